"""Bootstrap confidence intervals: the :class:`Estimate` record and the resampling loops.

Every bootstrap is a seeded percentile bootstrap over units (the items a dataset samples);
intervals are 95 % unless ``level`` says otherwise; a statistic that is undefined on a resample
(e.g. a constant column) skips that resample, and an interval with no defined resample is
(NaN, NaN). The same seed gives the same interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from capjudge.stats.correlation import ArrayLike, Stat


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


def none_if_nan(value: float) -> float | None:
    """``value`` as a float, or None when it is None or NaN (DuckDB tables and JSON)."""
    return None if value is None or math.isnan(value) else float(value)


def percentile_interval(values: Sequence[float], level: float) -> tuple[float, float]:
    """The central ``level`` percentile interval of ``values``, NaNs left out.

    Returns:
        (low, high); (NaN, NaN) when no value is defined.
    """
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
    return percentile_interval([fn(data[rng.integers(0, n, n)]) for _ in range(n_boot)], level)


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
    values: list[float] = []
    for _ in range(n_boot):
        picks = rng.integers(0, len(index_sets), len(index_sets))
        idx = np.concatenate([index_sets[p] for p in picks])
        values.append(stat(xa[idx], ya[idx]))
    return percentile_interval(values, level)


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
