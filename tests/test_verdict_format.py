"""``verdict_format: json_schema`` (issue 30): a constrained verdict as a named option.

The paper's free-text answer stays the default; with the option the request carries the
method's verdict as a JSON schema (the OpenAI ``response_format``), the prompt says which keys
to fill, every row records the option, and the reader reads the JSON. A backend that cannot
enforce a schema is refused before anything is sent. (llama.cpp's own server enforcing it:
tests/test_llamacpp.py.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from replay import replay

from capjudge.cli import main as cli_main
from capjudge.methods import MethodOptions, get_method
from capjudge.methods.base import Planned
from capjudge.protocol import Decoding
from capjudge.testing.openai_server import MockOpenAIServer, Scripted


def _answer(text: str, seen: list[dict[str, Any]]) -> Any:
    def script(body: dict[str, Any]) -> Scripted:
        seen.append(body)
        return Scripted(text=text, logprobs=False)
    return script


@pytest.mark.parametrize("method, args, text, key, score", [
    ("gveval", ["--mode", "ref-only", "--ref", "A dog runs."],
     '{"reasoning": "fine", "score": 77}', "score", 77.0),
    ("gveval-accr", ["--mode", "ref-only", "--ref", "A dog runs."],
     '{"reasoning": "ok", "accuracy": 80, "completeness": 60, "conciseness": 90, '
     '"relevance": 70}', "accuracy", 75.0),
])
def test_the_request_carries_the_schema_and_the_row_records_the_option(
        method: str, args: list[str], text: str, key: str, score: float,
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    with MockOpenAIServer(_answer(text, seen)) as server:
        assert cli_main(["score", "--backend", "openai/gpt-4o-2024-08-06", "--base-url",
                         server.url, "--cache-dir", str(tmp_path), "--json", "--method", method,
                         "--caption", "A dog.", *args, "--method-option",
                         "verdict_format=json_schema"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "text_only" and out["score"] == pytest.approx(score)
    assert "verdict_format=json_schema" in out["settings"]
    assert out["criteria"][key]["read_by"].startswith("JSON key")
    body = seen[0]
    schema = body["response_format"]["json_schema"]["schema"]
    assert body["response_format"]["type"] == "json_schema"
    assert schema["required"][0] == "reasoning" and key in schema["properties"]
    assert schema["additionalProperties"] is False
    last = body["messages"][-1]["content"]
    last_text = last if isinstance(last, str) else last[-1]["text"]
    assert "Give your answer as a JSON object" in last_text and f'"{key}"' in last_text


def test_the_paper_default_sends_no_schema_and_keeps_its_cache_keys() -> None:
    method = get_method("harmoniceval")
    from capjudge.item import Item

    item = Item(id="i", candidate="A dog.", references=("A dog runs.",))
    options = MethodOptions(decoding=Decoding(), vision=False)
    paper = [p for p in method.plan(item, "default", options) if isinstance(p, Planned)]
    assert paper and all(method.constrained(p) is p for p in paper)
    assert all("verdict_schema" not in p.request.canonical() for p in paper)
    constrained = [method.constrained(p) for p in method.plan(item, "default", MethodOptions(
        decoding=Decoding(), vision=False, extra={"verdict_format": "json_schema"}))
        if isinstance(p, Planned)]
    # Score first, as HarmonicEval's prompt asks; a different request, a different key.
    schema = json.loads(constrained[0].request.verdict_schema)
    assert schema["required"] == [constrained[0].request.slots[0].name, "reasoning"]
    assert constrained[0].request.cache_key("b", "s") != paper[0].request.cache_key("b", "s")


def test_cap3d_asks_for_its_points(tmp_path: Path) -> None:
    entry = {"id": "c3-json", "method": "cap3d", "style": "text",
             "text": '{"correctness": 3, "hallucination": 1}'}
    assert replay(entry, tmp_path)["score"] == pytest.approx(75.0)
    schema = get_method("cap3d").verdict_fields(None)  # type: ignore[arg-type]
    assert set(schema) == {"correctness", "hallucination"}


@pytest.mark.parametrize("backend, option, message", [
    ("fake/hash", "verdict_format=json_schema", "needs a backend that enforces a JSON schema"),
    ("fake/hash", "verdict_format=xml", "unknown verdict_format 'xml'"),
])
def test_a_backend_that_cannot_enforce_it_or_a_bad_value_is_a_usage_error(
        backend: str, option: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main(["score", "--backend", backend, "--method", "gveval", "--mode",
                     "ref-only", "--caption", "A dog.", "--ref", "A dog runs.",
                     "--method-option", option])
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
