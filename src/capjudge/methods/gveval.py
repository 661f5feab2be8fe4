"""G-VEval (gveval.md): chain-of-thought then "The final score is $N$" on 0-100, expected score
from the score token's distribution; reference-free, reference-only and combined modes, for
images and for videos (the 1536x512 Frame 1..3 tile made at ingest).

``gveval-accr`` asks for the four ACCR dimensions of §3.1 (accuracy, completeness, conciseness,
relevance), each written as ``Name: $N$`` on 0-100 (the paper's scoring setting) with its own
score position and distribution; the item's ACCR score is their mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from capjudge.backends.base import JudgeRequest, ScoreSlot
from capjudge.item import Item
from capjudge.methods.base import (
    Criterion,
    CriterionSpec,
    Method,
    MethodOptions,
    Planned,
    Scale,
    Skip,
    item_image,
)
from capjudge.prompts import Template, get_template, method_spec

MODES = ("ref-free", "ref-only", "combined")
ACCR = ("accuracy", "completeness", "conciseness", "relevance")


def score_slot() -> ScoreSlot:
    """The 0-100 ``$N$`` slot, from the method's templates.yaml."""
    scale = method_spec("gveval")["scale"]
    return ScoreSlot(name=scale["name"], low=int(scale["low"]), high=int(scale["high"]),
                     anchor=scale["anchor"], forced_prefix=scale["forced_prefix"])


def accr_slots() -> tuple[ScoreSlot, ...]:
    """One labelled 0-100 slot per ACCR dimension."""
    return tuple(ScoreSlot(name=c, low=0, high=100, anchor="$", label=c.capitalize(),
                           forced_prefix=f"\n{c.capitalize()}: $") for c in ACCR)


SCALE = Scale(0, 100, pass_mark=50)


def _plan_with(template: Template, item: Item, mode: str, options: MethodOptions,
               slots: tuple[ScoreSlot, ...], medium: str) -> list[Planned | Skip]:
    if "references" in template.needs and not item.references:
        return [Skip(item.id, mode, "no reference captions (mode needs references)",
                     template.ref)]
    image = None
    if "image" in template.needs:
        if not options.vision:
            return [Skip(item.id, mode, "backend has no vision input (mode needs the "
                         f"{'frames' if medium == 'video' else 'image'})", template.ref)]
        image = item_image(item, options.detail)
    messages = template.render(image=image, candidate=item.candidate,
                               references=list(item.references), medium=medium)
    request = JudgeRequest(messages=messages, slots=slots, decoding=options.decoding,
                           template=template.ref, tag=f"{item.id}|{mode}")
    return [Planned(item.id, mode, request)]


class GVEval(Method):
    """The G-VEval overall score.

    The method option ``media`` (e.g. ``[video]``) restricts a judge to some media kinds; other
    items are recorded as skipped.
    """

    name = "gveval"
    modes = MODES
    default_modes = MODES
    criteria = (CriterionSpec("score", SCALE, description="overall quality, 0-100"),)
    overall_scale = SCALE
    combination = "the expected score of the 0-100 distribution (eq. 1)"

    def template_id(self, medium: str, mode: str) -> str:
        """The template for a medium (image / video) and mode."""
        return f"gveval/{medium}/{mode}"

    def slots(self) -> tuple[ScoreSlot, ...]:
        """Where the score(s) are read."""
        return (score_slot(),)

    def plan(self, item: Item, mode: str, options: MethodOptions) -> list[Planned | Skip]:
        """One request per item and mode (skipped without references or vision as needed)."""
        self.check_mode(mode)
        medium = "video" if item.media_kind == "video" else "image"
        template = get_template("gveval", self.template_id(medium, mode))
        kinds = options.extra.get("media")
        if kinds and item.media_kind not in kinds:
            return [Skip(item.id, mode, f"judge configured for {'/'.join(kinds)} items "
                         f"only (this is {item.media_kind})", template.ref)]
        return _plan_with(template, item, mode, options, self.slots(), medium)


class GVEvalACCR(GVEval):
    """G-VEval's ACCR dimensions (video captions; images work the same way)."""

    name = "gveval-accr"
    criteria = tuple(CriterionSpec(c, SCALE, description=f"ACCR {c}, 0-100") for c in ACCR)
    combination = "the mean of accuracy, completeness, conciseness and relevance"

    def template_id(self, medium: str, mode: str) -> str:
        return f"gveval/accr/{mode}"  # one template for both media; it names the medium

    def slots(self) -> tuple[ScoreSlot, ...]:
        return accr_slots()

    def overall(self, criteria: Sequence[Criterion], options: dict[str, Any]
                ) -> tuple[float | None, str | None]:
        """The mean of the four ACCR scores (None when one is missing)."""
        scores = {c.name: c.score for c in criteria if c.name in ACCR}
        missing = [name for name in ACCR if scores.get(name) is None]
        if missing:
            return None, f"no score for {', '.join(missing)}"
        return sum(s for s in scores.values() if s is not None) / len(ACCR), None
