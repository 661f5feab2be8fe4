"""Reading one OpenAI-protocol answer to its end: slots finished, confirmed, read again.

What :class:`~capjudge.backends.openai_backend.OpenAIBackend` does with an answer once the
reader has located its verdicts: finishing each slot's digit tree (:func:`finish_slot`, marking
forced anchors), confirming off-contract readings at their forced anchor or by the follow-up
question (:mod:`capjudge.reading.confirm`), shaping the response, and reading a cached answer
again under new reading rules from what was stored (never asking again).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypedDict

from capjudge.protocol import (
    JudgeRequest,
    JudgeResponse,
    ScoreSlot,
    ServerTimings,
    SlotResult,
    Usage,
    worst_status,
)
from capjudge.reading.confirm import (
    confirmed,
    needs_confirmation,
    read_follow_up,
    rival_values,
    stated_rivals,
)
from capjudge.reading.locate import never_written
from capjudge.reading.pending import CONFIRM, QUESTION, PendingDigits, forced_reading
from capjudge.reading.tokens import (
    READING_RULES_VERSION,
    TokenLogprob,
    TreeReading,
    add_continuation,
    continuation_from_result,
    finish,
    follow_up_prefixes,
    read_next,
    read_text,
    read_tree,
)


class ResponseBase(TypedDict):
    """The fields every response read from one completion shares (``JudgeResponse(**base)``)."""

    usage: Usage
    model: str
    system_fingerprint: str | None
    latency_s: float
    timings: ServerTimings | None


CONFIRM_MODES = ("auto", "follow_up", "off")
"""Values of the ``confirm`` option (see :mod:`capjudge.reading.confirm`)."""



class Reader(Protocol):
    """What reading an answer needs to know of the backend that got it."""

    min_mass: float
    confirm: str
    continue_digits: bool  # it can ask continuation follow-ups (digit trees, anchors)
    follow_up_min_p: float  # an unobserved digit prefix this likely is asked (TreeReading)
    continue_off_reason: str | None  # why not, when it cannot

    @property
    def force_anchor(self) -> bool: ...  # noqa: D102

    @property
    def confirm_at_anchor(self) -> bool: ...  # noqa: D102

    def confirmable(self, request: JudgeRequest) -> bool: ...  # noqa: D102


def base_of(response: JudgeResponse, *, usage: Usage | None = None,
            timings: ServerTimings | None = None) -> ResponseBase:
    """The shared fields of ``response`` (its own usage and timings unless others are given)."""
    return {"usage": response.usage if usage is None else usage, "model": response.model,
            "system_fingerprint": response.system_fingerprint,
            "latency_s": response.latency_s,
            "timings": response.timings if timings is None else timings}


def read_unwritten(reader: Reader, slot: ScoreSlot, reading: TreeReading, joined: str,
                   tokens: Sequence[TokenLogprob]) -> tuple[TreeReading, str] | None:
    """The slot read at its forced anchor where the answer wrote no number for it, else None.

    The one home of this decision: a first reading (:func:`read_answer`) and a re-reading of
    the stored tokens (:func:`reread_raw`) must agree on it, or every forced-anchor judgement
    turns into a parse failure when it is read again under new rules. An abstention for a
    reason stays one (:func:`capjudge.reading.locate.never_written`).
    """
    if reading.located is None and reader.force_anchor and never_written(joined, slot):
        return forced_reading(slot, joined, tokens)
    return None


def _restamped(done: JudgeResponse, response: JudgeResponse, reader: Reader) -> JudgeResponse:
    """``done``, a stored ``response`` read again, keeping its raw answer and attempts."""
    done.raw, done.attempts = response.raw, response.attempts
    done.read_with = {**response.read_with, "reading_rules": READING_RULES_VERSION,
                      "confirm": reader.confirm, "min_mass": reader.min_mass}
    return done


def read_answer(reader: Reader, request: JudgeRequest, text: str,
                tokens: Sequence[TokenLogprob] | None, truncated: bool
                ) -> tuple[list[SlotResult], dict[int, TreeReading], dict[int, str],
                           dict[int, int | float | None]]:
    """Each of the request's slots read from one answer: the reading entry point of a backend.

    A backend passes what the judge sent (its text, its tokens with their alternatives when
    it returned them, whether it was cut) and gets each slot's result. For token answers it also
    gets what more the reading needs asked (:class:`~capjudge.reading.pending.PendingDigits`):
    each slot's digit tree (under slot index + :data:`CONFIRM` for an off-contract verdict's
    forced-anchor confirmation), the assistant text a follow-up's prefix is appended to, and
    which slots had their anchor forced.
    """
    slots: list[SlotResult] = []
    readings: dict[int, TreeReading] = {}
    joined = "".join(t.token for t in tokens or [])
    bases: dict[int, str] = {}
    forced: dict[int, int | float | None] = {}
    confirmable = reader.confirmable(request)
    for i, slot in enumerate(request.slots):
        if slot.position == "next":
            slots.append(read_next(tokens, slot))
        elif not tokens or slot.kind == "points":
            # text_only: no distribution (a count of points is always read from the text)
            slots.append(read_text(text, slot, truncated=truncated))
            if tokens and confirmable and reader.confirm_at_anchor and needs_confirmation(
                    slots[-1]):
                # An off-contract count: the judge asked at the count's forced anchor.
                k = i + CONFIRM
                readings[k], bases[k] = forced_reading(slot, joined, tokens, confirming=True)
                forced[k] = None
        else:
            readings[i] = read_tree(tokens, slot, truncated=truncated)
            located = readings[i].located
            if located is not None:
                bases[i] = joined[: located.start]
                if confirmable and located.off_contract is not None \
                        and reader.confirm_at_anchor:
                    # Off-contract: the same judge, asked at its verdict's forced anchor
                    # after its own answer, must agree (capjudge.reading.confirm).
                    k = i + CONFIRM
                    readings[k], bases[k] = forced_reading(slot, joined, tokens, confirming=True)
                    forced[k] = None
            elif (at_anchor := read_unwritten(reader, slot, readings[i], joined,
                                              tokens)) is not None:
                readings[i], bases[i] = at_anchor
                forced[i] = None
            readings[i].min_p = reader.follow_up_min_p
            if not reader.continue_digits and follow_up_prefixes(readings[i]):
                readings[i].notes.append(reader.continue_off_reason or "")
            slots.append(finish_slot(readings[i], reader.min_mass, forced, i))
    for reading in readings.values():
        reading.min_p = reader.follow_up_min_p
    confirm_at_anchors(slots, readings, forced, reader.min_mass, reader.continue_digits, text)
    return slots, readings, bases, forced


def rereadable_text(request: JudgeRequest, response: JudgeResponse) -> bool:
    """A stored text answer (no tokens) whose slots were read from its text."""
    raw = response.raw or {}
    return (not raw.get("reasoning_only") and not raw.get("tokens")
            and response.status not in ("error", "refused", "skipped")
            # cap3d's answers were stored before it had slots: their counts are read now.
            and (bool(response.slots) or any(s.kind == "points" for s in request.slots))
            and all(s.source in ("text", "none") or s.probs is None for s in response.slots)
            and not any(s.position == "next" for s in request.slots))


def reread_text(backend: Reader, request: JudgeRequest, response: JudgeResponse
                 ) -> JudgeResponse:
    """A stored text answer read again under the current rules (never asked again)."""
    finish_reason = (response.raw or {}).get("finish_reason")
    truncated = finish_reason == "length"
    slots = [read_text(response.text, slot, truncated=truncated) for slot in request.slots]
    if (response.raw or {}).get("follow_up") is not None and backend.confirm == "follow_up":
        confirm_by_question(slots, request, (response.raw or {})["follow_up"])
    return _restamped(response_of(response.text, slots, finish_reason, request,
                                  base_of(response)), response, backend)


def reread_raw(backend: Reader, request: JudgeRequest, response: JudgeResponse
                ) -> JudgeResponse:
    """``response`` read again from its raw tokens under the current reading rules."""
    raw = response.raw or {}
    tokens = [TokenLogprob(str(t), float(lp), tuple((str(a), float(b)) for a, b in top))
              for t, lp, top in raw["tokens"]]
    after = raw.get("after") or {}
    notes = raw.get("notes") or {}
    joined = "".join(t.token for t in tokens)
    slots: list[SlotResult] = []
    for i, slot in enumerate(request.slots):
        if slot.position == "next":
            slots.append(read_next(tokens, slot))
            continue
        truncated = raw.get("finish_reason") == "length"
        if slot.kind == "points":
            slots.append(read_text(response.text, slot, truncated=truncated))
        else:
            reading = read_tree(tokens, slot, truncated=truncated)
            forced: dict[int, int | float | None] = {}
            if (at_anchor := read_unwritten(backend, slot, reading, joined,
                                            tokens)) is not None:
                # The stored follow-ups complete the forced anchor's tree (never asked again).
                reading, forced[i] = at_anchor[0], None
            reading.min_p = backend.follow_up_min_p
            for prefix, node in (after.get(str(i)) or {}).items():
                add_continuation(reading, prefix, node)
            reading.notes.extend(n for n in notes.get(str(i), []) if n not in reading.notes)
            slots.append(finish_slot(reading, backend.min_mass, forced, i))
        anchor = after.get(str(i + CONFIRM))
        if needs_confirmation(slots[-1]) and backend.confirmable(request) and (
                # (nothing was asked where the anchor is the answer's own first token)
                anchor is not None or (slot.anchor_at(confirming=True) == (False, "")
                                       and backend.confirm_at_anchor)):
            # The forced anchor's tree as it was asked (never asked again).
            second, _ = forced_reading(slot, joined, tokens, confirming=True)
            second.min_p = backend.follow_up_min_p
            for prefix, node in (anchor or {}).items():
                add_continuation(second, prefix, node)
            slots[-1] = confirmed(slots[-1], finish_slot(second, backend.min_mass,
                                                     {0: None}, 0), "forced-anchor",
                                  rival_values(response.text, slot, slots[-1].printed),
                                  stated_rivals(response.text, slot, slots[-1].printed))
    if raw.get("follow_up") is not None and backend.confirm == "follow_up":
        confirm_by_question(slots, request, raw["follow_up"])
    return _restamped(response_of(response.text, slots, raw.get("finish_reason"), request,
                                  base_of(response)), response, backend)


def confirm_at_anchors(slots: list[SlotResult], readings: Mapping[int, TreeReading],
                        forced: dict[int, int | float | None], min_mass: float,
                        continue_digits: bool, text: str) -> None:
    """Each off-contract slot whose forced-anchor tree is complete, confirmed or contradicted.

    A tree still waiting for follow-ups leaves its slot as it is until the last round.
    ``text`` is the answer (the values it writes are the anchor's rivals).
    """
    for k, reading in readings.items():
        if k < CONFIRM or (continue_digits and follow_up_prefixes(reading)):
            continue
        second = finish_slot(reading, min_mass, forced, k)
        first = slots[k - CONFIRM]
        slots[k - CONFIRM] = confirmed(first, second, "forced-anchor",
                                       rival_values(text, reading.slot, first.printed),
                                       stated_rivals(text, reading.slot, first.printed))


def confirm_by_question(slots: list[SlotResult], request: JudgeRequest,
                         follow_up: str | None) -> None:
    """Each off-contract slot, confirmed or contradicted by the follow-up question's answer."""
    for i, slot in enumerate(request.slots):
        if needs_confirmation(slots[i]):
            second = None if follow_up is None else read_follow_up(follow_up, slot)
            slots[i] = confirmed(slots[i], second, "follow-up")


def finish_slot(reading: TreeReading, min_mass: float, forced: dict[int, int | float | None],
            index: int) -> SlotResult:
    """:func:`finish`, marking a forced slot (``anchor_forced``, the number it printed)."""
    result = finish(reading, min_mass)
    if index in forced:
        result.anchor_forced = True
        result.printed = forced[index]
        result.confirmation = "forced-anchor" if result.status != "parse_failure" else None
        slot = reading.slot
        if result.status == "parse_failure":
            # finish() names the placeholder number; the answer printed none.
            notes = f" ({'; '.join(reading.notes)})" if reading.notes else ""
            result.reason = (f"the answer wrote no score, and after the forced anchor "
                             f"{slot.forced_prefix!r} no probability on {slot.low}-{slot.high} "
                             f"was observed{notes}")
    return result


def response_of(text: str, slots: list[SlotResult], finish_reason: str | None,
              request: JudgeRequest, base: ResponseBase) -> JudgeResponse:
    """The response of an answer's slots: the worst slot's status, each failure's reason."""
    status = worst_status([s.status for s in slots])
    reason = "; ".join(f"{s.name}: {s.reason}" for s in slots if s.status != "ok") or None
    if finish_reason == "length" and status not in ("ok", "text_only"):
        reason = f"output cut at max_tokens ({request.decoding.max_tokens}); {reason}"
    return JudgeResponse(status=status, text=text, slots=slots, reason=reason, **base)


def merge_follow_ups(request: JudgeRequest, response: JudgeResponse, pending: PendingDigits,
                     answers: Sequence[JudgeResponse], *, min_mass: float, continuing: bool,
                     refused: Callable[[JudgeResponse], str | None]
                     ) -> tuple[JudgeResponse, str | None, bool]:
    """The response finished with its follow-ups' answers (digits, anchors, the question).

    Each digit follow-up's next-digit distribution joins its slot's tree; the question's
    answer is kept for :func:`confirm_by_question`; a follow-up that failed is a note on its
    slot, never a guess. Usage and server timings add the follow-ups' (cached ones excepted).

    Args:
        request: the request answered.
        response: the answer as the backend first read it.
        pending: what it waited for (:class:`~capjudge.reading.pending.PendingDigits`).
        answers: the follow-ups' answers, in ``pending.batch``'s order.
        min_mass: the backend's ``min_mass``.
        continuing: the backend can still ask continuation follow-ups.
        refused: why a failed follow-up shows the server refuses continuations (None: it
            does not show that); from then on no continuation is asked.

    Returns:
        The finished response; why continuations were turned off (None: they were not); and
        whether another round of follow-ups is due (a "10" after a "1").
    """
    usage = Usage(response.usage.prompt_tokens, response.usage.completion_tokens)
    timings = response.timings
    raw = dict(response.raw or {})
    followed: dict[str, dict[str, object]] = {
        k: dict(v) for k, v in (raw.get("after") or {}).items()}
    off: str | None = None
    for (i, prefix), answer in zip(pending.batch, answers, strict=True):
        if not answer.cached:
            usage.prompt_tokens += answer.usage.prompt_tokens
            usage.completion_tokens += answer.usage.completion_tokens
            if answer.timings is not None:
                timings = (timings or ServerTimings()).plus(answer.timings)
        if prefix == QUESTION:
            pending.follow_up = answer.text if answer.status not in (
                "error", "refused", "skipped") else None
            raw["follow_up"] = pending.follow_up
            continue
        reading = pending.readings[i]
        node = continuation_from_result(answer.slots[0]) if answer.slots else None
        if answer.status == "ok" and node is not None:
            add_continuation(reading, prefix, node)
            followed.setdefault(str(i), {})[prefix] = dict(node)  # kept raw (reread)
            continue
        why = answer.reason or (answer.slots[0].reason if answer.slots else None)
        if (refusal := refused(answer)) is not None:
            off, continuing = refusal, False
            note = refusal
        else:
            note = f"the follow-up for {prefix!r} failed ({why})"
        if note not in reading.notes:
            reading.notes.append(note)
    slots = list(response.slots)
    for i, reading in pending.readings.items():
        if i < CONFIRM:
            slots[i] = finish_slot(reading, min_mass, pending.forced, i)
    confirm_at_anchors(slots, pending.readings, pending.forced, min_mass, continuing,
                       response.text)
    if pending.question and (-1, QUESTION) in pending.asked:
        confirm_by_question(slots, request, pending.follow_up)
    done = response_of(response.text, slots, None, request,
                       base_of(response, usage=usage, timings=timings))
    if raw:
        done.raw = {**raw, "after": followed,
                    "notes": {str(i): list(r.notes) for i, r in pending.readings.items()
                              if r.notes}}
    more = continuing and any(
        set(follow_up_prefixes(r)) - {p for j, p in pending.asked if j == i}
        for i, r in pending.readings.items())
    return done, off, more
