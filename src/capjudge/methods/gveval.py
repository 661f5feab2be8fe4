"""G-VEval (gveval.md): chain-of-thought then "The final score is $N$" on 0-100, expected score
from the score token's distribution; reference-free, reference-only and combined modes, for
images and for videos (the 1536x512 Frame 1..3 tile made at ingest)."""

from __future__ import annotations

from typing import Any

from capjudge.backends.base import JudgeRequest, ScoreSlot
from capjudge.methods import MethodOptions, Planned, Skip, item_image
from capjudge.prompts import get_template, method_spec

MODES = ("ref-free", "ref-only", "combined")


def score_slot() -> ScoreSlot:
    """The 0-100 ``$N$`` slot, from the method's templates.yaml."""
    scale = method_spec("gveval")["scale"]
    return ScoreSlot(name=scale["name"], low=int(scale["low"]), high=int(scale["high"]),
                     anchor=scale["anchor"], forced_prefix=scale["forced_prefix"])


class GVEval:
    """The G-VEval method."""

    name = "gveval"
    modes: tuple[str, ...] = MODES
    default_modes: tuple[str, ...] = MODES

    def plan(self, item: dict[str, Any], mode: str, options: MethodOptions) -> Planned | Skip:
        if mode not in MODES:
            raise ValueError(f"unknown G-VEval mode {mode!r}; choose from {MODES}")
        medium = "video" if item["media_kind"] == "video" else "image"
        template = get_template("gveval", f"gveval/{medium}/{mode}")
        if "references" in template.needs and not list(item.get("references") or []):
            return Skip(item["id"], mode, "no reference captions (mode needs references)",
                        template.ref)
        image = None
        if "image" in template.needs:
            if not options.vision:
                return Skip(item["id"], mode, "backend has no vision input (mode needs the "
                            f"{'frames' if medium == 'video' else 'image'})", template.ref)
            image = item_image(item, options.detail)
        messages = template.render(image=image, candidate=item["candidate"],
                                   references=list(item.get("references") or []))
        request = JudgeRequest(messages=messages, slots=(score_slot(),),
                               decoding=options.decoding, template=template.ref,
                               tag=f"{item['id']}|{mode}")
        return Planned(item["id"], mode, request)
