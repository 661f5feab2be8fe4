"""An off-contract verdict is trusted only when a second, independent channel agrees (issue 40).

Each method's prompt asks for its verdict in one format (G-VEval's "The final score is $N$",
the ACCR labels, HarmonicEval's and VisCE²'s score first): an answer that states its verdict
exactly once in that format is *on-contract* and read as the paper reads it. Any other reading
(a JSON key, a table, a rubric word, a verdict questioned afterwards ...) is *off-contract*
(:attr:`capjudge.reading.locate.Located.off_contract`): the rules found a value, but a judge
can write in ways no rule has seen, and a wrong value that looks valid is the worst failure.

An off-contract reading therefore asks a second channel, where the backend has one:

- ``forced-anchor``: a backend that can continue the judge's own answer (llama.cpp, vLLM,
  transformers) appends the method's verdict prefix to the answer and reads the distribution
  there; the printed value must be its most likely value.
- ``follow-up``: elsewhere (OpenAI, Claude, Gemini), with the backend option
  ``confirm: follow_up``, one short question in the same conversation ("State only your final
  score ... as JSON") with the method's JSON schema as ``response_format``; its JSON value must
  be the printed one.

Agreement keeps the reading (a rubric word read without a distribution takes the anchor's
distribution). Disagreement, or a channel that gives no reading, is a ``parse_failure`` whose
reason quotes both readings (``confirmation: contradicted``). Without any channel the rules'
reading stays and the row says ``confirmation: unconfirmed``; the report counts those.

Every slot result records :attr:`~capjudge.protocol.SlotResult.confirmation`:

========================  ==============================================================
``on-contract``           stated once in the method's format: read as the paper reads it
``forced-anchor``         off-contract, confirmed at the forced anchor (or the reading
                          *is* the forced anchor's: the judge wrote no number)
``follow-up``             off-contract, confirmed by the follow-up question
``unconfirmed``           off-contract, no second channel: the rules' reading stands
``contradicted``          off-contract, the second channel disagreed: ``parse_failure``
========================  ==============================================================
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TypedDict

from capjudge.protocol import ScoreSlot, SlotResult
from capjudge.reading.finders import rating_phrases
from capjudge.reading.locate import Located
from capjudge.reading.masking import mask_view
from capjudge.reading.numbers import numbers_in
from capjudge.reading.scale import clean_text
from capjudge.reading.settled import ratings_stated
from capjudge.reading.structure import json_fields
from capjudge.reading.view import answer_view
from capjudge.reading.vocabulary import matches

CONFIRMATIONS = ("on-contract", "forced-anchor", "follow-up", "unconfirmed", "contradicted")
CHANNELS = ("forced-anchor", "follow-up")


class ContractFields(TypedDict):
    """A reading's ``confirmation`` and ``read_by`` (keyword arguments of a slot result)."""

    confirmation: str
    read_by: str


def contract_fields(found: Located) -> ContractFields:
    """``confirmation`` and ``read_by`` for a slot read from ``found`` (before any channel)."""
    if found.off_contract is None:
        return {"confirmation": "on-contract", "read_by": found.how}
    return {"confirmation": "unconfirmed",
            "read_by": f"{found.how} (off-contract: {found.off_contract})"}


def needs_confirmation(result: SlotResult) -> bool:
    """A valid reading that is off-contract and not yet confirmed."""
    return result.confirmation == "unconfirmed" and result.status in ("ok", "low_mass",
                                                                     "text_only")


def _most_likely(result: SlotResult) -> int | None:
    probs = result.probs
    if probs is None or not result.mass:
        return None
    return result.values[max(range(len(probs)), key=lambda k: probs[k])]


# At the forced anchor the printed value must be at least this many times as likely as each
# other value of the scale the answer writes (see :func:`rival_values`).
RIVAL_MARGIN = 2.0


def _cleaned(text: str, slot: ScoreSlot) -> str:
    """The answer as the rules read it: viewed, quotations masked, the scale's phrasings out."""
    return clean_text(mask_view(answer_view(text).text, slot.quotes), slot)


