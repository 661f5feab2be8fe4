"""The reader's parts (capjudge.reading): view, numbers, structure, vocabulary, decisions.

Hand-worked cases for each module; the corpora (test_judge_answers, test_blind_corpus) test
the whole reader on realistic answers.
"""

from __future__ import annotations

import pytest

from capjudge.methods.gveval import accr_slots, score_slot
from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.protocol import ScoreSlot
from capjudge.reading.locate import Located, Unreadable, locate
from capjudge.reading.masking import mask_negated
from capjudge.reading.numbers import cjk_value, number_at, word_value
from capjudge.reading.structure import json_fields, table_fields
from capjudge.reading.view import answer_view, normalise
from capjudge.reading.vocabulary import matches

GV, VIS, HE = score_slot(), visce2_slot(), he_slot("correctness")
ACCURACY = accr_slots()[0]

# -- view ---------------------------------------------------------------------------------------


def test_normalise_maps_every_character_back_to_the_original() -> None:
    text = "Ｓｃｏｒｅ：８\u200b５　½"
    plain, index = normalise(text)
    assert plain == "Score:85 ½"
    assert len(index) == len(plain) + 1 and index[-1] == len(text)
    assert text[index[plain.index("8")]] == "８" and text[index[plain.index("5")]] == "５"


def test_any_scripts_decimal_digits_are_ascii() -> None:
    assert normalise("٨٥ / ८५ / ๘๕")[0] == "85 / 85 / 85"


@pytest.mark.parametrize("text, cut, kept", [
    ("<think>maybe 50</think>\n45", False, "45"),
    ("<think>50... no, 45", True, ""),
    ("drafting 50 here</think>\nFinal: 45", False, "Final: 45"),
    ("<|begin_of_thought|>70<|end_of_thought|>80", False, "80"),
    ("<reasoning>3</reasoning><answer>4</answer>", False, "4"),
    ("\u25c1think\u25b770\u25c1/think\u25b785", False, "85"),
])
def test_reasoning_is_never_the_answer(text: str, cut: bool, kept: str) -> None:
    view = answer_view(text)
    assert view.reasoning_cut is cut
    assert view.text.strip() == kept
    assert len(view.text) == len(view.index) - 1


# -- numbers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("words, value", [("seventy-five", 75), ("seventy five", 75),
                                          ("four", 4), ("a hundred", 100), ("zero", 0),
                                          ("nineteen", 19), ("two three", 5)])
def test_number_words(words: str, value: int) -> None:
    assert word_value(words) == value


@pytest.mark.parametrize("numeral, value", [("八十五", 85), ("一百", 100), ("十", 10), ("四", 4),
                                            ("两", 2), ("八五", None), ("十二", 12)])
def test_cjk_numerals(numeral: str, value: int | None) -> None:
    assert cjk_value(numeral) == value


@pytest.mark.parametrize("text, value, end", [("85.5$", 85.5, 4), ("2 1/2 - ok", 2.5, 5),
                                              ("2½", 2.5, 2), ("4\n1/2", 4.0, 1),
                                              ("-3 points", -3.0, 2)])
def test_numbers_are_read_whole(text: str, value: float, end: int) -> None:
    n = number_at(text, 0)
    assert n is not None and n.value == pytest.approx(value) and n.end == end


# -- structure ----------------------------------------------------------------------------------


def test_json_fields_keep_their_offsets_and_paths() -> None:
    text = 'Here: ```json\n{"a": {"score": "88", "why": "ok"}, \'b\': [1, 2,],}\n```'
    fields = {f.path: f for f in json_fields(text)}
    assert text[fields[("a", "score")].start: fields[("a", "score")].end] == "88"
    assert fields[("b", "[1]")].value == "2"
    assert not json_fields("a set {x} in prose")


def test_table_fields_are_named_by_row_and_column() -> None:
    text = "| Metric | Score |\n|---|---|\n| Accuracy | 70 |\n| Relevance | **90** |\n"
    cells = {f.path: f.value for f in table_fields(text)}
    assert cells[("Accuracy", "Score")] == "70" and cells[("Relevance", "Score")] == "**90**"


# -- vocabulary ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name, slot, rank", [
    ("accuracy", ACCURACY, 2), ("Accuracy score", ACCURACY, 2), ("准确性", ACCURACY, 2),
    ("score", ACCURACY, 0), ("overall", ACCURACY, 0), ("final_score", GV, 2),
    ("rating", HE, 1), ("correctness", HE, 2), ("score_max", GV, 0), ("reason", VIS, 0)])
