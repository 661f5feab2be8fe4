"""Reference-conditioned likelihood: what a small *base* language model can judge.

A base model such as the embedded Gemma 3 270M follows no instructions, so asking it for a
chain of thought and a score (G-VEval, HarmonicEval) gives near-constant numbers. What it does
well is predict text. This method (the GPTScore / BARTScore family) asks how much more probable
the candidate becomes after the references, and the reverse:

- forward: ``(log p(candidate | references) - log p(candidate)) / |candidate|`` — pointwise
  mutual information per token; the unconditional term removes what makes a caption probable
  anywhere (short, common words), which scoring ``p(candidate | references)`` alone rewards;
- reverse: the same for each reference after the candidate, averaged over references;
- ``npmi`` mode (the default): each direction's PMI divided by the text's own surprisal
  ``-log p(text)`` — the share of the text's information that the other side explains — and
  the two directions averaged (a balance of precision and recall). Dividing by the surprisal
  instead of the token count stops long, rare-word captions from dominating;
- ``pmi`` mode: the mean of both directions' PMI per token;
- ``conditional`` mode: the forward conditional log-likelihood per token, unnormalised (the
  ablation: lower agreement, kept to show what the normalisation buys).

Captions are detokenised first (``"a dog ."`` -> ``"a dog."``): datasets of the Flickr8k/COCO
era ship PTB-tokenised text, which a language model rarely saw, and its odd spacing adds
surprisal unrelated to content. Measured on the first 80 Flickr8k-Expert images (1,458 rating
rows, Kendall tau-c x100): forward PMI per token 31.6 on the raw text, 37.7 detokenised; both
directions 33.2 -> 40.9 (pmi) and 42.4 (npmi), against CIDEr 39.8 on the same rows.

Scores are on 0-100 with 50 meaning "the references do not make the caption more likely" (the
pass mark): ``npmi`` reports ``50 * (1 + share)`` (clipped to the scale; a share below -1 means
the references double the caption's surprisal), ``pmi`` ``100 * sigmoid(PMI)`` (the per-token
posterior that the candidate was written about the references' picture rather than any
picture), ``conditional`` ``100 * exp(mean log p)``, the geometric-mean token probability.
Only backends that can score likelihoods (local models) run it; the others record a skip with
the reason.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from capjudge.item import Item
from capjudge.methods.base import (
    AggregateOptions,
    Criterion,
    CriterionSpec,
    Method,
    MethodOptions,
    Planned,
    Scale,
    Skip,
)
from capjudge.prompts import Template, get_template
from capjudge.protocol import JudgeRequest, JudgeResponse

SCALE = Scale(0, 100, pass_mark=50)
MODES = ("npmi", "pmi", "conditional")

# PTB tokenisation puts a space before punctuation and clitics; undo exactly that.
_SPACE_BEFORE_PUNCT = re.compile(r" ([.,!?;:%)\]}])")
_SPACE_BEFORE_CLITIC = re.compile(r" (n't|'s|'re|'ve|'m|'ll|'d)(?=\W|$)", re.IGNORECASE)
_SPACE_AFTER_OPEN = re.compile(r"([(\[{]) ")


def detokenise(text: str) -> str:
    """Caption text as people write it: PTB-style spacing around punctuation undone.

    ``"A man 's dog runs ."`` becomes ``"A man's dog runs."``; runs of whitespace become one
    space. Text without that spacing is returned unchanged (apart from the whitespace).
    """
    text = " ".join(text.split())
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    text = _SPACE_BEFORE_CLITIC.sub(r"\1", text)
    return _SPACE_AFTER_OPEN.sub(r"\1", text)


def _text(template: Template, **variables: Any) -> str:
    """A template rendered to the plain text a scored continuation follows."""
    return template.render(**variables)[-1].text()


def sigmoid(x: float) -> float:
    """The logistic function, safe for large |x|."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def explained_share(conditional: float, unconditional: float) -> float:
    """``PMI / surprisal``: the share of a text's information that its context explains.

    Args:
        conditional: ``log p(text | context)``.
        unconditional: ``log p(text | neutral context)`` (negative for any real text).

    Returns:
        ``1 - conditional / unconditional``: 1 when the context makes the text certain, 0 when
        it changes nothing, negative when it makes the text less likely.
    """
    if unconditional >= 0:  # a text of probability 1 carries no information to explain
        return 0.0
    return 1.0 - conditional / unconditional


def _directions(count: int, measure: Callable[[int], float]) -> tuple[float, float]:
    """``(forward, mean reverse)`` of a per-pair measure, in :meth:`Likelihood.plan`'s order.

    The pairs come as (conditional, neutral) twins: index 0/1 the candidate, then 2/3, 4/5, ...
    one per reference. ``measure(k)`` reads the twin starting at ``k``.
    """
    reverse = [measure(k) for k in range(2, count, 2)]
    return measure(0), sum(reverse) / len(reverse)


