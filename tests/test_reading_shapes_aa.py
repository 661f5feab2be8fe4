"""Verdict shapes of reading rules 28 (issue 40, corpus AA): what the number is about.

A number can be a real score, clearly written, of something other than the candidate: a frame
or a sentence of it, half of the picture, the picture's sharpness, the visual context, the
judge's own description, a reference, the previous item, a caption the judge would get "if"
the candidate said otherwise, or a stand-in written so the pipeline can go on. Each class with
its near misses (the caption's own verdict beside such a number is still read).
"""

from __future__ import annotations

import pytest
from reading_probe import value as _value
from reading_probe import why as _why

from capjudge.methods.cap3d import points_slots
from capjudge.methods.gveval import accr_slots, score_slot
from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.reading import read_points_slot
from capjudge.reading.contract import rates_another
from capjudge.reading.numbers import number_at

VC = visce2_slot()
GV = score_slot()
HE = he_slot("correctness")


def _accr(answer: str, quotes: tuple[str, ...] = ()) -> list[float | None]:
    from dataclasses import replace
    return [_value(answer, replace(s, quotes=quotes) if quotes else s) for s in accr_slots()]


@pytest.mark.parametrize(("answer", "slot", "want"), [
    # a part's or the picture's value first, then the caption's
    ("Picture sharpness: 55 (slightly out of focus). Correctness of the caption: 4. The "
     "drummers are right.", HE, 4),
    ("The photo is a little soft (roughly 50/100 in sharpness), but the caption fits it well: "
     "85.", VC, 85),
    ("My description: \"A girl in a red coat flying a kite on a hill\" (5/5). The candidate: "
     "3/5, it misses the girl.", HE, 3),
    ("The visual context is complete: 90. Caption: 55, it calls the tablet a laptop.", VC, 55),
    ("First sentence: 5, the woman and the dog are right.\nSecond sentence: 2, the coat is "
     "green.\nOverall: 3", HE, 3),
    # near misses: the caption's own clause, a count, a plain verdict
    ("Frame 2 matches the caption well: 80. The juggler is there.", VC, 80),
    ("85\nThe image quality is poor, but the caption names the dog and the ball.", VC, 85),
    ("4\nBoth halves of the picture are described: the slide and the bench.", HE, 4),
])
def test_the_value_of_another_thing_is_skipped(answer: str, slot: object, want: float) -> None:
    assert _value(answer, slot) == want  # type: ignore[arg-type]


@pytest.mark.parametrize(("answer", "slot"), [
    ("Opening sentence: 5. Closing sentence: 1.", HE),
    ("Left half (the children on the slide): 4\nRight half (an empty bench, not parents): 1",
     HE),
    ("The extracted visual context is reliable (90/100): it lists the surfer and the board.",
     VC),
    ("Here is a more detailed description: a boy in a red jacket builds a snowman with a blue "
     "scarf beside a fence.\n\nThis description scores 100 for appropriateness.", VC),
])
def test_only_other_things_rated_abstains(answer: str, slot: object) -> None:
    assert "scores something else" in _why(answer, slot)  # type: ignore[arg-type]


def test_rates_another_names_the_label() -> None:
    text = "Frame 3 (the crowd claps): 70"
    assert rates_another(text, number_at(text, text.index("70"))) == "Frame 3"  # type: ignore[arg-type]
    text = "The caption in frame 3 is right: 70"
    assert rates_another(text, number_at(text, text.index("70"))) is None  # type: ignore[arg-type]


def test_a_label_with_its_own_value_does_not_say_what_the_next_verdict_rates() -> None:
    assert _value("Image clarity: 60\nRating: 75\nThe caption misses the bridge.", VC) == 75
    # without its own value the sentence before still says what is rated
    assert "scores something else" in _why(
        "The image quality is what I look at here.\nRating: 75", VC)


_FRAMES = ("Frame 1 (he opens the bonnet):\nAccuracy: $90$ Completeness: $80$ Conciseness: "
           "$85$ Relevance: $95$\n\nFrame 2 (he checks the oil):\nAccuracy: $70$ Completeness: "
           "$60$ Conciseness: $85$ Relevance: $90$\n\nWhole video (final):\nAccuracy: $80$\n"
           "Completeness: $60$\nConciseness: $85$\nRelevance: $90$")


