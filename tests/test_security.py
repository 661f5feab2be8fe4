"""Secrets stay where they belong (issue 11, item 4).

The API key may live only in the environment; a base URL may not carry credentials. Canary
secrets are planted where a user might put them and searched for in every file a run writes:
judge outputs, the request cache, aggregate, report (database, lineage, markdown/HTML) and the
run registry. Judge-time media tampering (retargeted symlinks, changed files, another working
directory) is the table in ``test_judge_bad_inputs.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from capjudge.cli import main as cli_main
from capjudge.testing.openai_server import MockOpenAIServer
from capjudge.util.credentials import (
    CredentialsInURLError,
    check_url,
    find_credentials,
    has_userinfo,
    redact,
    strip_userinfo,
)

KEY_CANARY = "sk-canary-KEY-4f9a1c"
URL_CANARY = "canary-URL-77b2e0"


def files_containing(root: Path, secret: str, skip: set[Path] | None = None) -> list[Path]:
    """Every file under ``root`` whose bytes contain ``secret``."""
    return [p for p in root.rglob("*") if p.is_file() and p not in (skip or set())
            and secret.encode() in p.read_bytes()]


@pytest.mark.parametrize(("url", "stripped"), [
    ("http://user:pass@host:8000/v1", "http://host:8000/v1"),
    ("https://token@api.example.com/v1", "https://api.example.com/v1"),
    ("http://user:p@ss@host/v1", "http://host/v1"),  # an unencoded "@" in the password
    ("HTTP://U:P@HOST/v1", "HTTP://HOST/v1"),
])
def test_user_info_is_found_and_stripped(url: str, stripped: str) -> None:
    assert has_userinfo(url) and strip_userinfo(url) == stripped
    assert redact(f"could not reach {url} (timeout)") == f"could not reach {stripped} (timeout)"
    with pytest.raises(CredentialsInURLError) as info:
        check_url(url, "--base-url")
    assert "OPENAI_API_KEY" in str(info.value) and stripped in str(info.value)
    assert url not in str(info.value)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "https://api.openai.com/v1",
                                 "http://host/v1?next=a@b", "mailto:someone@example.com", ""])
def test_urls_without_user_info_pass(url: str) -> None:
    assert not has_userinfo(url) and strip_userinfo(url) == url
    check_url(url, "x")


def test_credentials_are_found_anywhere_in_params() -> None:
    params = {"judges": {"a": {"backend_options": {"base_url": "http://u:p@h/v1"}},
                         "b": {"backend_options": {"base_url": "http://h/v1"}}},
              "contexts": {"c": {"servers": ["http://h/v1", "https://k@h2/v1"]}}}
    assert [w for w, _ in find_credentials(params)] == [
        "judges.a.backend_options.base_url", "contexts.c.servers[1]"]


def test_the_key_is_sent_as_bearer_and_written_nowhere(ingested: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A full run (judge CLI, aggregate, report with lineage, registry) with the key canary in
    OPENAI_API_KEY, and a URL canary in a summary.json as versions that did not strip base URLs
    wrote it: neither reaches any file the later stages write."""
    from capjudge.aggregate import AggregateConfig, run_aggregate
    from capjudge.report import ReportConfig, run_report

    monkeypatch.setenv("OPENAI_API_KEY", KEY_CANARY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    judge_dir = tmp_path / "data" / "judge" / "main"
    with MockOpenAIServer() as server:
        code = cli_main(["judge", "--items", str(ingested / "items.parquet"), "--out",
                         str(judge_dir), "--method", "gveval", "--modes", "ref-free",
                         "--backend", "openai/gpt-4o-2024-08-06", "--limit", "12",
                         "--base-url", server.url, "--cache-dir", str(tmp_path / "cache")])
        assert code == 0
        assert set(server.authorization) == {f"Bearer {KEY_CANARY}"}  # never Basic auth
    summary_path = judge_dir / "summary.json"
    summary = json.loads(summary_path.read_text())
    assert summary["backend"]["base_url"] == server.url
    summary["backend"]["base_url"] = server.url.replace("http://", f"http://u:{URL_CANARY}@")
    summary_path.write_text(json.dumps(summary))  # as an older version would have written it
    (tmp_path / "params.yaml").write_text("judge: {}\n")
    run_aggregate([judge_dir], tmp_path / "data" / "aggregate", AggregateConfig())
    run_report(ingested, [judge_dir], tmp_path / "data" / "aggregate", tmp_path / "reports",
               ReportConfig(bootstrap=20, registry=str(tmp_path / ".capjudge-runs"),
                            params=str(tmp_path / "params.yaml")))
    assert (tmp_path / "reports" / "lineage.json").is_file()
    assert list((tmp_path / ".capjudge-runs").glob("*/capjudge.duckdb"))
    assert files_containing(tmp_path, KEY_CANARY) == []
    assert files_containing(tmp_path, URL_CANARY, skip={summary_path}) == []
    lineage = json.loads((tmp_path / "reports" / "lineage.json").read_text())
    assert server.url in lineage["backends"][0]["backend_facts"]  # the URL itself is kept


@pytest.mark.parametrize("via", ["option", "environment"])
def test_score_refuses_credentials_in_the_base_url(via: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://judge:{URL_CANARY}@127.0.0.1:9/v1"
    args = ["score", "--method", "gveval", "--mode", "ref-only", "--backend",
            "openai/gpt-4o-2024-08-06", "--caption", "A red square.", "--ref", "A red box.",
            "--cache-dir", str(tmp_path / "cache")]
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    if via == "option":
        args += ["--base-url", url]
    else:
        monkeypatch.setenv("OPENAI_BASE_URL", url)
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert "carries credentials" in err and "OPENAI_API_KEY" in err
    assert URL_CANARY not in err
    assert files_containing(tmp_path, URL_CANARY) == []


def test_the_judge_flow_refuses_credentials_before_prefect_records_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The judge config travels as Prefect flow parameters and params go to dvc.lock: a URL
    with user-info in params.yaml stops the stage before either happens."""
    from capjudge.judge import JudgeConfig
    from flows.judge import main as judge_flow_main
    from flows.params import load_params

    section: dict[str, Any] = {
        "method": "gveval", "backend": "openai/gpt-4o-2024-08-06",
        "backend_options": {"base_url": f"http://u:{URL_CANARY}@127.0.0.1:9/v1"}}
    params = {"ingest": {"out": str(tmp_path / "ingest")}, "judges": {"main": section}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(CredentialsInURLError, match="judges.main.backend_options.base_url"):
        load_params(path)
    assert judge_flow_main(["--name", "main", "--params", str(path)]) == 2
    err = capsys.readouterr().err
    assert "carries credentials" in err and URL_CANARY not in err
    with pytest.raises(ValueError, match="carries credentials"):
        JudgeConfig(**section)  # the library refuses it too (no flow, no CLI)


# --- issue 21: authentication failures and messages that repeat the key -------------------

AUTH_CANARY = "canary-Zq8xW3pT-auth-key"  # not sk-shaped: found by its value


def test_a_401_stops_the_judge_at_once_and_the_key_is_never_stored(
        ingested: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", AUTH_CANARY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    with MockOpenAIServer() as server:
        server.reject_key = True
        code = cli_main(["judge", "--items", str(ingested / "items.parquet"), "--out",
                         str(tmp_path / "judge"), "--method", "gveval", "--modes", "ref-free",
                         "--backend", "openai/gpt-4o-2024-08-06", "--limit", "40",
                         "--base-url", server.url, "--cache-dir", str(tmp_path / "cache")])
        received = server.total_received
    err = capsys.readouterr().err
    assert code == 2
    assert "rejected the credentials" in err and "HTTP 401" in err
    assert AUTH_CANARY not in err and "[REDACTED]" in err
    assert received <= 8  # at most the requests already in flight (concurrency 8), not 40
    assert not (tmp_path / "judge" / "judgements.parquet").exists()
    assert files_containing(tmp_path, AUTH_CANARY) == []


def test_score_json_never_prints_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", AUTH_CANARY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    from PIL import Image

    Image.new("RGB", (16, 12), (200, 10, 10)).save(tmp_path / "red.png")
    with MockOpenAIServer() as server:
        server.reject_key = True
        code = cli_main(["score", "--caption", "A red square.", "--json",
                         "--image", str(tmp_path / "red.png"), "--backend",
                         "openai/gpt-4o-2024-08-06", "--base-url", server.url,
                         "--cache-dir", str(tmp_path / "cache")])
        assert server.total_received == 1
    out = capsys.readouterr()
    assert code == 2 and AUTH_CANARY not in out.out + out.err
    assert "rejected the credentials" in out.err


@pytest.mark.parametrize(("message", "kept"), [
    ("HTTP 401: Incorrect API key provided: sk-proj-abcDEF123456789xyz.", "HTTP 401"),
    ("HTTP 400: header was Bearer abcdefghijklmnop", "HTTP 400"),
    (f"HTTP 500: upstream said {AUTH_CANARY} is odd", "HTTP 500"),
])
def test_backend_errors_are_redacted_when_made(message: str, kept: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from capjudge.protocol import BackendError

    monkeypatch.setenv("MY_SERVICE_API_KEY", AUTH_CANARY)
    text = str(BackendError(message, transient=False))
    assert kept in text and "[REDACTED]" in text
    assert "sk-proj" not in text and "abcdefghijklmnop" not in text and AUTH_CANARY not in text


@pytest.mark.parametrize(("code", "message", "auth"), [
    (401, "anything", True),
    (403, "You do not have permission to use this API key", True),
    (403, "logprobs are not supported with this model", False),
    (400, "Invalid API key format?", False),
])
def test_auth_failures_are_told_from_refusals(code: int, message: str, auth: bool) -> None:
    from capjudge.backends.openai_backend import is_auth_failure

    assert is_auth_failure(code, message) is auth
