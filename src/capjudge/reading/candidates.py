"""What a reading finds: a located verdict, an abstention, a candidate (see :mod:`locate`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from capjudge.protocol import Status
from capjudge.reading.numbers import Number


@dataclass(frozen=True)
class Located:
    """Where a slot's number was written (offsets in the original answer).

    Attributes:
        start: offset of its first character (a minus sign excluded).
        digits_end: offset just after its integer digits (what a token path covers).
        value: the number as written (a float when it had a fractional part).
        how: how it was found ("JSON key 'final_score'", "label 'Accuracy' and '$'" ...).
        kind: ``digits``, ``words``, ``cjk`` or ``escaped`` (digits the answer wrote as HTML
            entities or escapes); only digits have a token distribution.
        off_contract: None when the answer states its verdict exactly once in the format
            the method's prompt asks for (on-contract: read as the paper reads it); otherwise
            why it is off-contract (a second channel must agree before it is trusted: see
            :mod:`capjudge.reading.confirm`).
    """

    start: int
    digits_end: int
    value: float
    how: str = ""
    kind: str = "digits"
    off_contract: str | None = None

    @property
    def integral(self) -> bool:
        """Whether the value is a whole number."""
        return float(self.value).is_integer()

    @property
    def printed(self) -> int | float:
        """The value as an int when it is whole."""
        return int(self.value) if self.integral else self.value


@dataclass(frozen=True)
class Unreadable:
    """Why no score could be read from a text (``status`` is ``parse_failure``).

    ``unwritten``: the answer wrote no number where the verdict is due (or nothing at all), so
    a backend may read the slot at its forced anchor; any other reason is the reader's
    abstention, which no single other channel may override.
    """

    status: Status
    reason: str
    printed: int | float | None = None
    unwritten: bool = False


@dataclass(frozen=True)
class Candidate:
    """One place the answer may state the slot's value.

    Attributes:
        number: the number there.
        how: how it was found.
        rank: 2 the slot's own name, 1 a generic verdict name or the opening number, 0 a
            phrase.
        final: marked as the final one ("Final rating", "Final Answer").
        problem: why the number is not a reading (a range, a decimal ...), or None.
        own_scale: written against the slot's own scale ("70 out of 100", "4/5").
        source: which step of the reading found it (``structure``, ``label``, ``opening``,
            ``standalone``, ``own_scale``, ``phrase``, ``level``, ``checklist``): what later
            checks ask, never the wording of ``how``.
        contract: found in the method's own verdict format (label, filler, anchor).
    """

    number: Number
    how: str
    rank: int
    final: bool = False
    problem: str | None = None
    own_scale: bool = False
    source: str = ""
    contract: bool = False


def stands_alone(text: str, n: Number) -> bool:
    """A number in words is a value only where it stands as one.

    Followed by the end of its line or sentence, its scale ("out of five", "/5") or
    "points"; "Accuracy: one object is wrong" is prose.
    """
    rest = text[n.end:]
    return re.match(r"[\s*_`$)\]]*(?:$|[.,;!\n]|\(|out\s+of\b|/|of\s+\d|points?\b|"
                    r"pts\b|分|점)", rest, re.I) is not None


def printed_value(c: Candidate) -> int | float | None:
    """The candidate's value as an int when it is whole."""
    value = c.number.value
    return int(value) if float(value).is_integer() else value
