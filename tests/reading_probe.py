"""What the reader makes of one answer for one slot: its value, or why it abstains."""

from __future__ import annotations

from capjudge.methods.gveval import score_slot
from capjudge.protocol import ScoreSlot
from capjudge.reading.locate import Located, Unreadable, locate

GV = score_slot()


def value(text: str, slot: ScoreSlot = GV) -> float | None:
    """The value read for ``slot`` (G-VEval's by default), or None when the reader abstains."""
    found = locate(text, slot)
    return found.value if isinstance(found, Located) else None


def why(text: str, slot: ScoreSlot = GV) -> str:
    """Why the reader abstains (the test fails if it reads a value)."""
    found = locate(text, slot)
    assert isinstance(found, Unreadable), found
    return found.reason


def off_contract(text: str, slot: ScoreSlot = GV) -> str | None:
    """Why the value read is off the method's contract, None when on it (fails on abstention)."""
    found = locate(text, slot)
    assert isinstance(found, Located), found
    return found.off_contract