def rival_values(text: str, slot: ScoreSlot, printed: int | float | None) -> tuple[int, ...]:
    """The other values of ``slot``'s scale the answer writes as numbers.

    Scale phrasings, quotations and rubrics are left out: these are what a model continuing
    the answer may merely copy at the forced anchor.
    """
    if slot.kind != "score" or printed is None:
        return ()
    cleaned = _cleaned(text, slot)
    return tuple(sorted({int(n.value) for n in numbers_in(cleaned)
                         if n.integral and slot.low <= n.value <= slot.high
                         and n.value != printed}))


def stated_rivals(text: str, slot: ScoreSlot, printed: int | float | None) -> tuple[int, ...]:
    """The other values of ``slot``'s scale the answer *states as a rating* ("I'd rate it 40").

    A continuation at the forced anchor, appended after the whole answer, copies the verdict it
    has just read; between two values the judge states as its rating it cannot say which
    stands, so it confirms neither (the follow-up question can: the judge says).
    """
    if slot.kind != "score" or printed is None:
        return ()
    cleaned = _cleaned(text, slot)
    said = [c.number for c in rating_phrases(cleaned, slot) if c.problem is None]
    return tuple(sorted({int(n.value) for n in [*said, *ratings_stated(cleaned, slot)]
                         if n.value != printed and float(n.value).is_integer()
                         and slot.low <= n.value <= slot.high}))


def confirmed(result: SlotResult, second: SlotResult | None, channel: str,
              rivals: Sequence[int] = (), stated: Sequence[int] = ()) -> SlotResult:
    """``result`` after its second channel's reading ``second`` (None: the channel gave none).

    Args:
        result: the off-contract reading (``confirmation: unconfirmed``).
        second: the forced anchor's distribution (``forced-anchor``) or the follow-up's value
            as a text reading (``follow-up``); None when the channel answered nothing readable.
        channel: ``forced-anchor`` or ``follow-up``.
        rivals: the other values of the scale the answer writes (:func:`rival_values`). A
            model continuing an answer may copy a number it has just read, so at the forced
            anchor the printed value must also be :data:`RIVAL_MARGIN` times as likely as each
            of them: the channel has to prefer the reading to the answer's own alternatives.
        stated: the other values the answer states as its rating (:func:`stated_rivals`): the
            forced anchor confirms no reading beside one (see there).

    Returns:
        The reading confirmed, or a ``parse_failure`` quoting both readings.
    """
    if not needs_confirmation(result):
        return result
    printed = result.printed
    if channel == "forced-anchor" and stated:
        return _contradicted(result, f"the answer also states {stated[0]} as its rating, and a "
                             "continuation at the forced anchor copies the last verdict it "
                             "read: it cannot say which stands")
    if second is None or second.status not in ("ok", "low_mass", "text_only"):
        why = second.reason if second is not None and second.reason else "no reading"
        return _contradicted(result, f"the {channel} gives no reading ({why})")
    other: int | float | None = second.printed if channel == "follow-up" else _most_likely(second)
    if other is None or printed is None or float(other) != float(printed):
        p = ""
        if channel == "forced-anchor" and second.probs is not None and printed in second.values:
            p = f", P({printed}) = {second.probs[second.values.index(int(printed))]:.2f}"
        return _contradicted(result, f"the {channel} reads {other}{p}")
    if channel == "forced-anchor" and second.probs is not None and (
            close := _close_rival(second, int(printed), rivals)) is not None:
        return _contradicted(result, close)
    note = f"; confirmed by the {channel}"
    if channel == "forced-anchor" and second.probs is not None:
        note += f" (P({printed}) = {second.probs[second.values.index(int(printed))]:.2f})"
    out = replace(result, confirmation=channel, read_by=(result.read_by or "") + note)
    if second.status == "low_mass" and out.status == "ok":
        # A confirmation is no surer than its channel: an anchor that captured little
        # probability agrees weakly, and the row is flagged as such.
        out = replace(out, status="low_mass", reason=f"confirmed at a forced anchor that "
                      f"captured little probability ({second.reason})")
    if result.probs is None and second.probs is not None and channel == "forced-anchor":
        # A verdict without a digit distribution (a rubric word, a number in words) takes the
        # anchor's: the server gave one, and the value it confirms is the printed one.
        out = replace(out, probs=second.probs, mass=second.mass, source=second.source,
                      status=second.status, reason=second.reason, anchor_forced=True)
    return out


