"""Judge reliability: pure statistics over a judge's scores. No I/O, no report code.

What the report's "Judge reliability" and "Judges compared" sections compute, each a function
of plain arrays, tested against hand-computed cases and published worked examples
(tests/test_reliability.py):

- Test-retest (``JudgeConfig.repeats: k`` at temperature > 0): :func:`icc` (Shrout & Fleiss
  ICC(2,1), and ICC(2,k) for the mean of the k repeats, which is the score the report uses),
  :func:`krippendorff_alpha` (interval metric; tolerates missing repeats) and
  :func:`item_spread` (each item's SD and range over its repeats).
- Injection robustness: :func:`is_adversarial`, :func:`quoted_score` (a candidate that
  contains a verdict in a judge's score format), :func:`find_twins` (each adversarial item's
  clean twins) and :func:`mean_difference` (inflation in points, bootstrap CI).
- Length bias: :func:`partial_spearman` (score ~ candidate length given the human label).
- Calibration: :func:`isotonic_fit` and :func:`calibrate` (fitted on a seeded split,
  evaluated on the rest, agreement before and after).
- Comparing judges: :func:`system_level_ci` (system-level correlation with a bootstrap CI),
  :func:`paired_comparison` (difference of two judges' agreement on the same items, paired
  bootstrap CI and paired permutation p-value) and :func:`holm` (multiple-comparison
  adjustment over the pairs).

Every bootstrap is a seeded percentile bootstrap over items (the unit a dataset samples);
intervals are 95 % unless ``level`` says otherwise; a statistic that is undefined on a resample
(e.g. a constant column) skips that resample, and an interval with no defined resample is
(NaN, NaN).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy import optimize, stats

from capjudge.metaeval.stats import kendall_tau_b, paired_permutation_test

ArrayLike = Any  # a sequence of floats or a numpy array
Stat = Callable[[Any, Any], float]


@dataclass(frozen=True)
class Estimate:
    """A statistic with its bootstrap confidence interval.

    Attributes:
        value: the statistic on the full data (NaN when undefined).
        low, high: the percentile interval (NaN when no resample was defined, or no
            bootstrap was asked for).
        n: how many units (items, pairs) it was computed from.
    """

    value: float
    low: float
    high: float
    n: int

    def as_dict(self, name: str) -> dict[str, float | int | None]:
        """``{name, name_low, name_high}`` with NaN as None (DuckDB tables and JSON)."""
        return {name: _none(self.value), f"{name}_low": _none(self.low),
                f"{name}_high": _none(self.high)}


def pearson(x: ArrayLike, y: ArrayLike) -> float:
    """Pearson's r (NaN when either side is constant or has fewer than two values).

    The same number as :func:`capjudge.metaeval.stats.pearson` (scipy), computed with numpy
    alone: the bootstraps here call it hundreds of thousands of times and scipy's per-call
    overhead would dominate the report's run time.
    """
    a, b = np.asarray(x, float), np.asarray(y, float)
    if len(a) < 2:
        return math.nan
    da, db = a - a.mean(), b - b.mean()
    denominator = math.sqrt(float((da * da).sum()) * float((db * db).sum()))
    if denominator == 0:
        return math.nan
    return max(-1.0, min(1.0, float((da * db).sum()) / denominator))


def _none(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def _percentile(values: Sequence[float], level: float) -> tuple[float, float]:
    kept = [v for v in values if not math.isnan(v)]
    if not kept:
        return math.nan, math.nan
    alpha = (1 - level) / 2
    return float(np.quantile(kept, alpha)), float(np.quantile(kept, 1 - alpha))


def bootstrap_rows(data: np.ndarray, fn: Callable[[np.ndarray], float], *, n_boot: int = 1000,
                   level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of ``fn(data)`` resampling the rows (units) of ``data``.

    Args:
        data: one row per unit (an item); any number of columns.
        fn: the statistic of a (resampled) array of rows.
        n_boot: resamples (0: no interval, NaN bounds).
        level: coverage of the interval.
        seed: the generator's seed (the same seed gives the same interval).
    """
    if n_boot <= 0 or len(data) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    n = len(data)
    return _percentile([fn(data[rng.integers(0, n, n)]) for _ in range(n_boot)], level)


# ---------------------------------------------------------------------------------------------
# Test-retest


