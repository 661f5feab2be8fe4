"""The request cache under changed settings, concurrent runs and kills (issue 21, items 2, 5, 7).

- statuses are derived when an answer is read, from the current ``min_mass`` (and reading
  rules): a cache filled at ``min_mass`` 0.5 answers a run at 0.99 with ``low_mass`` rows,
  without asking again;
- two processes started together on one cache ask each question once (claims), against the
  stand-in OpenAI server;
- a killed writer's orphan temporaries and claims are removed when the cache is next opened.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from capjudge.cache import RequestCache
from capjudge.cli import main as cli_main
from capjudge.protocol import JudgeResponse, SlotResult, apply_min_mass
from capjudge.testing.openai_server import MockOpenAIServer
from capjudge.util.atomic import HOST, clean_orphans

ROOT = Path(__file__).resolve().parents[1]


def statuses(out: Path) -> dict[str, int]:
    rows = pq.read_table(out / "judgements.parquet").to_pylist()
    counts: dict[str, int] = {}
    for r in rows:
        if r["status"] != "skipped":
            counts[r["status"]] = counts.get(r["status"], 0) + 1
    return counts


def judge(ingested: Path, out: Path, cache: Path, min_mass: float, backend: str,
          extra: list[str] | None = None) -> dict[str, object]:
    code = cli_main(["judge", "--items", str(ingested / "items.parquet"), "--out", str(out),
                     "--backend", backend, "--method", "gveval", "--modes", "ref-only",
                     "--limit", "20", "--cache-dir", str(cache), "--min-mass", str(min_mass),
                     *(extra or [])])
    assert code == 0
    summary: dict[str, object] = json.loads((out / "summary.json").read_text())
    return summary


@pytest.mark.parametrize("backend", ["fake/hash", "openai"])
def test_min_mass_is_applied_when_read_not_when_stored(
        backend: str, ingested: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's probe: the same 20 items at --min-mass 0.99 after a cache filled at 0.5."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with MockOpenAIServer() as server:
        extra = ["--base-url", server.url] if backend == "openai" else []
        name = "openai/gpt-4o-2024-08-06" if backend == "openai" else backend
        fresh = judge(ingested, tmp_path / "fresh", tmp_path / "fresh-cache", 0.99, name,
                      extra)
        first = judge(ingested, tmp_path / "a", tmp_path / "cache", 0.5, name, extra)
        second = judge(ingested, tmp_path / "b", tmp_path / "cache", 0.99, name, extra)
        third = judge(ingested, tmp_path / "c", tmp_path / "cache", 0.5, name, extra)
    assert statuses(tmp_path / "a") == {"ok": 20}
    assert statuses(tmp_path / "b") == statuses(tmp_path / "fresh") == {"low_mass": 20}
    assert statuses(tmp_path / "c") == {"ok": 20}
    assert fresh["model_calls"] == first["model_calls"] == 20
    assert second["model_calls"] == third["model_calls"] == 0  # re-read, never re-asked
    assert second["cache_hits"] == 20
    rows = pq.read_table(tmp_path / "b" / "judgements.parquet").to_pylist()
    assert all("< 0.99" in r["reason"] for r in rows if r["status"] == "low_mass")


def slot(status: str, mass: float, reason: str | None) -> SlotResult:
    return SlotResult("score", [0, 1], [0.5, 0.5], mass, "logprobs", status,  # type: ignore[arg-type]
                      reason)


def test_apply_min_mass_changes_only_what_min_mass_decides() -> None:
    lost = "captured mass 0.900; 0.050 of the probability is on digit paths ..."
    r = JudgeResponse("low_mass", slots=[slot("ok", 0.6, None),
                                         slot("low_mass", 0.4, "captured mass 0.400 < 0.5"),
                                         slot("low_mass", 0.9, lost)])
    apply_min_mass(r, 0.3)
    assert [s.status for s in r.slots] == ["ok", "ok", "low_mass"]  # lost paths stay flagged
    assert r.slots[2].reason == lost and r.status == "low_mass"
    apply_min_mass(r, 0.95)
    assert [s.status for s in r.slots] == ["low_mass"] * 3
    assert r.slots[0].reason == "captured mass 0.600 < 0.95"
    r = JudgeResponse("ok", slots=[slot("ok", 0.6, None)])
    assert apply_min_mass(r, 0.7).status == "low_mass"
    assert apply_min_mass(r, 0.5).status == "ok" and r.reason is None
    failed = JudgeResponse("parse_failure", slots=[slot("parse_failure", 0.0, "none")])
    assert apply_min_mass(failed, 0.9).status == "parse_failure"


# --- two processes on one cache ------------------------------------------------------------

WORKER = textwrap.dedent("""
    import json, sys
    from capjudge.backends import create_backend
    from capjudge.protocol import JudgeRequest, Message, ScoreSlot, Decoding
    from capjudge.client import build_client
    url, cache, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    backend = create_backend("openai/gpt-4o-2024-08-06", base_url=url, concurrency=4)
    client = build_client(backend, cache_dir=cache)
    requests = [JudgeRequest(messages=(Message("user", (f"Rate caption {i}.",)),),
                             slots=(ScoreSlot("score", 0, 100),),
                             decoding=Decoding(max_tokens=30), template="probe@1")
                for i in range(n)]
    answers, stats = client.run_with_stats(requests)
    print(json.dumps({"calls": stats.calls, "hits": stats.cache_hits,
                      "ok": sum(a.status == "ok" for a in answers)}))
