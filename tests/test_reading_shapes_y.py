"""Verdict shapes of reading rules 25 (issue 40): verdicts a reader has to work out.

A verdict left open by a later hedge, a judge that goes on after its verdict in words the
reader sets aside, cap3d counts revised in prose after their lines. Each class with its near
misses.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from reading_probe import value as _value
from reading_probe import why as _why

from capjudge.methods.cap3d import points_slots
from capjudge.methods.gveval import accr_slots, score_slot
from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.reading import read_points_slot
from capjudge.reading.locate import Located, locate

GV = score_slot()


# -- a verdict left open by a later hedge ------------------------------------------------------

@pytest.mark.parametrize("answer", [
    "The final score is $80$. Hmm, on reflection I'd give it 70, maybe 75.",
    "Score: 80. Honestly I'd rate it 80, maybe 85.",
    "The final score is $80$.\n\nI would rate it 80-85, to be fair.",
])
def test_a_later_rating_that_names_no_one_value_leaves_the_verdict_open(answer: str) -> None:
    assert _value(answer) is None


@pytest.mark.parametrize("answer", [
    # under a condition: what another caption would get
    "The final score is $80$.\n\nIf the colour were named I would rate it 85-90.",
    # a range inside the explanation rates nothing
    "It names 3-4 of the objects. The final score is $80$.",
])
def test_a_hedge_that_is_no_later_rating_leaves_the_verdict(answer: str) -> None:
    assert _value(answer) == 80


# -- what the reader sets aside after the verdict is still the judge going on ------------------

def test_a_masked_revision_after_the_verdict_makes_it_off_contract() -> None:
    found = locate("The final score is $80$. Edit: the dog is a fox, so it should be 40.", GV)
    assert isinstance(found, Located) and found.value == 80
    assert found.off_contract is not None and "goes on after its verdict" in found.off_contract


def test_a_verdict_that_ends_the_answer_stays_on_contract() -> None:
    found = locate("The dog and the park are right. The final score is $80$.", GV)
    assert isinstance(found, Located) and found.off_contract is None


# -- cap3d: counts revised in prose after their lines ------------------------------------------

_LINES = ("Correctness Score (C. Score): 3\nHallucination Score (H. Score): 1\nPrecision Score: "
          "75%\nExplanation: wooden, chair and four legs are right; the armrests are invented.\n")


@pytest.mark.parametrize(("tail", "want"), [
    ("Update: I adjust C to 2 because the legs are metal.", [2, 1]),
    ("Edit: I'm changing C from 3 to 4, since the armrests are real.", [4, 1]),
    ("Edit: C should be 4 and H should be 0.", [4, 0]),
    ("Update: H goes down to 0; the armrests are in the back view.", [3, 0]),
    ("Edit: I keep the scores for C, but H should be 0 since the armrests are real.", [3, 0]),
    # kept whole, or left under a condition
    ("Final review: I keep the scores as they are.", [3, 1]),
    ("Edit: if the armrests count as one attribute, C is 4.", [None, 1]),
])
def test_counts_revised_in_prose_after_a_revision_mark(tail: str, want: list[int | None]
                                                       ) -> None:
    slots = points_slots("A wooden chair with four legs and armrests.")
    assert [read_points_slot(_LINES + tail, s).printed for s in slots] == want


# -- sums, baselines, distributions, stars: numbers that are no verdict ------------------------

_VC = visce2_slot()


@pytest.mark.parametrize(("answer", "slot", "why"), [
    ("There are two problems, 30 and 10 points.\n\nSo the final score is 100 minus those 40 "
     "points.", GV, "a sum left to be worked out"),
    ("Start at 100.\n-20: the horses are on a beach.\n-15: there are four riders.", _VC,
     "the baseline"),
    ("It depends on the reading. My rating distribution: 70 (40%), 80 (35%), 60 (25%).", _VC,
     "distribution"),
    ("The caption is okay, but the count is wrong. I give it three stars.", GV, "in stars"),
])
def test_a_number_that_starts_a_sum_or_shares_a_distribution_is_no_verdict(
        answer: str, slot: object, why: str) -> None:
    assert why in _why(answer, slot)


def test_a_part_named_in_an_aside_is_no_first_number() -> None:
    answer = "Computed as the mean of my sub-scores (object 90, attributes 75): 82.5, so 83."
    assert _value(answer, _VC) == 83
    assert _value("Mean of my sub-scores (object 90, attributes 75): 82.5.", _VC) is None
    assert _value("85 (objects 90, attributes 80)", _VC) == 85


# -- a verdict given twice: in two units, with a level, converted -------------------------------

@pytest.mark.parametrize(("answer", "want"), [
    ("The final score is $8/10$ (75/100).", None),
    ("The final score is $8/10$ (80/100).", 80),
    ("Final score: 8.5/10, i.e. 85.", 85),
])
def test_a_verdict_beside_its_value_on_another_scale_must_agree(answer: str,
                                                                 want: float | None) -> None:
    assert _value(answer) == want


def test_a_coarser_gloss_after_a_criterion_may_round_it() -> None:
    answer = ("Accuracy: $85$ (4/5)\nCompleteness: $60$ (3/5)\nConciseness: $95$ (5/5)\n"
              "Relevance: $90$ (4.5/5)")
    assert [_value(answer, s) for s in accr_slots()] == [85, 60, 95, 90]


_LEVELS = (("Very Low Correctness", 1), ("Low Correctness", 2), ("Moderate Correctness", 3),
           ("High Correctness", 4), ("Extremely High Correctness", 5))
HE = replace(he_slot("correctness"), levels=_LEVELS)


@pytest.mark.parametrize(("answer", "want"), [
    ("Rating: 3 – High Correctness\nThe kite colour is not mentioned.", None),
    ("3 - Extremely High Correctness", None),
    ("3 (Moderate Correctness)\nMostly right.", 3),
    ("4: High Correctness. The sky is missing.", 4),
])
def test_a_rating_glossed_with_another_levels_name_abstains(answer: str,
                                                            want: float | None) -> None:
    assert _value(answer, HE) == want


def test_a_value_converted_to_the_scale_after_the_verdict_competes() -> None:
    answer = ("**Score: 3**\n\nThe caption places them in a park. Overall I would call it an 80% "
              "accurate caption, which on this scale is a 4.")
    assert _value(answer, HE) is None
    assert _value("**Score: 4**\n\nAn 80% accurate caption, which on this scale is a 4.",
                  HE) == 4


# -- a position on the scale named in words ------------------------------------------------------

@pytest.mark.parametrize(("answer", "slot", "want"), [
    ("The caption is half right.\n\nThe final score is the midpoint of the scale.", GV, 50),
    ("I can't find anything to fault. This caption deserves the top of the scale.", GV, 100),
    ("All elements are correct and specific. Top of the scale.", HE, 5),
    ("Some parts are right and some wrong. The midpoint of the scale fits.", HE, 3),
    # approached or described, not given
    ("Nowhere near the top of the scale.", GV, None),
    ("Just below the top of the scale.", GV, None),
    ("4. Not quite the top of the scale.", HE, 4),
])
def test_a_position_on_the_scale_in_words(answer: str, slot: object, want: float | None
                                          ) -> None:
    assert _value(answer, slot) == want


def test_a_position_named_is_off_contract() -> None:
    found = locate("This caption deserves the top of the scale.", GV)
    assert isinstance(found, Located) and found.off_contract is not None


# -- one label for all the criteria; a revision to a range ---------------------------------------

def test_one_overall_value_is_no_criterions() -> None:
    answer = "Accurate, relevant and concise; it misses the bridge.\n\nOverall quality: $74$"
    assert [_value(answer, s) for s in accr_slots()] == [None] * 4
    assert _value(answer) == 74  # G-VEval's one verdict may be labelled any way


@pytest.mark.parametrize(("tail", "want"), [
    ("Edit: the banner says graduation. More like 65-70.", None),
    ("Edit: the banner says graduation. More like 65.", 65),
    ("It looks more like 3 dogs than 2.", 72),
])
def test_more_like_after_the_verdict(tail: str, want: float | None) -> None:
    assert _value("The final score is $72$.\n\n" + tail) == want


# -- settling, sureness, a count as a share of the attributes ------------------------------------

def test_call_it_settles_on_a_value() -> None:
    assert _value("I land at roughly 80 — call it 78 given the yacht issue.") == 78
    assert _value("Let's call it 3 errors. The final score is $70$.") == 70


def test_how_sure_the_judge_is_is_no_first_number() -> None:
    assert _value("I'm about 85% confident it's a 4: the scene is right.", HE) == 4
    assert _value("4 (90% confident)", HE) == 4


def test_a_count_written_as_a_share_of_the_attributes_is_the_count() -> None:
    answer = ("Correctness Score (C. Score): 4/5 attributes\nHallucination Score (H. Score): 1/5 "
              "attributes\nPrecision Score: 80%")
    slots = points_slots("A blue ceramic mug with a handle and steaming coffee.")
    assert [read_points_slot(answer, s).printed for s in slots] == [4, 1]
    bare = "Correctness Score (C. Score): 3/4\nHallucination Score (H. Score): 1"
    assert read_points_slot(bare, slots[0]).printed is None  # 3 of 4, or three quarters?


# -- near misses found by the review of rules 25 (over-breadth probes) ---------------------------

@pytest.mark.parametrize(("answer", "slot", "want"), [
    # "more like" after a subject corrects a count or an age, not the verdict
    ("40\nThe caption says 'a dozen birds', but the flock is more like 30.", _VC, 40),
    # a deduction, not a value converted to the scale
    ("4\nNearly perfect, which on this scale is 1 point off the top.", HE, 4),
    # fractions of things beside the verdict are counts, not another scale
    ("The final score is $40$ (2/3 objects correct).", GV, 40),
    ("The final score is $70$ (1/3 of the image is cropped).", GV, 70),
    # a position on the scale beside a written number is said of the scale
    ("95\nThis caption is at the top of the scale: everything is right.", _VC, 95),
    ("4\nThe top of the scale goes to captions with every detail right.", HE, 4),
    # a level weighed, not given
    ("4 — Moderate Correctness is too low for it; it is High Correctness.", HE, 4),
    # a start with nothing deducted is no baseline
    ("Rating: I'll start with 85 — the caption is good.", _VC, 85),
    # a rating the judge meant to give and did not
    ("80\nAccurate. I was going to rate it 70-75 before I spotted the leash.", _VC, 80),
    # the terms of a sum worked out are not VisCE²'s first number; its result is
    ("100 minus 15 for the missing colour = 85.\nThe caption is otherwise accurate.", _VC, 85),
])
def test_review_near_misses(answer: str, slot: object, want: float) -> None:
    assert _value(answer, slot) == want


def test_an_overall_range_after_the_criteria_lines_is_none_of_theirs() -> None:
    answer = ("Accuracy: $85$\nCompleteness: $70$\nConciseness: $90$\nRelevance: $95$\n\n"
              "Overall I'd rate the caption 80-85.")
    assert [_value(answer, s) for s in accr_slots()] == [85, 70, 90, 95]


def test_a_judge_that_finds_no_picture_declines() -> None:
    assert "declined" in _why("1\nI can't find any image in your message.", HE)
    # (one that goes on to judge by the references is not declining: corpora L and M)
    assert _value("I don't see an image attached, so I'll evaluate against the references "
                  "only. The final score is $75$.") == 75


@pytest.mark.parametrize(("tail", "want"), [
    ("For that version, H goes down to 0.", [3, 1]),
    ("Update: for the rewritten caption, C should be 4 and H should be 0.", [3, 1]),
    ("Edit: for the second caption in the batch, C should be 2.", [3, 1]),
    # the last word keeps the count
    ("Edit: H should be 2; I follow the prompt's, so H stays at 1.", [3, 1]),
    # a dash after the count ends its clause
    ("Edit: H goes down to 0 — the armrests are real.", [3, 0]),
    ("Edit: C drops to 2 — the legs are metal.", [2, 1]),
])
def test_cap3d_revisions_said_of_another_caption_or_taken_back(tail: str, want: list[int]
                                                               ) -> None:
    slots = points_slots("A wooden chair with four legs and armrests.")
    assert [read_points_slot(_LINES + tail, s).printed for s in slots] == want