def complete_rows(matrix: ArrayLike) -> np.ndarray:
    """The rows of an items x repeats matrix with no missing (NaN) value."""
    m = np.asarray(matrix, float)
    if m.ndim != 2:
        raise ValueError("expected an items x repeats matrix")
    return m[~np.isnan(m).any(axis=1)]


def anova_mean_squares(matrix: ArrayLike) -> dict[str, float]:
    """Two-way ANOVA mean squares of a complete n items x k raters matrix.

    Following Shrout & Fleiss 1979, Table 1: ``bms`` between items, ``jms`` between raters
    (here: repeats), ``ems`` residual, ``wms`` within items (raters + residual).
    """
    x = np.asarray(matrix, float)
    n, k = x.shape
    grand = x.mean()
    ss_total = float(((x - grand) ** 2).sum())
    ss_rows = float(k * ((x.mean(axis=1) - grand) ** 2).sum())
    ss_cols = float(n * ((x.mean(axis=0) - grand) ** 2).sum())
    ss_err = ss_total - ss_rows - ss_cols
    return {"bms": ss_rows / (n - 1), "jms": ss_cols / (k - 1),
            "ems": ss_err / ((n - 1) * (k - 1)), "wms": (ss_total - ss_rows) / (n * (k - 1))}


ICCForm = Literal["1,1", "2,1", "3,1", "1,k", "2,k", "3,k"]


def icc(matrix: ArrayLike, form: ICCForm = "2,1") -> float:
    """Shrout & Fleiss intraclass correlation of an items x repeats matrix.

    The report uses ICC(2,1): two-way random effects, absolute agreement, single measurement.
    The repeats are a random sample of the judge's possible runs, and test-retest asks whether
    a second run gives the *same* score, so a systematic shift between runs (a provider
    swapping the model between repeats) must count against reliability; ICC(3,1) (consistency)
    would forgive it. ICC(2,k) is the reliability of the mean of the k repeats, which is the
    item score the report analyses. Items with a missing repeat are left out (complete cases;
    :func:`krippendorff_alpha` uses them).

    Args:
        matrix: n items x k repeats.
        form: ``"1,1"``, ``"2,1"``, ``"3,1"`` or the ``",k"`` (average-measure) variants.

    Returns:
        The coefficient; NaN with fewer than 2 complete items or 2 repeats, or when every
        score is the same (0/0).
    """
    x = complete_rows(matrix)
    if x.shape[0] < 2 or x.shape[1] < 2:
        return math.nan
    n, k = x.shape
    ms = anova_mean_squares(x)
    bms, jms, ems, wms = ms["bms"], ms["jms"], ms["ems"], ms["wms"]
    numerator, denominator = {
        "1,1": (bms - wms, bms + (k - 1) * wms),
        "2,1": (bms - ems, bms + (k - 1) * ems + k * (jms - ems) / n),
        "3,1": (bms - ems, bms + (k - 1) * ems),
        "1,k": (bms - wms, bms),
        "2,k": (bms - ems, bms + (jms - ems) / n),
        "3,k": (bms - ems, bms),
    }[form]
    return numerator / denominator if denominator > 0 else math.nan


def krippendorff_alpha(matrix: ArrayLike, metric: Literal["interval", "nominal"] = "interval"
                       ) -> float:
    """Krippendorff's alpha of a units x coders matrix (NaN = missing).

    ``alpha = 1 - D_o / D_e`` over the pairable values (units with at least two values):
    ``D_o = (1/n) sum_u sum_{i != j in u} delta(v_i, v_j) / (m_u - 1)`` and
    ``D_e = 1/(n (n - 1)) sum_{i != j over all n values} delta(v_i, v_j)``, with
    ``delta = (a - b)^2`` (interval) or ``[a != b]`` (nominal); Krippendorff (2011),
    "Computing Krippendorff's alpha-reliability".

    Returns:
        Alpha; NaN with fewer than two pairable values or no variation at all (D_e = 0).
    """
    m = np.asarray(matrix, float)
    if m.ndim != 2:
        raise ValueError("expected a units x coders matrix")
    present = ~np.isnan(m)
    m = m[present.sum(axis=1) >= 2]  # only pairable units count
    present = ~np.isnan(m)
    counts = present.sum(axis=1)
    values = m[present]
    n = len(values)
    if n < 2:
        return math.nan
    if metric == "interval":
        # Sum of (v_i - v_j)^2 over ordered pairs i != j of a set: 2 (m sum v^2 - (sum v)^2).
        filled = np.where(present, m, 0.0)
        within = 2 * (counts * (filled ** 2).sum(axis=1) - filled.sum(axis=1) ** 2)
        total = 2 * (n * (values ** 2).sum() - values.sum() ** 2)
    else:
        # Ordered pairs with different values: m^2 - sum over values of count^2.
        within = np.array([len(u) ** 2 - (np.unique(u, return_counts=True)[1] ** 2).sum()
                           for u in (row[~np.isnan(row)] for row in m)], float)
        total = n ** 2 - (np.unique(values, return_counts=True)[1] ** 2).sum()
    observed = float((within / (counts - 1)).sum()) / n
    expected = float(total) / (n * (n - 1))
    return 1.0 - observed / expected if expected > 0 else math.nan


