"""Verdict shapes of reading rules 20 (issue 40, corpora S and T): classes with near misses.

A verdict reopened into a choice after it is stated ("I'd say 70. Or 75.", "4 … Actually, 3 or
4"); cap3d: a count left open with a question mark or revised with an arrow on its line, a rate
per attribute with its stated total, a count corrected in prose after the lines, an
explanation's bullet that names a label with no count, the template's placeholder kept before a
value, JSON keys that count attributes of a kind, and a line that works its count out being
off-contract; markup around a value (a template's braces, LaTeX, HTML); criterion names in more
languages; a rubric copied with one level in bold; a level named where the answer describes
its scale.
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
from capjudge.reading import read_ch, read_points_slot
from capjudge.reading.view import answer_view

GV, VIS, HE = score_slot(), visce2_slot(), he_slot("correctness")
ACC = accr_slots()[0]
C_SLOT, H_SLOT = points_slots("A wooden table.")


# -- a verdict reopened into a choice -----------------------------------------------------------


@pytest.mark.parametrize(("text", "slot"), [
    ("I'd say 70. Or 75.", VIS),
    ("80. Maybe 85, the lighting is hard to judge.", VIS),
    ("4\nActually, 3 or 4 — the sails are white, and it is hard to say how much that matters.",
     HE),
    ("The final score is $70$. Actually, 70 or 75.", GV),
    ("5. On reflection, 3 or 4: the hull colour is wrong.", HE),  # a revision cue, any values
])
def test_a_verdict_reopened_into_a_choice_abstains(text: str, slot) -> None:  # noqa: ANN001
    assert "open" in _why(text, slot)


@pytest.mark.parametrize(("text", "slot", "want"), [
    ("I'd say 70. Or rather, the caption is fine as it is.", VIS, 70),
    ("4\nThere are 3 or 4 boats in the harbour; the caption names two.", HE, 4),
    ("4. The caption gets 2-3 of the details right and misses the rest.", HE, 4),
    ("The final score is $70$.", GV, 70),
])
def test_a_value_beside_no_choice_leaves_the_verdict(text: str, slot, want: float  # noqa: ANN001
                                                     ) -> None:
    assert _value(text, slot) == want


# -- cap3d: a count's own line, and what comes after the lines ----------------------------------


def test_a_count_questioned_on_its_line_is_open() -> None:
    for line in ("3 → 4?", "1?", "3 -> 4 ?"):
        got = read_ch(f"Correctness Score (C. Score): {line}\nHallucination Score (H. Score): 1")
        assert got["correctness"][0] is None and "left open" in (got["correctness"][1] or "")
        assert got["hallucination"] == (1.0, None)


def test_a_count_revised_on_its_line_is_the_revision_and_off_contract() -> None:
    text = "Correctness Score (C. Score): 3 → 4\nHallucination Score (H. Score): 1"
    assert read_ch(text)["correctness"] == (4.0, None)
    result = read_points_slot(text, C_SLOT)
    assert result.printed == 4.0 and result.confirmation == "unconfirmed"


def test_a_rate_per_attribute_is_read_at_its_stated_total_or_not_at_all() -> None:
    line = "1 point each for colour and door count = 2"
    text = f"Correctness Score (C. Score): 2\nHallucination Score (H. Score): {line}"
    assert read_ch(text)["hallucination"] == (2.0, None)
    assert read_points_slot(text, H_SLOT).confirmation == "unconfirmed"  # worked out: off
    got = read_ch("C. Score: 2\nH. Score: 1 point each for colour and doors")
    assert got["hallucination"][0] is None and "rate" in (got["hallucination"][1] or "")


def test_a_plain_count_with_its_breakdown_is_on_contract() -> None:
    text = ("Correctness Score (C. Score): 2 (bus, double-decker)\n"
            "Hallucination Score (H. Score): 1\nPrecision Score: 66.7%")
    assert read_points_slot(text, C_SLOT).confirmation == "on-contract"
    assert read_points_slot(text, H_SLOT).confirmation == "on-contract"


LINES = "Correctness Score (C. Score): 3\nHallucination Score (H. Score): 1\nPrecision: 75%\n\n"


def test_a_count_corrected_in_prose_after_the_lines_is_the_correction_off_contract() -> None:
    text = LINES + ("Wait — view 2 shows a metal handle, so 'wooden handle' is a second "
                    "hallucination. The H. Score should be 2 and the precision 60%.")
    assert read_ch(text)["hallucination"][0] == 2.0
    result = read_points_slot(text, H_SLOT)
    assert result.printed == 2.0 and result.confirmation == "unconfirmed"
    assert read_points_slot(text, C_SLOT).printed == 3.0


@pytest.mark.parametrize("after", [
    "If the handle is metal, the H. Score should be 2.",
    "The H. Score should be 2. No — the H. Score should be 3.",
])
def test_a_correction_under_a_condition_or_two_corrections_leave_the_count_open(after: str
                                                                                ) -> None:
    got = read_ch(LINES + after)
    assert got["hallucination"][0] is None
    assert got["correctness"][0] == 3.0


def test_the_same_count_said_again_is_no_correction() -> None:
    assert read_ch(LINES + "The H. Score should be 1: only the mane is wrong.") == {
        "correctness": (3.0, None), "hallucination": (1.0, None)}


def test_an_explanation_bullet_naming_a_label_is_no_second_count() -> None:
    text = ("Correctness Score (C. Score): 2.5\nHallucination Score (H. Score): 1\n"
            "Explanation:\n- \"blue hat\": correct (1).\n"
            "- Hallucination: the caption says \"standing on a rock\"; there is no rock (1).")
    assert read_ch(text) == {"correctness": (2.5, None), "hallucination": (1.0, None)}
    # a label on a bullet with no count anywhere is still no count
    assert read_ch("- Correctness: the chair is right\n- Hallucination: the legs")[
        "hallucination"][0] is None


def test_the_templates_placeholder_kept_before_a_value_is_read_past() -> None:
    text = ("Correctness Score (C. Score): [Numerical Value] 3\n"
            "Hallucination Score (H. Score): [Numerical Value] 1")
    assert read_ch(text) == {"correctness": (3.0, None), "hallucination": (1.0, None)}
    alone = read_ch("Correctness Score (C. Score): [Numerical Value]\n"
                    "Hallucination Score (H. Score): [Numerical Value]")
    assert alone["correctness"][0] is None and "placeholder" in (alone["correctness"][1] or "")


def test_json_keys_that_count_attributes_of_a_kind_are_the_counts() -> None:
    text = '{"attributes": [{"attribute": "velvet", "verdict": "hallucinated"}], ' \
           '"correct": 3, "hallucinated": 1, "precision": "75%"}'
    assert read_ch(text) == {"correctness": (3.0, None), "hallucination": (1.0, None)}


def test_an_html_definition_list_holds_the_counts() -> None:
    text = ("<dl>\n  <dt>Correctness Score (C. Score)</dt><dd>3</dd>\n"
            "  <dt>Hallucination Score (H. Score)</dt><dd>1</dd>\n</dl>")
    assert read_ch(text) == {"correctness": (3.0, None), "hallucination": (1.0, None)}


# -- markup around a value ----------------------------------------------------------------------


@pytest.mark.parametrize("written", ["${{72}}$", "$^{72}$", r"$\mathbf{72}$", "$**72**$",
                                     r"$\textbf{ 72 }$"])
def test_markup_around_the_value_inside_its_delimiters_is_read_past(written: str) -> None:
    assert _value(f"The caption misses the pickle.\n\nThe final score is {written}.") == 72
    view = answer_view(f"The final score is {written}.")
    assert len(view.text) == len(f"The final score is {written}.")  # offsets kept


def test_markup_around_two_numbers_is_left_alone() -> None:
    assert answer_view("$\\frac{3}{4}$").text == "$\\frac{3}{4}$"
    assert "placeholder" in _why("The final score is ${{score}}$.") or _value(
        "The final score is ${{score}}$.") is None


def test_a_latex_aligned_block_reads_each_criterion() -> None:
    text = ("$$\n\\begin{aligned}\n\\text{Accuracy} &: 70 \\\\\n\\text{Completeness} &: 60 \\\\\n"
            "\\end{aligned}\n$$")
    assert _value(text, ACC) == 70


def test_html_markup_reads_as_spaces() -> None:
    assert _value("<p>The caption is right.</p><p>The final score is <b>$81$</b>.</p>") == 81


# -- criterion names in more languages ----------------------------------------------------------


@pytest.mark.parametrize(("label", "criterion"), [
    ("Točnost", "accuracy"), ("Přesnost", "accuracy"), ("Dokładność", "accuracy"),
    ("Úplnost", "completeness"), ("Volledigheid", "completeness"),
    ("Sažetost", "conciseness"), ("Zwięzłość", "conciseness"),
    ("Relevantnost", "relevance"), ("Relevans", "relevance"),
])
def test_criterion_names_in_more_languages(label: str, criterion: str) -> None:
    slot = next(s for s in accr_slots() if s.name == criterion)
    others = "\n".join(f"{s.label}: $50$" for s in accr_slots() if s.name != criterion)
    assert _value(f"{label}: $85$\n{others}", slot) == 85


# -- HarmonicEval: the rubric with one level in bold; a level that describes the scale ---------


RUBRIC = ["1 Very Low Correctness", "2 Low Correctness", "3 Moderate Correctness",
          "4 High Correctness", "5 Extremely High Correctness"]


def test_a_rubric_copied_with_one_level_in_bold_reads_that_level() -> None:
    lines = [f"- **{r}**" if r.startswith("3") else f"- {r}" for r in RUBRIC]
    assert _value("\n".join(lines), HE) == 3


def test_a_rubric_in_bold_throughout_or_twice_reads_no_level() -> None:
    assert _value("\n".join(f"- **{r}**" for r in RUBRIC), HE) is None
    two = [f"- **{r}**" if r[0] in "34" else f"- {r}" for r in RUBRIC]
    assert _value("\n".join(two), HE) is None


def test_a_level_named_to_describe_the_scale_does_not_rival_the_rating() -> None:
    slot = replace(HE, levels=tuple((r[2:], int(r[0])) for r in RUBRIC))
    text = ("4 (on the 1–5 scale, where 5 means extremely high correctness)\n\nThe cyclist and "
            "the helmet are right.")
    assert _value(text, slot) == 4
    # a level named as the verdict still rivals it
    assert _value("4. Overall this is Extremely High Correctness.", slot) is None


# -- rules 21 (corpus U) --------------------------------------------------------------------------


def test_a_verdict_resting_on_a_reading_the_judge_doubts_abstains() -> None:
    text = ("The final score is $45$.\n\nP.S. I may have read the tile right-to-left: if Frame "
            "1 is actually the rightmost panel, the caption matches and it would deserve $85$.")
    assert "doubts what it rests on" in _why(text)
    # a counterfactual about the caption is no doubt of the judge's own reading
    assert _value("The final score is $45$. Had the caption named the dog, it would deserve "
                  "$85$.") == 45
    # nor a doubt with no other value
    assert _value("The final score is $45$. I may have missed a detail, but the action is "
                  "reversed.") == 45


def test_a_rating_restated_as_the_prompts_single_digit_abstains() -> None:
    text = "The caption is well phrased. I rate it 85.\n\nSince the final rating must be a " \
           "single digit: 9"
    assert "single digit" in _why(text, VIS)
    # the instruction echoed, or the digit only offered, is no second rating
    assert _value("Your rating must be a single digit between 0 and 100.\n80", VIS) == 80
    assert _value("On the 0–100 scale: 70. (As a single digit, that would be 7.)", VIS) == 70


def test_namespaced_reasoning_blocks_are_reasoning() -> None:
    text = ("<seed:think>Draft: accuracy 80. 75 then.</seed:think>\nThe caption is right.\n\n"
            "Accuracy: $75$")
    assert _value(text, ACC) == 75
    assert answer_view("<seed:think>still thinking about 80").reasoning_cut


def test_an_apology_for_a_typo_revises_the_verdict() -> None:
    assert _value("The final score is $85$. Sorry, I transposed the digits: the final score "
                  "is $58$.") == 58


def test_vietnamese_criterion_names() -> None:
    lines = "Độ chính xác: $90$\nĐộ đầy đủ: $55$\nĐộ súc tích: $85$\nĐộ liên quan: $80$"
    assert [_value(lines, s) for s in accr_slots()] == [90, 55, 85, 80]


def test_the_scale_echoed_as_the_values_label_is_the_scale() -> None:
    assert _value("1 to 5: 4\n\nThe jogger and the park are right.", HE) == 4
    assert _value("1-5: 4", HE) == 4
    assert "range or a hedge" in _why("3 to 4: the caption is fine", HE)


def test_a_rating_of_the_vqa_question_is_not_the_answers() -> None:
    assert "scores something else" in _why("The question is clear and answerable from the "
                                           "image: 5. The kitchen has four chairs.", HE)
    assert _value("The answer is correct: 5. The question asks about chairs.", HE) == 5
