"""Verdict shapes the reader learnt after corpora E-G (issue 40): hand-worked cases per rule.

Each rule is a class of answers, tested with examples of the class and with its near misses
(the lookalike that must stay unread, or read otherwise): tool-call arguments as a JSON string,
CSV tables, worked arithmetic and arrows, abbreviated criterion labels, a rubric with one level
pointed at, star rows, a trailing "+", another criterion's label, a bottom-tenth rating beside
praise alone, and cap3d's paraphrased labels, zero in words and ambiguous fractions.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from reading_probe import value as _value
from reading_probe import why as _why

from capjudge.methods.gveval import accr_slots, score_slot
from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.protocol import ScoreSlot
from capjudge.reading import read_ch
from capjudge.reading.locate import Located, Unreadable, locate
from capjudge.reading.number_words import spelled_at
from capjudge.reading.numbers import number_at
from capjudge.reading.structure import json_fields, table_fields
from capjudge.reading.vocabulary import abbreviations

GV, VIS, HE = score_slot(), visce2_slot(), he_slot("correctness")
ACCR = accr_slots()



# -- structure: JSON inside a JSON string, CSV ------------------------------------------------


def test_tool_call_arguments_written_as_a_json_string_are_read_in_place() -> None:
    text = '{"name": "submit_score", "arguments": "{\\"score\\": 72}"}'
    inner = [f for f in json_fields(text) if f.path == ("arguments", "score")]
    assert len(inner) == 1 and inner[0].value == "72"
    assert text[inner[0].start:inner[0].end] == "72"  # offsets in the answer itself
    assert _value(text) == 72
    assert _value('[{"function": {"arguments": "{\\"final_score\\": \\"58\\"}"}}]') == 58


def test_a_json_string_that_is_not_json_is_only_a_string() -> None:
    fields = json_fields('{"reason": "{not json", "score": 70}')
    assert [f.path for f in fields] == [("reason",), ("score",)]


def test_csv_rows_are_a_table_and_the_overall_row_is_the_verdict() -> None:
    text = "criterion,score\ncoverage,80\nredundancy,60\noverall,71"
    cells = {f.path: f.value for f in table_fields(text)}
    assert cells[("overall", "score")] == "71"
    assert _value(text) == 71
    assert _value('caption,rating\n"A dog, on a beach",83', VIS) == 83  # a quoted comma


@pytest.mark.parametrize("prose", [
    "The caption is good, but short.\nIt names a dog, a ball.",  # sentences, not rows
    "one, two\nthree, four",  # no number under the header
])
def test_prose_with_commas_is_no_table(prose: str) -> None:
    assert table_fields(prose) == []


# -- numbers: a computation's result ------------------------------------------------------------


@pytest.mark.parametrize("text, value", [
    ("$100 - 12 - 6 = 82$", 82),
    ("Base 90 - 15 (wrong shirt colour) = 75", 75),
    ("100, -10 for the jacket, -5 for the place \u2192 85", 85),
    ("Score: 82 \u2192 71", 71),
    ("85 - 5 = 80", 80),
])
def test_a_worked_score_reads_as_its_stated_result(text: str, value: int) -> None:
    n = number_at(text, text.index("8") if text.startswith("Score") else
                  next(i for i, c in enumerate(text) if c.isdigit()))
    assert n is not None and n.value == value and n.kind == "digits"


def test_an_unevaluated_computation_reads_only_inside_its_delimiters() -> None:
    n = number_at("$100 - 15 - 10$", 1)
    assert n is not None and n.value == 75 and n.kind == "arithmetic"
    assert _value("The final score is $100 - 15 - 10$.") == 75
    plain = number_at("about 100 - 15 - 10 of them", 6)
    assert plain is not None and plain.value == 100  # not closed by the judge: as written


@pytest.mark.parametrize("text", ["$100 - 10 = 80$", "70 - 80"])
def test_a_contradicted_result_or_a_range_is_not_worked_out(text: str) -> None:
    start = 1 if text.startswith("$") else 0
    n = number_at(text, start)
    assert n is not None and n.value == float(text[start:].split()[0])


def test_a_denominator_is_never_a_computation() -> None:
    assert _value("Score \u2014 7 out of 10 \u2192 70/100. Mostly right.", VIS) == 70


# -- vocabulary: abbreviated criteria -----------------------------------------------------------


def test_abbreviations_are_unambiguous_cuts_of_known_criteria() -> None:
    names = {slot.name: abbreviations(slot) for slot in ACCR}
    assert "acc" in names["accuracy"] and "comp" in names["completeness"]
    assert "conc" in names["conciseness"] and "rel" in names["relevance"]
    # "co" and "com"/"con" could be several criteria or are words of their own.
    assert not any(a in ("co", "com", "con") for cuts in names.values() for a in cuts)
    assert abbreviations(GV) == ()  # the generic verdict has no criterion name to cut


def test_abbreviated_labels_on_one_line_read_each_criterion_off_contract() -> None:
    text = "Mostly right.\n\nAcc $80$ | Comp $70$ | Conc. $90$ | Rel $85$"
    found = [locate(text, slot) for slot in ACCR]
    assert [f.value for f in found if isinstance(f, Located)] == [80, 70, 90, 85]
    assert all(isinstance(f, Located) and f.off_contract for f in found)


# -- contract: what the whole answer says about the reading -----------------------------------


def test_a_rubric_with_one_level_pointed_at_reads_that_level() -> None:
    rubric = ("- 1 Very Low Correctness: wrong.\n- 2 Low Correctness: some right.  <-- selected\n"
              "- 3 Moderate Correctness: mostly.\n- 4 High Correctness: nearly all.\n"
              "- 5 Extremely High Correctness: all.")
    assert _value(rubric, HE) == 2
    assert _value(rubric.replace("<-- selected", "(my rating)"), HE) == 2


def test_a_rubric_restated_with_nothing_pointed_at_is_not_a_checklist() -> None:
    rubric = "- 1 Very Low Correctness: wrong.\n- 2 Low Correctness: some right.\n"
    found = locate(rubric + "\nThe dog is a cat.", HE)
    assert not (isinstance(found, Located) and "checklist" in found.how)


@pytest.mark.parametrize("text, value", [("\u2605\u2605\u2605\u2605\u2606\n\nMostly right.", 4),
                                         ("\u2b50\u2b50\u2b50\nIt invents a lake.", 3),
                                         ("Rating: \u2605\u2605\u2606\u2606\u2606", 2)])
def test_a_row_of_stars_counts_on_a_scale_it_fits(text: str, value: int) -> None:
    assert _value(text, HE) == value


def test_stars_on_another_scale_are_not_read() -> None:
    assert _value("\u2605\u2605\u2605\u2605\u2606\nGood caption.", VIS) is None


def test_a_trailing_plus_is_more_than_the_value() -> None:
    assert "4+" in _why("4+\nThe chef and the dessert are right.", HE)


def test_another_criterions_label_is_not_the_asked_one() -> None:
    assert "fluency" in _why("Fluency: 5\nThe sentence reads naturally.", HE)
    assert _value("Correctness: 4\nFluency: 5", HE) == 4


@pytest.mark.parametrize("text", ["9 \u2014 an excellent caption, it fully matches the image.",
                                  "The caption is accurate and complete, with no errors.\n\n"
                                  "Rating: 9"])
def test_a_bottom_tenth_rating_beside_praise_alone_abstains(text: str) -> None:
    assert "0-10 scale" in _why(text, VIS)


@pytest.mark.parametrize("text, value", [
    ("9\n\nThe caption describes a picnic, but the image shows skiers.", 9),
    ("0 \u2014 nothing in the caption matches the bus.", 0),
    ("9/100: accurate words, but about another picture.", 9),
    ("90 \u2014 an excellent caption.", 90),
])
def test_a_low_rating_beside_a_fault_or_on_its_scale_stands(text: str, value: int) -> None:
    assert _value(text, VIS) == value


def test_a_score_header_over_rows_of_other_things_is_no_verdict() -> None:
    table = ("| Object | Score |\n|---|---|\n| laptop | $95$ |\n| mug | $80$ |\n"
             "| notebook | $20$ |")
    assert _value(table) is None


# -- cap3d ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, c, h", [
    ("Correct attributes: 4 (mug, white)\nHallucinated attributes: None \u2014 no errors.", 4, 0),
    ("CS=3, HS=1, P=75%. Correct: lamp, brass.", 3, 1),
    ("Correctness Score (C. Score): 5\n\nThere are no hallucinations: all match.", 5, 0),
    ('```json\n{"C_score": 4, "H_score": 2, "correct": ["robot", "silver"]}\n```', 4, 2),
])
def test_cap3d_counts_under_other_words(text: str, c: float, h: float) -> None:
    found = read_ch(text, ["A silver robot"])
    assert found["correctness"][0] == c and found["hallucination"][0] == h


def test_cap3d_paraphrase_that_lists_instead_of_counting_gives_no_count() -> None:
    found = read_ch("Correct attributes: lamp, brass\nWrong details: shade colour")
    assert found["correctness"][0] is None and found["hallucination"][0] is None


def test_cap3d_fraction_of_several_points_is_ambiguous_but_a_half_point_is_not() -> None:
    found = read_ch("C. Score: 3/4\nH. Score: 1")
    assert found["correctness"][0] is None and "3 (of 4) or as 0.75" in str(
        found["correctness"][1])
    assert read_ch("C. Score: 1/2\nH. Score: 0")["correctness"][0] == 0.5


# -- numbers spelled out in other languages -----------------------------------------------------


@pytest.mark.parametrize("words, value", [
    ("setenta y ocho", 78), ("soixante-dix-huit", 78), ("soixante dix huit", 78),
    ("quatre-vingt-dix-neuf", 99), ("vingt et un", 21), ("fünfundsiebzig", 75),
    ("dreissig", 30), ("settantotto", 78), ("ventuno", 21), ("setenta e oito", 78),
    ("dieciseis", 16), ("cien", 100),
])
def test_numbers_spelled_out_in_other_languages(words: str, value: int) -> None:
    assert spelled_at(words, 0) == (len(words), value)


@pytest.mark.parametrize("article", ["un", "une", "uno", "una", "ein", "eine", "um", "uma"])
def test_articles_that_spell_one_are_not_numbers(article: str) -> None:
    assert spelled_at(article, 0) is None


@pytest.mark.parametrize("text, slot, value", [
    ("Calificación: setenta y ocho. La descripción es correcta.", VIS, 78),
    ("Die endgültige Punktzahl ist fünfundsiebzig.", GV, 75),
    ("Note : quatre sur cinq. La légende décrit le chat.", HE, 4),
    ("Puntuación: cuatro de cinco. Falta el vendedor.", HE, 4),
])
def test_a_verdict_spelled_out_after_its_label(text: str, slot: ScoreSlot, value: int) -> None:
    assert _value(text, slot) == value


@pytest.mark.parametrize("text, slot", [
    ("Puntuación: cuatro o cinco.", HE),  # a hedge
    ("Calificación: ocho sobre diez.", VIS),  # 8 of 10, on a 0-100 scale
])
def test_spelled_hedges_and_other_scales_abstain(text: str, slot: ScoreSlot) -> None:
    assert _value(text, slot) is None


def test_a_homograph_in_prose_is_not_a_verdict() -> None:
    # "neuf" (new) in a sentence is never scanned for; only a value after a label is read.
    assert _value("La légende parle d'un vélo neuf devant la gare.", VIS) is None


# -- decorations, the scale written inside the anchor, lists of JSON objects -------------------


@pytest.mark.parametrize("verdict, value", [("$+69$", 69), ("$\u224874$", 74), ("$~75$", 75),
                                            ("$\\approx 72$", 72)])
def test_a_plus_sign_or_about_before_the_verdict(verdict: str, value: int) -> None:
    assert _value(f"Generic but correct.\n\nThe final score is {verdict}.") == value


def test_the_scale_inside_the_anchor_keeps_the_anchor_that_closes_the_verdict() -> None:
    text = ("Missing the zebras.\n\nAccuracy: $85/100$\nCompleteness: $70/100$\n"
            "Conciseness: $95/100$\nRelevance: $90/100$")
    assert [_value(text, slot) for slot in ACCR] == [85, 70, 95, 90]


def test_each_object_of_a_json_list_names_its_own_criterion() -> None:
    text = ('[{"criterion": "Accuracy", "score": 85}, {"criterion": "Completeness", "score": 65},'
            ' {"criterion": "Conciseness", "score": 90}, {"criterion": "Coverage", "score": 1}]')
    assert _value(text, ACCR[0]) == 85 and _value(text, ACCR[2]) == 90
    # "Coverage" is completeness too: two objects name it, with different values.
    assert _value(text, ACCR[1]) is None


def test_cap3d_labels_as_headings_with_the_count_below() -> None:
    text = ("## Correctness Score (C. Score)\n\n**4**\n\n## Hallucination Score (H. Score)\n\n"
            "**1**\n\n## Explanation\n\nFlamingo, pink.")
    found = read_ch(text)
    assert found["correctness"][0] == 4 and found["hallucination"][0] == 1
    # A label ending a line of prose is no heading.
    assert read_ch("We then compute the Correctness Score\n4 of them.")["correctness"][0] is None


def test_one_step_down_from_a_number_below_the_top_is_not_worked_out() -> None:
    # "$85 - 80$": a range written downwards, or a subtraction? Not 5.
    assert _value("The final score is $85 - 80$.") is None
    assert _value("The final score is $100 - 20$.") == 80


def test_a_synonym_criterions_label_is_not_another_criterion() -> None:
    # Accuracy and correctness share names in other languages ("exactitud"): a synonym.
    assert _value("Accuracy: 4\nThe dog is right, the park is a beach.", HE) == 4


def test_stars_as_bullets_are_no_rating() -> None:
    text = "\u2605 The dog is right.\n\u2605 The park is a beach.\n\n4"
    assert _value(text, HE) == 4


# -- corpus H: conditions, alternatives, differences, resolutions, quoted fragments ------------


@pytest.mark.parametrize(("text", "slot", "why"), [
    ("The final score is $85$ if it's a cake, $30$ otherwise.", GV, "conditional"),
    ("Accuracy: $90$ provided the bird is a crow", ACCR[0], "conditional"),
    ("4, assuming the sign really says Main Street.", HE, "conditional"),
    ("70, or 75 if you count the reflection as a swan.", VIS, "range or a hedge"),
    ("80, maybe 85.", VIS, "range or a hedge"),
    ("The final score is $7$$5$.", GV, "runs into another"),
    ("The final score is $+10$ relative to that one.", GV, "difference"),
    ("The final score is $10$ points higher than the first caption's.", GV, "difference"),
])
def test_conditions_alternatives_and_differences_are_no_verdict(text: str, slot: ScoreSlot,
                                                                why: str) -> None:
    assert why in _why(text, slot)


@pytest.mark.parametrize(("text", "slot", "value"), [
    ("The final score is $85$. If the object were a hat it would be lower.", GV, 85),
    ("70, or so I would say: the swans are right.", VIS, 70),
    ("The final score is $75$.", GV, 75),
    ("The final score is $85$, higher than the first caption's.", GV, 85),
    ("4 - accurate, although the sign is unreadable.", HE, 4),
])
def test_their_near_misses_are_read(text: str, slot: ScoreSlot, value: float) -> None:
    assert _value(text, slot) == value


@pytest.mark.parametrize(("text", "slot", "value"), [
    ("Rating: 7 out of 10, i.e. 70 on your 0-100 scale.", VIS, 70),
    ("I'd put it at 3.5, which rounds to 4: the scene is right.", HE, 4),
    ("Somewhere between 60 and 65 - the setting is wrong - so 62.", VIS, 62),
])
def test_a_value_the_answer_resolves_onto_the_scale_is_read_there(text: str, slot: ScoreSlot,
                                                                  value: float) -> None:
    assert _value(text, slot) == value


@pytest.mark.parametrize(("text", "slot"), [
    ("Rating: 7 out of 10, i.e. 60 on your scale.", VIS),  # 7 of 10 is not 60
    ("I'd put it at 3.5, which rounds to 5.", HE),  # 3.5 rounds to 3 or 4
    ("Somewhere between 60 and 65, so 70.", VIS),  # outside its own range
    ("I'd put it at 3.5. The scene has 4 people.", HE),  # no connective: a count
])
def test_a_resolution_that_disagrees_is_no_resolution(text: str, slot: ScoreSlot) -> None:
    assert _value(text, slot) is None


def test_the_bottom_of_a_rubric_beside_praise_alone_abstains() -> None:
    assert "upside down" in _why("1\nThe caption is perfectly accurate and complete.", HE)
    assert _value("1\nThe caption is wrong about the dog.", HE) == 1
    assert _value("3\nThe caption is accurate.", HE) == 3


def test_a_quoted_fragment_of_the_candidate_is_not_a_verdict() -> None:
    slot = replace(HE, quotes=("A cat on a sofa. Rating: 5",))
    text = ('Rating: 2 - the animal is a dog, and the caption\'s own "Rating: 5" is not part '
            "of a description.")
    assert _value(text, slot) == 2
    # The same words not quoted from the candidate stay the judge's own.
    other = replace(HE, quotes=("A cat on a sofa.",))
    assert _value('"Rating: 5" - every detail matches.', other) == 5


def test_html_character_references_read_as_their_characters() -> None:
    assert _value("Accurate.<br><br>The final score is &#36;66&#36;.") == 66
    assert _value("&lt;think&gt;maybe $40$&lt;/think&gt;The final score is $70$.") == 70


def test_cap3d_counts_taken_back_without_new_ones_abstain() -> None:
    text = ("Correctness Score (C. Score): 3\nHallucination Score (H. Score): 1\n\nFinal "
            "review: its scores should be adjusted upward.")
    found = read_ch(text)
    assert found["correctness"][0] is None and "took its counts back" in str(
        found["correctness"][1])
    revised = text + "\nCorrectness Score (C. Score): 4\nHallucination Score (H. Score): 1"
    assert read_ch(revised)["correctness"][0] == 4


def test_a_block_headed_final_after_one_headed_draft_is_the_verdict() -> None:
    draft = "Draft scores:\nAccuracy: $80$\nCompleteness: $70$\n\n"
    assert _value(draft + "Final scores:\nAccuracy: $75$\nCompleteness: $60$", ACCR[0]) == 75
    # Two blocks each headed final: which stands?
    twice = "Final scores:\nAccuracy: $80$\n\nFinal scores:\nAccuracy: $75$"
    assert _value(twice, ACCR[0]) is None
    # A draft heading after the first block is no revision of it.
    assert _value("Accuracy: $80$\n\nDraft two:\nAccuracy: $75$", ACCR[0]) is None


# -- corpus I: corrections by an amount, summary lines, cap3d's swapped breakdowns ---------------


def test_a_verdict_corrected_by_an_amount_with_no_new_value_is_withdrawn() -> None:
    text = ("The final score is $80$.\n\nSelf-check: on reflection, the missing flower girl "
            "warrants roughly 10 points less.")
    assert "withdrew" in _why(text)
    # An amount already taken off before the verdict is its working, not a correction.
    assert _value("I took 10 points off for the flower girl. The final score is $80$.") == 80


def test_a_summary_line_that_disagrees_with_the_verdict_is_a_second_verdict() -> None:
    text = "TL;DR: 85/100\n\nThe caption misses a dog.\n\nThe final score is $75$."
    assert "2 different verdicts" in _why(text)
    assert _value("TL;DR: 75/100\n\nThe caption misses a dog.\n\nThe final score is $75$.") == 75
    # A reference scored on the scale is no summary of the verdict.
    assert _value("Reference 1 would get 90/100.\n\nThe final score is $75$.") == 75


def test_cap3d_counts_whose_breakdown_names_the_other_kind_abstain() -> None:
    swapped = ("Correctness Score (C. Score): 1 (hallucinated: colour)\n"
               "Hallucination Score (H. Score): 3 (correct: chair, wood, legs)")
    found = read_ch(swapped)
    assert found["correctness"][0] is None and "swapped" in str(found["correctness"][1])
    fine = ("Correctness Score (C. Score): 3 (chair, wood, legs)\n"
            "Hallucination Score (H. Score): 1 (incorrect: colour)")
    assert read_ch(fine)["correctness"][0] == 3 and read_ch(fine)["hallucination"][0] == 1


def test_a_negative_hallucination_count_on_the_prompts_line_is_on_contract() -> None:
    from capjudge.methods.cap3d import points_slots
    from capjudge.reading import read_points_slot

    text = "Correctness Score (C. Score): 3\nHallucination Score (H. Score): -2"
    h = read_points_slot(text, points_slots("a bicycle")[1])
    assert h.printed == 2 and h.confirmation == "on-contract"


def test_only_the_final_channel_of_a_harmony_answer_is_read() -> None:
    analysis = "<|channel|>analysis<|message|>Maybe 70? Let's say 78.<|end|>"
    final = "<|start|>assistant<|channel|>final<|message|>Accurate. The final score is $80$."
    assert _value(analysis + final) == 80
    assert _value(analysis + final + "<|return|>") == 80
    # Only the analysis channel: the verdict was never written, whatever the drafts say.
    assert "reasoning" in _why(analysis + "The final score is $78$.")


@pytest.mark.parametrize(("text", "value"), [
    ("Minor omission: the clock.\n\nRating: [[82]]", 82),
    ("Feedback: misses the rain. [RESULT] 84", 84),
])
def test_the_verdict_markers_of_common_judge_formats_are_read(text: str, value: int) -> None:
    assert _value(text) == value


def test_two_verdict_markers_that_disagree_abstain() -> None:
    assert _value("First pass [[70]]. Second pass [[85]].") is None


# -- corpus J (rules 9): a choice left open, a whole verdict for a criterion, small faults ---------


def test_a_choice_left_to_the_reader_abstains() -> None:
    text = ("If judged on the first half only, I would give $80$; judged on the full video, "
            "$60$.\n\nI leave the choice to you.")
    assert "leaves the verdict open" in _why(text)
    assert "leaves the verdict open" in _why("The final score is $70$. It's your call.")
    # A range that qualifies a committed value leaves nothing open.
    assert _value("Rating: 70 (somewhere between 60 and 80 depending on how much the blur "
                  "matters).", VIS) == 70


def test_one_overall_verdict_is_no_criterions_own() -> None:
    text = "Accurate and to the point, but it omits the child.\n\nOverall: $78$"
    for slot in ACCR:
        assert "a verdict for the whole" in _why(text, slot)
    # For the method's one verdict, "Overall" is that verdict.
    assert _value("Overall: $78$") == 78


def test_a_bottom_rating_beside_small_faults_only_is_no_verdict() -> None:
    assert "bottom tenth" in _why("My rating is 7. The caption is mostly good with minor "
                                  "errors.", VIS)
    # A serious fault makes the low rating believable.
    assert _value("My rating is 7. The caption is wrong: it shows a cat, not a dog.", VIS) == 7


def test_cap3d_counts_with_an_alternative_in_their_aside_abstain() -> None:
    text = ("Correctness Score (C. Score): 4\n"
            "Hallucination Score (H. Score): 1 (possibly 2 if the handle counts)")
    found = read_ch(text)
    assert found["correctness"][0] == 4 and found["hallucination"][0] is None
    assert "left open" in str(found["hallucination"][1])
    # A breakdown in parentheses is not an alternative.
    assert read_ch("C. Score: 4\nH. Score: 1 (handle: 1)")["hallucination"][0] == 1


@pytest.mark.parametrize(("text", "slot", "value"), [
    ("Bewertung: 4,0\n\nDie Leine hat die falsche Farbe.", HE, 4),  # a decimal comma, integral
    ("An excellent caption.\n\nI would score this caption 91 out of 100.", GV, 91),
    ("3 (the main object alone would merit 5, but the cups are wrong)", HE, 3),
])
def test_values_a_careful_reader_reads(text: str, slot: ScoreSlot, value: int) -> None:
    assert _value(text, slot) == value


def test_still_hypothetical_or_fractional() -> None:
    assert _value("If it named the dog, I would score it 95.", GV) is None
    assert _value("Bewertung: 4,5", HE) is None


def test_a_count_the_caption_states_is_never_the_rating() -> None:
    slot = replace(VIS, quotes=("3 giraffes standing near 2 trees.",))
    assert _value("3 giraffes? I only see 2 giraffes, and no trees. Rating: 40", slot) == 40


# -- corpus K (rules 10): another scale named, a total line, examples of the format, level spans --


def test_a_labelled_value_that_fits_another_scale_the_answer_names_abstains() -> None:
    text = ("Scoring on a 5-point scale:\nAccuracy: $4$\nCompleteness: $3$\nConciseness: $5$\n"
            "Relevance: $5$")
    assert "another scale" in _why(text, ACCR[0])
    # A value that does not fit the other scale is on the slot's own.
    assert _value("On a 5-point scale it would be a 4.\n\nAccuracy: $80$", ACCR[0]) == 80


def test_a_total_line_that_disagrees_with_the_verdict_is_a_second_verdict() -> None:
    text = ("- Objects: 30/40\n- Relations: 10/20\n**Total: 65/100**\n\nMisses the kite.\n\n"
            "The final score is $78$.")
    assert "2 different verdicts" in _why(text)
    assert _value(text.replace("65/100", "78/100")) == 78


def test_an_example_of_the_format_is_not_the_verdict() -> None:
    example = ("Here is an example of how the output should look:\n\n```\nThe caption misses "
               "some details.\nThe final score is $85$.\n```\n\n")
    assert _value(example + "Now let's evaluate the generated caption.") is None
    assert _value(example + "The caption is accurate.\nThe final score is $70$.") == 70
    # A fenced block not introduced as an example is the judge's own.
    assert _value("My evaluation:\n\n```\nAccurate.\nThe final score is $85$.\n```") == 85


def test_a_span_of_rubric_levels_is_not_one_level() -> None:
    levels = (("Very Low Correctness", 1), ("Low Correctness", 2),
              ("Moderate Correctness", 3), ("High Correctness", 4),
              ("Extremely High Correctness", 5))
    slot = replace(HE, levels=levels)
    assert "span of levels" in _why("High-to-Extremely-High Correctness. Nearly right.", slot)
    assert "span of levels" in _why("Between Moderate and High Correctness.", slot)
    assert _value("Extremely High Correctness - perfect.", slot) == 5
    assert _value("I would say High Correctness, the caption is right.", slot) == 4


# -- rules 11 (found on the llama.cpp server's channel, corpora I and K) --------------------------


def test_a_later_rating_phrase_with_another_value_is_a_second_verdict() -> None:
    text = "Rating: 4\n\nThe frisbee is red, not blue: major errors, so this deserves a 2."
    assert "2 different values" in _why(text, HE)
    # In a conditional aside it is no verdict ("if you meant completeness ...").
    assert _value("Rating: 4\n\n(If you meant completeness, I'd give it a 3.)", HE) == 4
    assert _value("Rating: 4\n\nIt deserves a 4: one colour is wrong.", HE) == 4


@pytest.mark.parametrize(("tail", "value"), [
    ("All in all, a solid 7/10.", None),   # 70, not 85
    ("All in all, 8.5/10.", 85),           # the same verdict on another scale
    ("It names 3/5 objects.", 85),         # a count, not a verdict on a scale of 5
])
def test_a_later_verdict_on_a_scale_of_5_or_10(tail: str, value: int | None) -> None:
    assert _value(f"The final score is $85$.\n\nMisses the people at the stop.\n\n{tail}") \
        == value


def test_a_verdict_reopened_and_cut_is_no_verdict() -> None:
    text = ("Snow on the rocks, 'summer' in the caption.\n\nThe final score is $72$.\n\n"
            "Actually, let me reconsider. The snow is prominent, and")
    found = locate(text, GV, truncated=True)
    assert isinstance(found, Unreadable) and "reopens" in found.reason
    # Finished, the same answer keeps its verdict (off-contract: questioned afterwards).
    assert _value(text + " it stays.") == 72


def test_out_of_100_at_a_sentences_end_is_the_scale() -> None:
    assert _value("The score is X out of 100.", VIS) is None
    assert _value("I rate it 85 out of 100.", VIS) == 85


def test_a_rating_taken_back_in_the_same_breath_is_replaced() -> None:
    text = ('Rating: 4 — no wait, the sign says "Stop", not "Slow" as the caption claims, and '
            "the sign is the subject. 3.")
    assert _value(text, HE) == 3
    assert "takes back" in _why("Rating: 4 — no wait, the sign is wrong.", HE)


# -- rules 12 (corpus L) ---------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "slot", "why"), [
    ("4\n\nThe rider is actually the subject. Major errors, which is why it deserves a 2.", HE,
     "2 different values"),
    ("Score: 4 — low confidence; I'd be equally comfortable with 3.", HE, "leaves the verdict"),
    ("It misses the dog. Would a final score of $70$ be reasonable here?", GV, "asked as a "
     "question"),
    ("Out of the five candidates, the final ranking is $2$.", GV, "a rank"),
    ("Evaluation (scale 1-5):\nAccuracy: $4$\nCompleteness: $3$\nConciseness: $5$\n"
     "Relevance: $4$", ACCR[0], "another scale"),
    ("Rating: eighty-ish, maybe high seventies.", VIS, "approximate"),
])
def test_no_one_verdict_committed(text: str, slot: ScoreSlot, why: str) -> None:
    assert why in _why(text, slot)


@pytest.mark.parametrize(("text", "slot", "value"), [
    # A question after the verdict is an offer, not a second verdict.
    ("The final score is $60$.\n\nWould you like me to re-evaluate with a stricter rubric "
     "(capping the score at 50)?", GV, 60),
    ("The final score is $85$. Is there anything else?", GV, 85),
    ("Ranked against the references it does well. The final score is $80$.", GV, 80),
])
def test_a_committed_verdict_stays(text: str, slot: ScoreSlot, value: int) -> None:
    assert _value(text, slot) == value


def test_the_judge_doubting_its_own_value_withdraws_it() -> None:
    text = ("Accuracy: $75$\nCompleteness: $65$\nConciseness: $90$\nRelevance: $95$\n\n"
            "Hmm: the caption calls the dog a wolf. I'm not sure 75 is defensible.")
    assert "withdrew" in _why(text, ACCR[0])
    assert _value(text, ACCR[1]) == 65  # the doubt names accuracy's value, not completeness's
    assert "withdrew" in _why("4\n\nIt may be a husky: I'm not confident 4 is right.", HE)
