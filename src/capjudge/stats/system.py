"""System-level statistics: agreement of per-system means, with a stratified bootstrap."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from capjudge.stats.bootstrap import Estimate, percentile_interval
from capjudge.stats.correlation import ArrayLike, Stat, pearson, pearson_fast


def system_level(metric: Sequence[float], human: Sequence[float], systems: Sequence[str],
                 stat: Stat = pearson) -> tuple[float, int]:
    """Correlation of per-system means; returns (coefficient, number of systems)."""
    names = sorted(set(systems))
    m = [float(np.mean([v for v, s in zip(metric, systems, strict=True) if s == n]))
         for n in names]
    h = [float(np.mean([v for v, s in zip(human, systems, strict=True) if s == n]))
         for n in names]
    return (stat(m, h) if len(names) > 2 else math.nan), len(names)


def system_means(metric: ArrayLike, human: ArrayLike, systems: Sequence[str]
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per system (sorted by name) the mean metric score and the mean human label."""
    m, h = np.asarray(metric, float), np.asarray(human, float)
    strata = system_strata(systems)
    return (np.array([m[ix].mean() for ix in strata]),
            np.array([h[ix].mean() for ix in strata]))


def system_strata(systems: Sequence[str]) -> list[np.ndarray]:
    """Item positions of each system, systems sorted by name."""
    by: dict[str, list[int]] = {}
    for i, s in enumerate(systems):
        by.setdefault(s, []).append(i)
    return [np.array(v) for _, v in sorted(by.items())]


def resample_strata(strata: list[np.ndarray], rng: np.random.Generator) -> list[np.ndarray]:
    """Each system's items drawn with replacement (as many as it has)."""
    return [ix[rng.integers(0, len(ix), len(ix))] for ix in strata]


def strata_means(values: np.ndarray, strata: list[np.ndarray]) -> np.ndarray:
    """The mean of ``values`` over each stratum's positions."""
    return np.array([values[ix].mean() for ix in strata])


def system_level_ci(metric: ArrayLike, human: ArrayLike, systems: Sequence[str], *,
                    stat: Stat = pearson_fast, n_boot: int = 1000, level: float = 0.95,
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
    strata = system_strata(systems)
    if len(strata) < 3:
        return Estimate(math.nan, math.nan, math.nan, len(strata))
    value = stat(strata_means(m, strata), strata_means(h, strata))
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(max(0, n_boot)):
        drawn = resample_strata(strata, rng)
        boot.append(stat(strata_means(m, drawn), strata_means(h, drawn)))
    low, high = percentile_interval(boot, level) if boot else (math.nan, math.nan)
    return Estimate(float(value), low, high, len(strata))
