"""The reading entry point: what a judge sent in, each slot's result out (issue 40).

A backend's part of reading an answer is to say what the judge sent, in the neutral
:class:`Answer` (its text, its tokens with their alternatives, its finish reason, a thought
kept in its own field, a refusal), and what it can compute besides: a backend that holds the
model gives exact distributions at a position (:class:`Teacher`, transformers' teacher
forcing). :func:`read` is the one call; it returns a :class:`Reading`: the response, and what
the reading still needs asked (digit follow-ups, a forced anchor, the confirmation question),
which the backend sends like any request and hands back to :meth:`Reading.complete`.

A cached answer is read again through the same call (:func:`read` on the stored
:class:`~capjudge.protocol.JudgeResponse`): from its raw tokens or its text when it was read
under other rules (:data:`~capjudge.reading.tokens.READING_RULES_VERSION`) or another
``confirm`` mode, never asked again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from capjudge.protocol import JudgeRequest, JudgeResponse
from capjudge.reading.answer import (
    Reader,
    ResponseBase,
    merge_follow_ups,
    read_answer,
    reread_raw,
    reread_text,
    rereadable_text,
    response_of,
)
from capjudge.reading.confirm import needs_confirmation
from capjudge.reading.pending import CONFIRM, PendingDigits, follow_up_requests
from capjudge.reading.teacher import Teacher, read_teacher_forced
from capjudge.reading.thought import checked, kept, thought_of
from capjudge.reading.tokens import (
    READING_RULES_VERSION,
    TokenLogprob,
    follow_up_prefixes,
    reasoning_only,
)


@dataclass(frozen=True)
class Answer:
    """What a judge sent, as the backend got it: nothing in it is read yet.

    Attributes:
        text: the message content.
        base: the fields the response shares with the completion (usage, model, timings).
        tokens: the content's tokens with their top alternatives (None: the server gave no
            log-probabilities).
        finish_reason: the server's (``"length"``: cut at ``max_tokens``).
        thinking: a reasoning model's thought in its own field (``reasoning_content``);
            never the answer.
        refusal: the server's refusal (its ``refusal`` field, or ``content_filter``).
    """

    text: str
    base: ResponseBase
    tokens: Sequence[TokenLogprob] | None = None
    finish_reason: str | None = None
    thinking: str | None = None
    refusal: str | None = None


@dataclass
class Reading:
    """One answer's reading: the response so far, and what it still waits for.

    Attributes:
        request: the request answered.
        response: the answer's response (final when ``pending`` is None).
        pending: the digit trees, anchors and question that wait for follow-ups.
        changed: for a stored answer: whether it was read again (False: it stands as it was
            stored, and only the backend's settings are re-applied to it).
    """

    request: JudgeRequest
    response: JudgeResponse
    pending: PendingDigits | None = None
    changed: bool = True
    thought: str = ""

    def follow_ups(self, continue_digits: bool) -> list[JudgeRequest]:
        """What the reading still needs asked, in one batch (empty: it is finished).

        ``continue_digits``: the backend can still ask continuation follow-ups (digit
        trees, forced anchors); see :func:`capjudge.reading.pending.follow_up_requests`.
        """
        if self.pending is None:
            return []
        return follow_up_requests(self.pending, self.request, self.response.text,
                                  continue_digits)

    def complete(self, answers: Sequence[JudgeResponse], *, min_mass: float, continuing: bool,
                 refused: Callable[[JudgeResponse], str | None]) -> str | None:
        """Merge the last batch's answers; return why continuations were turned off, if so.

        Afterwards ``response`` is the finished (or further) response, and ``pending`` is
        None unless another round is due (a "10" after a "1"). See
        :func:`capjudge.reading.answer.merge_follow_ups` for the arguments.
        """
        if self.pending is None:
            return None
        done, off, more = merge_follow_ups(self.request, self.response, self.pending, answers,
                                           min_mass=min_mass, continuing=continuing,
                                           refused=refused)
        self.response = done
        if not more:
            self.pending = None
            self.response = checked(self.request, done, self.thought)
        return off


def read(reader: Reader, request: JudgeRequest, answer: Answer | JudgeResponse,
         teacher: Teacher | None = None) -> Reading:
    """Each slot of ``request`` read from one answer: the reading's one entry point.

    Args:
        reader: the reading settings of the backend that got the answer (``min_mass``,
            ``confirm``, whether it can continue an answer, ...).
        request: the request answered; its slots say what to read and on what contract.
        answer: what the judge sent (:class:`Answer`), or a stored response to read again
            under the current rules.
        teacher: exact distributions at a position of the answer (a backend that holds the
            model); without one, distributions come from the answer's tokens and follow-ups.

    Returns:
        The :class:`Reading`: its response, and what it still needs asked.
    """
    if isinstance(answer, JudgeResponse):
        return _read_stored(reader, request, answer)
    if answer.refusal is not None:
        response = JudgeResponse(status="refused", text=answer.text,
                                 reason=f"model refused: {answer.refusal}", **answer.base)
        return Reading(request, response)
    truncated = answer.finish_reason == "length"
    if not answer.text.strip() and answer.thinking and request.slots:
        # A reasoning model's thought in its own field is never the answer: an answer with
        # nothing but that field stopped before its verdict.
        slots = [reasoning_only(slot, truncated) for slot in request.slots]
        response = response_of(answer.text, slots, answer.finish_reason, request, answer.base)
        response.raw = {"finish_reason": answer.finish_reason, "reasoning_only": True}
        return Reading(request, response)
    thought = thought_of(answer.text, answer.thinking)
    if teacher is not None:
        reading = Reading(request, read_teacher_forced(reader, request, answer.text,
                                                       answer.base, teacher))
    else:
        reading = _read_sent(reader, request, answer, truncated)
    if thought:
        # Kept with the answer: a stored answer read again is checked the same way.
        reading.response.raw = {**(reading.response.raw or {}), "thought": kept(thought)}
        reading.thought = thought
        if reading.pending is None:
            reading.response = checked(request, reading.response, thought)
    return reading


def _read_sent(reader: Reader, request: JudgeRequest, answer: Answer, truncated: bool
               ) -> Reading:
    """An answer read from its text and tokens; follow-ups pending where they are needed."""
    tokens = answer.tokens or None
    slots, readings, bases, forced = read_answer(reader, request, answer.text, tokens,
                                                 truncated)
    # ``confirm: follow_up``: a slot off-contract with no forced anchor to confirm it asks
    # the one short question.
    question = (reader.confirm == "follow_up" and reader.confirmable(request)
                and any(needs_confirmation(s) and i + CONFIRM not in readings
                        for i, s in enumerate(slots)))
    response = response_of(answer.text, slots, answer.finish_reason, request, answer.base)
    if tokens:
        # The raw answer, so a change of reading rules re-reads it (never re-asks).
        response.raw = {"tokens": [[t.token, t.logprob, [list(a) for a in t.top]]
                                   for t in tokens],
                        "finish_reason": answer.finish_reason,
                        "notes": {str(i): list(r.notes) for i, r in readings.items()
                                  if r.notes}}
    else:
        # A text answer is re-read from its text; what was cut must be remembered.
        response.raw = {"finish_reason": answer.finish_reason}
    pending = None
    if question or (reader.continue_digits
                    and any(follow_up_prefixes(r) for r in readings.values())):
        joined = "".join(t.token for t in tokens or [])
        pending = PendingDigits(joined, readings, set(), [], bases, forced, question)
    return Reading(request, response, pending)


def _read_stored(reader: Reader, request: JudgeRequest, stored: JudgeResponse) -> Reading:
    """A cached answer read again when it was read under other rules or ``confirm`` mode."""
    stale = (stored.read_with.get("reading_rules") != READING_RULES_VERSION
             or stored.read_with.get("confirm", reader.confirm) != reader.confirm)
    thought = str((stored.raw or {}).get("thought") or "")
    if stale and stored.raw and stored.raw.get("tokens") and request.slots:
        return Reading(request, checked(request, reread_raw(reader, request, stored), thought))
    if stale and request.slots and rereadable_text(request, stored):
        return Reading(request, checked(request, reread_text(reader, request, stored), thought))
    return Reading(request, stored, changed=False)


__all__ = ["Answer", "Reading", "Teacher", "read"]
