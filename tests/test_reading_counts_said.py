"""cap3d's counts said without the labels (reading rules 32, :mod:`capjudge.reading.counts_said`).

Judges that drop the "C. Score:"/"H. Score:" lines say the counts in prose or in the precision
formula; five corpora's writers read them unprompted. Each shape with the near misses that
must still abstain (a share, a hedge, a second value, a precision that disagrees).
"""

from __future__ import annotations

import pytest

from capjudge.methods.cap3d import points_slots
from capjudge.reading import read_points_slot
from capjudge.reading.counts_said import counts_said

_MUG = "A white ceramic mug with a broken handle."


def _counts(answer: str) -> list[float | None]:
    return [read_points_slot(answer, s).printed for s in points_slots(_MUG)]


@pytest.mark.parametrize(("answer", "want"), [
    ("I count three correct attributes (mug, white, ceramic) and one hallucination (the handle "
     "is intact), for a precision of 75%.", [3, 1]),
    ("I find 4 correct attributes and 2 hallucinated details.", [4, 2]),
    ("The caption gets three attributes right (mug, white, ceramic) and one wrong: the handle "
     "is intact. Precision is therefore 75%.", [3, 1]),
    ("Four attributes are correct and there are no hallucinations.", [4, 0]),
    ("Mug, white and ceramic are correct; 'broken' is wrong.\n\nPrecision = 3 / (3 + 1) = 75%",
     [3, 1]),
    ("Three attributes are correct and one is wrong (the handle).", [3, 1]),
])
def test_counts_said_in_prose_or_the_formula(answer: str, want: list[float]) -> None:
    assert _counts(answer) == want
    result = read_points_slot(answer, points_slots(_MUG)[0])
    # Off the prompt's contract: its second channel must agree before the row counts.
    assert result.confirmation == "unconfirmed"
    assert "not in the prompt's labelled lines" in (result.read_by or "")


@pytest.mark.parametrize("answer", [
    "3 of the 4 attributes are correct.",  # the fourth: wrong or not scored?
    "I find three correct attributes and maybe one hallucinated detail.",
    "Three correct attributes (maybe four) and one hallucination.",
    "I count three correct attributes and one hallucination, for a precision of 60%.",
    "Three correct attributes and one hallucination; on a second look, four correct "
    "attributes.",
    "Overall a good caption with one hallucinated detail.",  # no correctness count
    "Precision = 3 / (3 + 1) = 75%, or with the handle 4 correct attributes and 1 "
    "hallucination.",
])
def test_counts_not_settled_abstain(answer: str) -> None:
    assert _counts(answer) == [None, None]


def test_labelled_lines_are_read_as_before() -> None:
    answer = ("Correctness Score (C. Score): 3\nHallucination Score (H. Score): 1\n"
              "Explanation: four attributes are correct in the reference caption.")
    assert _counts(answer)[1] == 1


def test_counts_said_reports_why_it_abstains() -> None:
    _, why = counts_said("three correct attributes and one hallucination, precision 60%")
    assert why is not None and "disagree" in why
    assert counts_said("The mug is white.") == (None, None)