@pytest.mark.parametrize(("answer", "want"), [
    (_FRAMES, [80, 60, 85, 90]),
    ("For calibration, Reference 2 would score:\nAccuracy: $95$\nCompleteness: $90$\n"
     "Conciseness: $85$\nRelevance: $95$\n\nThe caption misses the second rower.\n\n"
     "Generated caption:\nAccuracy: $60$\nCompleteness: $50$\nConciseness: $85$\n"
     "Relevance: $80$", [60, 50, 85, 80]),
    ("As written:\nAccuracy: $40$\nCompleteness: $70$\nConciseness: $90$\nRelevance: $60$\n\n"
     "If \"cat\" were corrected to \"dog\":\nAccuracy: $90$\nCompleteness: $70$\n"
     "Conciseness: $90$\nRelevance: $90$", [40, 70, 90, 60]),
    ("Previous caption, for comparison: Accuracy $60$ / Completeness $50$ / Conciseness $80$ "
     "/ Relevance $70$.\n\nThis one fixes the colour.\n\nAccuracy: $85$\nCompleteness: $75$\n"
     "Conciseness: $80$\nRelevance: $90$", [85, 75, 80, 90]),
    ('{"candidate": {"accuracy": 65, "completeness": 55, "conciseness": 80, "relevance": 75},'
     ' "reference_1": {"accuracy": 95, "completeness": 90, "conciseness": 85, "relevance": 95}}',
     [65, 55, 80, 75]),
])
def test_accr_blocks_of_other_things_are_left_out(answer: str, want: list[float]) -> None:
    assert _accr(answer) == want


@pytest.mark.parametrize("answer", [
    ("The reference caption is clear and complete. Here are the scores for the reference "
     "caption:\n\nAccuracy: $95$\nCompleteness: $90$\nConciseness: $90$\nRelevance: $95$"),
    ('{"reference_1": {"accuracy": 95, "completeness": 90, "conciseness": 85, '
     '"relevance": 95}}'),
    ("Frame 1:\nAccuracy: $90$\nCompleteness: $80$\nConciseness: $85$\nRelevance: $95$\n\n"
     "Frame 2:\nAccuracy: $70$\nCompleteness: $60$\nConciseness: $80$\nRelevance: $90$"),
    # a quotation under a part's heading is no "and" over every part
    ('**Sentence 1: "A man walks his dog."**\nAccuracy: $90$\nCompleteness: $60$\n'
     'Conciseness: $95$\nRelevance: $90$\n\n**Sentence 2: "The sky is clear and blue."**\n'
     "Accuracy: $40$\nCompleteness: $20$\nConciseness: $90$\nRelevance: $50$"),
])
def test_accr_blocks_of_other_things_only_abstain(answer: str) -> None:
    assert _accr(answer) == [None] * 4


def test_a_condition_heading_a_block_of_its_own_is_no_condition_on_the_verdict() -> None:
    assert _accr("Accuracy: $40$\nCompleteness: $70$\nConciseness: $90$\nRelevance: $60$\n\n"
                 "If the caption named the breed:\nAccuracy: $90$") == [40, 70, 90, 60]
    # a condition in the verdict's sentence, or after a blank line in prose, still is one
    assert "conditional" in _why("Rating: 70 if the dog is a terrier.", VC)
    assert "conditional" in _why("60\n\nif the animal is a wolf; if it is a dog, 85.", VC)


def test_a_reference_quoted_as_the_generated_caption_abstains() -> None:
    refs = ("A man in a blue shirt is flying a kite on the beach", "Man flying a kite at the "
            "seashore")
    from dataclasses import replace
    slot = replace(GV, quotes=("A person standing on the sand.", *refs))
    answer = ('The generated caption "A man in a blue shirt is flying a kite on the beach" '
              "matches the other references very well.\n\nThe final score is $88$.")
    assert "not the candidate" in _why(answer, slot)
    # the candidate quoted as the generated caption beside the references is its verdict
    answer = ('The generated caption "A person standing on the sand" misses the kite that the '
              "references mention.\n\nThe final score is $30$.")
    assert _value(answer, slot) == 30


@pytest.mark.parametrize("answer", [
    ("I could not see any picture, so I use a neutral default; this is not an assessment of "
     "the caption.\n\nThe final score is $50$."),
    "The final score is $50$ (a neutral value so the pipeline can continue).",
])
def test_a_stand_in_verdict_abstains(answer: str) -> None:
    assert "stand-in" in _why(answer)


def test_a_plain_default_word_keeps_its_verdict() -> None:
    assert _value("The caption is accurate by default standards. The final score is $80$.") == 80


_LAPTOP = "A silver laptop with a black keyboard."


@pytest.mark.parametrize("answer", [
    ("No views were received, so I cannot evaluate the caption. Placeholder values so the "
     "format is complete:\nCorrectness Score (C. Score): 0\nHallucination Score (H. Score): 0"),
    ("Correctness Score (C. Score): 0\nHallucination Score (H. Score): 0\n(These counts are "
     "placeholders: the render did not load.)"),
])
def test_cap3d_stand_in_counts_abstain(answer: str) -> None:
    for s in points_slots(_LAPTOP):
        assert read_points_slot(answer, s).status == "parse_failure"


