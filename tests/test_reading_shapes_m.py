"""Verdict shapes of reading rules 13-16 (issue 40, corpora M-P): classes with near misses.

A computation whose steps do not give its stated result, a verdict put in a band of ten that
leaves it out, a bottom-tenth rating beside praise and small faults only, a bare number when
the candidate is itself a number, a cap3d count the prose states otherwise; and the safe misses'
classes: LaTeX spacing, text and display blocks, cap3d's value in brackets after its label.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from reading_probe import value as _value
from reading_probe import why as _why

from capjudge.methods.gveval import score_slot
from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.protocol import ScoreSlot
from capjudge.reading import read_ch
from capjudge.reading.arithmetic import evaluate, miscounted
from capjudge.reading.locate import Located, locate

GV, VIS, HE = score_slot(), visce2_slot(), he_slot("correctness")



# -- arithmetic: the steps must give the result ------------------------------------------------


@pytest.mark.parametrize(("expression", "value"), [
    ("100 - 15 - 10", 75), ("(4 + 5) / 2", 4.5), ("2 × 40", 80), ("0.8 * 100", 80),
    ("100-12-6=", 82), ("-5 + 10", 5)])
def test_a_judges_arithmetic_is_worked_out(expression: str, value: float) -> None:
    assert evaluate(expression) == value


@pytest.mark.parametrize("expression", ["__import__('os')", "2 ** 8", "1 / 0", "", "abc"])
def test_anything_but_arithmetic_has_no_value(expression: str) -> None:
    assert evaluate(expression) is None


def test_a_lone_fraction_is_a_scale_conversion_not_a_sum_to_check() -> None:
    assert miscounted("4/5 = ", 80) is None and miscounted("7 / 10", 70) is None
    assert miscounted("100 - 15 - 10 = ", 80) == 75


@pytest.mark.parametrize("text", [
    "Deductions: 15 and 10.\nThe final score is $100 - 15 - 10 = 80$.",
    "The final score is 100 - 15 - 10 = 80."])
def test_steps_that_do_not_give_the_stated_result_abstain(text: str) -> None:
    assert "gives 75, not the 80 it states" in _why(text)


def test_bracketed_steps_that_do_not_give_the_result_abstain_too() -> None:
    _why("The final score is $(70 + 90) / 2 = 85$.")  # unreadable: 80 or 85?


@pytest.mark.parametrize(("text", "value"), [
    ("The final score is $100 - 15 - 10 = 75$.", 75),
    ("The final score is $(70 + 90) / 2 = 80$.", 80),
    ("The final score is $4/5 = 80$.", 80)])
def test_steps_that_give_the_result_read_the_result(text: str, value: int) -> None:
    assert _value(text) == value


# -- a band of ten ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "Vague about the setting.\n\nThe final score is $\\approx 80$ — somewhere in the high 70s.",
    "The final score is $85$, i.e. in the low seventies.",
    "The final score is $62$ (mid-70s)."])
def test_a_verdict_put_in_a_band_that_leaves_it_out_abstains(text: str) -> None:
    assert "band that leaves it out" in _why(text)


@pytest.mark.parametrize(("text", "value"), [
    ("The final score is $78$, in the high 70s.", 78),
    ("The final score is $71$ (low 70s).", 71),
    ("A 1970s car is shown. The final score is $85$.", 85),
    ("The final score is $84$.\nThe car looks like it is from the 70s.", 84)])
def test_a_band_that_holds_the_verdict_or_is_no_band_agrees(text: str, value: int) -> None:
    assert _value(text) == value


# -- the bottom tenth beside praise and small faults only --------------------------------------


@pytest.mark.parametrize(("text", "slot"), [
    ("Overall this is a strong caption. It identifies the horses correctly and adds nothing "
     "irrelevant; the only omission is the snow, which is minor.\n\nThe final score is $4$.", GV),
    ("7 — a solid caption that gets the subject and the setting right, with one small omission.",
     VIS)])
def test_a_bottom_rating_beside_praise_and_small_faults_abstains(text: str,
                                                                 slot: ScoreSlot) -> None:
    assert "no serious fault" in _why(text, slot)


@pytest.mark.parametrize(("text", "slot", "value"), [
    ("0 — the caption describes a cat on a sofa, but the image shows a city bus. Nothing in the "
     "caption matches.", VIS, 0),
    ("0 — the caption describes a completely different scene (a beach) from the image.", VIS, 0),
    ("The grammar is good, but the caption is wrong about every object.\nThe final score is "
     "$5$.", GV, 5),
    ("Good fluency; the caption does not match the image.\nThe final score is $3$.", GV, 3),
    ("It says a dog instead of the cat that is there.\nThe final score is $8$.", GV, 8),
    ("The caption is unrelated to the image.\nThe final score is $2$.", GV, 2)])
def test_a_bottom_rating_beside_a_serious_fault_stands(text: str, slot: ScoreSlot,
                                                      value: int) -> None:
    assert _value(text, slot) == value


# -- a bare number when the candidate is a number ----------------------------------------------


def test_a_bare_number_for_a_numeric_candidate_may_be_the_judges_own_answer() -> None:
    slot = replace(HE, quotes=("3",))
    assert "candidate is itself a number" in _why("4", slot)
    assert "candidate is itself a number" in _why("**4**", replace(HE, quotes=("3 zebras",)))


@pytest.mark.parametrize(("text", "quotes", "value"), [
    ("4 - the count is off by one.", ("3",), 4),  # words of its own: a rating
    ("Correctness: 4", ("3",), 4),
    ("4", ("Three zebras graze by a watering hole at dusk.",), 4)])  # a caption, not a number
def test_a_rating_with_words_of_its_own_or_a_caption_candidate_stands(
        text: str, quotes: tuple[str, ...], value: int) -> None:
    assert _value(text, replace(HE, quotes=quotes)) == value


# -- cap3d: the prose's own count ---------------------------------------------------------------


def test_a_cap3d_count_the_prose_states_otherwise_abstains() -> None:
    text = ("Correctness Score (C. Score): 3\nHallucination Score (H. Score): 1\n"
            "Correct attributes: mug, blue, ceramic, handle — in total 4 correct attributes.")
    found = read_ch(text)
    assert found["correctness"][0] is None and "disagree" in str(found["correctness"][1])
    assert found["hallucination"] == (1.0, None)


@pytest.mark.parametrize("text", [
    "C. Score: 3\nH. Score: 1\nThat makes 3 correct attributes and 1 hallucinated detail.",
    "Correct attributes: 4\nHallucinated attributes: None\nC. Score: 4\nH. Score: 0"])
def test_a_cap3d_count_the_prose_agrees_with_stands(text: str) -> None:
    found = read_ch(text)
    assert found["correctness"][0] in (3.0, 4.0) and found["hallucination"][0] in (0.0, 1.0)


def test_cap3d_values_in_brackets_after_their_labels() -> None:
    found = read_ch("C. Score (3) · H. Score (1) · Precision 75%\nThe bell is not there.")
    assert found["correctness"] == (3.0, None) and found["hallucination"] == (1.0, None)


# -- LaTeX --------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "Good coverage; the vendor is missing.\n\nThe final score is $\\,83\\,$.",
    "Misses the calf.\n\n\\[\n\\text{The final score is } 83\n\\]",
    "The final score is $\\quad 83$."])
def test_latex_spacing_text_and_display_blocks_read_the_value(text: str) -> None:
    assert _value(text) == 83


# -- rules 14 (corpus N) ------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "I was unable to load the attached image, so I cannot judge it.\nThe final score is $0$.",
    "We could not decode the video.\n\nThe final score is $50$."])
def test_media_the_judge_could_not_load_is_a_decline(text: str) -> None:
    assert "declined" in _why(text)


def test_a_value_the_judge_calls_a_placeholder_is_no_rating() -> None:
    text = "The image looks blank. I'm assigning $0$ as a placeholder.\nThe final score is $0$."
    assert "stand-in" in _why(text)


@pytest.mark.parametrize(("text", "value"), [
    ("I was unable to see any dog in the image, so the caption is wrong.\nThe final score is "
     "$10$.", 10),
    ("There are 2 dogs in the image; the caption names both. Rating: 85", 85)])
def test_a_judge_that_saw_the_media_and_a_labelled_rating_stand(text: str, value: int) -> None:
    slot = GV if "final score" in text else VIS
    assert _value(text, slot) == value


@pytest.mark.parametrize("text", [
    "There are 2 dogs in the image and the caption mentions both of them. It is appropriate.",
    "I count 3 people and 2 bicycles; the caption is accurate."])
def test_visce2s_first_number_is_never_a_count_of_things(text: str) -> None:
    _why(text, VIS)


def test_a_number_before_a_scale_unit_is_still_the_first_number() -> None:
    assert _value("85 points: accurate and complete.", VIS) == 85


# -- rules 15 (corpus O) ------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "I'll refine this on a second pass.\n\nPreliminary score: $75$",
    "Tentative rating: 60 (to be confirmed)."])
def test_a_value_labelled_preliminary_with_no_final_one_abstains(text: str) -> None:
    # (A value marked provisional after it is caught where the number is read: corpus AC.)
    assert any(why in _why(text) for why in ("not yet its verdict", "marked provisional"))


def test_a_preliminary_value_then_a_final_one_reads_the_final() -> None:
    assert _value("Preliminary score: $70$.\nAfter a second look: the final score is $75$.") == 75


def test_a_variant_score_after_the_verdict_is_no_revision_of_it() -> None:
    text = ("Accurate.\n\nThe final score is $85$.\n\nLength-adjusted score: $78$ (the caption "
            "is long).")
    found = locate(text, GV)
    # Two verdicts: never the variant read as the revision (a second channel may still settle).
    assert not (isinstance(found, Located) and found.value == 78 and found.off_contract is None)
    assert _value("The final score is $80$.\nAdjusted score: $75$.") == 75  # a revision


# -- rules 16 (corpus P) ------------------------------------------------------------------------


def test_an_answer_of_numbers_alone_has_no_one_verdict() -> None:
    assert "numbers alone" in _why("4, 3, 5, 5, 4", HE)
    assert _value("4", HE) == 4 and _value("4, 4", HE) == 4  # one value, however often


CANDIDATE = "A woman kayaking on a calm lake."


def test_a_verdict_on_a_quoted_caption_that_is_none_of_the_requests_abstains() -> None:
    text = ("The caption 'A man surfing a large wave at sunset' accurately describes the surfer."
            "\n\nThe final score is $80$.")
    assert "neither the candidate nor a reference" in _why(text, replace(GV, quotes=(CANDIDATE,)))


@pytest.mark.parametrize("text", [
    "The caption 'A woman kayaking on a lake' is accurate.\n\nThe final score is $80$.",
    "The caption 'kayaking woman' is short.\n\nThe final score is $80$.",  # too few words
    "The caption 'A man surfing a large wave' is accurate.\n\nThe final score is $80$."])
def test_a_quoted_caption_of_the_request_or_an_unknown_candidate_stands(text: str) -> None:
    # (No candidate known at all: nothing to tell another caption from. A candidate of one
    # word, "A caption.", is known, and a quotation judged as it that is not it abstains:
    # test_reading_shapes_w.)
    slot = replace(GV, quotes=(CANDIDATE,) if "surfing" not in text else ())
    assert _value(text, slot) == 80


def test_a_caption_of_the_judges_own_before_the_verdict_needs_a_second_channel() -> None:
    text = ("The caption is vague. I'd rewrite it as 'A toddler feeding ducks at a pond'. "
            "The final score is $88$.")
    found = locate(text, GV)
    assert isinstance(found, Located) and found.value == 88
    assert found.off_contract and "caption of its own" in found.off_contract