""")


def test_two_processes_started_together_ask_each_prompt_once(tmp_path: Path) -> None:
    n = 200
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
           "OPENAI_API_KEY": "EMPTY"}
    with MockOpenAIServer(latency_s=0.01) as server:
        procs = [subprocess.Popen([sys.executable, "-c", WORKER, server.url,
                                   str(tmp_path / "cache"), str(n)], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        results = []
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
        received = server.total_received
    assert all(r["ok"] == n for r in results)
    # Each prompt asked once (a claim taken over from a slow claimer may repeat a handful).
    assert received <= n + 8, (received, results)
    assert sum(r["calls"] for r in results) == received
    assert list((tmp_path / "cache").rglob("*.lease")) == []


def test_a_live_claim_holds_and_a_dead_ones_is_taken_over(tmp_path: Path) -> None:
    cache = RequestCache(tmp_path)
    key = "ab" + "1" * 62
    assert cache.claim(key)
    assert not cache.claim(key)  # this (live) process holds it
    cache.release(key)
    assert cache.claim(key)
    cache.release(key)
    lease = Path(cache._lease(key))
    lease.write_text(f"{HOST} 999999999 1")  # a dead pid of this host (kill -9)
    assert cache.claim(key)
    cache.release(key)
    lease.write_text("otherhost 1 1")
    assert not cache.claim(key, lease_s=60)
    old = time.time() - 120
    os.utime(lease, (old, old))
    assert cache.claim(key, lease_s=60)  # a stuck claimer's, past the lease


def test_orphan_temporaries_and_claims_are_removed_on_open(tmp_path: Path) -> None:
    from capjudge.backends.fake import FakeBackend
    from capjudge.client import _CLEANED, build_client

    cache = RequestCache(tmp_path)
    shard = cache.root / "ab"
    shard.mkdir(parents=True)
    dead = shard / f".{'ab' + '2' * 62}.{HOST}.999999999.1.deadbeef.tmp"
    live = shard / f".{'ab' + '3' * 62}.{HOST}.{os.getpid()}.1.deadbeef.tmp"
    stale = shard / f"{'ab' + '4' * 62}.lease"
    for p in (dead, live):
        p.write_bytes(b"{")
    stale.write_text(f"{HOST} 999999999 1")
    _CLEANED.discard(str(cache.root.resolve()))
    build_client(FakeBackend("hash"), cache_dir=tmp_path)
    assert not dead.exists() and not stale.exists()
    assert live.exists()  # a live writer's file is never touched
    assert clean_orphans(shard) == 0


# --- one precedence, and the client timeout as a setting -----------------------------------


def test_cache_dir_precedence_flag_env_params_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from capjudge.cli import build_parser
    from capjudge.cli.common import judge_config
    from capjudge.judge import JudgeConfig

    section = {"method": "gveval", "backend": "fake/hash"}
    monkeypatch.delenv("CAPJUDGE_CACHE_DIR", raising=False)
    assert JudgeConfig.from_params(section).cache_dir is None  # default: .capjudge-cache
    assert JudgeConfig.from_params(section, {"cache_dir": "p"}).cache_dir == "p"
    monkeypatch.setenv("CAPJUDGE_CACHE_DIR", "/from/env")
    assert JudgeConfig.from_params({**section, "cache_dir": "p"}).cache_dir == "/from/env"
    args = build_parser().parse_args(["judge", "--out", "x", "--backend", "fake/hash",
                                      "--cache-dir", "/from/flag"])
    assert judge_config(args, None).cache_dir == "/from/flag"


def test_timeout_s_reaches_the_openai_client(monkeypatch: pytest.MonkeyPatch) -> None:
    from capjudge.judge import JudgeConfig, make_backend

    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")
    config = JudgeConfig(method="gveval", backend="openai/m", timeout_s=7.5,
                         backend_options={"base_url": "http://127.0.0.1:9/v1"})
    backend = make_backend(config)
    assert backend._client.timeout == 7.5  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="timeout_s"):
        JudgeConfig(method="gveval", backend="openai/m", timeout_s=0)


def test_a_reading_rules_change_rereads_cached_answers_and_never_asks(
        ingested: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from capjudge.reading import answer as reading_answer
    from capjudge.reading import entry as reading_entry

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    name = "openai/gpt-4o-2024-08-06"
    with MockOpenAIServer() as server:
        extra = ["--base-url", server.url]
        first = judge(ingested, tmp_path / "a", tmp_path / "cache", 0.5, name, extra)
        entry = next((tmp_path / "cache" / "requests").rglob("*.json")).read_text()
        current = reading_entry.READING_RULES_VERSION
        assert '"raw":{"tokens":' in entry
        assert f'"reading_rules":{json.dumps(current)}' in entry
        original = reading_answer.finish
        reads: list[str] = []

        def finish_v2(reading, min_mass):  # type: ignore[no-untyped-def]
            result = original(reading, min_mass)
            reads.append(result.name)
            result.status, result.reason = "low_mass", "read under newer rules"
            return result

        same = judge(ingested, tmp_path / "b", tmp_path / "cache", 0.5, name, extra)
        assert reads == []  # same rules: nothing is read again
        monkeypatch.setattr(reading_entry, "READING_RULES_VERSION", current + 1)
        monkeypatch.setattr(reading_answer, "READING_RULES_VERSION", current + 1)
        monkeypatch.setattr(reading_answer, "finish", finish_v2)
        second = judge(ingested, tmp_path / "c", tmp_path / "cache", 0.5, name, extra)
    assert first["model_calls"] == 20
    assert same["model_calls"] == second["model_calls"] == 0 and second["cache_hits"] == 20
    assert len(reads) == 20
    rows = pq.read_table(tmp_path / "c" / "judgements.parquet").to_pylist()
    judged = [r for r in rows if r["status"] != "skipped"]
    assert len(judged) == 20
    assert all(r["status"] == "low_mass" and "read under newer rules" in r["reason"]
               for r in judged)
