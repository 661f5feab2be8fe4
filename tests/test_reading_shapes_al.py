"""Verdict shapes of reading rules 38 (issue 40, corpus AL): a context that holds other items.

A judge run in one long chat, behind an agent with memory, with few-shot calibration examples or
several candidates in one request answers while its context holds other items, other captions
and other scores. The answer may say its verdict is another item's, rate a caption it quotes
that is not this one, copy an example's block, open with one value and close with another, or
put a progress counter before its rating. Each class with the near misses that must still read.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from reading_probe import GV, value, why

from capjudge.methods.cap3d import points_slots
from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.reading import read_points_slot
from capjudge.reading.elsewhere import find_elsewhere

VC = visce2_slot()
CORRECTNESS = he_slot("correctness")
# (The levels are the prompt's: HarmonicEval reads them from the rubric it sends.)
FLUENCY = replace(he_slot("fluency"), levels=(
    ("Disfluent", 1), ("Somewhat disfluent", 2), ("Moderately fluent", 3), ("Fluent", 4),
    ("Very fluent", 5)))
CANDIDATE = "Two girls riding bicycles on a country lane."


def _counts(text: str, candidate: str = CANDIDATE) -> list[float | None]:
    return [read_points_slot(text, s).printed for s in points_slots(candidate)]


@pytest.mark.parametrize("text", [
    # This item's media never arrived, and the judge went by another item's.
    "I'm not able to see a new image attached to this message; the only picture is still the "
    "previous one. Assuming this caption is for that same picture: The final score is $70$.",
    "The image for this item did not load, so based on the previous image (the platform): 2",
    "The attached image is blank, so I compared the caption with the previous picture: 84",
    # Another item's verdict carried over.
    "I can't see an image in this message, so I'm using my rating for the previous image: 75",
    "Reusing the scores from the last clip. The final score is $80$.",
    "This object was already evaluated (object 9): the final score is $100$.",
    # A pick among several candidates named by its number.
    "Best of the 4 candidates: Caption 3, the only one with the fog.\n\nThe final score is $91$.",
    "Caption B is the best of the two: it names the dog. The final score is $85$.",
    "Caption 3 has the colour right.\n\nThe final score is $90$ for the best caption (#1).",
])
def test_a_verdict_the_judge_says_is_another_items_abstains(text: str) -> None:
    reason = why(text)
    assert "another item" in reason or "declined" in reason, reason


@pytest.mark.parametrize("text", [
    # Comparisons with another item judge this one.
    "Compared with the previous caption, this one names the kite. The final score is $82$.",
    "Unlike the previous image, this one is sharp. The final score is $82$.",
    # Media missing, worked from the references: no other item named.
    "The image did not come through on my side, so I'm judging against the references alone. "
    "The final score is $70$.",
    # Denied or supposed.
    "I did not reuse my rating for the previous image. The final score is $70$.",
    "The best of the captions here is this one. The final score is $88$.",
])
def test_other_items_named_beside_a_verdict_on_this_one_read(text: str) -> None:
    assert find_elsewhere(text) is None


def test_the_carried_over_counts_of_another_object_are_no_counts() -> None:
    assert _counts("Image not visible for this object; reusing the previous object's scores.\n"
                   "Correctness Score (C. Score): 3\nHallucination Score (H. Score): 1"
                   ) == [None, None]


@pytest.mark.parametrize(("text", "slot"), [
    # The text the answer names as what it rates is not this request's candidate.
    ("Rating for 'A man holding a surfboard': 5 - exactly what the image shows.", CORRECTNESS),
    ("'A plate of pasta': 90", VC),
    ('Evaluation of "A black cat sleeping on a laptop": accurate.\nThe final score is $88$.', GV),
    ("Generated caption: A golden retriever catching a frisbee in a park.\nThe final score is "
     "$92$.", GV),
])
def test_a_verdict_on_a_text_that_is_not_the_candidate_abstains(text: str, slot: object
                                                                ) -> None:
    assert "quotes" in why(text, replace(slot, quotes=(CANDIDATE,)))  # type: ignore[type-var]


@pytest.mark.parametrize(("text", "slot", "expected"), [
    # The candidate named (in other words, or last before its verdict), or a structure's key.
    ("Rating for 'two girls on bikes along a country lane': 4", CORRECTNESS, 4.0),
    ('{\n  "final_score": 85\n}', GV, 85.0),
    ("Better caption: A golden retriever with a frisbee.\nThe final score is $60$.", GV, 60.0),
])
def test_the_candidate_named_as_what_is_rated_reads(text: str, slot: object, expected: float
                                                    ) -> None:
    assert value(text, replace(slot, quotes=(CANDIDATE,))) == expected  # type: ignore[type-var]


def test_cap3d_counts_for_another_quoted_caption_are_no_counts() -> None:
    text = ('Model-generated caption: "A yellow rubber duck"\n\nCorrectness Score (C. Score): 2\n'
            "Hallucination Score (H. Score): 0")
    assert _counts(text, "A silver laptop with an open screen.") == [None, None]
    assert _counts(text, "A small yellow rubber duck toy.") == [2.0, 0.0]


@pytest.mark.parametrize(("text", "slot"), [
    # A few-shot example copied from the prompt, with its gold verdict, and nothing of this one.
    ("Example 1:\nGenerated caption: A rowboat on a calm mountain lake.\nThe final score is "
     "$90$.\nExample 2:\nGenerated caption: Water.\nThe final score is $40$.\nNow evaluate:\n"
     "Generated caption: A small boat on a lake.", GV),
    ("Example 1 output:\nAccuracy: $95$", GV),
    ("Example 1: 'A cat on a mat' -> 90\nExample 2: 'A dog' -> 40", VC),
])
def test_a_copied_few_shot_example_is_no_verdict(text: str, slot: object) -> None:
    assert why(text, slot)  # type: ignore[arg-type]


def test_the_verdict_after_copied_examples_reads() -> None:
    assert value("Example 1: 'A cat on a mat' -> 90\nExample 2: 'A dog' -> 40\nCandidate -> 71",
                 VC) == 71.0
    # "Example:" without a number is the judge's own case (an earlier rule's).
    assert value("Example: the caption says 'park', so the final score is $80$.") == 80.0


@pytest.mark.parametrize(("text", "slot"), [
    # An opening rating, then a closing one with another value: nothing says which stands.
    ("5\nThe caption is clear.\nOverall: 4/5", he_slot("clarity")),
    ("80\nThe caption misses the red kite.\nOverall rating: 70/100", VC),
    ("85\n\nThe caption is good but misses the kite.\n\nThe final score is $80$.", GV),
    # A cached verdict before an end-of-turn token, then a bare number: two turns.
    ("60<|eot_id|>\n77", VC),
])
def test_two_statements_of_the_verdict_abstain(text: str, slot: object) -> None:
    assert why(text, slot)  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "slot", "expected"), [
    ("4\nThe caption is clear.\nOverall: 4/5", he_slot("clarity"), 4.0),
    ("85\n\nOn reflection the kite matters more.\n\nThe final score is $80$.", GV, 80.0),
    # The other item's score in brackets, a progress counter.
    ("Better than the last one (70): 82", VC, 82.0),
    ("[7/50] 64", VC, 64.0),
    ("Item 12 of 50\n\nThe caption misses the snow.\n\nThe final score is $63$.", GV, 63.0),
    ("62 (#41)", VC, 62.0),
    ("Item 9/20 - 4\nCorrect subject and colour.", CORRECTNESS, 4.0),
    # An end-of-turn token followed by an invented user turn is no second turn of the judge's.
    ("The final score is $70$.<|im_end|>\nThanks! Now rate this one: 40", GV, 70.0),
])
def test_session_numbers_beside_one_verdict_read(text: str, slot: object, expected: float
                                                 ) -> None:
    assert value(text, slot) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "slot", "expected"), [
    # A batch: each block headed by its quoted caption; the candidate's block is read.
    ('Caption 1 ("A man surfing a large wave"): correct. The final score is $85$.\n\n'
     'Caption 2 ("Two girls riding bicycles on a lane"): the lane is right. The final score is '
     "$62$.", GV, 62.0),
    ("'A red kite above a field' - 88\n'Two girls riding bicycles on a country lane' - 55",
     VC, 55.0),
])
def test_a_batch_block_quoting_the_candidate_is_read(text: str, slot: object, expected: float
                                                     ) -> None:
    assert value(text, replace(slot, quotes=(CANDIDATE,))) == expected  # type: ignore[type-var]


def test_a_batch_without_the_candidate_quoted_abstains() -> None:
    text = ('Caption 1 ("A man surfing a large wave"): The final score is $85$.\n\n'
            'Caption 2 ("A surfer falls off his board"): The final score is $62$.')
    assert why(text, replace(GV, quotes=(CANDIDATE,)))


@pytest.mark.parametrize(("text", "slot", "expected"), [
    # Another item's scores: a block headed as the previous item's, a labelled bracket.
    ("For consistency, here are my scores for the previous item:\nThe final score is $70$.\n\n"
     "This caption names the kite. The final score is $80$.", GV, 80.0),
    ("The caption is accurate.\n\nFinal score: \\boxed{81} (previous: \\boxed{64})", GV, 81.0),
    # A verdict the judge withdraws as another item's, then re-scores.
    ("The final score is $45$.\n\nIgnore my last score - I mixed this up with the previous "
     "image. The final score is $81$.", GV, 81.0),
])
def test_another_items_scores_beside_the_verdict_read(text: str, slot: object, expected: float
                                                      ) -> None:
    assert value(text, slot) == expected  # type: ignore[arg-type]


def test_cap3d_counts_of_the_previous_object_in_brackets_are_not_read() -> None:
    assert _counts("Unlike the previous chair (C. Score 2, H. Score 2), this caption has no "
                   "errors.\n\nCorrectness Score (C. Score): 4\nHallucination Score (H. Score): "
                   "0") == [4, 0]


@pytest.mark.parametrize(("text", "slot", "expected"), [
    # The enumerator of the candidate's own block is no value (VisCE²'s first number).
    ('1. "A dog running on a beach" - 40\n2. "Two girls riding bicycles on a country lane" - 92'
     '\n3. "Two dogs sleeping on a couch" - 15', VC, 92.0),
    # A level's word said of the text in prose beside an opening rating describes it.
    ("5\n\nThe sentence is fluent and natural.", FLUENCY, 5.0),
    # An opening rating the answer takes back in words, then a value standing alone.
    ("90\nDisregard my earlier rating; I misread the colour of the raincoat. 60", VC, 60.0),
    ("4\n\nI will not disregard my first rating: the text is still clear.", he_slot("clarity"),
     4.0),
    # Ratings in brackets at a line's start are no counters.
    ("[85/100] The caption is accurate.", VC, 85.0),
    # A supposed score for another caption, then the verdict.
    ('Score for "A black dog lying on a sofa" would be about 10. The candidate matches the '
     "image. The final score is $85$.", GV, 85.0),
])
def test_session_edges_that_read(text: str, slot: object, expected: float) -> None:
    assert value(text, replace(slot, quotes=(CANDIDATE,))) == expected  # type: ignore[type-var]


@pytest.mark.parametrize(("text", "slot"), [
    # A second turn of the judge's own that it reads as unsure still wrote another value.
    ("4\nThe caption names the dog.<|im_end|>\n2\nOn second look the caption misses the ball.",
     CORRECTNESS),
    # An opening rating against a level named as the verdict, or a qualified one.
    ("5\n\nSo I'd put it at Fluent (4).", FLUENCY),
    ("5 - the text is not fluent at all.", FLUENCY),
    # A named text without quotation marks, and the previous item's score carried over.
    ("Candidate: A herd of elephants crossing a muddy river.\n\n1\nNothing of the kind.",
     CORRECTNESS),
    ("Same picture as the previous item, so I carry over the score I gave the previous "
     "image: 4", CORRECTNESS),
    ("These frames are the same as in the previous clip, so I'm keeping the scores from the "
     "last clip:\n\nThe final score is $75$.", GV),
])
def test_session_edges_that_abstain(text: str, slot: object) -> None:
    assert why(text, replace(slot, quotes=(CANDIDATE,)))  # type: ignore[type-var]
