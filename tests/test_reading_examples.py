"""Issue 10's examples, tried as a user would: ``capjudge score ... --json`` against the
OpenAI-protocol stand-in server answering the way GPT-4o, Qwen2-VL and LLaVA-style models
write. Every one used to come back with a wrong score and status ``ok``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from capjudge.backends import create_backend
from capjudge.cli import main as cli_main
from capjudge.client import JudgeClient, RetryPolicy
from capjudge.methods.gveval import score_slot
from capjudge.protocol import Decoding, JudgeRequest, Message
from capjudge.scoring import harmonic_score
from capjudge.testing.openai_server import (
    MockOpenAIServer,
    Scripted,
    default_script,
    prompt_text,
)

Script = Callable[[dict[str, Any]], Scripted]


def score(script: Script, args: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path,
          model: str = "gpt-4o-2024-08-06") -> tuple[dict[str, Any], MockOpenAIServer]:
    """Run ``capjudge score --json`` against a server answering with ``script``."""
    with MockOpenAIServer(script) as server:
        cli_main(["score", "--backend", f"openai/{model}", "--base-url", server.url,
                  "--cache-dir", str(tmp_path / "cache"), "--json", *args])
        out = json.loads(capsys.readouterr().out)
    return out, server


def picture(tmp_path: Path, name: str = "img.png") -> Path:
    path = tmp_path / name
    Image.new("RGB", (64, 48), (200, 40, 40)).save(path)
    return path


def with_context_stage(answer: Scripted) -> Script:
    """The default answers for VisCE²'s context extraction, ``answer`` for the rating."""
    def script(body: dict[str, Any]) -> Scripted:
        text = prompt_text(body)
        if "Analyze the uploaded image" in text or "Generate a detailed description" in text:
            return default_script(body)
        return answer
    return script


GVEVAL = ["--method", "gveval", "--mode", "ref-only", "--caption", "A red square.",
          "--ref", "A red box on grey."]


