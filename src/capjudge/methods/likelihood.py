"""Reference-conditioned likelihood: what a small *base* language model can judge.

A base model such as the embedded Gemma 3 270M follows no instructions, so asking it for a
chain of thought and a score (G-VEval, HarmonicEval) gives near-constant numbers. What it does
well is predict text. This method (the GPTScore / BARTScore family) asks how much more probable
the candidate becomes after the references, and the reverse:

- forward: ``(log p(candidate | references) - log p(candidate)) / |candidate|`` — pointwise
  mutual information per token; the unconditional term removes what makes a caption probable
  anywhere (short, common words), which scoring ``p(candidate | references)`` alone rewards;
- reverse: the same for each reference after the candidate, averaged over references;
- ``pmi`` mode: the mean of both directions (an F-style balance of precision and recall);
  ``conditional`` mode: the forward conditional log-likelihood per token, unnormalised (the
  ablation: lower agreement, kept to show what the normalisation buys).

The score is reported on 0-100: ``100 * sigmoid(PMI)`` — read it as the per-token posterior
that the candidate was written about the references' picture rather than any picture; 50 means
the references do not make it more likely (the pass mark). ``conditional`` reports
``100 * exp(mean log p)``, the geometric-mean token probability. Only backends that can score
likelihoods (local models) run it; the others record a skip with the reason.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from capjudge.backends.base import JudgeRequest, JudgeResponse
from capjudge.item import Item
from capjudge.methods.base import (
    Criterion,
    CriterionSpec,
    Method,
    MethodOptions,
    Planned,
    Scale,
    Skip,
)
from capjudge.prompts import Template, get_template

SCALE = Scale(0, 100, pass_mark=50)
MODES = ("pmi", "conditional")


def _text(template: Template, **variables: Any) -> str:
    """A template rendered to the plain text a scored continuation follows."""
    return template.render(**variables)[-1].text()


def sigmoid(x: float) -> float:
    """The logistic function, safe for large |x|."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


class Likelihood(Method):
    """Reference-conditioned likelihood scores (PMI-normalised by default).

    Method option ``max_references`` (default 5): references used per item (the first ones).
    """

    name = "likelihood"
    modes = MODES
    default_modes = ("pmi",)
    criteria = (CriterionSpec("score", SCALE, description="100 x sigmoid(PMI per token)"),)
    overall_scale = SCALE
    combination = ("100 x sigmoid of the mean of forward and reverse pointwise mutual "
                   "information per token (conditional mode: 100 x exp(mean log p))")

    def plan(self, item: Item, mode: str, options: MethodOptions) -> list[Planned | Skip]:
        """One likelihood request per item: every (context, text) pair the score needs."""
        self.check_mode(mode)
        conditional = get_template("likelihood", "likelihood/conditional")
        unconditional = get_template("likelihood", "likelihood/unconditional")
        ref = f"{conditional.ref}+{unconditional.ref}"
        refs = [r for r in item.references if r.strip()][: int(
            options.extra.get("max_references", 5))]
        if not refs:
            return [Skip(item.id, mode, "no reference captions (likelihood needs references)",
                         ref)]
        medium = "video" if item.media_kind == "video" else "image"
        candidate = " " + item.candidate.strip()
        pairs = [(_text(conditional, medium=medium, references=refs), candidate)]
        if mode == "pmi":
            uncond = _text(unconditional, medium=medium)
            # The reverse direction: each reference after the candidate (one shared context).
            after_candidate = _text(conditional, medium=medium,
                                    references=[item.candidate.strip()])
            pairs.append((uncond, candidate))
            for r in refs:
                pairs.append((after_candidate, " " + r.strip()))
                pairs.append((uncond, " " + r.strip()))
        request = JudgeRequest(messages=(), slots=(), decoding=options.decoding,
                               template=ref, tag=f"{item.id}|{mode}",
                               continuations=tuple(pairs))
        return [Planned(item.id, mode, request)]

    def interpret(self, planned: Planned, response: JudgeResponse) -> list[Criterion]:
        """The score from the pairs' log-likelihoods (in the order :meth:`plan` made them)."""
        pairs = planned.request.continuations
        if response.status != "ok" or len(response.logliks) != len(pairs):
            reason = response.reason or ("the backend returned no likelihoods" if
                                         response.status == "ok" else None)
            return [Criterion("score", "error" if response.status == "ok" else response.status,
                              reason)]
        ll, n = response.logliks, [max(1, k) for k in response.lengths]
        forward_cond = ll[0] / n[0]
        if planned.mode == "conditional":
            value = 100 * math.exp(forward_cond)
            parts: dict[str, float] = {"mean_logp": forward_cond}
        else:
            forward = (ll[0] - ll[1]) / n[0]
            reverse = [(ll[k] - ll[k + 1]) / n[k] for k in range(2, len(ll), 2)]
            pmi = (forward + sum(reverse) / len(reverse)) / 2
            value = 100 * sigmoid(pmi)
            parts = {"pmi": pmi, "forward_pmi": forward,
                     "reverse_pmi": sum(reverse) / len(reverse)}
        # The components are this judge's "reasoning": shown with the row, like a generative
        # judge's text (a likelihood answer has no text of its own).
        response.text = response.text or json.dumps({k: round(v, 4) for k, v in parts.items()})
        return [Criterion("score", "ok", None, value, source="likelihood")]

    def overall(self, criteria: Sequence[Criterion], options: dict[str, Any]
                ) -> tuple[float | None, str | None]:
        """The single score."""
        scored = [c for c in criteria if c.score is not None]
        return (scored[0].score, None) if scored else (None, "no score")
