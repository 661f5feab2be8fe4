"""Comparing two metrics on the same items: paired bootstrap, paired permutation test, Holm."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from capjudge.stats.bootstrap import Estimate, percentile_interval
from capjudge.stats.correlation import ArrayLike, Stat, kendall_tau_b, pearson_fast
from capjudge.stats.system import resample_strata, strata_means, system_strata


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
    low, high = percentile_interval(diffs, level) if diffs else (math.nan, math.nan)
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
                      system_stat: Stat = pearson_fast, n_boot: int = 1000, n_perm: int = 1000,
                      level: float = 0.95, seed: int = 0) -> Comparison:
    """Does judge A agree with humans better than judge B, on the same items?

    The difference ``stat(A, human) - stat(B, human)`` gets a paired bootstrap CI (each
    resample draws the same items for both judges, so what the two share cancels) and a
    two-sided paired permutation p-value (:func:`paired_permutation_test`: per item the two
    judges' rank-normalised scores are swapped
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
        strata = system_strata(systems)
        if len(strata) >= 3:

            def delta(groups: list[np.ndarray]) -> float:
                hm = strata_means(h, groups)
                return (system_stat(strata_means(xa, groups), hm)
                        - system_stat(strata_means(xb, groups), hm))

            boot = [delta(resample_strata(strata, rng)) for _ in range(max(0, n_boot))]
            sl, sh = percentile_interval(boot, level) if boot else (math.nan, math.nan)
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
