"""A run that behaves under a user's hands (issue 33), through the public CLI.

- Ctrl-C (SIGINT to the process group, as a terminal sends it): no new request after it, the
  process gone within 5 s with a one-line message saying how to resume, the partial output
  written and marked incomplete, the answers kept in the cache (a rerun asks nothing again).
- One output folder, one owner: a second run of the same judge adds its modes beside the
  first's; another judge's run is refused naming what is there; a concurrent run refuses.
- A base URL that is not an OpenAI API (HTML, another JSON shape) or that answers 401 stops
  the run after at most two requests, with one line naming the URL and what came back.
- A full disk is one line (exit 2) naming the path and the space, never a traceback.
- Look-alike item ids; the review items (--params, --items, gzip, a bare base URL).
"""

from __future__ import annotations

import errno
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from capjudge.cli import main as cli_main
from capjudge.judge.out import output_lock
from capjudge.testing.openai_server import MockOpenAIServer
from capjudge.util.atomic import INCOMPLETE_MARKER

ROOT = Path(__file__).resolve().parents[1]


def _judge_argv(items: Path, out: Path, url: str, cache: Path, *extra: str) -> list[str]:
    return ["judge", "--items", str(items / "items.parquet"), "--out", str(out),
            "--backend", "openai/gpt-4o-2024-08-06", "--base-url", url, "--method", "gveval",
            "--modes", "ref-only", "--cache-dir", str(cache), "--max-tokens", "32", *extra]


@pytest.mark.heavy(seconds=22)
@pytest.mark.slow
def test_ctrl_c_stops_sending_exits_promptly_and_a_rerun_resumes(ingested: Path,
                                                                 tmp_path: Path) -> None:
    # 1 s per answer, 8 in flight: the run lasts ~17 s, the signal lands in its middle.
    with MockOpenAIServer(latency_s=1.0) as server:
        argv = _judge_argv(ingested, tmp_path / "out", server.url, tmp_path / "cache")
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        # A terminal's process starts with Ctrl-C's default action; a test run launched in the
        # background of a shell inherits SIGINT ignored (which capjudge rightly keeps).
        proc = subprocess.Popen([sys.executable, "-m", "capjudge.cli", *argv],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env, start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            deadline = time.monotonic() + 120
            while server.total_received < 12:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.05)
            at_signal = server.total_received
            t0 = time.monotonic()
            os.killpg(proc.pid, signal.SIGINT)  # the terminal's Ctrl-C
            _, err = proc.communicate(timeout=30)
            elapsed = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                proc.kill()
        after = server.total_received - at_signal
        concurrency = 8  # the OpenAI backend's default in flight
        assert proc.returncode == 130, err
        assert elapsed < 5, elapsed
        assert after <= concurrency, after
        assert "Traceback" not in err and "run the same command again" in err, err
        out = tmp_path / "out"
        assert (out / INCOMPLETE_MARKER).exists() and (out / "judgements.parquet").exists()
        answered = server.total_received
        # The same command again: what was answered comes from the cache.
        assert cli_main(argv) == 0
        assert sum(server.reasked.values()) == 0
        assert not (out / INCOMPLETE_MARKER).exists()
        rows = pq.read_table(out / "judgements.parquet").to_pylist()
        assert len(rows) == len(pq.read_table(ingested / "items.parquet"))
        assert server.total_received >= answered


