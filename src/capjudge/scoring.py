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


def paper_smoothing(values: Sequence[int], probs: Sequence[float], mass: float
                    ) -> tuple[float, float]:
    """HarmonicEval's s̃_c and σ_c (§2.2, Appendix A eqs. 7-8) on the model's probabilities.

    ``probs`` is the distribution renormalised over the scale and ``mass`` the probability the
    scale held before that; the paper's sums run over the model's own probabilities
    ``P(r) = probs[r] * mass``, not renormalised: s̃_c = Σ_r r P(r), σ_c = √(Σ_r (r - s̃_c)² P(r)).
    The two readings agree only when the scale tokens hold all the mass.

    Raises:
        ValueError: misaligned inputs or a mass outside (0, 1].
    """
    if len(values) != len(probs) or not values:
        raise ValueError("values and probs must be non-empty and aligned")
    if not 0.0 < mass <= 1.0 + 1e-9:
        raise ValueError(f"mass must be in (0, 1], not {mass}")
    total = sum(probs)
    raw = [q / total * mass for q in probs] if total > 0 else list(probs)
    s_tilde = sum(v * q for v, q in zip(values, raw, strict=True))
    var = sum(q * (v - s_tilde) ** 2 for v, q in zip(values, raw, strict=True))
    return s_tilde, math.sqrt(max(var, 0.0))


def logprobs_to_probs(logprobs: Mapping[int, float]) -> dict[int, float]:
    """exp() of log-probabilities, summing duplicates (two tokens can name the same value)."""
    out: dict[int, float] = {}
    for value, lp in logprobs.items():
        out[value] = out.get(value, 0.0) + math.exp(lp)
    return out


def harmonic_weights(sds: Sequence[float], gamma: float = 0.75, floor: float = 1e-6
                     ) -> list[float]:
    """HarmonicEval's weights ``w_c ∝ σ_c^(-2(1-γ)/γ)``, normalised to sum to 1 (its eq. 1).

    ``γ = 1`` gives uniform weights, ``γ = 0.5`` inverse-variance weights, and ``γ → 0``
    selects the most confident criterion (smallest σ; ties share the weight). ``σ_c`` is
    floored at ``floor`` so a perfectly confident criterion (σ = 0) does not divide by zero;
    the exponent is applied in log space so tiny σ and small γ cannot overflow.

    Raises:
        ValueError: no criteria, a negative σ, or γ outside (0, 1].
    """
    if not sds:
        raise ValueError("no criteria to weight")
    if not 0 < gamma <= 1:
        raise ValueError(f"gamma must be in (0, 1], got {gamma}")
    if any(s < 0 or not math.isfinite(s) for s in sds):
        raise ValueError(f"standard deviations must be finite and >= 0, got {list(sds)}")
    exponent = -2.0 * (1.0 - gamma) / gamma
    logs = [exponent * math.log(max(s, floor)) for s in sds]
    top = max(logs)
    raw = [math.exp(v - top) for v in logs]  # the largest weight is exp(0) = 1: no overflow
    total = sum(raw)
    return [r / total for r in raw]


def harmonic_score(scores: Sequence[float], sds: Sequence[float], gamma: float = 0.75) -> float:
    """HarmonicEval's overall score ``S = Σ_c w_c s̃_c``."""
    if len(scores) != len(sds):
        raise ValueError("scores and sds must be aligned")
    weights = harmonic_weights(sds, gamma)
    return sum(w * s for w, s in zip(weights, scores, strict=True))


def precision(correct: float, hallucinated: float) -> float | None:
    """3D-caption precision ``C / (C + H) × 100``; None when ``C = H = 0`` (undefined)."""
    if correct < 0 or hallucinated < 0:
        raise ValueError("points cannot be negative")
    total = correct + hallucinated
    return None if total == 0 else 100.0 * correct / total


def precision_macro(pairs: Sequence[tuple[float, float]]) -> float | None:
    """Mean of per-item precisions, over the items where precision is defined."""
    values = [p for c, h in pairs if (p := precision(c, h)) is not None]
    return sum(values) / len(values) if values else None


def precision_micro(pairs: Sequence[tuple[float, float]]) -> float | None:
    """Precision of the summed points: ``ΣC / (ΣC + ΣH) × 100``."""
    return precision(sum(c for c, _ in pairs), sum(h for _, h in pairs))
