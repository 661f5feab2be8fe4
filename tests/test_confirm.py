"""Issue 40: the method's contract, and a second channel for off-contract verdicts.

Unit tests of :mod:`capjudge.reading.confirm` and the contract in
:func:`capjudge.reading.locate.locate`, then the two channels end to end through
``capjudge score --json`` against the stand-in OpenAI-protocol server: the forced anchor
(a server that continues the judge's answer) and the follow-up question
(``confirm: follow_up``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from capjudge.cli import main as cli_main
from capjudge.protocol import ScoreSlot, SlotResult
from capjudge.reading.confirm import (
    confirmed,
    contract_fields,
    read_follow_up,
    rival_values,
    stated_rivals,
)
from capjudge.reading.locate import Located, Unreadable, locate
from capjudge.testing.openai_server import MockOpenAIServer, Scripted

GVEVAL = ScoreSlot("score", 0, 100, "$", "final score")
ACCURACY = ScoreSlot("accuracy", 0, 100, "$", "Accuracy", forced_prefix="\nAccuracy: $")
LEVELS = (("Very Low Correctness", 1), ("Low Correctness", 2), ("Moderate Correctness", 3),
          ("High Correctness", 4), ("Extremely High Correctness", 5))
HARMONIC = ScoreSlot("correctness", 1, 5, "", None, "", position="first", levels=LEVELS)
VISCE2 = ScoreSlot("score", 0, 100, "", None, "", position="first")


def _read(text: str, slot: ScoreSlot) -> Located:
    found = locate(text, slot)
    assert isinstance(found, Located), found
    return found


# -- the contract ------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "slot", "value"), [
    ("The caption is accurate. The final score is $85$.", GVEVAL, 85),
    ("Good caption.\nAccuracy: $80$", ACCURACY, 80),
    ("4\nThe caption is mostly right.", HARMONIC, 4),
    # LaTeX delimiters and an arithmetic verdict are the format, written another way.
    (r"The final score is \( 82 \).", GVEVAL, 82),
    ("The final score is $100 - 12 - 6 = 82$.", GVEVAL, 82),
    # The score written first under its own name, or a verdict's: the format with a label.
    ("**Correctness: 4/5** \u2014 High Correctness. The slope is right.", HARMONIC, 4),
    ("Score: 3\nThe dog is right, the ball's colour is not.", HARMONIC, 3),
    ("\u8a55\u4fa1\uff1a3\n\u72ac\u306f\u6b63\u3057\u3044\u3002", HARMONIC, 3),
    ("**Rating:** 30. The caption describes a party; the picture, a wedding.", VISCE2, 30),
])
def test_on_contract(text: str, slot: ScoreSlot, value: int) -> None:
    found = _read(text, slot)
    assert found.value == value and found.off_contract is None
    assert contract_fields(found)["confirmation"] == "on-contract"


@pytest.mark.parametrize(("text", "slot", "value", "why"), [
    ('{"score": 80}', GVEVAL, 80, "not in the method's format"),
    ("**Score:** 58", GVEVAL, 58, "not in the method's format"),
    ("The caption is fine. Rating: 4", HARMONIC, 4, "does not open with its score"),
    # A label after another value, or a line before it, is not the score written first.
    ("Confidence: 95%. Rating: 30. The caption is wrong about the party.", VISCE2, 30,
     "does not open with its score"),
    ("## Rating\n4\nThe dog is right.", HARMONIC, 4, "does not open with its score"),
    ("The final score is $80$. Hmm, that may be too generous.", GVEVAL, 80, "questions"),
    ("- [ ] 1 Very Low Correctness\n- [ ] 2 Low Correctness\n- [x] 4 High Correctness\n"
     "- [ ] 5 Extremely High Correctness", HARMONIC, 4, "checklist"),
])
def test_off_contract(text: str, slot: ScoreSlot, value: int, why: str) -> None:
    found = _read(text, slot)
    assert found.value == value
    assert found.off_contract is not None and why in found.off_contract
    fields = contract_fields(found)
    assert fields["confirmation"] == "unconfirmed" and "off-contract" in fields["read_by"]


@pytest.mark.parametrize(("text", "slot", "why"), [
    ("The final score is $80$. I retract that score.", GVEVAL, "withdrew"),
    ("The final score for my improved caption is $95$.", GVEVAL, "something else"),
    ("- [x] 2 Low Correctness\n- [x] 4 High Correctness\n- [ ] 5 Extremely High Correctness",
     HARMONIC, "2 lines are ticked"),
    ("- [ ] 1 Very Low Correctness\n- [ ] 4 High Correctness", HARMONIC, "no line is ticked"),
])
def test_abstains(text: str, slot: ScoreSlot, why: str) -> None:
    found = locate(text, slot)
    assert isinstance(found, Unreadable) and why in found.reason


@pytest.mark.parametrize(("text", "slot", "value"), [
    # Struck-through text is deleted text.
    ("**Final score:** ~~$85$~~ $74$ (corrected after re-checking the colour).", GVEVAL, 74),
    # A correction that says "should be" is not a hypothetical.
    ("Accuracy: $85$\n\nCorrection: on a second look it does mention the kite, so accuracy "
     "should be higher — Accuracy: $90$.", ACCURACY, 90),
])
def test_corrections_are_read(text: str, slot: ScoreSlot, value: int) -> None:
    assert _read(text, slot).value == value


@pytest.mark.parametrize(("text", "slot", "why"), [
    ("The given caption is too generic. An improved caption:\n\n\"A puppy chews a rope.\"\n\n"
     "Evaluation of the improved caption: it names the breed and the toy.\n\n"
     "The final score is $92$.", GVEVAL, "something else"),
    ("Image clarity: 90/100. The caption is appropriate for the image.", VISCE2,
     "something else"),
    ("5\n\nMostly accurate, but the bus colour is wrong, so I'd put it at High Correctness "
     "(4).", HARMONIC, "disagree"),
    # A first number restated in the same sentence as another value on the slot's scale.
    ("I'll say 6, that is, roughly 65 out of 100. The caption names the dog.", VISCE2,
     "restated"),
    # Every sentence before the verdict evaluates the references; the candidate, never.
    ("Reference 1 names the red kite. Reference 2 adds the beach and the dog. "
     "The final score is $88$.", GVEVAL, "something else"),
])
def test_more_abstentions(text: str, slot: ScoreSlot, why: str) -> None:
    found = locate(text, slot)
    assert isinstance(found, Unreadable) and why in found.reason


@pytest.mark.parametrize(("text", "slot", "value"), [
    # The same rating on two scales, or revised, or a restatement in a later sentence.
    ("7/10 - equivalently 70 out of 100. The man is right, the desk is not.", VISCE2, 70),
    ("I would rate it 60, i.e. 60 out of 100.", VISCE2, 60),
    # One sentence restating the references is context, and the caption is discussed.
    ("The references describe a red kite. The final score is $40$.", GVEVAL, 40),
    ("Reference 1 names the kite. The caption misses it. The final score is $40$.", GVEVAL,
     40),
])
def test_restatements_that_agree_and_context_are_read(text: str, slot: ScoreSlot,
                                                      value: int) -> None:
    assert _read(text, slot).value == value


def test_a_ticked_line_that_writes_its_number_is_read_at_the_digit() -> None:
    text = "- [ ] 1 Very Low Correctness\n- [x] 4 High Correctness\n- [ ] 5 Extremely High"
    found = _read(text, HARMONIC)
    assert found.kind == "digits" and text[found.start: found.digits_end] == "4"


def test_an_improved_caption_beside_a_scored_candidate_is_no_bar() -> None:
    text = ('The candidate caption misses the dog. An improved caption would be: "A dog on a '
            'mat."\n\nThe final score is $40$.')
    assert _read(text, GVEVAL).value == 40


def test_chat_template_tokens_end_the_answer() -> None:
    text = ("The caption misses the dog. **Score: 40**<|im_end|>\n<|im_start|>user\nRate this "
            "one.<|im_end|>\n<|im_start|>assistant\nThe final score is $90$.")
    assert _read(text, GVEVAL).value == 40
    # A template header before any content is skipped, not taken for the end.
    assert _read("<|im_start|>assistant\nThe final score is $70$.<|im_end|>", GVEVAL).value == 70
    # The verdict is only in the invented turn: the judge's own answer has none.
    assert isinstance(locate("Fine.<end_of_turn>\n<start_of_turn>user\nThe final score is $9$",
                             GVEVAL), Unreadable)


# -- agreement ---------------------------------------------------------------------------------

def _unconfirmed(printed: int) -> SlotResult:
    return SlotResult("score", list(range(101)), None, None, "text", "text_only", None, printed,
                      read_by="JSON key 'score' (off-contract: ...)",
                      confirmation="unconfirmed")


def _anchor(dist: dict[int, float]) -> SlotResult:
    values = list(range(101))
    probs = [dist.get(v, 0.0) for v in values]
    return SlotResult("score", values, probs, 1.0, "logprobs", "ok")


def test_agreement_keeps_the_reading_and_takes_the_distribution() -> None:
    out = confirmed(_unconfirmed(80), _anchor({80: 0.7, 75: 0.3}), "forced-anchor")
    assert out.status == "ok" and out.confirmation == "forced-anchor"
    assert out.printed == 80 and out.probs is not None and "P(80) = 0.70" in (out.read_by or "")


def test_a_weak_anchor_confirms_weakly() -> None:
    own = SlotResult("score", list(range(101)), [0.0] * 80 + [1.0] + [0.0] * 20, 1.0,
                     "logprobs", "ok", None, 80, confirmation="unconfirmed")
    weak = _anchor({80: 0.6, 40: 0.4})
    weak.status, weak.reason = "low_mass", "captured mass 0.030 < 0.5"
    out = confirmed(own, weak, "forced-anchor")
    assert out.status == "low_mass" and out.confirmation == "forced-anchor"
    assert "captured mass 0.030" in (out.reason or "")


def test_disagreement_is_a_failure_quoting_both() -> None:
    out = confirmed(_unconfirmed(80), _anchor({40: 0.9, 80: 0.1}), "forced-anchor")
    assert out.status == "parse_failure" and out.confirmation == "contradicted"
    assert out.probs is None and "80" in (out.reason or "") and "reads 40" in (out.reason or "")
    gone = confirmed(_unconfirmed(80), None, "follow-up")
    assert gone.status == "parse_failure" and "no reading" in (gone.reason or "")


def test_the_anchor_must_prefer_the_reading_to_the_values_the_answer_also_writes() -> None:
    # A model continuing the answer may copy a number it has just read: 72 first at the anchor
    # but hardly more likely than 68, which the answer also writes, confirms nothing.
    close = confirmed(_unconfirmed(72), _anchor({72: 0.4, 68: 0.3, 50: 0.3}), "forced-anchor",
                      rivals=(68,))
    assert close.status == "parse_failure" and close.confirmation == "contradicted"
    assert "barely prefers it to 68" in (close.reason or "")
    clear = confirmed(_unconfirmed(72), _anchor({72: 0.7, 68: 0.2, 50: 0.1}), "forced-anchor",
                      rivals=(68,))
    assert clear.confirmation == "forced-anchor"
    # a value the answer does not write is no rival; the follow-up question has no margin
    assert confirmed(_unconfirmed(72), _anchor({72: 0.4, 68: 0.3, 50: 0.3}), "forced-anchor",
                     rivals=(90,)).confirmation == "forced-anchor"
    follow = SlotResult("score", list(range(101)), None, None, "text", "text_only", None, 72)
    assert confirmed(_unconfirmed(72), follow, "follow-up", rivals=(68,)).confirmation == \
        "follow-up"


def test_the_anchor_confirms_no_reading_beside_another_stated_rating() -> None:
    # A continuation after "Overall I'd put this around 40 ... The final score is $85$."
    # copies 85: between two ratings the judge states it cannot say which stands.
    text = "Overall I'd put this around 40, since the bird is a heron.\n\nThe final score is $85$."
    assert stated_rivals(text, GVEVAL, 85) == (40,)
    assert stated_rivals("The caption names 3 of the 4 objects. The final score is $85$.",
                         GVEVAL, 85) == ()
    sure = _anchor({85: 0.9, 40: 0.05, 50: 0.05})
    copied = confirmed(_unconfirmed(85), sure, "forced-anchor", rivals=(40,), stated=(40,))
    assert copied.status == "parse_failure" and "also states 40" in (copied.reason or "")
    # The follow-up question asks the judge itself: it may confirm.
    follow = SlotResult("score", list(range(101)), None, None, "text", "text_only", None, 85)
    assert confirmed(_unconfirmed(85), follow, "follow-up", stated=(40,)).confirmation == \
        "follow-up"


@pytest.mark.parametrize(("text", "want"), [
    ('The final score is $72$. {"score": 68}', (68,)),
    ("On a scale of 0 to 100 I give it 72.", ()),  # the scale's own phrasing is no rival
    ('The caption "Two dogs on 3 benches" is fine: 72.', ()),  # nor a quotation of it
    ("72, and 72 again.", ()),
])
def test_rival_values_are_the_scales_other_values_the_answer_writes(text: str,
                                                                    want: tuple[int, ...]
                                                                    ) -> None:
    slot = ScoreSlot("score", 0, 100, "$", "final score",
                     quotes=("Two dogs on 3 benches",))
    assert rival_values(text, slot, 72) == want
    assert rival_values(text, ScoreSlot("n", 0, 9, kind="points"), 72) == ()


def test_on_contract_readings_are_never_touched() -> None:
    on = SlotResult("score", [1, 2], None, None, "text", "text_only", None, 2,
                    confirmation="on-contract")
    assert confirmed(on, None, "follow-up") is on


@pytest.mark.parametrize(("text", "value"), [
    ('{"score": 72}', 72), ('```json\n{"score": "72"}\n```', 72), ('{"final_score": 72}', 72)])
def test_follow_up_read_strictly(text: str, value: int) -> None:
    assert read_follow_up(text, GVEVAL).printed == value


@pytest.mark.parametrize("text", ["The final score is $72$.", '{"score": 72, "rating": 60}',
                                  '{"score": 7.5}', '{"score": 140}', '{"score": "high"}'])
def test_follow_up_without_one_value_gives_none(text: str) -> None:
    assert read_follow_up(text, GVEVAL).status == "parse_failure"


# -- end to end through capjudge score ---------------------------------------------------------

def _score(tmp_path: Path, script: Callable[[dict[str, Any]], Scripted],
           *options: str, item: tuple[str, ...] = ("--method", "gveval", "--mode", "ref-only",
                                                   "--caption", "A red car.", "--ref",
                                                   "A red car parked.")
           ) -> tuple[dict[str, Any], MockOpenAIServer]:
    """``capjudge score --json`` on ``item`` against the stand-in answering with ``script``."""
    with MockOpenAIServer(script) as server:
        buffer = io.StringIO()
        args = ["score", "--backend", "openai/gpt-4o-2024-08-06", "--base-url", server.url,
                "--cache-dir", str(tmp_path / "cache"), "--json", *item]
        for option in options:
            args += ["--backend-option", option]
        with redirect_stdout(buffer):
            cli_main(args)
    out: dict[str, Any] = json.loads(buffer.getvalue())
    return out, server


def _last_role(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["role"])


def _question(body: dict[str, Any]) -> bool:
    last = body["messages"][-1]
    return last["role"] == "user" and "State only your final score" in str(last["content"])


@pytest.mark.parametrize(("follow_up", "status", "confirmation"), [
    ('{"score": 80}', "text_only", "follow-up"),
    ('{"score": 55}', "parse_failure", "contradicted"),
    ("I already gave my score above.", "parse_failure", "contradicted"),
])
def test_follow_up_question(tmp_path: Path, follow_up: str, status: str,
                            confirmation: str) -> None:
    def script(body: dict[str, Any]) -> Scripted:
        text = follow_up if _question(body) else "Accurate and complete.\n**Score:** 80"
        return Scripted(text=text, logprobs=False)

    out, server = _score(tmp_path, script, "confirm=follow_up")
    crit = out["criteria"]["score"]
    assert (out["status"], crit["confirmation"]) == (status, confirmation)
    assert out["score"] == (80 if status != "parse_failure" else None)
    asked = [b for b in server.requests if _question(b)]
    assert len(asked) == 1 and asked[0]["response_format"]["type"] == "json_schema"


def test_on_contract_answers_ask_nothing_more(tmp_path: Path) -> None:
    out, server = _score(tmp_path, lambda body: Scripted(
        text="Accurate. The final score is $80$.", logprobs=False), "confirm=follow_up")
    assert out["criteria"]["score"]["confirmation"] == "on-contract" and out["score"] == 80
    assert len(server.requests) == 1


def test_without_a_channel_the_reading_stays_unconfirmed(tmp_path: Path) -> None:
    out, server = _score(tmp_path, lambda body: Scripted(
        text="Accurate.\n**Score:** 80", logprobs=False))
    crit = out["criteria"]["score"]
    assert out["score"] == 80 and crit["confirmation"] == "unconfirmed"
    assert "off-contract" in crit["read_by"] and len(server.requests) == 1


def _tokens(text_before: str, number: str, alternatives: dict[str, float], after: str
            ) -> list[tuple[str, dict[str, float]]]:
    return [(text_before, {}), (number, alternatives), (after, {})]


@pytest.mark.parametrize(("anchor", "status", "confirmation"), [
    ({"80": 0.7, "75": 0.3}, "ok", "forced-anchor"),
    ({"40": 0.9, "80": 0.1}, "parse_failure", "contradicted"),
])
def test_forced_anchor(tmp_path: Path, anchor: dict[str, float], status: str,
                       confirmation: str) -> None:
    def script(body: dict[str, Any]) -> Scripted:
        # After "... The final score is $" appended to the answer: ``anchor``, digit by digit.
        return Scripted(tokens=_tokens("Accurate and complete.\n**Score:** ", "80",
                                       {"80": 0.9, "70": 0.1}, ""),
                        anchor={int(k): p for k, p in anchor.items()})

    out, server = _score(tmp_path, script, "force_anchor=true")
    crit = out["criteria"]["score"]
    assert (out["status"], crit["confirmation"]) == (status, confirmation)
    continued = [str(b["messages"][-1]["content"]) for b in server.requests
                 if _last_role(b) == "assistant"]
    # The anchor's first digit, then the next digit after each likely one ("8" -> "80").
    assert continued and continued[0].endswith("The final score is $")
    assert all("**Score:** 80\nThe final score is $" in c for c in continued)
    if status == "ok":
        assert out["score"] == pytest.approx(79.0)  # the answer's own distribution stands


@pytest.mark.parametrize(("text", "forced"), [
    # The reader abstains for a reason: no forced anchor stands in for it.
    ("Accurate. The final score is $80$ or $85$.", False),
    ("Accurate. The final score is $80$. No wait, I can't settle on a score.", False),
    # No number written at all: the forced anchor reads the slot (the reading stays unwritten).
    ("Accurate and complete, nothing is missing.", True),
])
def test_a_forced_anchor_reads_only_what_was_never_written(tmp_path: Path, text: str,
                                                          forced: bool) -> None:
    def script(body: dict[str, Any]) -> Scripted:
        return Scripted(tokens=[(text, {})], anchor={80: 0.9, 40: 0.1})

    out, server = _score(tmp_path, script, "force_anchor=true")
    crit = out["criteria"]["score"]
    if forced:
        assert out["status"] == "ok" and crit["confirmation"] == "forced-anchor"
    else:
        assert out["status"] == "parse_failure" and out["score"] is None
        assert "no probability" not in crit["reason"]  # the reader's own reason, kept
        assert not [b for b in server.requests if _last_role(b) == "assistant"]


def test_every_method_states_its_verdict_contract() -> None:
    # Components own their metadata: each registered method says what its prompt asks for.
    from capjudge.methods import get_method

    for name in ("gveval", "gveval-accr", "visce2", "harmoniceval", "cap3d", "likelihood"):
        assert get_method(name).verdict_contract, name


def test_the_question_is_asked_where_continuation_is_off(tmp_path: Path) -> None:
    # OpenAI's own API cannot continue an answer (continue_digits off): the question is its
    # one channel, and it is still asked.
    def script(body: dict[str, Any]) -> Scripted:
        text = '{"score": 80}' if _question(body) else "Accurate.\n**Score:** 80"
        return Scripted(text=text, logprobs=False)

    out, server = _score(tmp_path, script, "confirm=follow_up", "continue_digits=false")
    assert out["criteria"]["score"]["confirmation"] == "follow-up" and out["score"] == 80
    assert sum(_question(b) for b in server.requests) == 1


def test_the_summary_counts_readings_by_confirmation() -> None:
    import pyarrow as pa

    from capjudge.client import ClientStats
    from capjudge.judge.config import JudgeConfig
    from capjudge.judge.out import summarise

    table = pa.table({
        "status": ["text_only", "text_only", "parse_failure", "skipped"],
        "mode": ["ref-only"] * 4, "reason": [None, None, "unconfirmed: ...", "why"],
        "cost_usd": [None] * 4, "template": ["t"] * 4, "completion_tokens": [10] * 4,
        "confirmation": ["on-contract", "unconfirmed", "contradicted", None]})
    summary = summarise(table, ClientStats(), JudgeConfig(backend="fake/x", method="gveval"),
                        {"backend": "fake/x"}, 1.0)
    assert summary["by_confirmation"] == {"contradicted": 1, "on-contract": 1, "unconfirmed": 1}
    assert any("1 of 3 readings are off the method's contract" in n for n in summary["notes"])


def test_the_stage_summary_sees_the_confirmation_column(tmp_path: Path) -> None:
    # The pipeline's judge stage summarises the combined parts' columns: the counts by
    # confirmation need the column there (a fresh clone's summary showed none without it).
    import pyarrow.parquet as pq

    from capjudge.judge.parts import combine_parts
    from capjudge.judge.rows import rows_table

    part = tmp_path / "part-0.parquet"
    pq.write_table(rows_table([]), part)
    table = combine_parts([part], tmp_path / "judgements.parquet")
    assert "confirmation" in table.column_names


# -- cap3d's counts: read in the seam, so they have the same second channels -----------------

_OFF = "Correct attributes: 3\nHallucinated details: 1 (the handle)"


def _score_3d(tmp_path: Path, views: list[str], script: Callable[[dict[str, Any]], Scripted],
              *options: str) -> tuple[dict[str, Any], MockOpenAIServer]:
    return _score(tmp_path, script, *options, item=("--method", "cap3d", "--views", *views,
                                                    "--caption", "A blue mug with a handle."))


@pytest.fixture
def views(sample_dir: Path) -> list[str]:
    return [str(sample_dir / "objects" / "cube" / f"view-{i}.png") for i in range(1, 5)]


@pytest.mark.parametrize(("follow_up", "score", "confirmation"), [
    ('{"correctness": 3, "hallucination": 1}', 75.0, "follow-up"),
    ('{"correctness": 4, "hallucination": 1}', None, "contradicted"),
    ('{"correctness": 3}', None, "contradicted"),  # no count for H: no confirmation
])
def test_cap3d_counts_off_contract_are_confirmed_by_the_follow_up(
        tmp_path: Path, views: list[str], follow_up: str, score: float | None,
        confirmation: str) -> None:
    def script(body: dict[str, Any]) -> Scripted:
        return Scripted(text=follow_up if _question(body) else _OFF, logprobs=False)

    out, server = _score_3d(tmp_path, views, script, "confirm=follow_up")
    assert out["score"] == score
    assert confirmation in {c["confirmation"] for c in out["criteria"].values()}
    asked = [b for b in server.requests if _question(b)]
    assert len(asked) == 1
    schema = asked[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["correctness"] == {"type": "number", "minimum": 0}


def test_cap3d_counts_on_contract_ask_nothing_more(tmp_path: Path, views: list[str]) -> None:
    text = "Correctness Score (C. Score): 3\nHallucination Score (H. Score): 1"
    out, server = _score_3d(tmp_path, views, lambda body: Scripted(text=text, logprobs=False),
                            "confirm=follow_up")
    assert out["score"] == 75.0 and len(server.requests) == 1
    assert {c["confirmation"] for n, c in out["criteria"].items()
            if n != "precision"} == {"on-contract"}


@pytest.mark.parametrize(("h_anchor", "score", "confirmation"), [
    ({1: 0.8, 2: 0.2}, 75.0, "forced-anchor"),
    ({0: 0.9, 1: 0.1}, None, "contradicted"),
])
def test_cap3d_counts_off_contract_are_confirmed_at_their_forced_anchors(
        tmp_path: Path, views: list[str], h_anchor: dict[int, float], score: float | None,
        confirmation: str) -> None:
    def script(body: dict[str, Any]) -> Scripted:
        return Scripted(tokens=[(_OFF, {})], anchors=[
            ("Correctness Score (C. Score): ", {3: 0.9, 2: 0.1}),
            ("Hallucination Score (H. Score): ", h_anchor)])

    out, _ = _score_3d(tmp_path, views, script, "force_anchor=true")
    assert out["score"] == score
    hallucination = out["criteria"]["hallucination"]
    assert hallucination["confirmation"] == confirmation
    assert out["criteria"]["correctness"]["confirmation"] == "forced-anchor"


def test_cap3d_counts_without_a_channel_stay_unconfirmed(tmp_path: Path,
                                                         views: list[str]) -> None:
    out, server = _score_3d(tmp_path, views, lambda body: Scripted(text=_OFF, logprobs=False))
    assert out["score"] == 75.0 and len(server.requests) == 1
    assert out["criteria"]["correctness"]["confirmation"] == "unconfirmed"


def test_a_slot_asked_first_is_confirmed_after_the_whole_answer() -> None:
    from capjudge.methods.harmoniceval import rating_slot as he_slot
    from capjudge.methods.visce2 import rating_slot as visce2_slot
    from capjudge.reading import TokenLogprob, forced_reading

    text = "The caption names the bus correctly.\nRating: 72"
    tokens = [TokenLogprob(text, 0.0, ())]
    for slot in (visce2_slot(), he_slot("correctness")):
        # Its forced anchor is the answer's start: the answer's own first token, which could
        # only repeat what it wrote. Confirming, the anchor follows the whole answer.
        _, base = forced_reading(slot, text, tokens, confirming=True)
        assert base == text + slot.confirm_prefix and slot.confirm_prefix.strip()
        _, start = forced_reading(slot, text, tokens)
        assert start == slot.forced_prefix == ""
    # A slot read last has one anchor for both.
    gv = ScoreSlot("score", 0, 100, "$", "final score")
    assert forced_reading(gv, text, tokens, confirming=True)[1] == forced_reading(
        gv, text, tokens)[1] == text + gv.forced_prefix


def test_the_confirmation_anchor_is_no_part_of_the_cache_key() -> None:
    from dataclasses import replace

    from capjudge.methods.visce2 import rating_slot as visce2_slot
    from capjudge.protocol import JudgeRequest, Message

    slot = visce2_slot()
    request = JudgeRequest(messages=(Message("user", ("Rate it.",)),), slots=(slot,))
    other = replace(request, slots=(replace(slot, confirm_prefix="\nOther: "),))
    assert request.canonical() == other.canonical()


@pytest.mark.parametrize(("option", "reads_unwritten", "confirms"), [
    (None, False, True),   # a recognised server: the second channel, but no one-channel reading
    (True, True, True),
    (False, False, False),
])
def test_reading_an_unwritten_verdict_at_its_anchor_is_asked_for(
        option: bool | None, reads_unwritten: bool, confirms: bool) -> None:
    from capjudge.backends.openai_backend import OpenAIBackend

    backend = OpenAIBackend("gemma-3-270m", base_url="http://127.0.0.1:9/v1",
                            force_anchor=option)
    backend.server = "llama.cpp"  # as recognised from its /props
    assert (backend.force_anchor, backend.confirm_at_anchor) == (reads_unwritten, confirms)


@pytest.mark.parametrize(("text", "value"), [
    ("점수: 8점 (10점 만점)\n캡션이 정확합니다.", None),  # 8 of 10: 8, or 80?
    ("评分：8分（满分10分）", None),
    ("8点（10点満点）", None),
    ("점수: 80점 (100점 만점)", 80),
    ("评分：80分（满分100分）", 80),
])
def test_a_scale_in_cjk_notation_is_the_values_scale(text: str, value: int | None) -> None:
    found = locate(text, VISCE2)
    assert (found.value if isinstance(found, Located) else None) == value


def test_a_forced_anchor_is_read_again_from_the_cache_under_new_rules(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A cached answer that wrote no number was read at its forced anchor; read again under
    # new reading rules (never asked again) it must keep that reading. It came back a
    # parse_failure for every such judgement of the bundled sample after a rules bump.
    from capjudge.reading import entry as reading_entry

    def script(body: dict[str, Any]) -> Scripted:
        return Scripted(tokens=[("Accurate and complete, nothing is missing.", {})],
                        anchor={80: 0.9, 40: 0.1})

    first, _ = _score(tmp_path, script, "force_anchor=true")
    monkeypatch.setattr(reading_entry, "READING_RULES_VERSION",
                        reading_entry.READING_RULES_VERSION + 1)
    again, server = _score(tmp_path, script, "force_anchor=true")
    assert server.requests == []  # read again from the cache, never asked
    assert first["status"] == again["status"] == "ok"
    assert again["score"] == pytest.approx(first["score"])
    assert again["criteria"]["score"]["confirmation"] == "forced-anchor"
