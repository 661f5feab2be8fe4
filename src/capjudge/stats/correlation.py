"""Correlation coefficients: Kendall tau-b/tau-c, Pearson, Spearman, partial correlations.

Correlations are raw coefficients in [-1, 1] (reports may print them x100). Kendall's tau-b and
tau-c come from :func:`scipy.stats.kendalltau`; which variant a dataset uses is a matter of
protocol (see :mod:`capjudge.metaeval.protocols`), so both are always available.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import stats

try:  # scipy's compiled discordant-pair count (see kendall_tau_b)
    from scipy.stats._stats import _kendall_dis
except ImportError:  # pragma: no cover - another scipy: its public function is used
    _kendall_dis = None

ArrayLike = Any  # a sequence of floats or a numpy array
Stat = Callable[[Any, Any], float]  # (metric scores, human ratings) -> statistic


def kendall_tau_b(x: ArrayLike, y: ArrayLike) -> float:
    """Kendall's tau-b (ties adjusted): :func:`scipy.stats.kendalltau`'s statistic, bit for bit.

    The report's bootstraps, permutation tests and calibration call it tens of thousands of
    times on a few hundred pairs each, where scipy's public function spends most of a call in
    its argument handling (``inspect.signature``, NaN policy) and its p-value: 0.20 ms a call
    on 138 pairs against 0.05 ms here, and 25 of the 38 s the report stage of a two-picture
    project took under a profiler.
    So this is scipy's own computation of the statistic (the same ranks, the same integer
    counts, the same floating-point operations; its discordant-pair count comes from scipy's
    compiled kernel), without the p-value; tests check it equals scipy's on ties, NaN and
    tiny inputs. Without that kernel (another scipy), scipy's public function is called.
    """
    if _kendall_dis is None:
        return float(stats.kendalltau(x, y, variant="b").statistic)
    a, b = np.asarray(x).ravel(), np.asarray(y).ravel()
    if a.size != b.size:
        raise ValueError("Array shapes are incompatible for broadcasting.")
    if a.size < 2 or a.dtype.kind not in "biuf" or b.dtype.kind not in "biuf":
        return float(stats.kendalltau(x, y, variant="b").statistic)  # scipy's own answer
    if np.isnan(a).any() or np.isnan(b).any():
        return math.nan  # scipy's nan_policy="propagate"
    return _scipy_tau_b(a, b)


def _scipy_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """The statistic of scipy's ``kendalltau`` (scipy/stats/_stats_py.py), step for step.

    ``np.concatenate`` where scipy writes ``np.r_``: the same arrays, a third of the time.
    """
    size = x.size
    perm = np.argsort(y)  # sort on y and convert y to dense ranks
    x, y = x[perm], y[perm]
    y = np.concatenate(([True], y[1:] != y[:-1])).cumsum(dtype=np.intp)
    perm = np.argsort(x, kind="mergesort")  # stable sort on x and convert x to dense ranks
    x, y = x[perm], y[perm]
    x = np.concatenate(([True], x[1:] != x[:-1])).cumsum(dtype=np.intp)
    dis = _kendall_dis(x, y)  # discordant pairs
    obs = np.concatenate(([True], (x[1:] != x[:-1]) | (y[1:] != y[:-1]), [True]))
    cnt = np.diff(np.nonzero(obs)[0]).astype("int64", copy=False)
    ntie = int((cnt * (cnt - 1) // 2).sum())  # joint ties
    xtie, ytie = _pairs_tied(x), _pairs_tied(y)
    tot = (size * (size - 1)) // 2
    if xtie == tot or ytie == tot:
        return math.nan
    con_minus_dis = tot - xtie - ytie + ntie - 2 * dis
    tau = con_minus_dis / np.sqrt(tot - xtie) / np.sqrt(tot - ytie)
    return float(np.minimum(1.0, max(-1.0, tau)))


def _pairs_tied(ranks: np.ndarray) -> int:
    cnt = np.bincount(ranks).astype("int64", copy=False)
    cnt = cnt[cnt > 1]
    return int((cnt * (cnt - 1) // 2).sum())


def kendall_tau_c(x: ArrayLike, y: ArrayLike) -> float:
    """Kendall's tau-c (Stuart's; for rectangular tables such as 4-point ratings; scipy)."""
    return float(stats.kendalltau(x, y, variant="c").statistic)


def pearson(x: ArrayLike, y: ArrayLike) -> float:
    """Pearson's r (NaN when either side is constant)."""
    if np.std(x) == 0 or np.std(y) == 0:
        return math.nan
    return float(stats.pearsonr(x, y).statistic)