def test_digit_split_scores_are_exact_over_the_whole_scale(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    # Qwen/LLaVA write "82" as "8", "2": first digit 8 (.6), 9 (.3), 7 (.1).
    dist = {82: 0.3, 85: 0.3, 90: 0.2, 95: 0.1, 70: 0.1}
    out, server = score(lambda body: Scripted(distribution=dist, split_digits=True), GVEVAL,
                        capsys, tmp_path, model="Qwen2-VL-7B-Instruct")
    # Was 83.5 (E[score | first digit 8]) with status ok.
    assert out["status"] == "ok" and out["score"] == pytest.approx(84.6)
    assert out["mass"] == pytest.approx(1.0)
    assert out["distribution"] == {str(v): pytest.approx(p) for v, p in dist.items()}
    # One request, then one continuation follow-up per other leading digit: "...$9", "...$7".
    follow_ups = [b for b in server.requests if b.get("continue_final_message")]
    assert len(server.requests) == 3 and len(follow_ups) == 2
    assert sorted(b["messages"][-1]["content"][-1] for b in follow_ups) == ["7", "9"]
    assert all(b["add_generation_prompt"] is False and b["max_tokens"] == 1
               for b in follow_ups)


def test_without_continuation_the_lost_mass_is_reported() -> None:
    dist = {82: 0.3, 85: 0.3, 90: 0.2, 95: 0.1, 70: 0.1}
    request = JudgeRequest(messages=(Message("user", ("Rate.",)),), slots=(score_slot(),),
                           decoding=Decoding(max_tokens=64), template="t@1")
    with MockOpenAIServer(lambda body: Scripted(distribution=dist, split_digits=True)) as server:
        backend = create_backend("openai/Qwen2-VL-7B-Instruct", base_url=server.url,
                                 continue_digits=False)
        response = JudgeClient(backend, None).run([request])[0]
        assert server.total_received == 1
    slot = response.slots[0]
    # The conditional distribution of the observed "8" is not passed off as the whole one.
    assert slot.status == "low_mass" and slot.mass == pytest.approx(0.6)
    assert slot.reason is not None and "0.400" in slot.reason and "continue_digits" in slot.reason


def test_a_server_that_cannot_continue_turns_follow_ups_off(tmp_path: Path) -> None:
    dist = {82: 0.3, 85: 0.3, 90: 0.2, 95: 0.1, 70: 0.1}
    request = JudgeRequest(messages=(Message("user", ("Rate.",)),), slots=(score_slot(),),
                           decoding=Decoding(max_tokens=64), template="t@1")
    with MockOpenAIServer(lambda body: Scripted(distribution=dist, split_digits=True)) as server:
        server.inject("ok", "400", "400")  # the follow-ups are refused (OpenAI's API would)
        backend = create_backend("openai/some-model", base_url=server.url)
        client = JudgeClient(backend, None, retry=RetryPolicy(2, 0.01, 0.02))
        response = client.run([request])[0]
        assert backend.continue_digits is False
    slot = response.slots[0]
    assert slot.status == "low_mass" and "cannot continue" in (slot.reason or "")


def test_gveval_reads_the_final_score_not_a_later_dollar_number(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = "Clear and correct. The final score is $85$. Note the scale runs from $0$ to $100$."
    out, _ = score(lambda body: Scripted(text=text), GVEVAL, capsys, tmp_path)
    assert out["status"] == "ok" and out["score"] == pytest.approx(85.0)  # was 100


def test_a_decimal_is_never_read_as_its_leading_digits(capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    text = "Mostly right. The final score is $85.5$."
    out, _ = score(lambda body: Scripted(text=text, logprobs=False), GVEVAL, capsys, tmp_path)
    assert out["score"] is None and out["status"] == "parse_failure"  # was 8
    assert "decimal (85.5)" in out["reason"]


def test_visce2_removes_the_scale_phrase_before_the_first_integer(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    answer = Scripted(text="On a scale of 0 to 100, I rate 85.")
    out, _ = score(with_context_stage(answer), ["--method", "visce2", "--image",
                                                 str(picture(tmp_path)), "--caption", "A red box."],
                   capsys, tmp_path)
    assert out["status"] == "ok" and out["score"] == pytest.approx(85.0)  # was 0


def test_harmoniceval_removes_the_scale_in_brackets(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    out, _ = score(lambda body: Scripted(text="Rating (1-5): 4"),
                   ["--method", "harmoniceval", "--image", str(picture(tmp_path)), "--caption",
                    "A red box."], capsys, tmp_path)
    assert out["status"] == "ok"
    # The 4 is read (was 1). The paper's s̃_c = Σ r P(r) on the model's probabilities: the
    # stand-in puts all of the scale's probability on "4", so s̃_c = 4 x the captured mass;
    # the renormalised expectation (kept as ``expected``) is 4.
    for c in out["criteria"].values():
        assert c["printed"] == 4 and c["expected"] == pytest.approx(4.0)
        assert c["score"] == pytest.approx(4.0 * c["mass"])


@pytest.mark.parametrize(("text", "c", "h"), [
    ("Correctness Score (C. Score): 1 + 1 + 0.5 = 2.5\nHallucination Score (H. Score): 1",
     2.5, 1.0),  # was C = 1
    ("Correctness Score (C. Score): 3\nH. Score: -2", 3.0, 2.0),  # was a parse failure
    ("Correctness Score (C. Score): [2]\nHallucination Score (H. Score): [1]", 2.0, 1.0),
])
def test_3d_points_read_the_stated_total_negatives_and_brackets(
        text: str, c: float, h: float, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    views = [str(picture(tmp_path, f"v{i}.png")) for i in range(3)]
    out, _ = score(lambda body: Scripted(text=text), ["--method", "cap3d", "--views", *views,
                                                       "--caption", "A red chair."],
                   capsys, tmp_path)
    assert out["status"] == "ok"
    assert out["criteria"]["correctness"]["score"] == pytest.approx(c)
    assert out["criteria"]["hallucination"]["score"] == pytest.approx(h)
    assert out["score"] == pytest.approx(100 * c / (c + h))


def test_3d_unreadable_points_are_a_parse_failure_with_the_reason(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    views = [str(picture(tmp_path, f"v{i}.png")) for i in range(2)]
    text = "Correctness Score (C. Score): [Numerical Value]\nHallucination Score (H. Score): 1"
    out, _ = score(lambda body: Scripted(text=text), ["--method", "cap3d", "--views", *views,
                                                       "--caption", "A red chair."],
                   capsys, tmp_path)
    assert out["score"] is None and out["status"] == "parse_failure"
    assert "placeholder" in out["criteria"]["correctness"]["reason"]


HE_DISTRIBUTIONS = {"Completeness": {4: 0.6, 5: 0.3, 3: 0.1}, "Clarity": {5: 0.7, 4: 0.3},
                    "Fluency": {5: 0.9, 4: 0.1}, "Conciseness": {4: 0.5, 3: 0.3, 5: 0.2}}


def he_script(body: dict[str, Any]) -> Scripted:
    """Distributions for four criteria; correctness comes back without logprobs."""
    text = prompt_text(body)
    if "- Correctness:" in text:
        return Scripted(text="3\nThe caption misses the grey background.", logprobs=False)
    name = next(n for n in HE_DISTRIBUTIONS if f"- {n}:" in text)
    return Scripted(distribution=HE_DISTRIBUTIONS[name], score_first=True)


def test_an_answer_without_logprobs_is_text_only_and_never_dominates(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out, _ = score(he_script, ["--method", "harmoniceval", "--image", str(picture(tmp_path)),
                               "--caption", "A red box."], capsys, tmp_path)
    correctness = out["criteria"]["correctness"]
    assert correctness["status"] == "text_only" and correctness["score"] == 3.0
    assert correctness["sd"] is None and correctness["distribution"] is None
    assert out["status"] == "text_only"
    # By hand: sds .6, .458, .3, .7 (completeness, clarity, fluency, conciseness); the
    # text-only correctness is weighted as the least confident (sd .7): 4.2637. With sd 0 it
    # took ~all the weight (σ floored at 1e-6) and the item scored ~3.00.
    assert out["score"] == pytest.approx(4.2637, abs=1e-3)
    sds = [0.6, 0.21 ** 0.5, 0.3, 0.7, 0.7]
    assert out["score"] == pytest.approx(harmonic_score([4.2, 4.7, 4.9, 3.9, 3.0], sds, 0.75))


def test_a_200_with_an_error_body_is_retried_and_keeps_the_message(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with MockOpenAIServer(lambda body: Scripted(distribution={60: 0.8, 70: 0.2})) as server:
        server.inject("error200")
        cli_main(["score", "--backend", "openai/gpt-4o-2024-08-06", "--base-url", server.url,
                  "--cache-dir", str(tmp_path / "cache"), "--json", *GVEVAL])
        out = json.loads(capsys.readouterr().out)
        assert server.total_received == 2  # retried (was: error at once, never retried)
    assert out["status"] == "ok" and out["score"] == pytest.approx(62.0)
    request = JudgeRequest(messages=(Message("user", ("Rate.",)),), slots=(score_slot(),),
                           template="t@1")
    with MockOpenAIServer() as server:
        server.inject(*["error200"] * 3)
        backend = create_backend("openai/gpt-4o-2024-08-06", base_url=server.url)
        failed = JudgeClient(backend, None, retry=RetryPolicy(3, 0.01, 0.02)).run([request])[0]
    assert failed.status == "error" and failed.attempts == 3
    assert "The server had an error while processing your request" in (failed.reason or "")


def test_text_only_is_a_status_everywhere_it_is_counted() -> None:
    import pandas as pd

    from capjudge.methods import Criterion, get_method, verdict
    from capjudge.protocol import STATUSES
    from capjudge.report.agreement import series_agreement
    from capjudge.validate import ValidateConfig, build_checks

    assert "text_only" in STATUSES
    method = get_method("gveval")
    v = verdict(method, [Criterion("score", "text_only", "no logprobs", 77.0, printed=77.0)],
                {})
    assert v.status == "text_only" and v.score == 77.0  # scored: it has a printed score
    rows = [{"score": 70.0 + k, "status": "text_only" if k < 2 else "ok", "human": float(k),
             "system": "s"} for k in range(4)]
    entry = series_agreement("j", "gveval", "ref-only", rows, 0, "p")
    assert entry["n"] == 4 and entry["text_only"] == 2
    judgements = pd.DataFrame([{"judge": "j", "method": "gveval", "criterion": "score",
                                "item_id": "a", "status": "text_only", "score": 77.0,
                                "mass": None, "probs": None, "printed": 77.0}])
    items = pd.DataFrame([{"id": "a", "media_sha256": "a" * 64}])
    suites = {name: exps for name, _, exps in build_checks(items, judgements, ValidateConfig())}
    assert "text-only" in suites and len(suites["text-only"]) == 2


def test_visce2_json_score_is_the_printed_integer_with_the_expected_value_beside_it(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # VisCE² §3: the first integer printed is the score; .6*80 + .3*75 + .1*65 = 77 beside it.
    answer = Scripted(distribution={80: 0.6, 75: 0.3, 65: 0.1}, score_first=True)
    out, server = score(with_context_stage(answer), [
        "--method", "visce2", "--mode", "vanilla", "--image", str(picture(tmp_path)),
        "--caption", "A red square."], capsys, tmp_path)
    assert out["status"] == "ok" and out["score"] == 80.0 and out["printed"] == 80
    assert out["expected"] == pytest.approx(77.0)
    assert out["settings"] == "prompt_variant=paper; score=printed; verdict_format=paper"
    assert out["template"] == "visce2/vanilla@2"
    rating = [b for b in server.requests if "Candidate caption" in prompt_text(b)]
    assert prompt_text(rating[0]) == (
        "On a precise scale from 0 to 100, rate whether the candidate caption is appropriate "
        "for the given image. Candidate caption: A red square. Your rating must be a single "
        "digit between 0 and 100.")
