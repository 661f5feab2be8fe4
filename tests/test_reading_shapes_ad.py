"""Verdict shapes of reading rules 31 (issue 40, corpus AD): the answers to the other prompts.

HarmonicEval's criteria other than correctness (their level names are everyday adjectives:
"Clear", "Concise"), G-VEval's video prompts (a score for one frame), VisCE² with its visual
context (a score of the context), ACCR in the combined mode (a block per source, then a final
block), cap3d's views (a tally line instead of the labels), Roman numerals where a value is
due, and qualifiers that keep a value open ("so far", "at the most generous"). Each class
with its near misses.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from reading_probe import off_contract as _off_contract
from reading_probe import value as _value
from reading_probe import why as _why

from capjudge.methods.cap3d import points_slots
from capjudge.methods.gveval import accr_slots
from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.reading import read_points_slot
from capjudge.reading.masking import find_decline, mask_hypotheticals
from capjudge.reading.numbers import roman_at, value_at

VC = visce2_slot()
# (The levels are the prompt's: HarmonicEval reads them from the rubric it sends.)
CLARITY = replace(he_slot("clarity"), levels=(
    ("Ambiguous", 1), ("Somewhat ambiguous", 2), ("Neutral", 3), ("Clear", 4),
    ("Very Clear", 5)))
CONCISE = he_slot("conciseness")
HE = he_slot("correctness")
_SHELF = "A wooden bookshelf with five shelves and wheels."


@pytest.mark.parametrize(("text", "want"), [
    ("IV (High Correctness)", 4), ("III\n", 3), ("IX.", 9), ("II out of V", 2), ("XIV/20", 14),
    ("I.", 1), ("VI", 6),
])
def test_a_roman_numeral_where_a_value_is_due(text: str, want: int) -> None:
    n = value_at(text, 0)
    assert n is not None and n.kind == "roman" and n.value == want


@pytest.mark.parametrize("text", [
    "I think 4",  # the pronoun
    "I'd say 4",
    "X/5",  # a placeholder, not ten
    "XX",
    "IVy",
    "LXXX",  # only numerals with an I or a V, up to 29
    "Index",
])
def test_not_a_roman_numeral(text: str) -> None:
    assert roman_at(text, 0) is None


def test_roman_numerals_are_read_off_contract() -> None:
    assert _value("Rating: IV (High Correctness)\n\nThe caption names the cyclists.", HE) == 4
    assert _value("\u2162 \u2014 generally accurate; the bus is a single-decker.", HE) == 3
    assert _off_contract("The final score is $XIV$") is not None


def test_a_roman_list_marker_is_no_rating() -> None:
    # "I. Analysis" opens an outline; the rating is the bare 4 further down.
    assert _value("I. The caption is wrong about the dog.", HE) is None
    assert _value("I. Analysis\nThe caption is right.\nII. Rating\n4", HE) == 4


def test_cap3d_counts_as_roman_numerals() -> None:
    answer = ("Correctness Score (C. Score): III\nHallucination Score (H. Score): I\n"
              "Precision Score: 75%")
    assert [read_points_slot(answer, s).printed for s in points_slots(_SHELF)] == [3, 1]


@pytest.mark.parametrize("answer", [
    "The caption is decent. I would say $72$ so far.",
    "The final score is $80$ at the most generous.",
])
def test_a_value_left_open(answer: str) -> None:
    assert _value(answer) is None


@pytest.mark.parametrize("answer", [
    "The final score is $72$, the best so far.",
    "So far, so good. The final score is $72$.",
])
def test_so_far_elsewhere_leaves_the_verdict(answer: str) -> None:
    assert _value(answer) == 72


@pytest.mark.parametrize(("answer", "thing"), [
    ("The visual context is accurate and detailed: it names the three people. Accuracy of the "
     "visual context: 90/100.", "visual context"),
    ("Overall rating for the first frame: 80", "first frame"),
])
def test_a_measure_of_another_thing(answer: str, thing: str) -> None:
    assert thing in _why(answer, VC)


@pytest.mark.parametrize(("answer", "want"), [
    ("Accuracy of the caption: 90/100.", 90),
    ("Same as for the previous caption: 3.\n\nIt repeats the same error.", 3),
])
def test_a_measure_of_the_caption_stays(answer: str, want: int) -> None:
    slot = HE if want <= 5 else VC
    assert _value(answer, slot) == want


def test_a_score_scoped_to_one_frame() -> None:
    answer = ('Looking only at Frame 2 (the middle frame), the caption "A man lifts a barbell" '
              "fits well, and for that frame the score is $90$.")
    assert "for that frame" in _why(answer)


@pytest.mark.parametrize("answer", [
    "For frame 2 the caption fits, and overall the final score is $85$.",
    "The caption fits this frame well. The final score is $85$.",
    "Score for the first frame: 80\nThe final score is $75$.",
])
def test_a_frame_named_beside_the_verdict(answer: str) -> None:
    assert _value(answer) in (85, 75)


def test_a_level_name_said_of_a_part_of_the_text() -> None:
    answer = ("2\n\nThe text uses \"two or three\", exactly the 'or' construction that makes it "
              "non-definitive, although the rest (fountain, park) is clear.")
    assert _value(answer, CLARITY) == 2


@pytest.mark.parametrize(("answer", "want"), [
    ("3\n\nThe setting is clear, but whether the animal is a dog or a wolf is not.", 3),
    ("3\n\nMost of the text is clear, but 'a dog or a wolf' leaves the animal open.", 3),
    ("2\n\nThe text is mostly clear, except that 'it' could refer to the dog or the ball.", 2),
])
def test_a_level_word_limited_to_a_part(answer: str, want: int) -> None:
    assert _value(answer, CLARITY) == want


@pytest.mark.parametrize("answer", [
    "2\n\nOn reflection, I'd call it Clear.",
    "2\n\nThe text is very clear.",  # said of the whole text: the rating and it disagree
    "2\n\nI was too strict at first, but on reflection the text is very clear.",
    "2\n\nThe grammar slips once, but the rest is clear, so the text is clear overall.",
])
def test_a_level_that_contradicts_the_rating(answer: str) -> None:
    assert "disagree" in _why(answer, CLARITY)


def test_a_hypothetical_after_the_rating_clause() -> None:
    masked = mask_hypotheticals('Concise (4) \u2014 "the tree" could be replaced by "its '
                                'leaves", otherwise to the point.')
    assert masked.startswith("Concise (4)") and "could" not in masked
    # A hypothetical before the break still takes its sentence.
    assert mask_hypotheticals("If the caption named the dog \u2014 it could score 90.").strip() \
        == ""
    assert _value('Concise (4) \u2014 "the tree" could be replaced.', CONCISE) == 4


@pytest.mark.parametrize(("answer", "declined"), [
    ("I can't see the video itself, but the references give enough to judge. The final score "
     "is $80$.", False),
    # (Only with words of sufficiency, and never beside a refusal to rate.)
    ("I cannot see the image, but based on the references, the caption is fine.", True),
    ("I'm unable to see the image, but the references are only 3 short sentences, which is "
     "not enough for a fair judgement. Please attach the image.", True),
    ("I cannot see the image, so I cannot rate it.", True),
    ("I can't see the image, but here is a guess: 50", True),
])
def test_a_decline_worked_around_with_the_references(answer: str, declined: bool) -> None:
    assert (find_decline(answer) is not None) is declined


def test_a_final_block_over_blocks_per_source() -> None:
    answer = ("Against the references:\nAccuracy: $90$\nCompleteness: $80$\nConciseness: $90$\n"
              "Relevance: $95$\n\nAgainst the image:\nAccuracy: $70$\nCompleteness: $50$\n"
              "Conciseness: $90$\nRelevance: $85$\n\nFinal (both considered):\nAccuracy: $80$\n"
              "Completeness: $65$\nConciseness: $90$\nRelevance: $90$")
    assert [_value(answer, s) for s in accr_slots()] == [80, 65, 90, 90]
    # Without the final block the blocks compete.
    two = answer[: answer.index("\n\nFinal")]
    assert _value(two, accr_slots()[1]) is None


def test_cap3d_tally_line_without_the_labels() -> None:
    answer = ("View 1: bookshelf, wooden, five shelves \u2014 correct. View 2: the back panel is "
              "white, not glass.\n\nTotals: C = 5, H = 2")
    assert [read_points_slot(answer, s).printed for s in points_slots(_SHELF)] == [5, 2]
    for other in ("C = 5, H = 2 for the previous caption.",
                  "Totals: C = 5, H = 2\nRecount: C = 4, H = 2"):
        assert read_points_slot(other, points_slots(_SHELF)[0]).printed is None


def test_single_digit_quoted_beside_the_scale() -> None:
    answer = ('85\n\n(The prompt asks for a "single digit" but also a 0-100 scale; I have given '
              "the 0-100 rating.) The caption describes the skier.")
    assert _value(answer, VC) == 85
    assert "single digit" in _why("I rate it 85. Since the final rating must be a single "
                                  "digit: 9", VC)


def test_values_per_source_with_no_verdict_over_them() -> None:
    # (On the llama.cpp server the forced anchor copied the first: the rules abstain first.)
    answer = "Based on the image: 80. Based on the visual context: 60, since it omits the sign."
    assert "per source" in _why(answer, VC)
    assert _value("Based on the image: 80. Based on the visual context: 80.", VC) == 80
    assert _value("Against the references: 80\nAgainst the image: 60\nThe final score is "
                  "$70$.") == 70


CONCISE_LEVELS = replace(CONCISE, levels=(
    ("Excessively verbose", 1), ("Overly verbose", 2), ("Moderately verbose", 3), ("Concise", 4),
    ("Optimally concise", 5)))


@pytest.mark.parametrize(("answer", "want"), [
    ("The text is concise and to the point.", None),  # described in prose: 4 or 5?
    ("Concise.", 4),
    ("Rating: Concise", 4),
    ("The text is Optimally concise.", 5),  # the level's own capital: named
])
def test_a_level_word_in_prose_is_no_reading(answer: str, want: int | None) -> None:
    assert _value(answer, CONCISE_LEVELS) == want