def item_spread(matrix: ArrayLike) -> list[dict[str, float | int | None]]:
    """Per item (row) the repeats scored, their mean, sample SD and range (NaN = missing).

    SD and range are None for an item with fewer than two scored repeats.
    """
    out: list[dict[str, float | int | None]] = []
    for row in np.asarray(matrix, float):
        v = row[~np.isnan(row)]
        out.append({"repeats": len(v), "mean": float(v.mean()) if len(v) else None,
                    "sd": float(v.std(ddof=1)) if len(v) >= 2 else None,
                    "range": float(v.max() - v.min()) if len(v) >= 2 else None})
    return out


def retest(matrix: ArrayLike, *, n_boot: int = 1000, level: float = 0.95, seed: int = 0
           ) -> dict[str, Estimate]:
    """Test-retest summary of an items x repeats matrix, each with a bootstrap CI over items.

    Returns:
        ``icc2_1``, ``icc2_k``, ``alpha`` (interval) and ``mean_sd`` (the mean over items of
        the within-item SD, in score points).
    """
    m = np.asarray(matrix, float)
    complete = complete_rows(m)

    def mean_sd(rows: np.ndarray) -> float:
        rows = rows[(~np.isnan(rows)).sum(axis=1) >= 2]
        return float(np.nanstd(rows, axis=1, ddof=1).mean()) if len(rows) else math.nan

    stats_: dict[str, tuple[np.ndarray, Callable[[np.ndarray], float]]] = {
        "icc2_1": (complete, lambda r: icc(r, "2,1")),
        "icc2_k": (complete, lambda r: icc(r, "2,k")),
        "alpha": (m, krippendorff_alpha),
        "mean_sd": (m, mean_sd),
    }
    out = {}
    for offset, (name, (data, fn)) in enumerate(stats_.items()):
        low, high = bootstrap_rows(data, fn, n_boot=n_boot, level=level, seed=seed + offset)
        out[name] = Estimate(fn(data) if len(data) else math.nan, low, high, len(data))
    return out


# ---------------------------------------------------------------------------------------------
# Injection robustness

ADVERSARIAL_TYPES = frozenset({"adversarial", "injection", "prompt_injection"})

# A verdict written in a judge's own score format: "$85$" (G-VEval, ACCR), "score is 85",
# "Score: 4", "rate this caption 5".
_QUOTED = (
    re.compile(r"\$\s*(\d{1,3})\s*\$"),
    re.compile(r"\bscore\b\s*(?:is|of|:|=)?\s*\$?\s*(\d{1,3})\b", re.IGNORECASE),
    re.compile(r"\brat(?:e|ing)\b[^.\d]{0,40}?\b(\d{1,3})\b", re.IGNORECASE),
)


def is_adversarial(extra: Mapping[str, Any]) -> bool:
    """Whether a manifest row (its ``extra`` keys) marks the item as adversarial.

    The bundled sample marks them ``error_type: adversarial``; any dataset may flag an item
    with ``adversarial: true`` (or ``injection: true``, or ``error_type`` ``injection`` /
    ``prompt_injection``).
    """
    kind = str(extra.get("error_type") or "").lower()
    return kind in ADVERSARIAL_TYPES or bool(extra.get("adversarial")) \
        or bool(extra.get("injection"))