def test_names_of_a_slot(name: str, slot: ScoreSlot, rank: int) -> None:
    assert matches(name, slot) == rank


# -- masking ------------------------------------------------------------------------------------


def test_rejected_alternatives_and_bounds_are_masked() -> None:
    text = "I would not rate it 5; at least 80; not perfect, 4; rather than 3, a 2."
    masked = mask_negated(text)
    assert "5" not in masked and "80" not in masked and "3" not in masked
    assert "4" in masked and "2" in masked and len(masked) == len(text)


# -- locate: the decisions ----------------------------------------------------------------------


@pytest.mark.parametrize("text, slot, value", [
    ('{"evaluation": {"final_score": "88"}}', GV, 88),
    ("| Criterion | Score |\n|---|---|\n| Accuracy | 70 |", ACCURACY, 70),
    ('{"scores": [{"criterion": "Accuracy", "score": 80}], "overall": 70}', ACCURACY, 80),
    ("**Final Answer**\n\n\\[\n\\boxed{85}\n\\]", GV, 85),
    ("最终得分：$73$", GV, 73), ("Puntuación final: $72$", GV, 72), ("准确性：$80$", ACCURACY, 80),
    ("The final score is seventy-five.", GV, 75), ("I'd give it a four.", HE, 4),
    ("最终得分：八十五分", GV, 85), ("Final verdict — 57", GV, 57), ("85", GV, 85),
    ("7/10 - equivalently 70 out of 100.", VIS, 70),
    ("Initial rating: 70.\nOn a closer look, no.\nFinal rating: 50", VIS, 50),
    ("The final score is $70$. Re-reading, the final score is $75$.", GV, 75),
    ("I would not rate it 5; I give it 3.", HE, 3),
    ("<think>Maybe 50? Say 45.</think>\n\n45", VIS, 45),
    ("I'd rate it a solid eighty: the dog is right.", VIS, 80),
    ("Accuracy: One object is wrong.\nAccuracy: $80$", ACCURACY, 80),
])
def test_verdicts_are_read_from_structure_labels_and_words(text: str, slot: ScoreSlot,
                                                           value: int) -> None:
    found = locate(text, slot)
    assert isinstance(found, Located), found
    assert found.value == value and found.how


@pytest.mark.parametrize("text, slot, why", [
    ("The final score is $70$. The final score is $85$.", GV, "2 different values"),
    ("the final score is $60$ or $65$.", GV, "range or a hedge"),
    ("This is either a 3 or a 4.", HE, "range or a hedge"),
    ("I'd rate it somewhere between 60 and 70.", VIS, "range or a hedge"),
    ("2 1/2 - mostly right", HE, "mixed number"),
    ("2 1/2. The setting is right.", HE, "mixed number"),
    ("**8**/10 - decent", VIS, "another scale"),
    ("seven out of ten", VIS, "another scale"),
    ("70\n75\n70\n75", VIS, "2 different values"),
    ("<think>There are 4 people. I'd think", VIS, "reasoning cut off"),
    ("The final score is $8", GV, "may be unfinished"),
])
def test_the_reader_abstains_when_nobody_could_tell(text: str, slot: ScoreSlot,
                                                    why: str) -> None:
    found = locate(text, slot)
    assert isinstance(found, Unreadable) and why in found.reason, found


def test_a_number_ending_a_cut_answer_is_unfinished() -> None:
    assert isinstance(locate("45", VIS), Located)
    found = locate("45", VIS, truncated=True)
    assert isinstance(found, Unreadable) and "cut at max_tokens" in found.reason


def test_located_offsets_are_the_originals() -> None:
    text = "<think>70</think>\nＦｉｎａｌ ｓｃｏｒｅ： $８\u200b５$"
    found = locate(text, GV)
    assert isinstance(found, Located) and found.value == 85
    assert text[found.start] == "８" and text[found.digits_end - 1] == "５"


def test_rubric_level_names_are_read_only_when_no_number_is_written() -> None:
    slot = ScoreSlot("correctness", 1, 5, anchor="", position="first", forced_prefix="",
                     levels=(("Very Low Correctness", 1), ("Low Correctness", 2),
                             ("Moderate Correctness", 3), ("High Correctness", 4),
                             ("Extremely High Correctness", 5)))
    found = locate("**Extremely High Correctness.** Everything is right.", slot)
    assert isinstance(found, Located) and found.value == 5
    found = locate("High Correctness or Moderate Correctness, hard to say.", slot)
    assert isinstance(found, Unreadable)
