"""What comes after a verdict (capjudge.reading.settled, rules 9): open alternatives abstain,
later values and prose after a verdict the prompt asks to end with make it off-contract."""

from __future__ import annotations

import re

import pytest

from capjudge.methods.gveval import accr_slots, score_slot
from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.protocol import ScoreSlot
from capjudge.reading.locate import Located, Unreadable, locate

GV, VIS, HE = score_slot(), visce2_slot(), he_slot("correctness")
ACCR = accr_slots()


def _found(text: str, slot: ScoreSlot = GV) -> Located:
    found = locate(text, slot)
    assert isinstance(found, Located), found
    return found


def _why(text: str, slot: ScoreSlot = GV) -> str:
    found = locate(text, slot)
    assert isinstance(found, Unreadable), found
    return found.reason


# -- an alternative or a condition in the verdict's own sentence: abstain -----------------------


@pytest.mark.parametrize(("text", "slot"), [
    ("The final score is $80$ on a strict reading, maybe $85$ on a generous one.", GV),
    ("The final score is $60$ — or perhaps 70 — for this one.", GV),
    ("Accuracy: $90$ for a crow, and 50 instead for a raven\n"
     "Completeness: $75$\nConciseness: $90$\nRelevance: $95$", ACCR[0]),
    ("70 (otherwise 55, if the sign is not the one in the photo)", VIS),
    ("4 — instead 3 if the cup counts as a mug.", HE),
])
def test_a_value_offered_as_an_alternative_after_the_verdict_abstains(text: str,
                                                                      slot: ScoreSlot) -> None:
    # (For the answer's one verdict, a second value in the method's delimiters is reason
    # enough: rules 10.)
    assert re.search("alternative or under a condition|two verdicts|choice open", _why(text, slot))


@pytest.mark.parametrize(("text", "slot", "value"), [
    # An aside that argues, without offering the value: the verdict stands.
    ("Completeness: $70$ (one could argue for 60)", ACCR[1], 70),
    # The alternative is in another sentence, and the verdict is the last word.
    ("It could be 3 or 4 at first sight. Looking closely: 4.", HE, 4),
    # The same value again is no alternative.
    ("The final score is $80$ for the caption as written (or 80 of a hundred).", GV, 80),
    # A denominator is the scale, not a value.
    ("The final score is $80$ (of 100, if you want the scale).", GV, 80),
])
def test_no_alternative_when_nothing_else_is_offered(text: str, slot: ScoreSlot,
                                                     value: int) -> None:
    assert _found(text, slot).value == value


# -- after the verdict: off-contract, a second channel must agree --------------------------------


def test_a_clean_verdict_that_ends_the_answer_is_on_contract() -> None:
    assert _found("Accurate and complete.\n\nThe final score is $85$.").off_contract is None
    accr = ("Reasons ...\nAccuracy: $80$\nCompleteness: $70$\nConciseness: $90$\n"
            "Relevance: $85$")
    assert all(_found(accr, s).off_contract is None for s in ACCR)


@pytest.mark.parametrize(("text", "why"), [
    ("The final score is $80$ given the 3 objects.", "goes on to another value"),
    ("The final score is $80$.\n\nA stricter rater would take 15 points off for the dog.",
     "score-like value"),
    ("The final score is $80$.\n\nNote: the caption is fluent, but the dog is missing.",
     "goes on after its verdict"),
])
def test_what_follows_the_verdict_makes_it_off_contract(text: str, why: str) -> None:
    found = _found(text)
    assert found.value == 80 and why in str(found.off_contract)


def test_a_slot_asked_first_may_explain_after_its_score() -> None:
    # HarmonicEval and VisCE² ask for the score first: the reasons follow, as asked.
    assert _found("4\nThe caption names the dog and the ball correctly.", HE).off_contract \
        is None


# -- two values side by side, a later verdict in the method's delimiters (rules 10) --------------


@pytest.mark.parametrize(("text", "slot"), [
    ("5 4", HE),
    ("Rating: 85 with the reference taken into account, 70 without it.", VIS),
    ("Per the rubric, the final score is $60$.\n\nPersonally, I think the caption deserves "
     "$90$.", GV),
])
def test_two_values_for_the_one_verdict_abstain(text: str, slot: ScoreSlot) -> None:
    assert "nothing says which" in _why(text, slot)


@pytest.mark.parametrize(("text", "slot", "value"), [
    # A criterion's siblings follow it in any layout: they are not rival verdicts.
    ("Accuracy: $80$ Completeness: $70$ Conciseness: $90$ Relevance: $85$", ACCR[0], 80),
    ("I give it 80 for accuracy, 60 for completeness, 90 for conciseness and 85 for "
     "relevance.", ACCR[0], 80),
    # The same value again, or a count with its noun, is no second verdict.
    ("The final score is $80$.\n\nTo repeat: $80$.", GV, 80),
    ("4 — with 2 small errors, it is still mostly right.", HE, 4),
])
def test_siblings_and_repeats_are_no_second_verdict(text: str, slot: ScoreSlot,
                                                    value: int) -> None:
    assert _found(text, slot).value == value
