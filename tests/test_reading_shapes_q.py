"""Verdict shapes of reading rules 17 (issue 40, corpus Q): classes with near misses.

A value under a qualifier with another under its own ("$50$ (strict) / $70$ (lenient)"); a
later value the answer prefers to its verdict ("a neutral 50 may be the safer rating"); the
verdict restated as another value of its own scale ("7 … corresponds to 70"); cap3d: a label's
value ended by the other label on its line, a count hedged again after the lines, points of
penalised content counted beside H; a captured mass equal to ``min_mass`` up to the rounding
of log-probabilities.
"""

from __future__ import annotations

import math

import pytest
from reading_probe import value as _value
from reading_probe import why as _why

from capjudge.methods.gveval import accr_slots, score_slot
from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.protocol import JudgeResponse, SlotResult, apply_min_mass, below_min_mass
from capjudge.reading import read_ch

GV, VIS, HE = score_slot(), visce2_slot(), he_slot("correctness")
ACC = accr_slots()[0]


# -- a value under a qualifier, then another under its own --------------------------------------


@pytest.mark.parametrize("text", [
    "Accuracy: $50$ (strict) / $70$ (lenient, if the people count)",
    "Accuracy: $50$ (strict reading), $70$ (lenient reading)",
    "Accuracy: $50$ (strict) or $70$ (lenient)",
    "Accuracy: $50$ (with the reference) | $65$ (without)",
])
def test_two_qualified_values_on_one_line_abstain(text: str) -> None:
    assert "range or a hedge" in _why(text, ACC)


@pytest.mark.parametrize(("text", "want"), [
    ("Accuracy: $80$ (the colours are right)", 80),
    ("Accuracy: $80$ (out of 100)", 80),
    ("Accuracy: $80$ (high). The caption names every object.", 80),
])
def test_one_qualified_value_is_read(text: str, want: float) -> None:
    assert _value(text, ACC) == want


# -- another value offered as the better verdict ------------------------------------------------


@pytest.mark.parametrize(("text", "slot"), [
    ("I'd give it 85. However, since the image is small, a neutral 50 may be the safer "
     "rating.", VIS),
    ("The final score is $80$. Perhaps 65 would be fairer given the missing dog.", GV),
    ("4. On reflection a fairer score would be 3, since the bus colour is wrong.", HE),
    ("Rating: 70. That said, 60 might be more appropriate for a caption this vague.", VIS),
])
def test_a_later_value_preferred_to_the_verdict_abstains(text: str, slot) -> None:  # noqa: ANN001
    assert "better one" in _why(text, slot)


@pytest.mark.parametrize(("text", "slot", "want"), [
    # the same value, or a value on no scale of the slot's, or no preference
    ("I'd give it 85; 85 may be the safer rating anyway.", VIS, 85),
    ("4. A 5 would be too generous: the bus colour is wrong.", HE, 4),
    ("The final score is $80$. It would be better with the dog named; 2 dogs are shown.",
     GV, 80),
])
def test_no_preferred_rival_leaves_the_verdict(text: str, slot, want: float) -> None:  # noqa: ANN001
    assert _value(text, slot) == want


# -- the verdict restated as another value of its own scale -------------------------------------


def test_a_verdict_restated_on_its_own_scale_abstains() -> None:
    text = ("7 — reading your instruction literally as a single digit. On the 0–100 scale "
            "that corresponds to 70.")
    assert "restates its verdict" in _why(text, VIS)
    assert "restates its verdict" in _why("Score: 8, which translates to 80.", VIS)


def test_a_restatement_on_another_scale_is_no_restatement_of_the_value() -> None:
    # (these abstain for the other scale named, as before rules 17, not as a restatement)
    for text, slot in [("4 — that corresponds to 80 on a 0-100 scale. It misses the hikers.",
                        HE), ("Rating: 80, which corresponds to about 4 on a 1-5 scale.", VIS)]:
        assert "another scale" in _why(text, slot)
    assert _value("Rating: 80, equivalent to 80 percent.", VIS) == 80
    assert _value("Rating: 80. The caption corresponds to the image well; 2 dogs are shown.",
                  VIS) == 80


# -- cap3d ---------------------------------------------------------------------------------------


def test_a_label_ends_at_the_other_label_on_its_line() -> None:
    text = ("Correctness Score (C. Score): 4\nHallucination Score (H. Score): 1\n\n"
            "Final review: to separate the captions more clearly I scale the counts: "
            "C. Score = 8, H. Score = 2 (precision unchanged at 80%).")
    assert read_ch(text) == {"correctness": (8.0, None), "hallucination": (2.0, None)}
    assert read_ch("C. Score = 3, H. Score = 1") == {"correctness": (3.0, None),
                                                     "hallucination": (1.0, None)}
    # a sum stated on the line keeps its total
    assert read_ch("C. Score: 1 + 1 + 1 = 3, H. Score: 0")["correctness"] == (3.0, None)


