"""Batch mode (``submit: batch``) against the protocol server with ``/v1/files`` and
``/v1/batches``: same rows as synchronous judging, per-request errors as statuses, resume after
``kill -9`` without resubmitting, size limits, write-only JSONL + import (vllm run-batch), and
the batch discount in costs and estimates."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from capjudge.backends.openai_batch import STATE_FILE, BatchState
from capjudge.cache import RequestCache
from capjudge.cli import main as cli_main
from capjudge.judge import JudgeConfig, run_judge
from capjudge.testing.batch_server import MockBatchServer

MODEL = "gpt-4o-2024-08-06"
PRICES = {MODEL: {"input_per_1m": 2.5, "output_per_1m": 10.0}}


def config(server: MockBatchServer, cache: Path, *, submit: str = "batch", limit: int = 3,
           modes: tuple[str, ...] = ("ref-only", "ref-free"), **batch: Any) -> JudgeConfig:
    options = {"poll_interval_s": 0.02, "max_wait_s": 60, **batch}
    return JudgeConfig(method="gveval", backend=f"openai/{MODEL}", modes=list(modes),
                       limit=limit, cache_dir=str(cache), max_tokens=64, prices=PRICES,
                       backoff_base_s=0.01, backend_options={"base_url": server.url},
                       submit=submit, batch_options=options if submit == "batch" else {})


def rows(out: Path) -> list[dict[str, Any]]:
    return pq.read_table(out / "judgements.parquet").to_pylist()


def state(out: Path) -> list[dict[str, Any]]:
    return json.loads((out / STATE_FILE).read_text())["batches"]


def input_lines(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted(out.glob("batch_*.jsonl"))
            if not p.name.endswith((".output.jsonl", ".errors.jsonl"))
            for line in p.read_text().splitlines()]


def test_batch_judge_gives_the_synchronous_rows_at_half_the_price(ingested: Path,
                                                                  tmp_path: Path) -> None:
    items = ingested / "items.parquet"
    with MockBatchServer() as server:
        sync = run_judge(items, tmp_path / "sync", config(server, tmp_path / "c1",
                                                          submit="sync"))
        sync_bodies = sorted(json.dumps(b, sort_keys=True) for b in server.requests)
        sync_calls = server.total_received
        batch = run_judge(items, tmp_path / "batch", config(server, tmp_path / "c2"))
        assert server.batch_creations == 1
        # Every answer came through the batch (its lines are the only chat requests since).
        assert server.total_received - sync_calls == len(sync_bodies)
        assert server.authorization["Bearer batch"] == len(sync_bodies)
        # The lines are the synchronous requests, byte for byte once parsed.
        lines = input_lines(tmp_path / "batch")
        assert sorted(json.dumps(x["body"], sort_keys=True) for x in lines) == sync_bodies
        assert {x["method"] for x in lines} == {"POST"}
        assert {x["url"] for x in lines} == {"/v1/chat/completions"}
        batch_rows = rows(tmp_path / "batch")
        keys = {r["cache_key"] for r in batch_rows}
        assert {x["custom_id"] for x in lines} == keys  # custom_id = the cache key
        rerun = run_judge(items, tmp_path / "batch", config(server, tmp_path / "c2"))
        assert server.batch_creations == 1  # everything cached: nothing submitted again
    by_row = {(r["item_id"], r["mode"], r["criterion"]): r for r in rows(tmp_path / "sync")}
    for r in batch_rows:
        twin = by_row[(r["item_id"], r["mode"], r["criterion"])]
        assert r["status"] == twin["status"] == "ok"
        assert r["score"] == pytest.approx(twin["score"])
        assert r["probs"] == pytest.approx(twin["probs"])
        assert r["cached"] is False
        assert r["cost_usd"] == pytest.approx(twin["cost_usd"] / 2)
    assert batch["by_status"] == sync["by_status"]
    assert batch["model_calls"] == sync["model_calls"] == len(sync_bodies)
    assert batch["cache_hits"] == 0
    assert batch["cost_usd"] == pytest.approx(sync["cost_usd"] / 2, rel=1e-3)
    assert rerun["cache_hits"] == rerun["requests"] and rerun["model_calls"] == 0
    assert all(r["cached"] for r in rows(tmp_path / "batch"))
    recorded = state(tmp_path / "batch")
    assert [(b["status"], b["collected"]) for b in recorded] == [("completed", True)]
    assert (tmp_path / "batch" / f"{recorded[0]['name']}.output.jsonl").is_file()


def test_per_request_errors_are_statuses_and_only_they_are_resubmitted(ingested: Path,
                                                                       tmp_path: Path) -> None:
    out, cache = tmp_path / "judge", tmp_path / "cache"
    with MockBatchServer() as server:
        planned = run_judge(ingested / "items.parquet", tmp_path / "probe",
                            config(server, tmp_path / "probe-cache", submit="sync", limit=4,
                                   modes=("ref-only",)))
        keys = sorted(r["cache_key"] for r in rows(tmp_path / "probe"))
        assert planned["requests"] == 4
        faults: dict[str, int | str] = {keys[0]: 400, keys[1]: 500, keys[2]: "expired"}
        server.line_fault = lambda custom_id, body: faults.get(custom_id)
        summary = run_judge(ingested / "items.parquet", out,
                            config(server, cache, limit=4, modes=("ref-only",)))
        got = {r["cache_key"]: r for r in rows(out)}
        assert "HTTP 400: injected batch line error 400" in got[keys[0]]["reason"]
        assert "HTTP 500" in got[keys[1]]["reason"]
        assert "batch_expired" in got[keys[2]]["reason"]
        assert all(got[k]["status"] == "error" and got[k]["score"] is None for k in keys[:3])
        assert got[keys[3]]["status"] == "ok"
        assert summary["by_status"] == {"error": 3, "ok": 1}
        assert state(out)[0]["status"] == "expired"  # an expired line expires the batch
        assert RequestCache(cache).get(keys[0]) is None  # failures are never cached
        server.line_fault = None
        again = run_judge(ingested / "items.parquet", out,
                          config(server, cache, limit=4, modes=("ref-only",)))
    assert again["by_status"] == {"ok": 4} and again["model_calls"] == 3
    assert server.batch_creations == 2
    assert [server.submitted_lines[k] for k in keys] == [2, 2, 2, 1]  # only failures again


def test_kill_9_while_polling_resumes_the_batch_without_resubmitting(ingested: Path,
                                                                     tmp_path: Path) -> None:
    out, cache = tmp_path / "judge", tmp_path / "cache"
    n_items = 5
    cmd = [sys.executable, "-m", "capjudge.cli", "judge", "--items",
           str(ingested / "items.parquet"), "--out", str(out), "--modes", "ref-only",
           "--method", "gveval", "--backend", f"openai/{MODEL}", "--limit", str(n_items),
           "--cache-dir", str(cache), "--submit", "batch",
           "--batch-option", "poll_interval_s=0.05"]
    with MockBatchServer() as server:
        server.hold_batches = True  # the batch runs until the test lets it finish
        env = {**os.environ, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "sk-test"}
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline and not (
                (out / STATE_FILE).is_file() and server.batch_retrievals >= 3):
            time.sleep(0.05)
        assert server.batch_retrievals >= 3, "the run never got to polling its batch"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert server.batch_creations == 1
        recorded = state(out)
        assert len(recorded) == 1 and recorded[0]["id"] in server.batches
        assert recorded[0]["status"] == "in_progress" and not recorded[0]["collected"]
        server.hold_batches = False
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "resuming 1 recorded batch(es)" in done.stderr
        assert server.batch_creations == 1  # polled the recorded batch, created none
        assert len(server.submitted_lines) == n_items
        assert max(server.submitted_lines.values()) == 1  # no line sent twice
        assert server.total_received == n_items  # each request answered once, in the batch
    result = rows(out)
    assert [r["status"] for r in result] == ["ok"] * n_items
    assert json.loads((out / "summary.json").read_text())["model_calls"] == n_items
    assert state(out)[0]["collected"] is True


def test_a_batch_created_just_before_a_crash_is_adopted(ingested: Path, tmp_path: Path
                                                       ) -> None:
    """kill -9 between the API creating a batch and batches.json recording its id: the
    rerun finds the batch by its input file instead of creating another."""
    out, cache = tmp_path / "judge", tmp_path / "cache"
    with MockBatchServer() as server:
        server.hold_batches = True
        first = run_judge(ingested / "items.parquet", out,
                          config(server, cache, max_wait_s=0, modes=("ref-only",)))
        assert first["by_status"] == {"error": 3}
        assert all("not answered yet" in r["reason"] and "run the stage again" in r["reason"]
                   for r in rows(out))
        data = json.loads((out / STATE_FILE).read_text())
        batch_id = data["batches"][0]["id"]
        data["batches"][0].update(id=None, status="uploaded", create_attempted=True)
        (out / STATE_FILE).write_text(json.dumps(data))  # as if the id was never written
        server.hold_batches = False
        again = run_judge(ingested / "items.parquet", out,
                          config(server, cache, modes=("ref-only",)))
        assert server.batch_creations == 1
    assert again["by_status"] == {"ok": 3}
    assert state(out)[0]["id"] == batch_id


def test_transient_api_failures_while_polling_are_retried_at_the_next_poll(
        ingested: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, cache = tmp_path / "judge", tmp_path / "cache"
    with MockBatchServer() as server:
        original = server.retrieve_batch
        calls = {"n": 0}

        def flaky(batch_id: str) -> dict[str, Any] | None:
            calls["n"] += 1
            if calls["n"] <= 2:  # the connection drops, as during a server restart
                raise ConnectionResetError("restarting")
            return original(batch_id)

        monkeypatch.setattr(server, "retrieve_batch", flaky)
        monkeypatch.setattr("socketserver.BaseServer.handle_error", lambda *a: None)
        summary = run_judge(ingested / "items.parquet", out,
                            config(server, cache, limit=2, modes=("ref-only",)))
        assert server.batch_creations == 1 and calls["n"] > 2
    assert summary["by_status"] == {"ok": 2}


def test_size_limits_split_the_requests_into_several_batches(ingested: Path,
                                                             tmp_path: Path) -> None:
    out, cache = tmp_path / "judge", tmp_path / "cache"
    with MockBatchServer(max_batch_requests=2) as server:
        summary = run_judge(ingested / "items.parquet", out,
                            config(server, cache, limit=5, modes=("ref-only",),
                                   max_requests=2))
        assert server.batch_creations == 3
        assert summary["by_status"] == {"ok": 5}
        assert [b["requests"] for b in state(out)] == [2, 2, 1]
        # Bytes: a limit of about two lines splits two lines per file at most.
        largest = max(len(json.dumps(x, ensure_ascii=False, separators=(",", ":"))) + 1
                      for x in input_lines(out))
        out2 = tmp_path / "bytes"
        run_judge(ingested / "items.parquet", out2,
                  config(server, tmp_path / "cache2", limit=5, modes=("ref-only",),
                         max_bytes=2 * largest + 10))
        files = [p for p in out2.glob("batch_*.jsonl") if p.name.count(".") == 1]
        assert len(files) >= 3
        assert all(p.stat().st_size <= 2 * largest + 10 for p in files)
        # A single request larger than a whole file may be: its own error, nothing sent.
        creations = server.batch_creations
        tiny = run_judge(ingested / "items.parquet", tmp_path / "tiny",
                         config(server, tmp_path / "cache3", limit=2, modes=("ref-only",),
                                max_bytes=100))
        assert server.batch_creations == creations
    assert tiny["by_status"] == {"error": 2}
    assert all("over a batch file's limit" in r["reason"] for r in rows(tmp_path / "tiny"))


def test_write_only_jsonl_through_an_offline_runner_and_import(ingested: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]
                                                               ) -> None:
    """``write_only`` writes the JSONL; an offline runner (here: the server's chat endpoint,
    as ``vllm run-batch`` would run it) writes results in the same format; ``capjudge batch
    import`` records them and the next run reads them into the cache."""
    import urllib.request

    out, cache = tmp_path / "judge", tmp_path / "cache"
    with MockBatchServer() as server:
        first = run_judge(ingested / "items.parquet", out,
                          config(server, cache, write_only=True, modes=("ref-only",)))
        assert first["by_status"] == {"error": 3} and server.batch_creations == 0
        assert all("write_only" in r["reason"] for r in rows(out))
        jsonl = out / "batch_input_000.jsonl"
        results = tmp_path / "results.jsonl"
        with results.open("w") as f:
            for n, line in enumerate(jsonl.read_text().splitlines()):
                item = json.loads(line)
                request = urllib.request.Request(
                    f"{server.url}/chat/completions", method="POST",
                    data=json.dumps(item["body"]).encode(),
                    headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request) as response:  # noqa: S310 - local
                    body = json.loads(response.read())
                f.write(json.dumps({"id": f"vllm-{n}", "custom_id": item["custom_id"],
                                    "response": {"status_code": 200, "request_id": f"r{n}",
                                                 "body": body}, "error": None}) + "\n")
        assert cli_main(["batch", "import", str(results), "--state-dir", str(out)]) == 0
        assert json.loads(capsys.readouterr().out)["results"] == 3
        answered = server.total_received
        second = run_judge(ingested / "items.parquet", out,
                           config(server, cache, write_only=True, modes=("ref-only",)))
        assert server.total_received == answered and server.batch_creations == 0
    assert second["by_status"] == {"ok": 3}
    assert BatchState(out).entries[0].collected
    assert cli_main(["batch", "import", str(jsonl), "--state-dir", str(out)]) == 2  # inputs


def test_estimate_cost_shows_the_batch_discount(ingested: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    args = ["estimate-cost", "--items", str(ingested / "items.parquet"), "--method", "gveval",
            "--backend", f"openai/{MODEL}", "--modes", "ref-only"]
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"judge": {"prices": PRICES}}))
    assert cli_main([*args, "--params", str(params)]) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["batch"]["discount"] == 0.5
    assert default["batch"]["usd_expected"] == pytest.approx(default["usd_expected"] / 2,
                                                             abs=1e-4)
    assert default["batch"]["usd_max"] == pytest.approx(default["usd_max"] / 2, abs=1e-4)
    params.write_text(yaml.safe_dump({"judge": {"prices": {
        MODEL: {**PRICES[MODEL], "batch_discount": 0.25}}}}))
    assert cli_main([*args, "--params", str(params)]) == 0
    custom = json.loads(capsys.readouterr().out)
    assert custom["batch"]["discount"] == 0.25
    assert custom["batch"]["usd_max"] == pytest.approx(custom["usd_max"] * 0.75, abs=1e-4)


def test_batch_settings_are_checked_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="submit must be one of"):
        JudgeConfig(method="gveval", backend=f"openai/{MODEL}", submit="bulk")
    with pytest.raises(ValueError, match="unknown batch_options: poll"):
        JudgeConfig(method="gveval", backend=f"openai/{MODEL}", submit="batch",
                    batch_options={"poll": 1})
    section = {"method": "gveval", "backend": f"openai/{MODEL}", "submit": "batch",
               "batch_options": {"poll_interval_s": 60, "max_wait_s": 0}}
    assert JudgeConfig.from_params(section).batch_options["max_wait_s"] == 0
    (tmp_path / STATE_FILE).write_text("{not json")
    with pytest.raises(ValueError, match="may still be running"):
        BatchState(tmp_path)


@pytest.mark.heavy(seconds=5)
@pytest.mark.slow
def test_the_dvc_stage_keeps_its_batch_state_where_dvc_does_not_delete_it(
        ingested: Path, tmp_path: Path, harness: str) -> None:
    """``python -m flows.judge`` (the DVC stage's command) in batch mode: one process, and the
    state under ``<cache_dir>/batches/<name>``, since ``dvc repro`` deletes the stage's output
    directory before running it again."""
    from flows.judge import main as judge_main

    cache, out = tmp_path / "cache", tmp_path / "out"
    with MockBatchServer() as server:
        params = {"ingest": {"out": str(ingested)},
                  "judge": {"cache_dir": str(cache), "max_tokens": 64},
                  "judges": {"gv-batch": {
                      "method": "gveval", "backend": f"openai/{MODEL}", "modes": ["ref-only"],
                      "limit": 3, "out": str(out), "submit": "batch",
                      "backend_options": {"base_url": server.url},
                      "batch_options": {"poll_interval_s": 0.02}}}}
        path = tmp_path / "params.yaml"
        path.write_text(yaml.safe_dump(params))
        assert judge_main(["--name", "gv-batch", "--params", str(path)]) == 0
        assert server.batch_creations == 1
    assert not (out / STATE_FILE).exists()
    assert state(cache / "batches" / "gv-batch")[0]["collected"] is True
    assert json.loads((out / "summary.json").read_text())["by_status"] == {"ok": 3}
