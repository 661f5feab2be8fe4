"""3D-object captions (caption3d_correctness_hallucination_prompt.md): precision of C/H points.

The judge sees the multi-view tile and returns correctness points (partial credit allowed),
hallucination points and an explanation; precision = C / (C + H) × 100.

The two counts are read in the reading seam (:mod:`capjudge.reading.points`: slots of kind
``points``), like every other method's verdict, so an off-contract answer gets its second
channel (a forced anchor, or the follow-up question with ``confirm: follow_up``). C = H = 0 is
the recorded status ``undefined``, never a division by zero. Per system, precision is reported
both per item (macro) and from the summed points (micro) by the aggregate stage.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    item_image,
)
from capjudge.prompts import get_template
from capjudge.protocol import JudgeRequest, JudgeResponse, ScoreSlot, SlotResult
from capjudge.records import JSONValue
from capjudge.scoring import precision, precision_macro, precision_micro

PRECISION = Scale(0, 100, pass_mark=50)
POINTS = Scale(0, None)



def points_slots(candidate: str) -> tuple[ScoreSlot, ScoreSlot]:
    """The two counts the prompt asks for, as slots of kind ``points``.

    The forced prefixes are the prompt's own labels: a backend that can continue the judge's
    answer confirms an off-contract count there (0-100 bounds only that distribution).
    """
    def count(name: str) -> ScoreSlot:
        label = f"{name.title()} Score ({name[0].upper()}. Score)"
        return ScoreSlot(name, 0, 100, anchor="", label=label, kind="points",
                         quotes=(candidate,), forced_prefix=f"\n{label}: ")

    return count("correctness"), count("hallucination")


class Cap3D(Method):
    """Correctness / hallucination points and precision for 3D-object captions.

    Method option ``all_media``: judge images too (by default only 3D ``views`` items).
    """

    name = "cap3d"
    verdict_contract = ("two labelled lines, once each: 'Correctness Score (C. Score): N' and "
                        "'Hallucination Score (H. Score): N'")
    criteria = (
        CriterionSpec("correctness", POINTS, needs_image=True,
                      description="correct attribute points (partial credit)"),
        CriterionSpec("hallucination", POINTS, needs_image=True,
                      description="hallucinated detail points"),
        CriterionSpec("precision", PRECISION, needs_image=True, description="C / (C + H) x 100"),
    )
    overall_scale = PRECISION
    combination = "precision = C / (C + H) x 100 (undefined when C = H = 0)"
    aggregates = ("precision_macro", "precision_micro")

    def verdict_fields(self, request: JudgeRequest) -> dict[str, JSONValue]:
        """``verdict_format: json_schema``: the correctness and hallucination points."""
        points: JSONValue = {"type": "number", "minimum": 0}
        return {"correctness": points, "hallucination": points}

    def plan(self, item: Item, mode: str, options: MethodOptions) -> list[Planned | Skip]:
        """One request per 3D object (the multi-view tile); other media are skipped."""
        self.check_mode(mode)
        settings = self.settings(options)
        template = get_template("cap3d", "cap3d/score",
                                variant=dict(settings)["prompt_variant"])
        if item.media_kind != "views" and not options.extra.get("all_media"):
            return [Skip(item.id, mode, "cap3d judges 3D objects (views items); set "
                         "all_media to judge images too", template.ref)]
        if not options.vision:
            return [Skip(item.id, mode, "backend has no vision input (cap3d needs the "
                         "views)", template.ref)]
        messages = template.render(image=item_image(item, options.detail),
                                   candidate=item.candidate)
        request = JudgeRequest(messages=messages, slots=points_slots(item.candidate),
                               decoding=options.decoding,
                               template=template.ref, tag=f"{item.id}|{mode}",
                               quotes=(item.candidate,))
        return [Planned(item.id, mode, request, settings=settings)]

    def interpret(self, planned: Planned, response: JudgeResponse) -> list[Criterion]:
        """Correctness and hallucination points (read in the seam), and their precision."""
        names = ("correctness", "hallucination")
        by_name = {s.name: s for s in response.slots}
        if response.status in ("error", "refused", "skipped") or set(names) - set(by_name):
            return [Criterion(name, response.status if response.status != "ok"
                              else "parse_failure", response.reason or "no points read")
                    for name in (*names, "precision")]
        counts = [_count(by_name[name]) for name in names]
        (c, c_why), (h, h_why) = ((x.score, x.reason) for x in counts)
        if c is None or h is None:
            reason = "; ".join(why for why in (c_why, h_why) if why)
            return [*counts, Criterion("precision", "parse_failure", reason)]
        p = precision(c, h)
        return [*counts, Criterion("precision", "undefined" if p is None else "ok",
                                   "C = H = 0: precision is undefined" if p is None else None,
                                   p, source="text")]

    def overall(self, criteria: Sequence[Criterion], options: AggregateOptions
                ) -> tuple[float | None, str | None]:
        """The item's precision."""
        by_name = {c.name: c for c in criteria}
        p = by_name.get("precision")
        if p is None or p.score is None:
            return None, p.reason if p is not None else "no precision"
        return p.score, None

    def system_aggregates(self, criteria: Sequence[Sequence[Criterion]]
                          ) -> dict[str, float | None]:
        """Precision per item averaged (macro) and from the summed points (micro)."""
        pairs = []
        for item in criteria:
            points = {c.name: c.score for c in item if c.score is not None}
            c, h = points.get("correctness"), points.get("hallucination")
            if c is not None and h is not None:
                pairs.append((float(c), float(h)))
        return {"precision_macro": precision_macro(pairs),
                "precision_micro": precision_micro(pairs)}


def _count(slot: SlotResult) -> Criterion:
    """One count's criterion: its printed points, or the reason none was read."""
    if slot.status not in ("ok", "low_mass", "text_only") or slot.printed is None:
        return Criterion(slot.name, "parse_failure", slot.reason or f"no {slot.name} points",
                         printed=slot.printed, source="text", read_by=slot.read_by,
                         confirmation=slot.confirmation)
    value = float(slot.printed)
    return Criterion(slot.name, "ok", None, value, printed=value, source="text",
                     read_by=slot.read_by, confirmation=slot.confirmation)


__all__ = ["Cap3D", "points_slots"]