def test_two_runs_on_one_out_keep_both_modes_and_another_judge_is_refused(
        ingested: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, cache = tmp_path / "out", tmp_path / "cache"
    base = ["judge", "--items", str(ingested / "items.parquet"), "--out", str(out),
            "--method", "gveval", "--cache-dir", str(cache), "--limit", "6"]
    assert cli_main([*base, "--backend", "fake/hash+vision", "--modes", "ref-only"]) == 0
    assert cli_main([*base, "--backend", "fake/hash+vision", "--modes", "combined"]) == 0
    modes = {r["mode"] for r in pq.read_table(out / "judgements.parquet").to_pylist()}
    assert modes == {"ref-only", "combined"}
    capsys.readouterr()
    assert cli_main([*base, "--backend", "fake/const:70+vision", "--modes", "ref-only"]) == 2
    err = capsys.readouterr().err
    assert "holds judgements of gveval on fake/hash+vision" in err and "another judge" in err
    assert len(err.strip().splitlines()) == 1
    with output_lock(out):  # a run holding the folder: the second one refuses at once
        assert cli_main([*base, "--backend", "fake/hash+vision", "--modes", "ref-free"]) == 2
    assert "another run (pid" in capsys.readouterr().err
    modes = {r["mode"] for r in pq.read_table(out / "judgements.parquet").to_pylist()}
    assert modes == {"ref-only", "combined"}  # nothing lost


class _Server:
    """A base URL that answers every request with one fixed body (and counts them)."""

    def __init__(self, status: int, body: bytes, content_type: str) -> None:
        outer = self
        self.hits = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                outer.hits += 1
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST  # noqa: N815 - the stdlib's name

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> _Server:
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    yield


@pytest.mark.parametrize("status, body, content_type, message", [
    (200, b"<!DOCTYPE html><html><body>Please sign in</body></html>", "text/html",
     "did not answer as an OpenAI chat-completions API: it sent an HTML page"),
    (200, b'{"status": "ok", "version": "2.1"}', "application/json",
     "a JSON object with the keys ['status', 'version'] and no 'choices'"),
    (401, b'{"error": {"message": "Incorrect API key", "code": "invalid_api_key"}}',
     "application/json", "the server rejected the credentials"),
])
def test_a_wrong_server_stops_the_run_after_at_most_two_requests(
        status: int, body: bytes, content_type: str, message: str, ingested: Path,
        tmp_path: Path, capsys: pytest.CaptureFixture[str], no_key: None) -> None:
    with _Server(status, body, content_type) as server:
        code = cli_main(_judge_argv(ingested, tmp_path / "out", server.url,
                                    tmp_path / "cache", "--limit", "30"))
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and "Traceback" not in err
    assert server.hits <= 2, server.hits
    assert not (tmp_path / "out" / "judgements.parquet").exists()


def test_a_full_disk_is_one_line_and_loses_nothing(
        ingested: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import capjudge.judge.out as judge

    real = judge.pq.write_table

    def full(table: Any, where: Any, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(where))

    with MockOpenAIServer() as server:
        argv = _judge_argv(ingested, tmp_path / "out", server.url, tmp_path / "cache",
                           "--limit", "5")
        monkeypatch.setattr(judge.pq, "write_table", full)
        assert cli_main(argv) == 2
        err = capsys.readouterr().err
        assert "No space left on device" in err and "MB free" in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
        asked = server.total_received
        monkeypatch.setattr(judge.pq, "write_table", real)
        assert cli_main(argv) == 0  # room again: nothing is asked twice
        assert server.total_received == asked


def test_look_alike_ids_are_quarantined_naming_both(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import unicodedata

    from PIL import Image

    Image.new("RGB", (32, 32), (9, 9, 9)).save(tmp_path / "a.png")
    Image.new("RGB", (32, 32), (9, 9, 9)).save(tmp_path / unicodedata.normalize("NFD",
                                                                              "é.png"))
    ids = ["café", unicodedata.normalize("NFD", "café"), "café ", "ca\u200bfé",
           "ｃａｆé", "caf\u00e9\u00a0"]
    rows = [{"id": i, "image": "a.png", "candidate": "A cat."} for i in ids]
    rows.append({"id": "x", "image": "é.png", "candidate": "A cat."})  # NFC name, NFD file
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    cli_main(["ingest", str(manifest), "--media-root", str(tmp_path), "--out",
              str(tmp_path / "out")])
    items = pq.read_table(tmp_path / "out" / "items.parquet").to_pylist()
    quarantined = {r["line"]: r["reason"] for r in
                   pq.read_table(tmp_path / "out" / "quarantine.parquet").to_pylist()}
    assert [i["id"] for i in items] == ["café"]
    assert set(quarantined) == {2, 3, 4, 5, 6, 7}
    for line in (2, 3, 4, 5, 6):
        assert "looks the same as id 'café' at line 1" in quarantined[line]
    assert "file not found" in quarantined[7] and "another Unicode form" in quarantined[7]


def test_review_items_are_clear_errors(ingested: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["score", "--params", str(tmp_path / "nope.yaml"), "--backend",
                     "fake/hash", "--caption", "A dog.", "--ref", "A dog runs.", "--method",
                     "gveval", "--mode", "ref-only"]) == 2
    assert "--params" in capsys.readouterr().err
    assert cli_main(["judge", "--items", str(ingested / "quarantine.parquet"), "--out",
                     str(tmp_path / "j"), "--backend", "fake/hash"]) == 2
    assert "not an items table" in capsys.readouterr().err
    import gzip

    (tmp_path / "m.jsonl").write_bytes(gzip.compress(b'{"id": "a"}\n'))
    assert cli_main(["ingest", str(tmp_path / "m.jsonl"), "--media-root", str(tmp_path),
                     "--out", str(tmp_path / "o")]) == 2
    assert "gzip-compressed" in capsys.readouterr().err


def test_a_bare_server_address_means_its_v1_api() -> None:
    from capjudge.backends.openai_backend import with_api_path

    assert with_api_path("http://localhost:8000") == "http://localhost:8000/v1"
    assert with_api_path("http://localhost:8000/") == "http://localhost:8000/v1"
    assert with_api_path("https://h.example/openai/v1") == "https://h.example/openai/v1"
    assert with_api_path(None) is None


def test_a_constant_metric_says_why_it_has_no_correlation() -> None:
    from capjudge.metaeval.protocols import Protocol
    from capjudge.metaeval.run import Rows, correlate

    rows = Rows(index=[0, 1, 2, 3], human=[1.0, 2.0, 3.0, 4.0], annotator=[0, 0, 0, 0])
    out = correlate([0.5, 0.5, 0.5, 0.5], rows, Protocol(name="t", dataset="t", rows="ratings"),
                    0)
    assert out.get("note") and "same score" in str(out["note"])


def test_an_option_added_later_at_its_default_is_the_same_judge(
        ingested: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Rows written before ``visual_input`` existed lack it; a run at its default adds a mode
    to their folder, and one that sets another value is refused as another judge."""
    import pyarrow as pa

    out, cache = tmp_path / "out", tmp_path / "cache"
    base = ["judge", "--items", str(ingested / "items.parquet"), "--out", str(out),
            "--method", "gveval", "--cache-dir", str(cache), "--limit", "6",
            "--backend", "fake/hash+vision"]
    assert cli_main([*base, "--modes", "ref-only"]) == 0
    path = out / "judgements.parquet"
    table = pq.read_table(path)
    older = [s.replace("; visual_input=tile", "") if s else s
             for s in table.column("settings").to_pylist()]
    assert any(s and "visual_input" not in s for s in older)
    index = table.column_names.index("settings")
    pq.write_table(table.set_column(index, "settings", pa.array(older, pa.string())), path)
    assert cli_main([*base, "--modes", "combined"]) == 0
    modes = {r["mode"] for r in pq.read_table(path).to_pylist()}
    assert modes == {"ref-only", "combined"}
    capsys.readouterr()
    assert cli_main([*base, "--modes", "ref-free", "--method-option",
                     "visual_input=frames"]) == 2
    assert "another judge" in capsys.readouterr().err
