"""A criterion's line that holds two values in the method's delimiters (rules 35).

:func:`capjudge.reading.settled.alternative_after` abstains when one ACCR criterion's line
gives it a second ``$N$`` that nothing sets aside ("my head says $60$, my heart says $70$");
:func:`capjudge.reading.masking.mask_hypotheticals` blanks a condition right after a
criterion's label when the line then turns to the caption as it is ("had it ..., $90$; as
written, $65$"). Other criteria's values on the same line, and values the answer marks as
former or hypothetical, are near misses that keep reading as before. Also rules 35: a
conditional sentence takes its "otherwise" branch with it, and cap3d reads "C. Score 4" (no
colon) and a whole object's "Overall" line after per-part ones; a later sentence that turns to
another value ("On the other hand, 65 if ...") leaves the verdict open.
"""

from __future__ import annotations

import pytest
from reading_probe import value as _value

from capjudge.methods.cap3d import points_slots
from capjudge.methods.gveval import accr_slots
from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.reading import read_points_slot

ACCURACY, COMPLETENESS, CONCISENESS, RELEVANCE = accr_slots()


def _answer(line: str) -> str:
    return f"Accuracy: $90$\n{line}\nConciseness: $95$\nRelevance: $95$"


@pytest.mark.parametrize("line", [
    "Completeness: my head says $60$, my heart says $70$",
    "Completeness: $100$... kidding, it repeats 'beautiful' three times. $60$.",
    "Completeness: strict $55$, lenient $75$",
    "Completeness: if the animal is a dog, $90$; otherwise $40$",
    "Completeness: had it named the stick, $90$, and $60$ for the rest",
])
def test_two_values_on_a_criterion_line_abstain(line: str) -> None:
    assert _value(_answer(line), COMPLETENESS) is None
    # The other criteria are read as before.
    assert _value(_answer(line), CONCISENESS) == 95


@pytest.mark.parametrize(("line", "want"), [
    ("Completeness: had it mentioned the stick, $90$; as written, $65$", 65),
    ("Completeness: if it had named the stick, $90$; as it stands, $65$", 65),
    ("Completeness: had it named the stick, $90$; but it does not, so $65$", 65),
    ("- **Completeness:** were the stick named, $90$; in fact, $65$", 65),
])
def test_a_condition_after_the_label_then_the_caption_as_it_is(line: str, want: int) -> None:
    assert _value(_answer(line), COMPLETENESS) == want


@pytest.mark.parametrize(("answer", "slot", "want"), [
    # Other criteria's values on one line, in any layout.
    ("Accuracy: $80$, Completeness: $65$, Conciseness: $85$, Relevance: $90$", COMPLETENESS, 65),
    ("Accuracy $80$ | Completeness $60$ | Conciseness $95$ | Relevance $90$", ACCURACY, 80),
    ("Accuracy: $70$ / Completeness: $80$ / Conciseness: $90$ / Relevance: $100$", ACCURACY, 70),
    ("Genauigkeit: $80$; Vollständigkeit: $60$; Prägnanz: $90$; Relevanz: $85$", ACCURACY, 80),
    # A later value the answer marks as former or hypothetical.
    (_answer("Completeness: $85$ (was $90$ before I noticed the hat)"), COMPLETENESS, 85),
    (_answer("Completeness: $70$ (would be $85$ if it mentioned the city)"), COMPLETENESS, 70),
    (_answer("Completeness: $60$, not $70$"), COMPLETENESS, 60),
    (_answer("Completeness: $70$ (vs. $85$ for a caption naming the ball)"), COMPLETENESS, 70),
    # "if anything" is no condition.
    (_answer("Completeness: if anything, a bit generous at $70$"), COMPLETENESS, 70),
    # The same value twice is one value.
    (_answer("Completeness: $60$ - yes, $60$"), COMPLETENESS, 60),
])
def test_near_misses_read_as_before(answer: str, slot: object, want: int) -> None:
    assert _value(answer, slot) == want  # type: ignore[arg-type]


def test_a_condition_left_open_stays_unread() -> None:
    # The condition after the label with nothing turning to the caption as it is: no value.
    assert _value(_answer("Completeness: had it named the stick, $90$"), COMPLETENESS) is None


def test_a_condition_and_its_other_branch_are_both_blanked() -> None:
    # A conditional sentence and the "otherwise" after it leave no value.
    assert _value("If the stick counts, 3; otherwise 4.", he_slot("completeness")) is None
    assert _value("If the stick counts, 3. The caption names the stick, so 3.",
                  he_slot("completeness")) == 3


def test_the_whole_objects_count_after_per_part_lines() -> None:
    answer = ("Table: C. Score 3, H. Score 0\nChairs: C. Score 2, H. Score 1\n\n"
              "Overall - Correctness Score (C. Score): 5\nOverall - Hallucination Score "
              "(H. Score): 1")
    correctness, hallucination = points_slots("Four chairs around a table.")[:2]
    assert read_points_slot(answer, correctness).printed == 5
    assert read_points_slot(answer, hallucination).printed == 1
    # Colon-less labels are labels: "C. Score 4, H. Score 1".
    assert read_points_slot("C. Score 4, H. Score 1", correctness).printed == 4


@pytest.mark.parametrize(("answer", "want"), [
    ("I'd say 80, since it names both animals. On the other hand, 65 if the setting matters.",
     None),
    ("I'd say 80. Then again, 65 is defensible.", None),
    # A count after the turn is no value offered.
    ("I'd say 80. On the other hand, the caption misses 2 dogs.", 80),
])
def test_a_later_sentence_that_turns_to_another_value(answer: str, want: int | None) -> None:
    assert _value(answer, visce2_slot()) == want
