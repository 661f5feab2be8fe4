"""Reading an answer whose distributions the backend computes exactly (teacher forcing).

A backend that holds the model (transformers) need not read distributions from returned
tokens: it computes the exact distribution of a slot's values at any position. It says so
through a :class:`Teacher`; the reading here decides *where* (where the answer wrote its
verdict, or the slot's forced anchor), what an abstention is (never teacher-forced away), and
whether an off-contract verdict is confirmed at its forced anchor (:mod:`capjudge.reading.confirm`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from capjudge.protocol import (
    JudgeRequest,
    JudgeResponse,
    ScoreSlot,
    SlotResult,
    below_min_mass,
    worst_status,
)
from capjudge.reading.answer import Reader, ResponseBase
from capjudge.reading.confirm import (
    confirmed,
    contract_fields,
    needs_confirmation,
    rival_values,
    stated_rivals,
)
from capjudge.reading.locate import find_printed
from capjudge.reading.points import read_points_slot
from capjudge.reading.tokens import abstention
from capjudge.scoring import normalise


class Teacher(Protocol):
    """Exact distributions of a slot's values at positions of one answer."""

    def at_printed(self, slot: ScoreSlot, start: int) -> Mapping[int, float] | None:
        """P(value) where the answer's digits start (character ``start`` of its text).

        None when the digits do not start a token ("is85"): the model did not choose them
        there, so no distribution at that position is its verdict's.
        """

    def at_anchor(self, slot: ScoreSlot, *, confirming: bool = False) -> Mapping[int, float]:
        """P(value) at the slot's forced anchor (:meth:`ScoreSlot.anchor_at`)."""


def read_teacher_forced(reader: Reader, request: JudgeRequest, text: str, base: ResponseBase,
                        teacher: Teacher) -> JudgeResponse:
    """Each slot of ``request`` read from ``text``, with the teacher's exact distributions."""
    slots = [_read_slot(reader, slot, text, teacher) for slot in request.slots]
    status = worst_status([s.status for s in slots])
    reason = "; ".join(f"{s.name}: {s.reason}" for s in slots if s.reason) or None
    return JudgeResponse(status=status, text=text, slots=slots, reason=reason, **base)


def _read_slot(reader: Reader, slot: ScoreSlot, text: str, teacher: Teacher) -> SlotResult:
    """One slot: where its verdict was written (else the forced anchor), and its confirmation."""
    if slot.kind == "points":
        # A count of points is read from the text (capjudge.reading.points).
        return _confirm_at_anchor(read_points_slot(text, slot), slot, teacher, reader, text)
    found = find_printed(text, slot)  # located once: the position and the contract
    if found is None and (abstained := abstention(text, slot)) is not None:
        return abstained  # a reasoned abstention is never teacher-forced away
    printed = found.printed if found is not None else None
    raw = teacher.at_printed(slot, found.start) if found is not None else None
    forced = raw is None
    if raw is None:
        # "first" slots: the score was asked for first, so it is read at the answer's start
        # (not where a later "Rating: 4" was written); others after the answer and the prefix.
        raw = teacher.at_anchor(slot)
    result = _distribution_result(slot, raw, reader.min_mass, printed, forced)
    if forced:
        result.confirmation = "forced-anchor" if result.status != "parse_failure" else None
    elif found is not None:
        fields = contract_fields(found)
        result.confirmation, result.read_by = fields["confirmation"], fields["read_by"]
        result = _confirm_at_anchor(result, slot, teacher, reader, text)
    return result


def _confirm_at_anchor(result: SlotResult, slot: ScoreSlot, teacher: Teacher, reader: Reader,
                       text: str) -> SlotResult:
    """``result``, confirmed or contradicted at its forced anchor when off-contract.

    The distribution at the slot's forced anchor after the whole answer must put the printed
    value first (:mod:`capjudge.reading.confirm`).
    """
    if not needs_confirmation(result):
        return result
    second = _distribution_result(slot, teacher.at_anchor(slot, confirming=True),
                                  reader.min_mass, None, True)
    return confirmed(result, second, "forced-anchor",
                     rival_values(text, slot, result.printed),
                     stated_rivals(text, slot, result.printed))


def _distribution_result(slot: ScoreSlot, raw: Mapping[int, float], min_mass: float,
                         printed: int | float | None, forced: bool) -> SlotResult:
    """The slot's exact distribution (not renormalised in ``raw``) as a result with its status."""
    probs, mass = normalise(dict(raw), slot.values)
    result = SlotResult(slot.name, slot.values, probs, mass, "teacher_forcing", "ok", None,
                        printed, forced)
    if mass <= 0:
        result.probs, result.status = None, "parse_failure"
        result.reason = "no probability on the scale at the score position"
    elif below_min_mass(mass, min_mass):
        result.status = "low_mass"
        result.reason = f"captured mass {mass:.3f} < {min_mass}"
    return result
