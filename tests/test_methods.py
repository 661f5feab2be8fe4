"""Method maths and parsing: harmonic weighting, C/H precision, ACCR, VisCE² context ablation."""

from __future__ import annotations

import math
from typing import Any

import pytest

from capjudge.methods import Criterion, MethodOptions, Planned
from capjudge.methods.cap3d import Cap3D, points_slots
from capjudge.methods.gveval import ACCR, GVEvalACCR, accr_slots
from capjudge.methods.harmoniceval import HarmonicEval
from capjudge.methods.visce2 import select_context, split_context
from capjudge.protocol import JudgeResponse, ScoreSlot, worst_status
from capjudge.reading import parse_ch, parse_points
from capjudge.reading.tokens import read_slot
from capjudge.scoring import (
    harmonic_score,
    harmonic_weights,
    precision,
    precision_macro,
    precision_micro,
)


def test_harmonic_weighting_limits_and_a_hand_computed_case() -> None:
    sds = [0.5, 1.0, 2.0]
    assert harmonic_weights(sds, 1.0) == pytest.approx([1 / 3] * 3)  # uniform
    inv = [1 / s**2 for s in sds]
    assert harmonic_weights(sds, 0.5) == pytest.approx([v / sum(inv) for v in inv])
    selective = harmonic_weights(sds, 1e-3)  # gamma -> 0 picks the most confident criterion
    assert selective[0] == pytest.approx(1.0) and selective[1] < 1e-12
    # gamma = 0.75: w ∝ σ^(-2/3); σ = (0.5, 1): w = (2^(2/3), 1) / (2^(2/3) + 1)
    w = harmonic_weights([0.5, 1.0], 0.75)
    expected = 2 ** (2 / 3) / (2 ** (2 / 3) + 1)
    assert w == pytest.approx([expected, 1 - expected])
    assert harmonic_score([4.0, 2.0], [0.5, 1.0], 0.75) == pytest.approx(
        4 * expected + 2 * (1 - expected))
    assert harmonic_score([4.0, 2.0], [0.5, 1.0], 0.75) == pytest.approx(3.2270, abs=1e-4)


def test_harmonic_weighting_guards() -> None:
    w = harmonic_weights([0.0, 1.0], 0.75)  # a certain criterion does not divide by zero
    assert all(math.isfinite(x) for x in w) and w[0] > 0.999
    assert harmonic_weights([0.0, 0.0], 0.5) == pytest.approx([0.5, 0.5])
    with pytest.raises(ValueError):
        harmonic_weights([], 0.75)
    with pytest.raises(ValueError):
        harmonic_weights([1.0], 0.0)
    with pytest.raises(ValueError):
        harmonic_weights([-1.0], 0.75)


def test_harmoniceval_overall_uses_the_scored_criteria_and_says_what_is_missing() -> None:
    criteria = [Criterion("clarity", "ok", score=4.0, sd=0.5),
                Criterion("fluency", "ok", score=2.0, sd=1.0),
                Criterion("correctness", "skipped", "no vision")]
    score, why = HarmonicEval().overall(criteria, {"settings": {"gamma": 0.75}})
    assert score == pytest.approx(3.2270, abs=1e-4)
    assert why and "missing" in why and "correctness" in why
    assert HarmonicEval().overall([], {})[0] is None


@pytest.mark.parametrize(("text", "c", "h"), [
    ("Correctness Score (C. Score): 2\nHallucination Score (H. Score): 1", 2.0, 1.0),
    ("**Correctness Score (C. Score):** 1.5 (chair)\n**Hallucination Score (H. Score):** 3", 1.5,
     3.0),
    ("C. Score: 1/2\nH. Score: 0", 0.5, 0.0),
    ("C Score = 2½\nH Score = ½", 2.5, 0.5),
    ("correctness score: 3\nhallucination score: 0\nPrecision Score: 100%", 3.0, 0.0),
    # Issue 40: a count in words, "None" for zero, a value corrected on its own line, a block
    # of final scores after a review.
    ("C. Score: three (chair, wooden, rocking)\nH. Score: None", 3.0, 0.0),
    ("C. Score: 4\nH. Score: 1 — actually, on re-checking view 3 the handle is there, so "
     "H. Score: 0.", 4.0, 0.0),
    ("Initial:\n- C. Score: 4\n- H. Score: 2\nFinal scores after review:\nC. Score: 5\n"
     "H. Score: 1", 5.0, 1.0),
])
def test_ch_parsing(text: str, c: float, h: float) -> None:
    assert parse_ch(text) == (pytest.approx(c), pytest.approx(h))


