"""Verdict shapes of reading rules 32 (issue 40, corpus AF): judges trained to judge.

Evaluator models fine-tuned for judging answer capjudge's prompts in their trained formats:
Prometheus' "[RESULT] 3" and Flow-Judge's "<score>4</score>" on a 1-5 rubric where 0-100 is
asked, PandaLM's preference "2" between numbered responses, G-Eval's form ("- Coherence: 4",
"Fluency (1-3): 3"), TIGERScore's error lists with score reductions. Asked again, such a judge
repeats its number, so the second channel cannot tell 3 of 100 from 3 of 5: these abstain by
their shape. Each class with the near misses that must still read.
"""

from __future__ import annotations

import pytest
from reading_probe import value as _value
from reading_probe import why as _why

from capjudge.methods.cap3d import points_slots
from capjudge.methods.gveval import accr_slots
from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.reading import read_points_slot

VC = visce2_slot()


@pytest.mark.parametrize("answer", [
    "Feedback: The response mostly aligns with the image but contains a notable inaccuracy "
    "regarding the main action. [RESULT] 3",
    "<feedback>\nThe caption identifies the chess board and the players' hands.\n</feedback>\n"
    "<score>\n4\n</score>",
    "Score: 2\n\nOnly one bench is visible.",
    "Rating: [[7]]",
    # A bottom phrase said of one detail, of some details, denied or supposed (review probes).
    "The caption is wrong about the dog's color but otherwise right. Score: 6",
    "The caption is completely wrong about the weather but gets the dog and the beach right. "
    "Score: 7",
    "The caption would be completely wrong if it said cat, but it correctly says dog. Score: 9",
    "Unrelated details such as the sky are left out, which is fine. Score: 8",
    "The caption is not unrelated to the image: the dog and the beach are both there. Score: 9",
    "Nothing in the caption is wrong. Score: 9",
    "<feedback>\nThe caption accurately identifies the chess board. It does not describe the "
    "clock beside the board, a minor omission.\n</feedback>\n<score>\n4\n</score>",
])
def test_a_bottom_tenth_rating_off_the_format_abstains(answer: str) -> None:
    assert "bottom tenth" in _why(answer)


@pytest.mark.parametrize(("answer", "want"), [
    # The whole caption at the bottom: the low value is the judge's.
    ("The caption describes a cat, but the image shows a bus: it is completely wrong. "
     "Score: 3", 3),
    ("Score: 5. The caption is about a kitchen; this is a different scene entirely.", 5),
    ("Score: 5/100 - wrong.", 5),  # written on the scale
    ("Score: 0. The caption has nothing to do with the image.", 0),
    ("Score: 5. The caption describes a kitchen, but the photo is of a beach.", 5),
    ("The final score is $5$.", 5),  # the method's own format
    ("Score: 40. Only one bench is visible.", 40),  # above the bottom tenth
])
def test_a_low_rating_the_answer_supports_reads(answer: str, want: float) -> None:
    assert _value(answer) == want


def test_the_same_off_visce2s_format() -> None:
    assert _value("No, the candidate caption is not appropriate for the image.\n1", VC) == 1
    assert _value("Evaluation Form (scores ONLY):\n- Appropriateness: 4", VC) is None
    assert _value("Evaluation Form (scores ONLY):\n- Appropriateness: 85", VC) == 85


@pytest.mark.parametrize("answer", [
    "1\n\nReason: Response 1 correctly describes the hikers, while Response 2 mentions a lake "
    "that is not there.",
    "2\n\nReason: Output (2) names the storm; Output (1) does not.",
    "1\n\nReason: Response 1 describes the surfers, while the other response is missing.",
    "2\n\nThe caption in Response 2 is more accurate than Response 1.",
    "Assistant 1 is better than Assistant 2.\n1",
    "Output (2) is better.",
    "Preference: Response 1",
])
def test_a_pick_between_numbered_responses_is_no_rating(answer: str) -> None:
    assert "preference" in _why(answer, VC)
    assert "preference" in _why(answer, he_slot("correctness"))


def test_a_response_named_beside_another_value_reads() -> None:
    # The value names no response: a rating, whatever the answer calls the caption.
    assert _value("85\n\nResponse 1 (the caption) names the hikers; Response 2 adds the lake.",
                  VC) == 85


def test_another_aspects_name_rates_that_aspect() -> None:
    clarity = he_slot("clarity")
    assert "coherence" in _why("Evaluation Form (scores ONLY):\n- Coherence: 4", clarity)
    assert _value("Evaluation Form (scores ONLY):\n- Clarity: 4", clarity) == 4
    assert "helpfulness" in _why("Helpfulness: 4", he_slot("correctness"))


def test_a_labels_own_range_is_its_scale() -> None:
    fluency = he_slot("fluency")
    assert "another scale" in _why("Evaluation Form (scores ONLY):\n- Fluency (1-3): 3", fluency)
    assert _value("Fluency (1-5): 3", fluency) == 3
    assert _value("Score (0-5): 3", fluency) == 3  # the same top: the same 3
    accuracy = accr_slots()[0]
    assert "another scale" in _why("Accuracy (1-10): 8\nCompleteness: $70$", accuracy)
    assert _value("Accuracy (0-100): $80$\nCompleteness (0-100): $70$", accuracy) == 80


@pytest.mark.parametrize("answer", [
    "The model-generated output contains 1 error, with a total score reduction of 1.0.\n"
    'Error location 1: "are sit"\nError aspect 1: Fluency\nScore reduction 1: 1.0',
    "The model-generated output contains 2 errors, with a total score reduction of 3.0.\n"
    'Error location 1: "small little"\nSeverity 1: Major\nScore reduction 1: 2.0',
    "Your text contains 1 error:\nError type 1: Grammar/Agreement\nMajor/minor: Minor",
])
def test_penalties_indices_and_counts_are_no_first_number(answer: str) -> None:
    assert _value(answer, he_slot("fluency")) is None


def test_a_rating_after_counted_faults_reads() -> None:
    assert _value("The caption has 1 minor error. Rating: 4", he_slot("fluency")) == 4
    assert _value("Rating 4: concise", he_slot("conciseness")) == 4


@pytest.mark.parametrize(("c_line", "want"), [("2 1/2", 2.5), ("1 1/4", 1.25), ("3/4", None)])
def test_a_mixed_number_of_points(c_line: str, want: float | None) -> None:
    answer = (f"Correctness Score (C. Score): {c_line}\nHallucination Score (H. Score): 1\n"
              "Precision Score: 71%")
    assert read_points_slot(answer, points_slots("A leather shoe.")[0]).printed == want


def test_a_bottom_rating_its_own_reasoning_praises_abstains() -> None:
    clarity = he_slot("clarity")
    glider = ("<reasoning>\n- The text names the subject and the action unambiguously.\n- The "
              "text passes the clarity criterion.\n</reasoning>\n<score>\n1\n</score>")
    assert "in its reasoning" in _why(glider, clarity)
    # A fault in the reasoning leaves the bottom rating standing; the reasoning is never read
    # for the verdict itself.
    assert _value("<think>Looks good at first, but it names the wrong animal.</think>\n1",
                  clarity) == 1
    assert _value("<think>The text is clear and well written.</think>\n5", clarity) == 5
