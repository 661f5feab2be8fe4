"""Keeping the pipe full (issue 42): ``capjudge judge --concurrency`` and the judge flow's
chunks sharing one client whose ``concurrency`` bounds every request in flight."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from capjudge.cli import main as cli_main


def test_judge_concurrency_flag_sets_the_clients_concurrency(
        ingested: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import capjudge.judge.connect as judge

    seen: list[int | None] = []
    original = judge.build_client

    def spy(backend: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("concurrency"))
        return original(backend, **kwargs)

    monkeypatch.setattr(judge, "build_client", spy)
    monkeypatch.chdir(tmp_path)
    base = ["judge", "--backend", "fake/hash", "--cache-dir", str(tmp_path / "cache"),
            "--items", str(ingested / "items.parquet"), "--method", "gveval",
            "--modes", "ref-only", "--limit", "4"]
    assert cli_main([*base, "--out", str(tmp_path / "a"), "--concurrency", "3"]) == 0
    assert cli_main([*base, "--out", str(tmp_path / "b")]) == 0
    assert seen == [3, None]  # None: the backend's own default
    capsys.readouterr()


def text_items(path: Path, n: int) -> Path:
    import pyarrow.parquet as pq

    from capjudge.records import ItemRow

    rows = [ItemRow(id=f"t{i:04d}", task="caption", media_kind="none",
                    candidate=f"A dog number {i} runs.", references=("A dog runs.",))
            for i in range(n)]
    pq.write_table(ItemRow.table(rows), path)
    return path


def test_a_server_that_lists_its_models_needs_no_probe() -> None:
    """The first requests go together when the server already proved itself (issue 42)."""
    from capjudge.backends import create_backend
    from capjudge.backends.fake import FakeBackend
    from capjudge.client import JudgeClient
    from capjudge.testing.openai_server import MockOpenAIServer

    with MockOpenAIServer() as server:
        backend = create_backend("openai/gpt-4o-2024-08-06", base_url=server.url)
        assert backend.verified() and JudgeClient(backend, None)._probed
    assert not JudgeClient(FakeBackend("hash"), None)._probed  # no server: probe as before


def test_a_sign_in_page_is_not_verified() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from capjudge.backends import create_backend

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = b"<html><body>Sign in</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True).start()
    try:
        port = httpd.server_address[1]
        backend = create_backend("openai/gpt-4o-2024-08-06",
                                 base_url=f"http://127.0.0.1:{port}/v1")
        assert backend.verified() is False  # the first request goes alone, as before
    finally:
        httpd.shutdown()


@pytest.mark.heavy(seconds=5)
@pytest.mark.slow
def test_api_judge_flow_overlaps_chunks_within_its_concurrency(
        harness: None, tmp_path: Path) -> None:
    """runner.workers 1 (params.yaml) no longer serialises an API judge's chunks; the one
    client still bounds the requests in flight, and the rows are the library's."""
    import pyarrow.parquet as pq
    import yaml

    from capjudge.item import load_items
    from capjudge.judge import JudgeConfig, judge_items
    from capjudge.testing.openai_server import MockOpenAIServer
    from flows.judge import main

    items = text_items(tmp_path / "items.parquet", 40)
    with MockOpenAIServer(latency_s=0.05) as server:
        judge = {"method": "gveval", "backend": "openai/gpt-4o-2024-08-06",
                 "modes": ["ref-only"], "max_tokens": 64, "concurrency": 3,
                 "backend_options": {"base_url": server.url}}
        params = {"ingest": {"out": str(tmp_path)}, "runner": {"workers": 1}, "judge": {},
                  "judges": {"j": {**judge, "cache_dir": str(tmp_path / "c1"),
                                   "out": str(tmp_path / "out")}}}
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
        assert main(["--name", "j", "--params", str(tmp_path / "params.yaml")]) == 0
        assert server.in_flight.peak <= 3  # the concurrency bound holds across chunk tasks
        assert server.in_flight.requests == 40
        library = judge_items(load_items(items),
                              JudgeConfig(**judge, cache_dir=str(tmp_path / "c2")))
    keep = ("item_id", "mode", "status", "score", "probs", "reasoning")

    def norm(value: object) -> str:
        return repr(list(value) if isinstance(value, tuple) else value)

    table = pq.read_table(tmp_path / "out" / "judgements.parquet").to_pylist()
    flow_rows = sorted(tuple(norm(r[k]) for k in keep) for r in table)
    lib_rows = sorted(tuple(norm(getattr(r, k)) for k in keep) for r in library.rows)
    assert flow_rows == lib_rows and len(flow_rows) == 40
