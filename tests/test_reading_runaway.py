"""What decoders and serving paths do to an answer (corpus AJ, reading rules 36).

A judge run with ``ignore_eos`` or ``min_tokens`` runs on into another item
(:mod:`capjudge.reading.runaway`); sampling splits or doubles digits; guided decoding echoes a
schema's template or writes a key twice; an adapter states its verdict in two formats.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from reading_probe import value, why

from capjudge.methods.cap3d import points_slots
from capjudge.methods.gveval import accr_slots
from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.reading import read_points_slot
from capjudge.reading.locate import Located, locate
from capjudge.reading.points import read_ch
from capjudge.reading.runaway import runaway_start
from capjudge.reading.structure import json_fields

VC = visce2_slot()
# (The levels are the prompt's: HarmonicEval reads them from the rubric it sends.)
FLUENCY = replace(he_slot("fluency"), levels=(
    ("Disfluent", 1), ("Somewhat disfluent", 2), ("Moderately fluent", 3), ("Fluent", 4),
    ("Very fluent", 5)))
ACCURACY = accr_slots()[0]
CANDIDATE = "A brown dog catches a frisbee in a park."


@pytest.mark.parametrize(("text", "cut_at"), [
    # Another caption after the verdict: what follows is another item's.
    ("Good.\n\nThe final score is $87$.\n\nGenerated caption:\nTwo cats sleep on a sofa.\n"
     "The final score is $5$.", "Generated caption:"),
    ("74\n\nCandidate caption: A surfer riding a wave.\n90", "Candidate caption:"),
    # The prompt's own text restated, with its example.
    ("Accurate.\n\nThe final score is $66$.\n\nResponse Format:\nYou should ... like this: "
     "The final score is $50$.", "Response Format:"),
    ("The final score is $58$.\n\nYou will be given one sentence of visual caption ...",
     "You will be given"),
])
def test_run_on_into_another_item_starts_at_its_header(text: str, cut_at: str) -> None:
    assert runaway_start(text, CANDIDATE) == text.index(cut_at)


@pytest.mark.parametrize("text", [
    # The candidate again: the same item rated twice, left for the rules to weigh.
    "55\nCandidate caption: A brown dog catches a frisbee in a park.\n60",
    # A header before any verdict restates what the answer judges.
    "Generated caption: A cat on a mat.\nIt names the cat. The final score is $40$.",
    "Reference captions: a dog; a frisbee.\nThe caption matches. The final score is $80$.",
    # No header at all.
    "The final score is $80$.\n\nThe frisbee is red.",
])
def test_no_run_on(text: str) -> None:
    assert runaway_start(text, CANDIDATE) is None


def test_a_caption_header_is_no_run_on_when_the_candidate_is_unknown() -> None:
    assert runaway_start("The final score is $80$.\nCaption: a cat.\n$20$", "") is None


@pytest.mark.parametrize(("text", "slot", "expected"), [
    # The candidate's reading is the one before the run-on (the probe's candidate is "A dog
    # runs on the beach." in reading_probe's G-VEval slot: no quotes, so only the prompt's
    # headers cut).
    ("The final score is $66$.\n\nResponse Format:\nend with a sentence like this: The final "
     "score is $50$.", None, 66.0),
    ("74\n\nReference captions:\nA dog.\n\n90", VC, 74.0),
])
def test_reading_stops_where_the_answer_runs_on(text: str, slot: object, expected: float) -> None:
    assert (value(text) if slot is None else value(text, slot)) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "slot"), [
    # Digits a stray space split or a stream doubled: 8, 5 or 85.
    ("The caption is accurate.\n\nThe final score is $8 5$.", None),
    ("Score: 8 5\n", None),
    ("8 5 — mostly right.", VC),
    # A JSON key written twice with two values (last-wins is a parser's, not the judge's).
    ('{"score": 70, "reasoning": "on reflection the omission is minor", "score": 75}', None),
    # The schema's template echoed by guided decoding: its numbers are the example's.
    ('{"reasoning": "string", "score": 50}', None),
    ('{"rating": 50, "explanation": "string"}', VC),
    ('{"reasoning": "<your reasoning here>", "score": 80}', None),
    # Two statements of the verdict, the first not marked as a draft.
    ("The skateboarder matches.\n\nScore: 90\n\nThe final score is $91$.", None),
    ("**Rating:** 85\nThe caption misses the ball. The final score is $80$.", None),
    ("Verdict: 70\nThe caption misses the ball. The final score is $75$.", None),
    # ... or a second bare statement after the asked sentence.
    ("The caption misses the ball. The final score is $91$.\nScore: 90", None),
    # A degree word that puts the level on the other side of the rating.
    ("5 — totally disfluent.", FLUENCY),
    ("5 — barely fluent.", FLUENCY),
])
def test_damaged_or_doubled_verdicts_abstain(text: str, slot: object) -> None:
    assert (why(text) if slot is None else why(text, slot))  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "slot", "expected"), [
    # Not split: a count with its noun.
    ("I counted 4 3-star reviews in the picture. The final score is $70$.", None, 70.0),
    # A JSON object whose reasoning is the judge's own words.
    ('{"reasoning": "Good caption, names the dog.", "score": 50}', None, 50.0),
    ('{"score": 70, "score": 70}', None, 70.0),
    # A message part's "type": "text" names a kind, not a placeholder.
    ('{"type": "text", "text": "Accurate. The final score is $72$."}', None, 72.0),
    # A draft marked as one, or revised before the final value.
    ("Initial score: 70\nOn closer look the dog is brown.\nFinal score: 75", None, 75.0),
    ("Score: 70. Wait, the dog is brown. Final score: 75", None, 75.0),
    ("Score: 80\n\nThe final score is $80$.", None, 80.0),
    ("The caption misses the ball. The final score is $80$.\nScore: 80", None, 80.0),
    ("Draft:\nScore: 90\n\nFinal:\nThe caption misses the ball. The final score is $80$.",
     None, 80.0),
    ("Sample 1 score: 70\nThe caption misses the ball. The final score is $80$.", None, 80.0),
    # A loop repeating the rating is no split ("5 5" alone may be 55).
    ("5 5 5 5 5 5 5 5", FLUENCY, 5.0),
    # The schema's template quoted beside a verdict: its example does not compete.
    ('Expected output: {"reasoning": "string", "score": 0}\nThe caption misses the ball. '
     "The final score is $80$.", None, 80.0),
    # The scale in brackets is the number's own, and its conversion the verdict.
    ("Rating: 4 (out of 5), i.e. 80 out of 100.", VC, 80.0),
    # A degree word before a level's name moves it: "perfectly fluent" is Fluent (4) or more.
    ("5 — perfectly fluent.", FLUENCY, 5.0),
    ("4 — mostly fluent.", FLUENCY, 4.0),
    ("1 — totally disfluent.", FLUENCY, 1.0),
    ("3 — moderately fluent", FLUENCY, 3.0),
])
def test_undamaged_verdicts_read(text: str, slot: object, expected: float) -> None:
    assert (value(text) if slot is None else value(text, slot)) == expected  # type: ignore[arg-type]


def test_sentencepiece_marks_are_spaces() -> None:
    assert value("Accuracy:\u2581$75$", ACCURACY) == 75.0


@pytest.mark.parametrize(("text", "correctness", "hallucination"), [
    # Split or doubled counts.
    ("Correctness Score (C. Score): 5 6\nHallucination Score (H. Score): 1\n", None, 1.0),
    ("Correctness Score (C. Score): 3\nHallucination Score (H. Score): 1 2\n", 3.0, None),
    # A short tally before the prompt's block that says otherwise.
    ("C: 4, H: 1\n\nCorrectness Score (C. Score): 5\nHallucination Score (H. Score): 1\n",
     None, 1.0),
    # The same tally, or one the block corrects ("Edit:"), stands.
    ("C: 5, H: 1\n\nCorrectness Score (C. Score): 5\nHallucination Score (H. Score): 1\n",
     5.0, 1.0),
    ("C: 4, H: 1\nEdit: recounted.\nCorrectness Score (C. Score): 5\n"
     "Hallucination Score (H. Score): 1\n", 5.0, 1.0),
    # A mixed number is one count.
    ("Correctness Score (C. Score): 3 1/2\nHallucination Score (H. Score): 1\n", 3.5, 1.0),
])
def test_cap3d_counts_split_or_told_twice(text: str, correctness: float | None,
                                          hallucination: float | None) -> None:
    read = read_ch(text)
    assert (read["correctness"][0], read["hallucination"][0]) == (correctness, hallucination)


def test_cap3d_ignore_eos_block_for_an_invented_caption_is_not_read() -> None:
    text = ("Correctness Score (C. Score): 3\nHallucination Score (H. Score): 0\n"
            "Precision Score: 100%\n\nModel-generated caption: \"A green teapot with a lid.\"\n"
            "Correctness Score (C. Score): 1\nHallucination Score (H. Score): 3\n")
    read = read_ch(text, ("A blue ceramic mug with a handle.",))
    assert (read["correctness"][0], read["hallucination"][0]) == (3.0, 0.0)


@pytest.mark.parametrize(("hallucination", "precision", "read"), [
    # 80 % follows from 4 and 1: the "11" is a digit written twice (a stream's doubled chunk),
    # and a continuation of the answer would only copy it.
    ("11", "80%", None),
    # 75 % follows from neither: the judge's arithmetic is off; the counts stand, off-contract.
    ("1", "75%", "unconfirmed"),
    ("1", "80%", "on-contract"),
    ("1", "80.0%", "on-contract"),
    ("11", "27%", "on-contract"),  # rounded to a whole per cent
])
def test_cap3d_counts_their_own_precision_contradicts(hallucination: str, precision: str,
                                                     read: str | None) -> None:
    text = ("Correctness Score (C. Score): 4\n"
            f"Hallucination Score (H. Score): {hallucination}\n"
            f"Precision Score: {precision}\nExplanation:\nIncorrect: red.")
    for slot in points_slots("A wooden chair with a red cushion."):
        result = read_points_slot(text, slot)
        if read is None:
            assert result.status == "parse_failure" and "written twice" in (result.reason or "")
        else:
            assert (result.printed, result.confirmation) == (
                4.0 if slot.name == "correctness" else float(hallucination), read)


def test_the_same_caption_rated_again_after_the_verdict_leaves_it_open() -> None:
    text = ("55\nOn a precise scale from 0 to 100, rate whether the candidate caption is "
            "appropriate for the given image. Candidate caption: A brown dog catches a frisbee "
            "in a park. Your rating must be a single digit between 0 and 100. 60")
    slot = replace(VC, quotes=(CANDIDATE,))
    assert "rates the same caption again" in why(text, slot)
    assert value(text.replace(" 60", " 55"), slot) == 55.0


@pytest.mark.parametrize(("second", "expected"), [
    ("Looking again, the stairs are fewer than five.\n\nThe final score is $60$.", None),
    ("Looking again, I stand by it.\n\nThe final score is $80$.", 80.0),
    ("The stairs are stone.", 80.0),  # no verdict in the second turn: the first stands
])
def test_a_second_turn_of_the_judges_own_is_weighed_with_the_first(
        second: str, expected: float | None) -> None:
    text = ("The caption covers the skateboarder.\n\nThe final score is $80$.<end_of_turn>\n"
            f"<start_of_turn>model\n{second}<end_of_turn>")
    assert value(text) == expected


def test_an_invented_user_turn_still_ends_the_answer() -> None:
    assert value("The final score is $80$.<|im_end|>\n<|im_start|>user\nAnd this one? "
                 "The final score is $20$.") == 80.0


@pytest.mark.parametrize(("text", "fields"), [
    # Guided JSON cut at max_tokens while padding: the fields a comma closed are complete.
    ('{"reasoning": "Accurate.", "score": 72,\n\n\n' + " " * 40,
     [(("reasoning",), "Accurate."), (("score",), "72")]),
    # The field being written when the cut came is not.
    ('{"reasoning": "Accurate.", "score": 7', [(("reasoning",), "Accurate.")]),
    # A syntax error with text after it is no JSON at all.
    ("a {85} b", []),
])
def test_json_cut_inside_its_object_keeps_the_closed_fields(
        text: str, fields: list[tuple[tuple[str, ...], str]]) -> None:
    assert [(f.path, f.value) for f in json_fields(text)] == fields


def test_a_cut_after_an_invented_turn_leaves_the_number_before_it_finished() -> None:
    found = locate("70 [INST] Why? [/INST] Because the caption says", VC, truncated=True)
    assert isinstance(found, Located) and found.value == 70.0
    assert not isinstance(locate("The rating is 70", VC, truncated=True), Located)
