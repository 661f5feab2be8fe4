"""Verdict shapes of reading rules 26 (issue 40, corpus Z): the long tail of real traffic.

A verdict left to the reader ("somewhere in between", "pick whichever suits your use"), a value
taken back as soon as it is written ("seventy—no, sixty-five"), ACCR's lines numbered or
written after the copied definitions of their criteria. Each class with its near misses.
"""

from __future__ import annotations

import pytest
from reading_probe import value as _value
from reading_probe import why as _why

from capjudge.methods.gveval import accr_slots, score_slot
from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.reading.locate import Located, locate

VC = visce2_slot()
GV = score_slot()
HE = he_slot("correctness")


@pytest.mark.parametrize("answer", [
    ("Judged against the image alone it would earn $74$. Against the references, perhaps "
     "around $60$.\n\nWeighing both, I'd put it somewhere in between."),
    ("For a strict benchmark I'd give it 55, since the colour is wrong. For casual alt text, 75. "
     "Pick whichever suits your use."),
])
def test_a_verdict_left_to_the_reader_abstains(answer: str) -> None:
    assert "leaves the verdict open" in _why(answer, VC)


@pytest.mark.parametrize(("answer", "want"), [
    ("Rating: seventy—no, sixty-five. The dog and the ball are right, but it's a beach.", 65),
    ("Rating: 80... wait, 75. The leash is missing.", 75),
    # no value taken back
    ("Rating: 80, no doubt. The leash is there.", 80),
    ("Rating: 80 — no errors at all.", 80),
])
def test_a_value_taken_back_at_once_is_replaced(answer: str, want: float) -> None:
    assert _value(answer, VC) == want


def test_a_value_corrected_at_once_is_off_contract() -> None:
    found = locate("Rating: 80... wait, 75. The leash is missing.", VC)
    assert isinstance(found, Located) and found.off_contract is not None


@pytest.mark.parametrize(("answer", "slot", "want"), [
    # a number after "no" that does not end its clause, or a bare "no" ("not"), replaces nothing
    ("The final score is $80$ — no, 2 dogs are missing.", None, 80),
    ("The final score is $85$, no 10-point penalty applies here.", None, 85),
    ("Le doy un 4, no 5.", "he", 4),
    ("4, sorry 4.5 is not allowed, so 4.", "he", 4),
])
def test_no_replacement_after_no(answer: str, slot: str | None, want: float) -> None:
    assert _value(answer, HE if slot else GV) == want


@pytest.mark.parametrize("answer", [
    "4\nThe dog is positioned somewhere in between the benches, as stated.",
    "4\nThe caption could say 'man' or 'person'; use whichever fits, both are accurate.",
    "Taking both views into account, I settle somewhere in between: 4.",
])
def test_in_between_and_whichever_said_of_other_things_leave_the_verdict(answer: str) -> None:
    assert _value(answer, HE) == 4


@pytest.mark.parametrize("answer", [
    ("- It misses the seagulls.\n\n1. Accuracy: $80$\n2. Completeness: $70$\n3. Conciseness: "
     "$85$\n4. Relevance: $90$"),
    ("- Accuracy: Does the caption correctly describe the entities? $80$\n- Completeness: Does "
     "the caption cover all significant events? $70$\n- Conciseness: Is the caption clear and "
     "succinct? $85$\n- Relevance: Is the caption pertinent to the image content? $90$"),
])
def test_accr_lines_numbered_or_after_copied_definitions(answer: str) -> None:
    assert [_value(answer, s) for s in accr_slots()] == [80, 70, 85, 90]


def test_numbered_accr_lines_are_on_contract() -> None:
    answer = "1. Accuracy: $80$\n2. Completeness: $70$\n3. Conciseness: $85$\n4. Relevance: $90$"
    found = locate(answer, accr_slots()[0])
    assert isinstance(found, Located) and found.off_contract is None