def spearman(x: ArrayLike, y: ArrayLike) -> float:
    """Spearman's rho."""
    if np.std(x) == 0 or np.std(y) == 0:
        return math.nan
    return float(stats.spearmanr(x, y).statistic)


def pearson_fast(x: ArrayLike, y: ArrayLike) -> float:
    """Pearson's r (NaN when either side is constant or has fewer than two values).

    The same number as :func:`pearson` (scipy) to about 1e-15, computed with numpy alone: the
    reliability bootstraps call it hundreds of thousands of times and scipy's per-call overhead
    would dominate the report's run time. Two functions rather than one because the two differ
    in the last bits, and merging them would change the digits of published outputs.
    """
    a, b = np.asarray(x, float), np.asarray(y, float)
    if len(a) < 2:
        return math.nan
    da, db = a - a.mean(), b - b.mean()
    denominator = math.sqrt(float((da * da).sum()) * float((db * db).sum()))
    if denominator == 0:
        return math.nan
    return max(-1.0, min(1.0, float((da * db).sum()) / denominator))


STATS: dict[str, Stat] = {"kendall_tau_b": kendall_tau_b, "kendall_tau_c": kendall_tau_c,
                          "pearson": pearson, "spearman": spearman}


def correlation_matrix(metric: dict[str, Sequence[float]], human: dict[str, Sequence[float]],
                       stat: Stat = kendall_tau_b) -> dict[str, dict[str, float]]:
    """Metric criterion x human criterion correlations (HarmonicEval Table 3 layout)."""
    return {m: {h: stat(mv, hv) for h, hv in human.items()} for m, mv in metric.items()}


def partial_correlation(x: ArrayLike, y: ArrayLike, z: ArrayLike) -> float:
    """Pearson partial correlation of x and y given z.

    ``(r_xy - r_xz r_yz) / sqrt((1 - r_xz^2)(1 - r_yz^2))`` (NaN when undefined).
    """
    r_xy, r_xz, r_yz = pearson_fast(x, y), pearson_fast(x, z), pearson_fast(y, z)
    if any(math.isnan(r) for r in (r_xy, r_xz, r_yz)):
        return math.nan
    denominator = math.sqrt(max(0.0, (1 - r_xz ** 2) * (1 - r_yz ** 2)))
    return (r_xy - r_xz * r_yz) / denominator if denominator > 0 else math.nan


def partial_spearman(x: ArrayLike, y: ArrayLike, z: ArrayLike) -> float:
    """Spearman partial correlation of x and y given z.

    It is the Pearson partial correlation of the ranks (ties get average ranks).

    Rank-based because candidate lengths are skewed (a few verbose captions), human labels
    are ordinal with many ties, and a judge's scale need not be linear in quality; ranks make
    the coefficient indifferent to all three.
    """
    return partial_correlation(stats.rankdata(x), stats.rankdata(y), stats.rankdata(z))


def undefined_reason(x: Sequence[float], y: Sequence[float], labelled: int | None = None,
                     min_points: int = 3) -> str | None:
    """Why no correlation between judge scores ``x`` and human labels ``y`` exists, or None.

    A rank or linear correlation needs at least ``min_points`` pairs and variation on both
    sides: a judge (or metric) that gave every item the same score has no ranking to compare.
    ``labelled``: how many items carry a human label (0: say so), when known.
    """
    if labelled == 0:
        return "no item has a human label for this criterion"
    if len(x) < min_points:
        return f"{len(x)} labelled item(s) scored: a correlation needs at least {min_points}"
    if len(set(x)) == 1:
        return (f"the judge (or metric) gave every item the same score ({x[0]:g}): no "
                "ranking to compare, the correlation does not exist")
    if len(set(y)) == 1:
        return (f"every item has the same human label ({y[0]:g}): the correlation does not "
                "exist")
    return None
