"""``demo-overlap``: one criterion on 1-5 from a prompt in this package's own folder."""

from __future__ import annotations

from pathlib import Path

from capjudge.item import Item
from capjudge.methods import CriterionSpec, Method, MethodOptions, Planned, Scale, Skip
from capjudge.prompts import get_template
from capjudge.protocol import JudgeRequest, ScoreSlot

PROMPTS = Path(__file__).with_name("prompts")
FIVE = Scale(1, 5, pass_mark=3)


class DemoOverlap(Method):
    """How much the candidate says what the references say, 1-5 (text only)."""

    name = "demo-overlap"
    criteria = (CriterionSpec("overlap", FIVE, description="content shared with the refs"),)
    overall_scale = FIVE
    choices: dict[str, tuple[str, ...]] = {}

    def plan(self, item: Item, mode: str, options: MethodOptions) -> list[Planned | Skip]:
        self.check_mode(mode)
        template = get_template(self.name, "demo/overlap", folder=PROMPTS)
        if not item.references:
            return [Skip(item.id, mode, "demo-overlap needs references", template.ref)]
        messages = template.render(candidate=item.candidate, references=list(item.references))
        request = JudgeRequest(messages=messages, slots=(ScoreSlot("overlap", 1, 5),),
                               decoding=options.decoding, template=template.ref, tag=item.id)
        return [Planned(item.id, mode, request)]
