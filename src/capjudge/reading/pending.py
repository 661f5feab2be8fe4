"""What one answer's reading still needs asked: digit follow-ups, forced anchors, a question.

A digit-split score's other leading digits are completed with continuation follow-ups
(:func:`follow_up_requests`, which a backend sends like any request); while the client finishes
a response, its digit trees wait in a :class:`PendingDigits`. :func:`forced_reading` starts the
reading of a slot at its forced anchor (the answer never wrote the number, or an off-contract
verdict is confirmed there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from capjudge.protocol import JudgeRequest, Message, ScoreSlot
from capjudge.reading.confirm import follow_up_question, follow_up_schema
from capjudge.reading.locate import Located
from capjudge.reading.tokens import (
    TokenLogprob,
    TreeReading,
    continuation_from_result,
    follow_up_prefixes,
    next_slot,
    read_next,
)

CONFIRM = 1000
"""Digit trees of forced-anchor confirmations are kept under slot index + this."""
QUESTION = "?"
"""The follow-up batch's marker of a confirmation question (never a digit prefix)."""


@dataclass
class PendingDigits:
    """A response whose digit trees wait for follow-ups.

    Keyed by the response's id() while the client finishes it; never stored.

    Attributes:
        text: the answer's text as its tokens spell it (the offsets refer to it).
        readings: slot index -> its digit-tree reading.
        asked: (slot index, prefix) already asked, so a failed one is not asked again.
        batch: what the last :meth:`OpenAIBackend.follow_ups` asked, in order.
        bases: slot index -> the assistant text a follow-up's digit prefix is appended to
            (the answer up to the number; with a forced anchor, the answer and the anchor).
        forced: slot index -> the number the answer printed (None) for forced slots.
        question: a confirmation question is to be asked (``confirm: follow_up``).
        follow_up: the question's answer once it came (None: not asked or failed).
    """

    text: str
    readings: dict[int, TreeReading]
    asked: set[tuple[int, str]] = field(default_factory=set)
    batch: list[tuple[int, str]] = field(default_factory=list)
    bases: dict[int, str] = field(default_factory=dict)
    forced: dict[int, int | float | None] = field(default_factory=dict)
    question: bool = False
    follow_up: str | None = None


def forced_reading(slot: ScoreSlot, text: str, tokens: Sequence[TokenLogprob], *,
                   confirming: bool = False) -> tuple[TreeReading, str]:
    """A reading of ``slot`` at its forced anchor, and the assistant text that precedes it.

    ``"first"`` slots are read at the answer's start, after ``forced_prefix`` (with an empty
    prefix, from the answer's own first token: nothing needs asking); other slots after the
    whole text and ``forced_prefix``. ``confirming`` an off-contract reading of a slot asked
    first, its ``confirm_prefix`` after the whole text is the anchor (the answer's start would
    only repeat the answer's own first token). An empty digit tree leaves the first digit
    unobserved, so :func:`follow_up_prefixes` asks for it (the empty prefix) like any other.
    """
    after, prefix = slot.anchor_at(confirming=confirming)
    base = (text if after else "") + prefix
    reading = TreeReading(slot, Located(len(base), len(base), 0.0), whole=False)
    if not base:
        # The answer's first token is the distribution at the forced position: nothing to ask.
        root = continuation_from_result(read_next(tokens[:1], next_slot(slot.name)))
        reading.after[""] = root if root is not None else {}
    return reading, base


def follow_up_requests(pending: PendingDigits, request: JudgeRequest, text: str,
                       continue_digits: bool) -> list[JudgeRequest]:
    """What the reading of one answer still needs asked, in one batch (recorded in ``pending``).

    - With ``continue_digits``: one continuation request per likely, unobserved leading-digit
      prefix (at least :data:`~capjudge.reading.tokens.FOLLOW_UP_MIN_P`): the conversation,
      then the assistant's own output up to and including that prefix ("... The final score is
      $9"), asking for one token with its top-20 alternatives (the next digit or the end of the
      number). A forced anchor (a slot with no number written, or an off-contract verdict's
      confirmation) first asks the empty prefix after the answer and the slot's
      ``forced_prefix``.
    - ``confirm: follow_up``: the one short confirmation question in the same conversation,
      its answer held to the slots' JSON schema (:mod:`capjudge.reading.confirm`).
    """
    out: list[JudgeRequest] = []
    pending.batch = []
    for i, reading in sorted(pending.readings.items()) if continue_digits else ():
        if reading.located is None:
            continue  # the reader abstained on this slot: nothing to complete
        for prefix in follow_up_prefixes(reading):
            if (i, prefix) in pending.asked:
                continue
            pending.asked.add((i, prefix))
            pending.batch.append((i, prefix))
            slot = request.slots[i % CONFIRM]
            content = pending.bases[i] + prefix
            out.append(JudgeRequest(
                messages=(*request.messages, Message("assistant", (content,))),
                slots=(next_slot(f"{slot.name}@{prefix}"),),
                decoding=replace(request.decoding, max_tokens=1, top_logprobs=20),
                template=f"{request.template}+continue", tag=f"{request.tag}|{prefix}"))
    if pending.question and (-1, QUESTION) not in pending.asked:
        pending.asked.add((-1, QUESTION))
        pending.batch.append((-1, QUESTION))
        out.append(JudgeRequest(
            messages=(*request.messages, Message("assistant", (text,)),
                      Message("user", (follow_up_question(request.slots),))),
            slots=request.slots, decoding=replace(request.decoding, max_tokens=64),
            template=f"{request.template}+confirm", tag=f"{request.tag}|confirm",
            verdict_schema=follow_up_schema(request.slots)))
    return out