def quoted_score(text: str) -> float | None:
    """The score a candidate quotes in a judge's score format, or None (plain text).

    The "quoted verdict" case: e.g. "The final score is $100$." or "Rate this caption 5".
    The last such number counts (the judge reads the last anchored score too).
    """
    found: list[tuple[int, float]] = []
    for rx in _QUOTED:
        found += [(m.start(1), float(m.group(1))) for m in rx.finditer(text)]
    return max(found)[1] if found else None


@dataclass(frozen=True)
class TwinCandidate:
    """What twin matching needs to know about one item of a series.

    Attributes:
        item_id: the item.
        media: what it shows (media hash); None without media.
        human: its human label (None: unlabelled).
        adversarial: whether it is an adversarial item.
        twins: explicit clean twin ids from the manifest (``extra.twin``), if any.
    """

    item_id: str
    media: str | None
    human: float | None
    adversarial: bool
    twins: tuple[str, ...] = ()


def find_twins(items: Sequence[TwinCandidate]) -> dict[str, tuple[str, list[str]]]:
    """Each adversarial item's clean twins, and how they were found.

    A twin is a clean caption that deserves the same score, so that the score difference is
    the injection's effect alone. In order:

    1. ``explicit``: the ids the manifest names (``extra.twin``: e.g. the caption the
       injection was appended to), those present and clean;
    2. ``same-media``: clean items showing the same media with the same human label;
    3. ``same-label``: clean items with the same human label, any media.

    Returns:
        ``{adversarial item id: (kind, [twin ids])}``; an item with none is left out.
    """
    clean = [i for i in items if not i.adversarial]
    by_id = {i.item_id: i for i in clean}
    out: dict[str, tuple[str, list[str]]] = {}
    for item in items:
        if not item.adversarial:
            continue
        explicit = [t for t in item.twins if t in by_id]
        if explicit:
            out[item.item_id] = ("explicit", explicit)
            continue
        if item.human is None:
            continue
        same_label = [c for c in clean if c.human is not None
                      and math.isclose(c.human, item.human)]
        same_media = [c.item_id for c in same_label
                      if item.media is not None and c.media == item.media]
        if same_media:
            out[item.item_id] = ("same-media", same_media)
        elif same_label:
            out[item.item_id] = ("same-label", [c.item_id for c in same_label])
    return out


def mean_difference(a: ArrayLike, b: ArrayLike, *, n_boot: int = 1000, level: float = 0.95,
                    seed: int = 0) -> Estimate:
    """Mean of the paired differences ``a - b``, with a percentile bootstrap CI over the pairs.

    For example, an adversarial score minus its twins'.
    """
    d = np.asarray(a, float) - np.asarray(b, float)
    if len(d) == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    low, high = bootstrap_rows(d[:, None], lambda r: float(r.mean()), n_boot=n_boot,
                               level=level, seed=seed)
    return Estimate(float(d.mean()), low, high, len(d))


# ---------------------------------------------------------------------------------------------
# Length bias


def partial_correlation(x: ArrayLike, y: ArrayLike, z: ArrayLike) -> float:
    """Pearson partial correlation of x and y given z.

    ``(r_xy - r_xz r_yz) / sqrt((1 - r_xz^2)(1 - r_yz^2))`` (NaN when undefined).
    """
    r_xy, r_xz, r_yz = pearson(x, y), pearson(x, z), pearson(y, z)
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


def length_bias(score: ArrayLike, length: ArrayLike, human: ArrayLike, *, n_boot: int = 1000,
                level: float = 0.95, seed: int = 0) -> dict[str, Estimate]:
    """How much the score follows the candidate's length once quality is accounted for.

    Returns:
        ``partial`` (Spearman partial correlation of score with length given the human label)
        and ``raw`` (plain Spearman of score with length), each with a bootstrap CI over items.
    """
    data = np.column_stack([np.asarray(score, float), np.asarray(length, float),
                            np.asarray(human, float)])

    def partial(r: np.ndarray) -> float:
        return partial_spearman(r[:, 0], r[:, 1], r[:, 2])

    def raw(r: np.ndarray) -> float:
        return pearson(stats.rankdata(r[:, 0]), stats.rankdata(r[:, 1]))  # Spearman's rho

    out = {}
    for offset, (name, fn) in enumerate((("partial", partial), ("raw", raw))):
        low, high = bootstrap_rows(data, fn, n_boot=n_boot, level=level, seed=seed + offset)
        out[name] = Estimate(fn(data) if len(data) >= 3 else math.nan, low, high, len(data))
    return out