def test_ch_two_blocks_with_nothing_preferring_one_abstain() -> None:
    # The judge scores the candidate, then its own corrected caption: which block is the
    # candidate's is not for a reader to guess.
    text = ("**Original caption**\nC. Score: 2\nH. Score: 2\n\n**Corrected caption:** ...\n"
            "C. Score: 5\nH. Score: 0")
    c, h = parse_ch(text)
    assert c is None and h is None


def _read_cap3d(text: str) -> JudgeResponse:
    """A text answer to the 3D prompt as the reading seam returns it (its two count slots)."""
    slots = [read_slot(None, text, slot, 0.5) for slot in points_slots("a chair")]
    return JudgeResponse(worst_status([s.status for s in slots]), text=text, slots=slots)


def test_ch_parse_failures_and_undefined_precision() -> None:
    method = Cap3D()
    planned = Planned("x", "default", None)  # type: ignore[arg-type]
    missing = method.interpret(planned, _read_cap3d("C. Score: 2\nLooks fine."))
    by = {c.name: c for c in missing}
    assert by["hallucination"].status == "parse_failure"
    assert by["precision"].status == "parse_failure" and by["precision"].score is None
    assert by["correctness"].score == 2.0
    zero = {c.name: c for c in method.interpret(
        planned, _read_cap3d("C. Score: 0\nH. Score: 0"))}
    assert zero["precision"].status == "undefined" and zero["precision"].score is None
    good = {c.name: c for c in method.interpret(
        planned, _read_cap3d("C. Score: 1\nH. Score: 3"))}
    assert good["precision"].score == pytest.approx(25.0)  # the paper's chair example
    assert method.overall(list(good.values()), {})[0] == pytest.approx(25.0)
    failed = method.interpret(planned, JudgeResponse("error", reason="HTTP 500"))
    assert {c.status for c in failed} == {"error"}
    with pytest.raises(ValueError):
        parse_points("1/0")


def test_precision_micro_and_macro() -> None:
    pairs = [(1.0, 3.0), (2.0, 0.0), (0.0, 0.0)]
    assert precision(1, 3) == pytest.approx(25.0)
    assert precision(0, 0) is None
    assert precision_macro(pairs) == pytest.approx((25.0 + 100.0) / 2)  # undefined item left out
    assert precision_micro(pairs) == pytest.approx(100 * 3 / 6)
    assert precision_macro([(0, 0)]) is None and precision_micro([(0, 0)]) is None


def test_accr_parsing_and_mean() -> None:
    text = ("The caption is accurate but misses the ending.\nAccuracy: $80$\n"
            "Completeness: $ 60$\nConciseness: $90$\nRelevance: $100$")
    slots = accr_slots()
    results = [read_slot(None, text, slot, 0.5) for slot in slots]
    assert [r.printed for r in results] == [80, 60, 90, 100]
    criteria = [Criterion(name, "ok", score=float(r.printed or 0))
                for name, r in zip(ACCR, results, strict=True)]
    assert GVEvalACCR().overall(criteria, {}) == (pytest.approx(82.5), None)
    partial = criteria[:3] + [Criterion("relevance", "parse_failure")]
    score, why = GVEvalACCR().overall(partial, {})
    assert score is None and why and "relevance" in why


def test_first_position_slots_read_the_first_integer() -> None:
    slot = ScoreSlot("score", 1, 5, anchor="", position="first", forced_prefix="")
    r = read_slot(None, "4\nThe caption is clear, though 2 words are odd.", slot, 0.5)
    # Read from text alone (no log-probabilities): text_only, not ok (issue 10).
    assert r.printed == 4 and r.status == "text_only"
    assert read_slot(None, "Score 3.5 overall", slot, 0.5).status == "parse_failure"


def test_visual_context_sections_and_ablations() -> None:
    context = ("List of Important Objects (up to five):\n- Object 1: a red circle\n"
               "Features:\n- Features of Object 1: red, round\n"
               "Relationships:\n- The circle is left of the square.")
    sections = split_context(context)
    assert set(sections) == {"objects", "features", "relationships"}
    only_objects = select_context(context, ("objects",))
    assert only_objects is not None and "red circle" in only_objects
    assert "round" not in only_objects and "left of" not in only_objects
    with_features = select_context(context, ("objects", "features"))
    assert with_features is not None and "round" in with_features
    assert "left of" not in with_features
    assert select_context("Just a sentence about a cat.", ("objects",)) is None


# --- each method's score as its paper defines it (hand-computed cases) ----------------------

