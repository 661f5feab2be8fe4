"""Meta-evaluation statistics: how well a metric agrees with humans. Pure functions.

Correlations are raw coefficients in [-1, 1] (reports may print them x100). Kendall's tau-b and
tau-c come from :func:`scipy.stats.kendalltau`; which variant a dataset uses is a matter of
protocol (see :mod:`capjudge.metaeval.protocols`), so both are always available.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

ArrayLike = Any  # a sequence of floats or a numpy array
Stat = Callable[[Any, Any], float]  # (metric scores, human ratings) -> statistic


def kendall_tau_b(x: ArrayLike, y: ArrayLike) -> float:
    """Kendall's tau-b (ties adjusted; scipy)."""
    return float(stats.kendalltau(x, y, variant="b").statistic)


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


STATS: dict[str, Stat] = {"kendall_tau_b": kendall_tau_b, "kendall_tau_c": kendall_tau_c,
                          "pearson": pearson, "spearman": spearman}


@dataclass(frozen=True)
class PairwiseResult:
    """Pairwise preference agreement; ties are reported and counted both ways."""

    accuracy: float  # ties counted as wrong (FLEUR's Pascal-50S protocol)
    accuracy_ties_correct: float  # ties counted as right
    accuracy_ties_half: float  # ties counted as half
    ties: int
    n: int


def pairwise_accuracy(score_a: Sequence[float], score_b: Sequence[float],
                      human_prefers_a: Sequence[bool]) -> PairwiseResult:
    """Fraction of pairs where the metric prefers the caption humans preferred."""
    a, b = np.asarray(score_a, float), np.asarray(score_b, float)
    pref = np.asarray(human_prefers_a, bool)
    if not (len(a) == len(b) == len(pref)) or len(a) == 0:
        raise ValueError("need aligned, non-empty pairs")
    agree = np.where(pref, a > b, b > a)
    ties = a == b
    n = len(a)
    return PairwiseResult(accuracy=float(agree.sum() / n),
                          accuracy_ties_correct=float((agree | ties).sum() / n),
                          accuracy_ties_half=float((agree.sum() + 0.5 * ties.sum()) / n),
                          ties=int(ties.sum()), n=n)


def best_of_n_accuracy(metric: Sequence[Sequence[float]], human: Sequence[Sequence[float]]
                       ) -> float:
    """MMHE-style best-of-N accuracy.

    The share of groups where the metric's top candidate is among the humans' top candidates
    (a metric tie counts only if every tied candidate is a top).
    """
    hits = 0
    for m, h in zip(metric, human, strict=True):
        m_arr, h_arr = np.asarray(m, float), np.asarray(h, float)
        best_m = set(np.flatnonzero(m_arr == m_arr.max()))
        best_h = set(np.flatnonzero(h_arr == h_arr.max()))
        hits += best_m <= best_h
    return hits / len(metric) if metric else math.nan


def correlation_matrix(metric: dict[str, Sequence[float]], human: dict[str, Sequence[float]],
                       stat: Stat = kendall_tau_b) -> dict[str, dict[str, float]]:
    """Metric criterion x human criterion correlations (HarmonicEval Table 3 layout)."""
    return {m: {h: stat(mv, hv) for h, hv in human.items()} for m, mv in metric.items()}


def system_level(metric: Sequence[float], human: Sequence[float], systems: Sequence[str],
                 stat: Stat = pearson) -> tuple[float, int]:
    """Correlation of per-system means; returns (coefficient, number of systems)."""
    names = sorted(set(systems))
    m = [float(np.mean([v for v, s in zip(metric, systems, strict=True) if s == n]))
         for n in names]
    h = [float(np.mean([v for v, s in zip(human, systems, strict=True) if s == n]))
         for n in names]
    return (stat(m, h) if len(names) > 2 else math.nan), len(names)


def bootstrap_ci(x: ArrayLike, y: ArrayLike, stat: Stat, *,
                 groups: Sequence[object] | None = None, n_boot: int = 1000,
                 level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of ``stat(x, y)``.

    With ``groups`` (e.g. the item each rating row belongs to), whole groups are resampled, so
    several annotators' rows of one item stay together (a cluster bootstrap).
    """
    xa, ya = np.asarray(x, float), np.asarray(y, float)
    rng = np.random.default_rng(seed)
    if groups is None:
        index_sets = [np.array([i]) for i in range(len(xa))]
    else:
        by: dict[object, list[int]] = {}
        for i, g in enumerate(groups):
            by.setdefault(g, []).append(i)
        index_sets = [np.array(v) for v in by.values()]
    values = []
    for _ in range(n_boot):
        picks = rng.integers(0, len(index_sets), len(index_sets))
        idx = np.concatenate([index_sets[p] for p in picks])
        v = stat(xa[idx], ya[idx])
        if not math.isnan(v):
            values.append(v)
    if not values:
        return math.nan, math.nan
    alpha = (1 - level) / 2
    return float(np.quantile(values, alpha)), float(np.quantile(values, 1 - alpha))


def paired_permutation_test(metric_a: ArrayLike, metric_b: ArrayLike, human: ArrayLike,
                            stat: Stat = kendall_tau_b, *,
                            n_perm: int = 1000, seed: int = 0) -> tuple[float, float]:
    """Is metric A's agreement with humans different from metric B's?

    Under the null hypothesis the two metrics are exchangeable, so each item's pair of scores
    is swapped with probability 1/2 (on rank-normalised scores, so metrics on different scales
    can be compared). Returns (observed stat(A) - stat(B), two-sided p-value).
    """
    a = stats.rankdata(metric_a) / len(metric_a)
    b = stats.rankdata(metric_b) / len(metric_b)
    h = np.asarray(human, float)
    observed = stat(a, h) - stat(b, h)
    rng = np.random.default_rng(seed)
    extreme = 0
    for _ in range(n_perm):
        swap = rng.random(len(a)) < 0.5
        pa, pb = np.where(swap, b, a), np.where(swap, a, b)
        if abs(stat(pa, h) - stat(pb, h)) >= abs(observed) - 1e-12:
            extreme += 1
    return float(observed), (extreme + 1) / (n_perm + 1)