@pytest.mark.parametrize("review", [
    "Final review: C. Score might be 3 or 4, depending on whether 'vintage' counts.",
    "On reflection the correctness score could also be 5 if the dial counts.",
    "Final review: the C. Score is arguably 3.",
])
def test_a_count_hedged_after_the_lines_is_open(review: str) -> None:
    text = f"C. Score: 4\nH. Score: 1\nPrecision: 80%\n\n{review}"
    got = read_ch(text)
    assert got["correctness"][0] is None and "open again" in (got["correctness"][1] or "")
    assert got["hallucination"] == (1.0, None)


def test_a_review_that_keeps_the_counts_reads_them() -> None:
    text = ("C. Score: 4\nH. Score: 1\nPrecision: 80%\n\nFinal review: the counts stand; "
            "the caption might be improved by naming the antenna.")
    assert read_ch(text) == {"correctness": (4.0, None), "hallucination": (1.0, None)}


@pytest.mark.parametrize("line", [
    "Irrelevant-content penalty: 1", "Penalty for speculative content: 2",
    "- Unsupported claims deducted: 1"])
def test_points_counted_beside_h_leave_h_open(line: str) -> None:
    text = f"Correctness Score (C. Score): 3\nHallucination Score (H. Score): 1\n{line}\n"
    got = read_ch(text)
    assert got["correctness"] == (3.0, None)
    assert got["hallucination"][0] is None and "beside the hallucination" in (
        got["hallucination"][1] or "")


@pytest.mark.parametrize("line", ["Irrelevant-content penalty: 0", "Views checked: 4",
                                  "Omitted attributes: 2"])
def test_a_zero_penalty_or_another_count_leaves_h(line: str) -> None:
    text = f"Correctness Score (C. Score): 3\nHallucination Score (H. Score): 1\n{line}\n"
    assert read_ch(text) == {"correctness": (3.0, None), "hallucination": (1.0, None)}


# -- min_mass and the rounding of log-probabilities ---------------------------------------------


def test_a_mass_equal_to_min_mass_up_to_rounding_is_not_low() -> None:
    import math

    mass = math.exp(math.log(0.3)) + math.exp(math.log(0.2))  # 0.5 from rounded log-probs
    assert not below_min_mass(0.5 - 1e-9, 0.5) and not below_min_mass(mass, 0.5)
    assert below_min_mass(0.4999, 0.5)
    slot = SlotResult("score", [1, 2], [0.5, 0.5], 0.5 - 1e-9, "logprobs", "ok")
    response = apply_min_mass(JudgeResponse(status="ok", slots=[slot]), 0.5)
    assert response.slots[0].status == "ok"
    low = SlotResult("score", [1, 2], [0.5, 0.5], 0.49, "logprobs", "ok")
    assert apply_min_mass(JudgeResponse(status="ok", slots=[low]), 0.5).status == "low_mass"


# -- a judge's arithmetic: one home (capjudge.reading.arithmetic) --------------------------------


@pytest.mark.parametrize(("text", "gives"), [
    ("The final score is $100 - 15 - 10 = 80$.", "gives 75"),
    ("Score: 90 - 15 (wrong shirt colour) = 70", "gives 75"),
    ("Rating: 100, -10 for the jacket, -5 for the place = 80", "gives 85"),
])
def test_a_computation_its_steps_contradict_is_named_as_such(text: str, gives: str) -> None:
    reason = _why(text, GV) if text.startswith("The final") else _why(text, VIS)
    assert "the computation" in reason and gives in reason


@pytest.mark.parametrize(("text", "want"), [
    ("The final score is $100 - 15 - 10 = 75$.", 75),
    ("Score: 90 - 15 (wrong shirt colour) = 75", 75),
    ("The final score is $100 - 15 - 10$.", 75),
    ("The final score is $4/5 = 80$.", 80),
    ("The final score is $85$ (70 - 80 was my first range).", 85),
])
def test_a_computation_that_adds_up_reads_its_result(text: str, want: float) -> None:
    slot = VIS if text.startswith("Score:") else GV
    assert _value(text, slot) == want


def test_each_count_ends_at_the_next_field_of_its_line() -> None:
    # Corpus A's one-line answer: read 50 and 50 before rules 17 (the precision's "= 50"
    # taken as each count's stated total), which gave the right item score by chance.
    text = "C. Score = 2, H. Score = 2, Precision = 50%. Duck and yellow are correct."
    assert read_ch(text) == {"correctness": (2.0, None), "hallucination": (2.0, None)}
    assert read_ch("CS=3, HS=1, P=75%") == {"correctness": (3.0, None),
                                           "hallucination": (1.0, None)}
    assert read_ch("C. Score: 2 (tire = 1, black = 1), H. Score: 0")["correctness"] == (2.0, None)