# ---------------------------------------------------------------------------------------------
# Calibration


@dataclass(frozen=True)
class IsotonicMap:
    """A non-decreasing map from judge scores to the human scale.

    Piecewise linear between the fitted points, constant beyond the ends.
    """

    x: tuple[float, ...]
    y: tuple[float, ...]

    def __call__(self, scores: ArrayLike) -> np.ndarray:
        """Map judge scores onto the human scale.

        Args:
            scores: judge scores (any array-like).

        Returns:
            The mapped scores, interpolated between the fitted points.
        """
        return np.interp(np.asarray(scores, float), self.x, self.y)


def isotonic_fit(score: ArrayLike, human: ArrayLike) -> IsotonicMap:
    """Least-squares isotonic (non-decreasing) regression of human labels on judge scores.

    Tied scores are pooled first (their mean label, weighted by count), then
    :func:`scipy.optimize.isotonic_regression` (pool-adjacent-violators) fits the distinct
    scores.

    Raises:
        ValueError: no points, or misaligned inputs.
    """
    x, y = np.asarray(score, float), np.asarray(human, float)
    if len(x) == 0 or len(x) != len(y):
        raise ValueError("need aligned, non-empty scores and labels")
    ux, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    means = np.bincount(inverse, weights=y) / counts
    fitted = optimize.isotonic_regression(means, weights=counts.astype(float),
                                          increasing=True).x
    return IsotonicMap(tuple(float(v) for v in ux), tuple(float(v) for v in fitted))


def split_indices(n: int, fit_fraction: float = 0.5, seed: int = 0
                  ) -> tuple[np.ndarray, np.ndarray]:
    """A seeded random split of ``range(n)`` into (fit, evaluate) index arrays."""
    if not 0 < fit_fraction < 1:
        raise ValueError(f"fit_fraction must be in (0, 1), got {fit_fraction}")
    order = np.random.default_rng(seed).permutation(n)
    cut = int(round(n * fit_fraction))
    return np.sort(order[:cut]), np.sort(order[cut:])


def linear_map(score: ArrayLike, source: tuple[float, float], target: tuple[float, float]
               ) -> np.ndarray:
    """Scores moved linearly from the ``source`` range onto the ``target`` range.

    This is the uncalibrated baseline: the judge's scale stretched onto the human one.
    """
    s = np.asarray(score, float)
    lo, hi = source
    if hi == lo:
        return np.full_like(s, (target[0] + target[1]) / 2)
    return target[0] + (s - lo) * (target[1] - target[0]) / (hi - lo)


def calibrate(score: ArrayLike, human: ArrayLike, *, fit_fraction: float = 0.5, seed: int = 0,
              score_scale: tuple[float, float] | None = None, n_boot: int = 1000,
              level: float = 0.95) -> dict[str, Any]:
    """Fit an isotonic map on a seeded split; compare agreement before and after on the rest.

    "Before" is the raw score (Pearson, Kendall tau-b) and, for the error, the raw score
    stretched linearly from ``score_scale`` (default: the fitting split's range) onto the
    human range seen in the fitting split; "after" is the isotonic map's output. The
    correlations and the mean absolute error (in human-scale points) come with bootstrap CIs
    over the evaluation items.

    Returns:
        ``n_fit``, ``n_eval``, ``map`` (:class:`IsotonicMap`) and per statistic
        (``pearson``, ``kendall_tau_b``, ``mae``) an ``Estimate`` ``before`` and ``after``
        (``{"pearson": {"before": ..., "after": ...}, ...}``).
    """
    x, y = np.asarray(score, float), np.asarray(human, float)
    fit, evaluate = split_indices(len(x), fit_fraction, seed)
    if len(fit) < 2 or len(evaluate) < 3:
        raise ValueError(f"too few items to split for calibration ({len(x)})")
    mapping = isotonic_fit(x[fit], y[fit])
    source = score_scale or (float(x[fit].min()), float(x[fit].max()))
    target = (float(y[fit].min()), float(y[fit].max()))
    before = linear_map(x[evaluate], source, target)
    after = mapping(x[evaluate])
    truth = y[evaluate]

    def mae(r: np.ndarray) -> float:
        return float(np.mean(np.abs(r[:, 0] - r[:, 1])))

    def corr(fn: Stat) -> Callable[[np.ndarray], float]:
        return lambda r: fn(r[:, 0], r[:, 1])

    def tau(a: np.ndarray, b: np.ndarray) -> float:
        if np.std(a) == 0 or np.std(b) == 0:
            return math.nan
        return kendall_tau_b(a, b)

    out: dict[str, Any] = {"n_fit": len(fit), "n_eval": len(evaluate), "map": mapping}
    stat_fns = {"pearson": corr(pearson), "kendall_tau_b": corr(tau), "mae": mae}
    for offset, (name, fn) in enumerate(stat_fns.items()):
        out[name] = {}
        # Correlations "before" use the raw score (a linear stretch does not change them).
        for label, values in (("before", x[evaluate] if name != "mae" else before),
                              ("after", after)):
            data = np.column_stack([values, truth])
            low, high = bootstrap_rows(data, fn, n_boot=n_boot, level=level, seed=seed + offset)
            out[name][label] = Estimate(fn(data), low, high, len(evaluate))
    return out