def test_cap3d_counts_of_an_improved_caption_are_left_out() -> None:
    answer = ("Improved caption: \"A grey laptop with a backlit black keyboard.\"\n"
              "Improved caption — C. Score: 5, H. Score: 0\n\nOriginal caption:\n"
              "Correctness Score (C. Score): 3\nHallucination Score (H. Score): 1")
    assert [read_points_slot(answer, s).printed for s in points_slots(_LAPTOP)] == [3, 1]


def test_cap3d_placeholder_objects_are_counted() -> None:
    answer = ("Correctness Score (C. Score): 2\nHallucination Score (H. Score): 1\nThe grey "
              "placeholder cube under the laptop is not in the caption.")
    assert [read_points_slot(answer, s).printed for s in points_slots(_LAPTOP)] == [2, 1]


def test_refusing_to_rate_higher_is_no_refusal() -> None:
    assert _value("I cannot rate the caption higher than 60 because the leash is missing. The "
                  "final score is $60$.") == 60
    assert "declined" in _why("The picture did not load, so I cannot rate the caption. The "
                              "final score is $0$.")


@pytest.mark.parametrize(("answer", "slot", "want"), [
    # the label only opens a sentence that goes on to the caption's verdict
    ("Frame 4 shows the dog drinking, which is covered, so the final score is $85$.", GV, 85),
    ("The visual context and the image both confirm the man and the dog, so I rate it 90.", VC,
     90),
    ("My own description would say the same: 90\nThe caption names all 4 objects.", VC, 90),
    ("Visual context agrees: 85\nThe caption misses 2 of the 6 objects.", VC, 85),
    ("90 for clarity and accuracy: the caption names every object.", VC, 90),
    # a heading over every part, a premise, a generic heading over part notes
    ("Frame 1 to Frame 4 combined:\nAccuracy: $90$\nCompleteness: $70$\nConciseness: $95$\n"
     "Relevance: $100$", accr_slots()[0], 90),
    ("If I weigh the references and the image equally:\n\nAccuracy: $90$\nCompleteness: $70$\n"
     "Conciseness: $95$\nRelevance: $100$", accr_slots()[0], 90),
    ("Frame 1 (beginning):\nThe man and the dog enter.\nFrame 4 (final frame):\nThe dog drinks, "
     "which is described.\nThe final score is $90$.", GV, 90),
])
def test_words_for_parts_in_a_verdict_of_the_caption(answer: str, slot: object,
                                                    want: float) -> None:
    assert _value(answer, slot) == want  # type: ignore[arg-type]


def test_json_objects_named_for_another_thing() -> None:
    assert _value('{"reference_1": {"score": 100}, "candidate": {"score": 80}}') == 80
    assert _value('{"frames": [{"id": 1, "score": 90}, {"id": 4, "score": 70}], '
                  '"final_score": 80}') == 80
    assert "reference_1" in _why('{"reference_1": {"score": 100}}')


@pytest.mark.parametrize(("answer", "slot", "want"), [
    # what the review probes found the first cuts took for another thing's value
    ("For this picture 88 - a perfect 100 would need the tabby pattern.", VC, 88),
    ("The visual context is fully covered: 90", VC, 90),
    ("Rating: 70 for lighting: the caption calls it night, but it is dusk.", VC, 70),
    ("At first I thought I cannot evaluate the caption; then the image loaded. 85", VC, 85),
    ("Here is my description: a tabby cat asleep on a sill.\nThis description and the one "
     "provided differ only in the colour, so I give it 4.", HE, 4),
    ('{"human": {"score": 85, "justification": "as a human would judge"}}', GV, 85),
    ("The caption is brief and on topic.\n\nIf 'grey' were read as 'tabby', nothing would "
     "change:\nAccuracy: $90$", accr_slots()[0], 90),
])
def test_near_misses_found_by_review(answer: str, slot: object, want: float) -> None:
    assert _value(answer, slot) == want  # type: ignore[arg-type]


def test_a_caption_count_is_no_caption_verdict() -> None:
    # "Caption word count:" names the caption but rates nothing: never the count (two labelled
    # things rated, as with rules 27)
    assert "rates other things" in _why("My own description is nearly the same: 85\nCaption "
                                        "word count: 11", VC)


def test_cap3d_quoted_placeholder_words_are_objects() -> None:
    answer = ("Correctness Score (C. Score): 2\nHallucination Score (H. Score): 0\nExplanation:\n"
              "- 'scoreboard' (1): a black panel with digits.\n- 'placeholder numbers' (1): every "
              "digit reads 0.")
    slots = points_slots("A scoreboard showing placeholder numbers.")
    assert [read_points_slot(answer, s).printed for s in slots] == [2, 0]
