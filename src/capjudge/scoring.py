"""Pure maths on a judge's score distribution: normalisation, expectation, spread, entropy.

A judge's answer is kept as a probability distribution over the score scale (from token
log-probabilities or exact teacher forcing), not as the single number it printed. G-VEval's
expected score is ``E(s) = sum_i i * p(i)`` (its eq. 1); HarmonicEval's "score smoothing" is the
same expectation on 1-5 and its weights use the distribution's standard deviation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class DistributionSummary:
    """Summary statistics of a renormalised distribution over a numeric scale."""

    expected: float
    argmax: int
    sd: float
    entropy: float  # natural log (nats)
    mass: float  # probability captured by the scale before renormalisation


def normalise(raw: Mapping[int, float], values: Sequence[int]) -> tuple[list[float], float]:
    """Restrict raw probabilities to the scale and renormalise them.

    Args:
        raw: value -> probability (need not sum to 1; values outside the scale are ignored).
        values: the scale, in order.

    Returns:
        (probabilities aligned with ``values``, captured mass). When the mass is zero the
        probabilities are all zero: the caller must treat that as a failure, never as a score.
    """
    probs = [max(0.0, float(raw.get(v, 0.0))) for v in values]
    mass = sum(probs)
    if mass <= 0.0 or not math.isfinite(mass):
        return [0.0] * len(values), 0.0
    return [p / mass for p in probs], mass


def summarise(values: Sequence[int], probs: Sequence[float], mass: float) -> DistributionSummary:
    """Expectation, argmax, standard deviation and entropy of a normalised distribution.

    Raises:
        ValueError: the distribution is empty (zero mass); there is no score to summarise.
    """
    if len(values) != len(probs) or not values:
        raise ValueError("values and probs must be non-empty and aligned")
    total = sum(probs)
    if total <= 0:
        raise ValueError("empty distribution (zero mass): no score")
    p = [x / total for x in probs]
    mean = sum(v * q for v, q in zip(values, p, strict=True))
    var = sum(q * (v - mean) ** 2 for v, q in zip(values, p, strict=True))
    entropy = -sum(q * math.log(q) for q in p if q > 0)
    best = max(range(len(p)), key=lambda i: (p[i], -i))  # ties: the lower value
    return DistributionSummary(expected=mean, argmax=int(values[best]), sd=math.sqrt(max(var, 0)),
                               entropy=entropy, mass=mass)


def logprobs_to_probs(logprobs: Mapping[int, float]) -> dict[int, float]:
    """exp() of log-probabilities, summing duplicates (two tokens can name the same value)."""
    out: dict[int, float] = {}
    for value, lp in logprobs.items():
        out[value] = out.get(value, 0.0) + math.exp(lp)
    return out
