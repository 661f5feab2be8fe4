"""Numbers said figuratively, in irony or around in other words (rules 34, corpus AH).

:mod:`capjudge.reading.figurative` blanks numbers in fixed phrases and in sentences marked as
irony; :func:`capjudge.reading.masking.mask_negated` blanks a value the judge talks around
("anything but $100$", "hardly a 90", "better than a 3"). Each class with near misses.
"""

from __future__ import annotations

import pytest
from reading_probe import value as _value

from capjudge.methods.cap3d import points_slots
from capjudge.methods.gveval import accr_slots
from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.reading import read_points_slot
from capjudge.reading.figurative import mask_figurative

VC = visce2_slot()
CORRECTNESS = he_slot("correctness")


@pytest.mark.parametrize(("text", "kept"), [
    ("Deserves a high five! Perfect grammar.", ""),
    ("More characters than Ocean's 11 - the caption invents a crowd.", ""),
    ("One in a hundred captions mentions the reflection.", ""),
    ("It does a 180 from what's shown.", ""),
    ("This one goes up to 11.", ""),
    ("Sure, let's give it a 100 - it only missed the second half. \U0001f644", ""),
    ("Oh, a flawless $100$, obviously.", ""),
    ("A perfect 100 /s", ""),
    # Near misses: the same words without the figure, and a plain sentence after the irony.
    ("Oh, sure. The caption is wrong.\nScore: 20", "20"),
    ("High quality: 5", "5"),
    ("Ocean's 11/100 rating", "11100"),  # a value on a scale, not a title
])
def test_figures_and_irony_are_blanked(text: str, kept: str) -> None:
    assert "".join(c for c in mask_figurative(text) if c.isdigit()) == kept


@pytest.mark.parametrize(("answer", "want", "slot"), [
    ("Anything but a 5 - it gets the animal wrong: that's a goat. 2.", 2, CORRECTNESS),
    ("Anything but a 5.", None, CORRECTNESS),
    ("Better than a 3, not quite a 4. It leaves out the bucket of fish.", None,
     he_slot("completeness")),
    ("I'm tempted by a 4, but I'll resist: 3. 'who is wearing' could be trimmed.", 3,
     he_slot("conciseness")),
    ("I'm tempted by a 4. 'who is wearing' could be trimmed, though.", None,
     he_slot("conciseness")),
    ("Hardly a 90 - more like a 65.", 65, VC),
    ("Deserves a high five! Perfect grammar.", None, he_slot("fluency")),
    ("More characters than Ocean's 11 - the caption invents a crowd where the image has one "
     "performer. 20.", 20, VC),
    ("Sure, let's give it a 100 - it only missed the entire second half of the video. "
     "\U0001f644", None, None),
    ("The caption is fine but omits the teacher.\n\nI couldn't in good conscience go above 70, "
     "so 70 it is.", 70, None),
    # Near misses that still read.
    ("Far from perfect: 60.", 60, VC),
    ("Hardly any errors. Rating: 90", 90, VC),
    ("Better than the reference. The final score is $85$.", 85, None),
])
def test_the_value_said_around(answer: str, want: float | None, slot) -> None:
    assert (_value(answer, slot) if slot is not None else _value(answer)) == want


def test_an_accr_line_talked_around_has_no_value() -> None:
    relevance = accr_slots()[3]
    answer = ("Accuracy: $90$\nCompleteness: $75$\nConciseness: $70$\n"
              "Relevance: anything but $100$ - the question is off-topic")
    assert _value(answer, relevance) is None
    sarcastic = ("Accuracy: Oh, a flawless $100$, obviously - it only called the giraffe a "
                 "horse.\nCompleteness: $60$\nConciseness: $90$\nRelevance: $85$")
    assert _value(sarcastic, accr_slots()[0]) is None
    assert _value(sarcastic, accr_slots()[1]) == 60


@pytest.mark.parametrize(("h_line", "want"), [
    ("0 if that line is a shadow, 1 if it's a crack", None),
    ("2 - if the lid counts", None),
    ("1", 1),
    ("1 (the wings)", 1),
])
def test_a_cap3d_count_under_a_condition(h_line: str, want: float | None) -> None:
    answer = (f"Correctness Score (C. Score): 3\nHallucination Score (H. Score): {h_line}\n"
              "Explanation: bowl, white, ceramic.")
    assert read_points_slot(answer, points_slots("A white bowl.")[1]).printed == want
