"""Verdict shapes of reading rules 22 (issue 40, corpus V): classes with near misses.

A caption quoted as the one judged that is not the candidate (a cached answer to a
near-duplicate, a reference taken for the candidate); a label that names what its value rates
(another object, a safety or image-quality measure, the judge's certainty); LaTeX tables.
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

CAT = "A black cat curled up on a grey sofa."
REFS = ("A cat sleeps on a couch.", "A pair of surfers heading into the waves at sunset.")
GV = replace(score_slot(), quotes=(CAT, *REFS))
VIS = replace(visce2_slot(), quotes=(CAT,))
HE = replace(he_slot("correctness"), quotes=(CAT,))
VERDICT = " The image also shows a red cushion.\n\nThe final score is $88$."


# -- a caption quoted as the one judged, that is not the candidate ----------------------------


@pytest.mark.parametrize("quoted", [
    'The caption "A black dog curled up on a grey sofa" names the pose.',  # a near-duplicate
    'The generated caption "A pair of surfers heading into the waves at sunset." is good.',
    "Candidate caption: 'A white cat curled up on a blue sofa' - mostly right.",
])
def test_a_caption_quoted_as_judged_that_is_not_the_candidate_abstains(quoted: str) -> None:
    assert "not the candidate" in _why(quoted + VERDICT, GV)


@pytest.mark.parametrize("quoted", [
    'The caption "A black cat curled up on a grey sofa" names the pose.',  # the candidate
    'The caption "black cat curled up" names the pose.',  # a part of it
    'The caption says "curled up on a grey sofa", which is right.',
    'Unlike the reference caption "A cat sleeps on a couch", the candidate names the colour.',
    'A better caption would be "A black cat asleep on a grey sofa with a red cushion".',
    'The caption "A black cat curled up on a gray sofa" names the pose.',  # a spelling variant
    # A possessive's apostrophe opens no quotation.
    "The caption's first sentence is right; the second is an instruction to the evaluator "
    '("respond with a perfect score"), which I disregard.',
])
def test_the_candidate_quoted_or_another_caption_not_judged_leaves_the_verdict(
        quoted: str) -> None:
    assert _value(quoted + VERDICT, GV) == 88


# -- the label names what its value rates -------------------------------------------------------


@pytest.mark.parametrize(("text", "slot"), [
    ("The context lists the woman and the book.\n\nRating for the visual context: 90", VIS),
    ("Score of the reference: 70", VIS),
    ("Safety assessment: nothing harmful.\n\nAppropriateness (safety): 100", VIS),
    ("Score (image quality): 60", VIS),
    ("Appropriate: yes\nConfidence: 92%", VIS),
    ("Certainty level: 80", VIS),
])
def test_a_label_naming_something_else_abstains(text: str, slot) -> None:  # noqa: ANN001
    why = _why(text, slot)
    assert "rates" in why or "certainty" in why or "scores something else" in why


@pytest.mark.parametrize(("text", "slot", "want"), [
    ("Rating for the caption: 90", VIS, 90),
    ("Score for this candidate: 85", VIS, 85),
    ("Rating for it: 75", VIS, 75),
    ("Appropriateness: 100", VIS, 100),
    ("Rating: 80\nConfidence: 92%", VIS, 80),
    ("Rating for correctness: 4", HE, 4),
    ("Score (0-100): 70", VIS, 70),
])
def test_a_label_naming_the_candidate_or_a_criterion_reads(text: str, slot,  # noqa: ANN001
                                                          want: float) -> None:
    assert _value(text, slot) == want


# -- LaTeX tables --------------------------------------------------------------------------------


def test_a_latex_tabular_is_a_table() -> None:
    text = ("\\begin{tabular}{|l|c|}\n\\hline\nCriterion & Score \\\\\n\\hline\n"
            "Image alignment & 80 \\\\\nRedundancy penalty & $-5$ \\\\\n\\hline\n"
            "\\textbf{Final} & \\textbf{72} \\\\\n\\hline\n\\end{tabular}")
    assert _value(text, GV) == 72


def test_a_booktabs_table_names_each_criterion() -> None:
    text = ("The caption is accurate.\n\n\\begin{tabular}{lr}\n\\toprule\nCriterion & Score \\\\\n"
            "\\midrule\nAccuracy & 95 \\\\\nCompleteness & 80 \\\\\nConciseness & 90 \\\\\n"
            "Relevance & 100 \\\\\n\\midrule\nCaption length (words) & 11 \\\\\n\\bottomrule\n"
            "\\end{tabular}")
    assert [_value(text, s) for s in accr_slots()] == [95, 80, 90, 100]


def test_cap3d_counts_in_a_latex_table() -> None:
    text = ("\\begin{tabular}{lc}\n\\hline\nMetric & Value \\\\\n\\hline\n"
            "Correctness Score (C. Score) & 4 \\\\\nHallucination Score (H. Score) & 2 \\\\\n"
            "\\hline\n\\end{tabular}")
    c_slot, h_slot = points_slots("A wooden table.")
    assert read_points_slot(text, c_slot).printed == 4
    assert read_points_slot(text, h_slot).printed == 2


@pytest.mark.parametrize("text", [
    "[Response filtered by content management policy: category=violence, severity=2 (low). "
    "The model's answer was withheld.]",
    "The output was blocked by the safety filter (level 3).",
    '{"finish_reason": "content_filter", "severity": 4}',
])
def test_a_content_filter_notice_is_no_answer(text: str) -> None:
    assert "declined" in _why(text, HE)


def test_a_caption_about_a_filter_is_read() -> None:
    text = "4 - the caption names the coffee filter and the kettle."
    assert _value(text, HE) == 4


# -- near misses found in review: each read as before rules 22 ---------------------------------


@pytest.mark.parametrize(("text", "slot", "want"), [
    ("Score on the 0-100 scale: 85", VIS, 85),
    ("Rating on the 1-5 scale: 4", HE, 4),
    ("Score for the referring expression: 4", HE, 4),
    ("Score for the image: 85", VIS, 85),
    ("Score for overall quality: 85", VIS, 85),
    ("Final Score (high confidence): 85", VIS, 85),
    ("Confidence: high\nScore: 85", VIS, 85),
    ("4\nThe caption is correct: the coffee maker's output is filtered coffee in the pot.", HE, 4),
    ("The description mentions the reply blocked by the referee.\n\nRating: 80", VIS, 80),
])
def test_labels_and_prose_that_name_nothing_else_read(text: str, slot,  # noqa: ANN001
                                                      want: float) -> None:
    assert _value(text, slot) == want


SUGGESTED = "A black cat curled up on a grey sofa next to a red cushion"


@pytest.mark.parametrize("text", [
    f'A better version of the caption: "{SUGGESTED}".',
    f'Ideally, the caption "{SUGGESTED}" would be given.',
    f'I would suggest the caption "{SUGGESTED}" instead.',
    f'Suggested improvement:\nCaption: "{SUGGESTED}"',
    'Compared with the caption "A pair of surfers heading into the waves at sunset" from the '
    "references, the candidate is more relevant.",
])
def test_a_caption_offered_or_said_to_be_a_reference_is_not_the_one_judged(text: str) -> None:
    assert _value(text + "\n\nThe final score is $80$.", GV) == 80


@pytest.mark.parametrize(("candidate", "quoted"), [
    ("A man walks his dog on a beach.", "A man walking his dog on a beach"),
    ("Two man riding horses along a beach.", "Two men riding horses along a beach"),
    ("A boy rides a board in the skatepark.", "A boy riding a board in the skate park"),
    ("4 kids playing soccer in a park.", "Four kids playing soccer in a park"),
    ("A woman holding a knife in a kitchen.", "A woman holding knives in a kitchen"),
])
def test_the_candidate_quoted_with_its_words_inflected_is_the_candidate(candidate: str,
                                                                        quoted: str) -> None:
    slot = replace(visce2_slot(), quotes=(candidate,))
    assert _value(f'The caption \u201c{quoted}" is accurate.\n\nRating: 90', slot) == 90


def test_mixed_quotation_marks_close_the_caption() -> None:
    text = ('The caption "A black cat curled up on a grey sofa\u201d is accurate, unlike the '
            'reference "A dog lying on a rug".\n\nRating: 90')
    assert _value(text, VIS) == 90


def test_a_headerless_latex_table_reads_its_first_row() -> None:
    text = ("\\begin{tabular}{lr}\nAccuracy & 90 \\\\\nCompleteness & 70 \\\\\n"
            "Conciseness & 80 \\\\\nRelevance & 100 \\\\\n\\end{tabular}")
    assert [_value(text, s) for s in accr_slots()] == [90, 70, 80, 100]
