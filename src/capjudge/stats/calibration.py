"""Calibration: an isotonic map from judge scores to the human scale, fitted on a seeded split."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

import numpy as np
from scipy import optimize

from capjudge.stats.bootstrap import Estimate, bootstrap_rows
from capjudge.stats.correlation import ArrayLike, Stat, kendall_tau_b, pearson_fast


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
        # numpy's stubs give np.interp on an array an Any return; it is an array of floats.
        mapped: np.ndarray = np.interp(np.asarray(scores, float), self.x, self.y)
        return mapped


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


class BeforeAfter(TypedDict):
    """A statistic on the evaluation split before and after the calibration map."""

    before: Estimate
    after: Estimate


class Calibration(TypedDict):
    """What :func:`calibrate` returns."""

    n_fit: int
    n_eval: int
    map: IsotonicMap
    pearson: BeforeAfter
    kendall_tau_b: BeforeAfter
    mae: BeforeAfter
    """Mean absolute error, in human-scale points."""


def calibrate(score: ArrayLike, human: ArrayLike, *, fit_fraction: float = 0.5, seed: int = 0,
              score_scale: tuple[float, float] | None = None, n_boot: int = 1000,
              level: float = 0.95) -> Calibration:
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

    def estimate(values: np.ndarray, fn: Callable[[np.ndarray], float], offset: int
                 ) -> Estimate:
        data = np.column_stack([values, truth])
        low, high = bootstrap_rows(data, fn, n_boot=n_boot, level=level, seed=seed + offset)
        return Estimate(fn(data), low, high, len(evaluate))

    # Correlations "before" use the raw score (a linear stretch does not change them).
    raw = x[evaluate]
    pearson_fn, tau_fn = corr(pearson_fast), corr(tau)
    return {"n_fit": len(fit), "n_eval": len(evaluate), "map": mapping,
            "pearson": {"before": estimate(raw, pearson_fn, 0),
                        "after": estimate(after, pearson_fn, 0)},
            "kendall_tau_b": {"before": estimate(raw, tau_fn, 1),
                              "after": estimate(after, tau_fn, 1)},
            "mae": {"before": estimate(before, mae, 2), "after": estimate(after, mae, 2)}}