def test_harmoniceval_paper_smoothing_uses_the_models_probabilities() -> None:
    from capjudge.scoring import paper_smoothing

    # P(4) = .6, P(5) = .2 (the ratings hold .8 of the mass): s̃ = 2.4 + 1.0 = 3.4;
    # σ² = (4-3.4)²·.6 + (5-3.4)²·.2 = .216 + .512 = .728.
    s, sd = paper_smoothing([1, 2, 3, 4, 5], [0, 0, 0, 0.75, 0.25], 0.8)
    assert s == pytest.approx(3.4) and sd == pytest.approx(0.728 ** 0.5)
    # With all the mass on the scale it is the usual expectation and sd.
    s, sd = paper_smoothing([1, 2, 3, 4, 5], [0, 0, 0.5, 0.5, 0], 1.0)
    assert s == pytest.approx(3.5) and sd == pytest.approx(0.5)
    with pytest.raises(ValueError):
        paper_smoothing([1, 2], [0.5, 0.5], 0.0)


def _slot_response(slot_name: str, values: list[int], probs: list[float], mass: float,
                   printed: int) -> Any:
    from capjudge.protocol import JudgeResponse, SlotResult

    return JudgeResponse("ok", text=str(printed), slots=[
        SlotResult(slot_name, values, probs, mass, "logprobs", "ok", None, printed)])


def test_harmoniceval_criterion_score_is_the_papers_and_renormalised_is_an_option() -> None:
    from capjudge.methods import Planned
    from capjudge.methods.harmoniceval import HarmonicEval, rating_slot
    from capjudge.protocol import JudgeRequest

    values = [1, 2, 3, 4, 5]
    response = _slot_response("correctness", values, [0, 0, 0, 0.75, 0.25], 0.8, 4)
    request = JudgeRequest(messages=(), slots=(rating_slot("correctness"),))
    paper = Planned("i", "default", request, "correctness",
                    settings=(("prompt_variant", "paper"), ("score", "paper")))
    (c,) = HarmonicEval().interpret(paper, response)
    assert c.score == pytest.approx(3.4) and c.sd == pytest.approx(0.728 ** 0.5)
    assert c.expected == pytest.approx(4.25) and c.mass == pytest.approx(0.8)
    renorm = Planned("i", "default", request, "correctness",
                     settings=(("prompt_variant", "paper"), ("score", "renormalised")))
    (r,) = HarmonicEval().interpret(renorm, response)
    assert r.score == pytest.approx(4.25) and r.sd == pytest.approx(0.1875 ** 0.5)


def test_visce2_score_is_the_printed_integer_with_the_expected_value_beside_it() -> None:
    from capjudge.methods import Planned
    from capjudge.methods.visce2 import VisCE2, rating_slot
    from capjudge.protocol import JudgeRequest

    values = list(range(101))
    probs = [0.0] * 101
    probs[80], probs[75], probs[65] = 0.6, 0.3, 0.1
    response = _slot_response("score", values, probs, 1.0, 80)
    request = JudgeRequest(messages=(), slots=(rating_slot(),))
    (c,) = VisCE2().interpret(Planned("i", "vanilla", request, settings=(
        ("prompt_variant", "paper"), ("score", "printed"))), response)
    assert c.score == 80.0 and c.expected == pytest.approx(77.0)  # 48 + 22.5 + 6.5
    assert not c.paths_disagree
    (e,) = VisCE2().interpret(Planned("i", "vanilla", request, settings=(
        ("prompt_variant", "paper"), ("score", "expected"))), response)
    assert e.score == pytest.approx(77.0) and e.printed == 80
    with pytest.raises(ValueError, match="unknown score"):
        VisCE2().settings(MethodOptions(extra={"score": "mean"}))


def test_gveval_keeps_the_expected_value_and_flags_disagreeing_paths() -> None:
    from capjudge.methods import Planned
    from capjudge.methods.gveval import GVEval, score_slot
    from capjudge.protocol import JudgeRequest

    values = list(range(101))
    probs = [0.0] * 101
    probs[60], probs[90] = 0.3, 0.7
    # The text says 60 but the distribution's most likely value is 90 (a sampled answer).
    response = _slot_response("score", values, probs, 1.0, 60)
    request = JudgeRequest(messages=(), slots=(score_slot(),))
    (c,) = GVEval().interpret(Planned("i", "ref-only", request), response)
    assert c.score == pytest.approx(81.0)  # Eq. 1: .3*60 + .7*90
    assert c.paths_disagree and c.argmax == 90 and c.printed == 60
