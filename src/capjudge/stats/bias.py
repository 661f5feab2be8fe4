"""Length bias: how much a score follows the candidate's length once quality is accounted for."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from capjudge.stats.bootstrap import Estimate, bootstrap_rows
from capjudge.stats.correlation import ArrayLike, partial_spearman, pearson_fast


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
        return pearson_fast(stats.rankdata(r[:, 0]), stats.rankdata(r[:, 1]))  # Spearman's rho

    out = {}
    for offset, (name, fn) in enumerate((("partial", partial), ("raw", raw))):
        low, high = bootstrap_rows(data, fn, n_boot=n_boot, level=level, seed=seed + offset)
        out[name] = Estimate(fn(data) if len(data) >= 3 else math.nan, low, high, len(data))
    return out
