"""Pairwise preference accuracy and best-of-N accuracy against human choices."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


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