# -- corpus R's classes (rules 18) ---------------------------------------------------------------


@pytest.mark.parametrize(("text", "slot"), [
    ("An error-severity assessment, where 0 means no problems and 100 means the caption is "
     "entirely wrong.\n\nOn this severity scale, the final score is $30$.", GV),
    ("Inappropriateness score (0 = perfectly appropriate, 100 = completely wrong): 20", VIS),
    ("Error level: 2 (1 = no errors, 5 = completely wrong)", HE),
    ("Lower is better here. The final score is $20$.", GV),
])
def test_a_scale_the_judge_turns_round_abstains(text: str, slot) -> None:  # noqa: ANN001
    assert "lower is better" in _why(text, slot) or "turns round" in _why(text, slot)


@pytest.mark.parametrize(("text", "slot", "want"), [
    # the scale restated the right way round, or a hypothetical inversion
    ("Where 0 means the caption is entirely wrong and 100 means flawless, the final score is "
     "$70$.", GV, 70),
    ("If 1 meant the best rating this would be a 4; on the scale given here, where 5 is best, "
     "my rating is 2.", HE, 2),
    ("4. (5 = no errors at all.) Only the umbrella's colour is wrong.", HE, 4),
])
def test_a_scale_the_right_way_round_leaves_the_verdict(text: str, slot, want: float  # noqa: ANN001
                                                         ) -> None:
    assert _value(text, slot) == want


@pytest.mark.parametrize(("text", "want"), [
    ("1  2  3  [4]  5\nThe caption is right about the boat, not the lake.", 4),
    ("\u2610 1  \u2610 2  \u2610 3  \u2611 4  \u2610 5\n\nHigh Correctness: mostly accurate.", 4),
    ("1 | 2 | **3** | 4 | 5\nHalf of the objects are right.", 3),
])
def test_the_one_value_marked_on_a_printed_scale_is_read(text: str, want: float) -> None:
    assert _value(text, HE) == want


@pytest.mark.parametrize("text", [
    "1  2  [3]  [4]  5\nBetween the two.",  # two marks
    "1 2 3 4 5\nI cannot tell.",  # no mark
])
def test_a_printed_scale_without_one_mark_gives_no_value(text: str) -> None:
    assert _value(text, HE) is None


def test_alternatives_that_read_the_same_add_up() -> None:
    from capjudge.reading.tokens import TokenLogprob, _alternatives, plain_tokens

    tok = plain_tokens([TokenLogprob("4", math.log(0.55), (
        ("4", math.log(0.55)), ("\uff14", math.log(0.15)), ("5", math.log(0.2)),
        ("3", math.log(0.1))))])[0]
    alts = _alternatives(tok)
    assert alts["4"] == pytest.approx(0.7) and sum(alts.values()) == pytest.approx(1.0)


@pytest.mark.parametrize("text", [
    "The final score is $72$.\n\nConfidence in this score: $85\\%$",
    "The final score is $72$.\nProbability that this score is right: 85",
])
def test_a_label_that_measures_the_verdict_is_no_rival(text: str) -> None:
    assert _value(text, GV) == 72


def test_initials_in_brackets_after_another_languages_name_are_the_label() -> None:
    text = "Korrektheitswert (C. Score): 6\nHalluzinationswert (H. Score): 2\nPräzision: 75 %"
    assert read_ch(text) == {"correctness": (6.0, None), "hallucination": (2.0, None)}


# -- found on the llama.cpp server's forced anchor, corpus R (rules 19) -------------------------
# (The embedded base model at the anchor copies the number it has just read, so these were
# "confirmed"; the rules must abstain on their own.)


def test_a_score_field_after_the_verdict_with_another_value_abstains() -> None:
    text = "It misses the plant.\n\nThe final score is $72$.\n\n```json\n{\"score\": 68}\n```"
    assert "score field" in _why(text, GV)
    assert "score field" in _why("The final score is $72$. {'final_score': '65'}", GV)
    same = "It misses the plant.\n\nThe final score is $72$.\n\n```json\n{\"score\": 72}\n```"
    assert _value(same, GV) == 72


def test_a_bottom_rating_beside_appropriate_abstains_and_beside_not_appropriate_reads() -> None:
    assert "no serious fault" in _why(
        "Yes, the candidate caption is appropriate for the given image.\n1", VIS)
    assert _value("No, the candidate caption is not appropriate for the image.\n1", VIS) == 1


@pytest.mark.parametrize("text", ["மதிப்பீடு: 100-க்கு 68. தலைப்பு சரியாக உள்ளது.",
                                  "रेटिंग: 100 में से 68"])
def test_out_of_100_written_before_the_value_is_the_scale(text: str) -> None:
    assert _value(text, VIS) == 68
