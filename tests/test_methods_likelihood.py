"""The likelihood method: text preparation, the pairs it plans and hand-computed scores."""

from __future__ import annotations

import json
import math

import pytest

from capjudge.item import Item
from capjudge.methods import Planned, Skip, get_method
from capjudge.methods.base import MethodOptions
from capjudge.methods.likelihood import detokenise, explained_share, sigmoid
from capjudge.protocol import JudgeResponse


@pytest.mark.parametrize(("raw", "expected"), [
    ("A man 's dog runs .", "A man's dog runs."),
    ("two dogs , one cat ( black ) !", "two dogs, one cat (black)!"),
    ("they do n't  know", "they don't know"),
    ("I 'm here ; you 're there", "I'm here; you're there"),
    ("Already written normally.", "Already written normally."),
    ("a 'dog' named Rex", "a 'dog' named Rex"),  # a quote is not a clitic
    ("  spaced\tout \n text ", "spaced out text"),
])
def test_detokenise_undoes_ptb_spacing_only(raw: str, expected: str) -> None:
    assert detokenise(raw) == expected


def test_explained_share_reference_values() -> None:
    assert explained_share(-2.0, -8.0) == pytest.approx(0.75)
    assert explained_share(-8.0, -8.0) == pytest.approx(0.0)
    assert explained_share(-12.0, -8.0) == pytest.approx(-0.5)
    assert explained_share(0.0, -8.0) == pytest.approx(1.0)
    assert explained_share(-1.0, 0.0) == 0.0  # nothing to explain


def _item(candidate: str = "A dog runs .", refs: tuple[str, ...] = ("A dog is running .",
                                                                    "The dog 's run .")) -> Item:
    return Item(id="i1", candidate=candidate, media_kind="image", references=refs)


def _plan(mode: str, item: Item | None = None) -> Planned:
    out = get_method("likelihood").plan(item or _item(), mode, MethodOptions())
    assert len(out) == 1 and isinstance(out[0], Planned)
    return out[0]


def test_plan_detokenises_and_orders_the_pairs() -> None:
    pairs = _plan("npmi").request.continuations
    forward_ctx, candidate = pairs[0]
    assert candidate == " A dog runs."
    assert forward_ctx.endswith("- A dog is running.\n- The dog's run.\n-")
    assert pairs[1][1] == candidate and "A dog is running" not in pairs[1][0]  # neutral context
    # Reverse: each reference after the candidate, then after the neutral context.
    assert [t for _, t in pairs[2:]] == [" A dog is running.", " A dog is running.",
                                         " The dog's run.", " The dog's run."]
    assert pairs[2][0].endswith("- A dog runs.\n-") and pairs[3][0] == pairs[1][0]
    assert _plan("pmi").request.continuations == pairs  # same pairs, another reading
    assert _plan("conditional").request.continuations == pairs[:1]


def test_plan_without_references_is_a_skip_with_the_reason() -> None:
    out = get_method("likelihood").plan(_item(refs=("  ",)), "npmi", MethodOptions())
    assert len(out) == 1 and isinstance(out[0], Skip) and "reference" in out[0].reason


# log-likelihoods in plan order: forward (cond, uncond), then per reference (cond, uncond).
LOGLIKS = [-6.0, -12.0, -4.0, -10.0, -9.0, -9.0]
LENGTHS = [4, 4, 5, 5, 3, 3]


@pytest.mark.parametrize(("mode", "expected", "part", "part_value"), [
    # forward share 1 - 6/12 = 0.5; reverse shares 0.6 and 0 -> 0.3; mean 0.4 -> 50 x 1.4
    ("npmi", 70.0, "share", 0.4),
    # forward PMI 6/4 = 1.5; reverse 6/5 = 1.2 and 0 -> 0.6; mean 1.05
    ("pmi", 100 * sigmoid(1.05), "pmi", 1.05),
    ("conditional", 100 * math.exp(-6.0 / 4), "mean_logp", -1.5),
])
def test_scores_are_hand_computed(mode: str, expected: float, part: str,
                                  part_value: float) -> None:
    method = get_method("likelihood")
    planned = _plan(mode)
    n = len(planned.request.continuations)
    response = JudgeResponse("ok", logliks=LOGLIKS[:n], lengths=LENGTHS[:n])
    [criterion] = method.interpret(planned, response)
    assert criterion.status == "ok" and criterion.score == pytest.approx(expected)
    assert criterion.reasoning is not None
    assert json.loads(criterion.reasoning)[part] == pytest.approx(part_value, abs=1e-4)


def test_modes_sharing_one_answer_each_keep_their_own_reasoning() -> None:
    # npmi and pmi ask the same request: a run answers both from one response object, and
    # pmi's row must not show npmi's components (it did: the first mode wrote them into it).
    method = get_method("likelihood")
    response = JudgeResponse("ok", logliks=LOGLIKS, lengths=LENGTHS)
    [npmi] = method.interpret(_plan("npmi"), response)
    [pmi] = method.interpret(_plan("pmi"), response)
    assert npmi.reasoning is not None and pmi.reasoning is not None
    assert "share" in json.loads(npmi.reasoning) and "pmi" in json.loads(pmi.reasoning)
    assert response.text == ""  # the shared answer is left as it came


def test_npmi_is_clipped_to_its_scale() -> None:
    method = get_method("likelihood")
    planned = _plan("npmi")
    # References that triple every text's surprisal: share -2 -> below the scale.
    response = JudgeResponse("ok", logliks=[-30.0, -10.0, -30.0, -10.0, -30.0, -10.0],
                             lengths=[3] * 6)
    [criterion] = method.interpret(planned, response)
    assert criterion.reasoning is not None
    assert criterion.score == 0.0
    assert json.loads(criterion.reasoning)["share"] == pytest.approx(-2.0)


def test_a_response_without_likelihoods_is_an_error_not_a_score() -> None:
    method = get_method("likelihood")
    [criterion] = method.interpret(_plan("npmi"), JudgeResponse("ok", text="7"))
    assert criterion.status == "error" and criterion.score is None
    assert "no likelihoods" in (criterion.reason or "")


def test_explain_puts_the_recorded_components_in_words() -> None:
    method = get_method("likelihood")
    text = method.explain('{"share": 0.6912, "forward_share": 0.72, "reverse_share": 0.6624}',
                          "npmi")
    assert text.startswith("the references explain 69 % of the caption's information")
    assert "72 %" in text and "66 %" in text
    pmi = method.explain('{"pmi": 0.6931, "forward_pmi": 0.5, "reverse_pmi": 0.8862}', "pmi")
    assert "2.00 times as likely" in pmi  # e^0.6931
    cond = method.explain('{"mean_logp": -0.6931}', "conditional")
    assert "geometric-mean probability of 50.0 %" in cond
    assert method.explain("not json", "npmi") == "not json"  # text stays text
    assert get_method("gveval").explain("The caption is fine.", "ref-only") == \
        "The caption is fine."