class Likelihood(Method):
    """Reference-conditioned likelihood scores (PMI-normalised by default).

    Method option ``max_references`` (default 5): references used per item (the first ones).
    """

    name = "likelihood"
    verdict_contract = "none: no verdict is written (log-likelihoods of the caption)"
    choices: ClassVar[dict[str, tuple[str, ...]]] = {}  # not a paper prompt: no variants
    modes = MODES
    default_modes = ("npmi",)
    reads_verdict = False  # scores log-likelihoods: no verdict to format
    criteria = (CriterionSpec("score", SCALE, description=(
        "50 x (1 + share of surprisal explained); pmi: 100 x sigmoid(PMI per token)")),)
    overall_scale = SCALE
    combination = ("mean of the forward and reverse directions: npmi 50 x (1 + PMI / surprisal), "
                   "pmi 100 x sigmoid(PMI per token), conditional 100 x exp(mean log p)")

    def plan(self, item: Item, mode: str, options: MethodOptions) -> list[Planned | Skip]:
        """One likelihood request per item: every (context, text) pair the score needs."""
        self.check_mode(mode)
        conditional = get_template("likelihood", "likelihood/conditional")
        unconditional = get_template("likelihood", "likelihood/unconditional")
        ref = f"{conditional.ref}+{unconditional.ref}"
        refs = [detokenise(r) for r in item.references if r.strip()][: int(
            options.extra.get("max_references", 5))]
        if not refs:
            return [Skip(item.id, mode, "no reference captions (likelihood needs references)",
                         ref)]
        medium = "video" if item.media_kind == "video" else "image"
        text = detokenise(item.candidate)
        candidate = " " + text
        pairs = [(_text(conditional, medium=medium, references=refs), candidate)]
        if mode != "conditional":
            uncond = _text(unconditional, medium=medium)
            # The reverse direction: each reference after the candidate (one shared context).
            after_candidate = _text(conditional, medium=medium, references=[text])
            pairs.append((uncond, candidate))
            for r in refs:
                pairs.append((after_candidate, " " + r))
                pairs.append((uncond, " " + r))
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
        elif planned.mode == "pmi":
            forward, reverse = _directions(len(ll), lambda k: (ll[k] - ll[k + 1]) / n[k])
            pmi = (forward + reverse) / 2
            value = 100 * sigmoid(pmi)
            parts = {"pmi": pmi, "forward_pmi": forward, "reverse_pmi": reverse}
        else:
            forward, reverse = _directions(len(ll), lambda k: explained_share(ll[k], ll[k + 1]))
            share = (forward + reverse) / 2
            value = min(100.0, max(0.0, 50 * (1 + share)))
            parts = {"share": share, "forward_share": forward, "reverse_share": reverse}
        # The components are this judge's "reasoning": shown with the row, like a generative
        # judge's text (a likelihood answer has no text of its own). On the criterion, not the
        # response: npmi and pmi ask the same request and share its answer.
        return [Criterion("score", "ok", None, value, source="likelihood",
                          reasoning=response.text or json.dumps(
                              {k: round(v, 4) for k, v in parts.items()}))]

    def explain(self, reasoning: str, mode: str) -> str:
        """The recorded components (JSON) in words: what the references explain."""
        try:
            parts = json.loads(reasoning)
        except ValueError:
            return reasoning
        if not isinstance(parts, dict):
            return reasoning
        if "share" in parts:
            return (f"the references explain {100 * parts['share']:.0f} % of the caption's "
                    f"information (the references predict {100 * parts['forward_share']:.0f} % "
                    f"of the caption's, the caption {100 * parts['reverse_share']:.0f} % of the "
                    "references')")
        if "pmi" in parts:
            return (f"after the references each caption token is {math.exp(parts['pmi']):.2f} "
                    f"times as likely as without them (PMI {parts['pmi']:.2f} nats per token, "
                    f"caption {parts['forward_pmi']:.2f}, references "
                    f"{parts['reverse_pmi']:.2f})")
        if "mean_logp" in parts:
            return (f"after the references the caption's tokens have a geometric-mean "
                    f"probability of {100 * math.exp(parts['mean_logp']):.1f} %")
        return reasoning

    def overall(self, criteria: Sequence[Criterion], options: AggregateOptions
                ) -> tuple[float | None, str | None]:
        """The single score."""
        scored = [c for c in criteria if c.score is not None]
        return (scored[0].score, None) if scored else (None, "no score")
