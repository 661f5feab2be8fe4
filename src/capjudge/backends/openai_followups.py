"""Digit follow-ups of an OpenAI-compatible answer: what waits for them, and forced anchors.

A digit-split score's other leading digits are completed with continuation follow-ups
(:meth:`capjudge.backends.openai_backend.OpenAIBackend.follow_ups`); while the client finishes
a response, its digit trees wait in a :class:`PendingDigits`. :func:`forced_reading` starts the
reading of a slot whose number the answer never wrote, at its forced anchor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from capjudge.backends.logprobs import (
    TokenLogprob,
    TreeReading,
    continuation_from_result,
    next_slot,
    read_next,
)
from capjudge.protocol import ScoreSlot
from capjudge.reading.locate import Located


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


def forced_reading(slot: ScoreSlot, text: str, tokens: Sequence[TokenLogprob]
                    ) -> tuple[TreeReading, str]:
    """A reading of ``slot`` at its forced anchor, and the assistant text that precedes it.

    ``"first"`` slots are read at the answer's start, after ``forced_prefix`` (with an empty
    prefix, from the answer's own first token: nothing needs asking); other slots after the
    whole text and ``forced_prefix``. An empty digit tree leaves the first digit unobserved,
    so :func:`follow_up_prefixes` asks for it (the empty prefix) like any other.
    """
    base = slot.forced_prefix if slot.position == "first" else text + slot.forced_prefix
    reading = TreeReading(slot, Located(len(base), len(base), 0.0), whole=False)
    if not base:
        # The answer's first token is the distribution at the forced position: nothing to ask.
        root = continuation_from_result(read_next(tokens[:1], next_slot(slot.name)))
        reading.after[""] = root if root is not None else {}
    return reading, base