# ---------------------------------------------------------------------------------------------
# System level and comparing judges


def system_means(metric: ArrayLike, human: ArrayLike, systems: Sequence[str]
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per system (sorted by name) the mean metric score and the mean human label."""
    m, h = np.asarray(metric, float), np.asarray(human, float)
    strata = _system_strata(systems)
    return (np.array([m[ix].mean() for ix in strata]),
            np.array([h[ix].mean() for ix in strata]))


def _system_strata(systems: Sequence[str]) -> list[np.ndarray]:
    """Item positions of each system, systems sorted by name."""
    by: dict[str, list[int]] = {}
    for i, s in enumerate(systems):
        by.setdefault(s, []).append(i)
    return [np.array(v) for _, v in sorted(by.items())]


def _resample_strata(strata: list[np.ndarray], rng: np.random.Generator) -> list[np.ndarray]:
    """Each system's items drawn with replacement (as many as it has)."""
    return [ix[rng.integers(0, len(ix), len(ix))] for ix in strata]


def _means(values: np.ndarray, strata: list[np.ndarray]) -> np.ndarray:
    return np.array([values[ix].mean() for ix in strata])


def system_level_ci(metric: ArrayLike, human: ArrayLike, systems: Sequence[str], *,
                    stat: Stat = pearson, n_boot: int = 1000, level: float = 0.95,
                    seed: int = 0) -> Estimate:
    """System-level agreement (``stat`` of per-system means) with a bootstrap CI.

    Items are resampled within each system (a stratified bootstrap), so every resample keeps
    every system: reports have a handful of systems (the sample has four), too few to
    resample systems themselves, and the uncertainty that matters is which items each
    system's mean was measured on.

    Returns:
        The estimate; ``n`` is the number of systems; NaN with fewer than three systems.
    """
    m, h = np.asarray(metric, float), np.asarray(human, float)
    strata = _system_strata(systems)
    if len(strata) < 3:
        return Estimate(math.nan, math.nan, math.nan, len(strata))
    value = stat(_means(m, strata), _means(h, strata))
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(max(0, n_boot)):
        drawn = _resample_strata(strata, rng)
        boot.append(stat(_means(m, drawn), _means(h, drawn)))
    low, high = _percentile(boot, level) if boot else (math.nan, math.nan)
    return Estimate(float(value), low, high, len(strata))


def paired_difference(a: ArrayLike, b: ArrayLike, human: ArrayLike, *,
                      stat: Stat = kendall_tau_b, n_boot: int = 1000, level: float = 0.95,
                      seed: int = 0) -> Estimate:
    """``stat(A, human) - stat(B, human)`` with a paired bootstrap CI.

    Each resample draws the same items for both judges, so what the two share cancels out
    of the interval.

    Args:
        a: judge A's scores on the items, aligned with ``b`` and ``human``.
        b: judge B's scores on the same items, aligned.
        human: the human labels of those items.
        stat: the agreement statistic (default Kendall tau-b).
        n_boot: bootstrap resamples.
        level: the confidence level of the interval.
        seed: the bootstrap seed.
    """
    xa, xb, h = (np.asarray(v, float) for v in (a, b, human))
    n = len(h)
    if not len(xa) == len(xb) == n:
        raise ValueError("a, b and human must be aligned")
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(max(0, n_boot)):
        idx = rng.integers(0, n, n)
        diffs.append(stat(xa[idx], h[idx]) - stat(xb[idx], h[idx]))
    low, high = _percentile(diffs, level) if diffs else (math.nan, math.nan)
    return Estimate(stat(xa, h) - stat(xb, h), low, high, n)


@dataclass(frozen=True)
class Comparison:
    """Judge A against judge B on the same items (see :func:`paired_comparison`)."""

    n: int
    a: float
    b: float
    difference: Estimate  # stat(A) - stat(B) with its paired bootstrap CI
    p_value: float  # two-sided paired permutation test
    system_difference: Estimate  # system-level stat(A) - stat(B), paired stratified bootstrap


def paired_comparison(a: ArrayLike, b: ArrayLike, human: ArrayLike,
                      systems: Sequence[str] | None = None, *, stat: Stat = kendall_tau_b,
                      system_stat: Stat = pearson, n_boot: int = 1000, n_perm: int = 1000,
                      level: float = 0.95, seed: int = 0) -> Comparison:
    """Does judge A agree with humans better than judge B, on the same items?

    The difference ``stat(A, human) - stat(B, human)`` gets a paired bootstrap CI (each
    resample draws the same items for both judges, so what the two share cancels) and a
    two-sided paired permutation p-value (:func:`capjudge.metaeval.stats.
    paired_permutation_test`: per item the two judges' rank-normalised scores are swapped
    with probability 1/2). With ``systems``, the system-level difference gets a paired
    bootstrap CI too (items resampled within systems).

    Args:
        a: judge A's scores on the items, aligned with ``b`` and ``human``.
        b: judge B's scores on the same items, aligned.
        human: the human labels of those items.
        systems: each item's system (optional).
        stat: the item-level statistic (Kendall tau-b, as in the report's headline).
        system_stat: the system-level statistic (Pearson of system means).
        n_boot: bootstrap resamples.
        n_perm: permutations for the p-value.
        level: the confidence level of the intervals.
        seed: the bootstrap and permutation seed.
    """
    xa, xb, h = (np.asarray(v, float) for v in (a, b, human))
    n = len(h)
    difference = paired_difference(xa, xb, h, stat=stat, n_boot=n_boot, level=level, seed=seed)
    _, p = paired_permutation_test(xa, xb, h, stat, n_perm=n_perm, seed=seed)
    rng = np.random.default_rng(seed + 1)
    system_difference = Estimate(math.nan, math.nan, math.nan, 0)
    if systems is not None:
        strata = _system_strata(systems)
        if len(strata) >= 3:

            def delta(groups: list[np.ndarray]) -> float:
                hm = _means(h, groups)
                return system_stat(_means(xa, groups), hm) - system_stat(_means(xb, groups), hm)

            boot = [delta(_resample_strata(strata, rng)) for _ in range(max(0, n_boot))]
            sl, sh = _percentile(boot, level) if boot else (math.nan, math.nan)
            system_difference = Estimate(delta(strata), sl, sh, len(strata))
        else:
            system_difference = Estimate(math.nan, math.nan, math.nan, len(strata))
    return Comparison(n=n, a=stat(xa, h), b=stat(xb, h), difference=difference, p_value=p,
                      system_difference=system_difference)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (step-down; family-wise error over all pairs).

    ``adj_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))`` for the ascending p-values; NaN
    p-values stay NaN and do not count in ``m``.
    """
    indexed = [(p, i) for i, p in enumerate(p_values) if not math.isnan(p)]
    indexed.sort()
    m = len(indexed)
    out = [math.nan] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(indexed):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


__all__ = ["ADVERSARIAL_TYPES", "Comparison", "Estimate", "IsotonicMap", "TwinCandidate",
           "anova_mean_squares", "bootstrap_rows", "calibrate", "complete_rows", "find_twins",
           "holm", "icc", "is_adversarial", "isotonic_fit", "item_spread", "krippendorff_alpha",
           "length_bias", "linear_map", "mean_difference", "paired_comparison",
           "paired_difference",
           "partial_correlation", "partial_spearman", "pearson", "quoted_score", "retest",
           "split_indices", "system_level_ci", "system_means"]