def _close_rival(second: SlotResult, printed: int, rivals: Sequence[int]) -> str | None:
    """Why the anchor does not prefer ``printed`` to a value the answer also writes, or None."""
    probs = second.probs or []
    p = probs[second.values.index(printed)]
    for r in rivals:
        if r in second.values and p < RIVAL_MARGIN * (q := probs[second.values.index(r)]):
            return (f"the forced-anchor barely prefers it to {r}, which the answer also writes "
                    f"(P({printed}) = {p:.2f}, P({r}) = {q:.2f}; under {RIVAL_MARGIN:g} times)")
    return None


def _contradicted(result: SlotResult, why: str) -> SlotResult:
    return replace(result, status="parse_failure", probs=None, confirmation="contradicted",
                   reason=f"unconfirmed: the answer reads {result.printed} ({result.read_by}), "
                          f"and {why}")


def follow_up_question(slots: Sequence[ScoreSlot]) -> str:
    """The one short question asked after an off-contract answer (same conversation)."""
    keys = ", ".join(f'"{s.name}": N' for s in slots)
    scales = "; ".join(f"{s.name}: a number of points, 0 or more" if s.kind == "points"
                       else f"{s.name}: an integer from {s.low} to {s.high}" for s in slots)
    return (f"State only your final score, as JSON and nothing else: {{{keys}}} ({scales}).")


def follow_up_schema(slots: Sequence[ScoreSlot]) -> str:
    """The JSON schema (as JSON text) the follow-up's answer must follow."""
    schema = {"type": "object",
              "properties": {s.name: {"type": "number", "minimum": 0} if s.kind == "points"
                             else {"type": "integer", "minimum": s.low, "maximum": s.high}
                             for s in slots},
              "required": [s.name for s in slots], "additionalProperties": False}
    return json.dumps(schema, sort_keys=True)


def read_follow_up(text: str, slot: ScoreSlot) -> SlotResult:
    """The follow-up's value for ``slot``: one JSON key naming it, strictly.

    Anything else (prose, two keys that disagree, a value off the scale) gives no reading: a
    confirmation must not rest on the same rules that found the off-contract reading.
    """
    view = answer_view(text)
    values = set()
    for f in json_fields(view.text):
        names = [n.lower() for n in f.path]
        if not names:
            continue
        if matches(names[-1], slot) >= 1:
            try:
                values.add(float(f.value.strip()))
            except ValueError:
                values.add(float("nan"))  # "88/100", "high": no value for the slot
    failed = SlotResult(slot.name, slot.values, None, None, "text", "parse_failure")
    if len(values) != 1:
        failed.reason = (f"the follow-up answer holds no JSON value for {slot.name}"
                         if not values else f"the follow-up answer holds {len(values)} values "
                         f"for {slot.name}")
        return failed
    value = values.pop()
    if slot.kind == "points":
        # A count of points: halves allowed, never negative.
        if not math.isfinite(value) or value < 0:
            failed.reason = f"the follow-up's {slot.name} {value:g} is not a count of points"
            return failed
        return SlotResult(slot.name, slot.values, None, None, "text", "text_only", None,
                          value, read_by="follow-up JSON")
    if value != value or not value.is_integer() or not slot.low <= value <= slot.high:
        failed.reason = f"the follow-up's {slot.name} {value:g} is not on {slot.low}-{slot.high}"
        return failed
    return SlotResult(slot.name, slot.values, None, None, "text", "text_only", None, int(value),
                      read_by="follow-up JSON")


__all__ = ["CHANNELS", "CONFIRMATIONS", "RIVAL_MARGIN", "confirmed", "contract_fields",
           "follow_up_question", "follow_up_schema", "needs_confirmation", "read_follow_up",
           "rival_values"]
