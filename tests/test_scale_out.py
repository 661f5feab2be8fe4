"""Scale-out: request-counting and shared rate limits, the runner section, the parallel ingest
and context flows, and the judge flow on a local Dask cluster of two worker processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from capjudge.backends.base import Capabilities
from capjudge.backends.fake import FakeBackend
from capjudge.client import JudgeClient
from capjudge.protocol import Decoding, JudgeRequest, JudgeResponse, Message
from capjudge.util.limits import FilePause, FileRateLimiter, RateLimiter
from helpers import FakeClock

# Columns that differ between two runs by nature (timing, where an answer came from).
VOLATILE = {"latency_s", "cached", "attempts"}


def _requests(n: int, tag: str = "r") -> list[JudgeRequest]:
    from capjudge.methods.gveval import score_slot

    return [JudgeRequest(messages=(Message("user", (f"{tag} {i}",)),), slots=(score_slot(),),
                         decoding=Decoding(max_tokens=8), template="t@1") for i in range(n)]


def _max_in_window(times: Sequence[float], window: float) -> int:
    """The most events in any half-open interval [t, t + window)."""
    ts = sorted(times)
    return max((sum(1 for u in ts[i:] if u < t + window) for i, t in enumerate(ts)), default=0)


# --- rate limiter: requests, not batches -----------------------------------------------------


def test_the_rate_limiter_counts_requests_not_batches() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm=10, clock=clock, sleep=clock.sleep)
    assert limiter.acquire(0, 8) == 0
    # 8 + 8 > 10: the second batch of 8 waits for the first to leave the window.
    assert limiter.acquire(0, 8) == pytest.approx(60.0)
    # A batch larger than the whole budget still goes, alone in its window.
    assert RateLimiter(rpm=10, clock=clock, sleep=clock.sleep).acquire(0, 16) == 0


def test_a_shorter_window_scales_the_budget() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm=120, window_s=1.0, clock=clock, sleep=clock.sleep)
    waits = [limiter.acquire() for _ in range(4)]  # 2 per 1-s window
    assert waits[:2] == [0, 0] and waits[2] == pytest.approx(1.0) and waits[3] == 0


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def acquire(self, tokens: int = 0, requests: int = 1) -> float:
        self.calls.append((tokens, requests))
        return 0.0


def test_the_client_charges_every_request_of_a_batch(tmp_path: Path) -> None:
    recorder = _Recorder()
    client = JudgeClient(FakeBackend("hash"), None, limiter=recorder)  # max_batch 16
    client.run(_requests(20))
    assert sorted(n for _, n in recorder.calls) == [4, 16]


class _SlowBackend(FakeBackend):
    """Counts how many generate() calls overlap."""

    def __init__(self) -> None:
        super().__init__("hash")
        self.capabilities = Capabilities(vision=False, distribution="logprobs", max_batch=1,
                                         concurrency=2)
        self.active = self.peak = 0
        self._guard = threading.Lock()

    def generate(self, requests: Sequence[JudgeRequest]) -> list[JudgeResponse | Exception]:  # type: ignore[override]
        with self._guard:
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(0.02)
        try:
            return super().generate(requests)  # type: ignore[return-value]
        finally:
            with self._guard:
                self.active -= 1


def test_concurrency_bounds_calls_across_runs_sharing_a_client() -> None:
    """Flow chunk tasks share one client per process; together they stay within its
    concurrency, not concurrency x tasks."""
    backend = _SlowBackend()
    client = JudgeClient(backend, None)
    threads = [threading.Thread(target=client.run, args=(_requests(6, f"t{k}"),))
               for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert client.stats.calls == 24 and backend.peak == 2


# --- shared limiter and pause ---------------------------------------------------------------

_CHILD = textwrap.dedent("""
    import json, sys, time
    from capjudge.util.limits import FileRateLimiter
    last = [0.0]
    def clock():
        # The limiter's own reading of the clock under its lock: its last one in acquire is
        # the admission (a time taken after acquire returns may be late on busy cores).
        last[0] = time.time()
        return last[0]
    limiter = FileRateLimiter(sys.argv[1], rpm=240, window_s=1.0, clock=clock)  # 4 per 1 s
    times = []
    for _ in range(6):
        limiter.acquire()
        times.append(last[0])
    print(json.dumps(times))
""")


def test_the_file_limiter_holds_across_processes(tmp_path: Path) -> None:
    state = tmp_path / "limits" / "window.json"
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, str(state)],
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    times = [t for p in procs for t in json.loads(p.communicate(timeout=60)[0])]
    assert all(p.returncode == 0 for p in procs)
    # 12 admissions at 4 per second need about 2 s; two private limiters would admit 8 at once.
    assert len(times) == 12 and _max_in_window(times, 1.0 - 0.05) <= 4
    assert max(times) - min(times) >= 1.9


def test_file_limiter_waits_in_its_own_window(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    a = FileRateLimiter(tmp_path / "w.json", rpm=120, window_s=1.0, clock=clock,
                        sleep=clock.sleep)
    b = FileRateLimiter(tmp_path / "w.json", rpm=120, window_s=1.0, clock=clock,
                        sleep=clock.sleep)
    assert a.acquire() == 0 and b.acquire() == 0
    assert a.acquire() > 0.99  # the budget is the file's, not each instance's


def test_a_send_stays_in_the_shared_window_until_it_has_surely_arrived(tmp_path: Path) -> None:
    """The server counts arrivals: a send is counted for the window plus a margin."""
    clock = FakeClock(1000.0)
    limiter = FileRateLimiter(tmp_path / "w.json", rpm=60, window_s=3.0, clock=clock,
                              sleep=clock.sleep)  # 3 per 3-s window, margin min(1, 3/2) = 1 s
    assert [limiter.acquire() for _ in range(3)] == [0, 0, 0]
    waited = limiter.acquire()
    assert 3.9 < waited <= 4.1  # the window (3 s) and the margin (1 s), to a bucket's width
    plain = FileRateLimiter(tmp_path / "v.json", rpm=60, window_s=3.0, clock=clock,
                            sleep=clock.sleep, arrival_margin_s=0)
    assert [plain.acquire() for _ in range(3)] == [0, 0, 0] and 2.9 < plain.acquire() <= 3.1


def test_a_file_pause_is_seen_by_every_instance(tmp_path: Path) -> None:
    one, two = FilePause(tmp_path / "p.json"), FilePause(tmp_path / "p.json")
    assert two.remaining() == 0
    one.pause_for(5)
    assert 4 < two.remaining() <= 5
    two.pause_for(1)  # windows only extend
    assert one.remaining() > 4


def test_a_retry_after_pauses_every_client_sharing_the_folder(tmp_path: Path) -> None:
    """Two clients (as on two worker processes) built on one shared folder: while the first
    waits out a 1 s Retry-After, the second sends nothing."""
    from capjudge.backends import create_backend
    from capjudge.client import build_client
    from capjudge.testing.openai_server import MockOpenAIServer

    with MockOpenAIServer(latency_s=0.02) as server:
        def client() -> JudgeClient:
            backend = create_backend("openai/gpt-4o-2024-08-06", base_url=server.url)
            return build_client(backend, cache_dir=tmp_path / "cache", max_attempts=3,
                                backoff_base_s=0.01, shared_dir=tmp_path / "limits")

        first, second = client(), client()
        server.inject("429", retry_after=1.0)
        worker = threading.Thread(target=first.run, args=(_requests(1, "first"),))
        worker.start()
        # The second client learns of the pause from the shared file alone.
        deadline = time.monotonic() + 10
        while not second.pause.remaining() and time.monotonic() < deadline:
            time.sleep(0.01)
        t429 = server.arrivals[0][0]
        answers = second.run(_requests(5, "second"))
        worker.join()
        later = [t for t, _ in server.arrivals[1:]]
    assert all(a.status == "ok" for a in answers) and len(later) == 6
    assert min(later) > t429 + 0.95  # nothing went out inside the window


def test_the_client_uses_the_shared_limits_when_given_a_folder(tmp_path: Path) -> None:
    from capjudge.client import build_client
    from capjudge.util.limits import FilePause as Pause
    from capjudge.util.limits import FileRateLimiter as Limiter

    client = build_client(FakeBackend("hash"), cache_dir=tmp_path / "c", rpm=60,
                          shared_dir=tmp_path / "limits")
    assert isinstance(client.limiter, Limiter) and isinstance(client.pause, Pause)
    client.run(_requests(3))
    assert list((tmp_path / "limits").glob("*.window.json"))


# --- runner section ---------------------------------------------------------------------------


def test_runner_section_is_checked(tmp_path: Path) -> None:
    from flows.runner import RunnerConfig, task_runner

    assert RunnerConfig.from_params({}).kind == "threads"
    with pytest.raises(ValueError, match="unknown runner settings: nodes"):
        RunnerConfig.from_params({"runner": {"nodes": 3}})
    with pytest.raises(ValueError, match="kind"):
        RunnerConfig(kind="spark")
    with pytest.raises(ValueError, match="address needs kind"):
        RunnerConfig(address="tcp://x:8786")
    dask = RunnerConfig(kind="dask", workers=2, shared_dir=str(tmp_path / "s"))
    assert dask.limits_dir("cache") == str(tmp_path / "s") and dask.size(8) == 2
    # A local cluster's default size: the stage's, at most one process per core.
    assert RunnerConfig(kind="dask").worker_count(10_000) == (os.cpu_count() or 1)
    assert RunnerConfig().worker_count(8) == 8
    assert RunnerConfig().limits_dir("cache") is None
    assert type(task_runner(dask, 1)).__name__ == "DaskTaskRunner"


def test_a_missing_ray_says_what_to_install() -> None:
    from flows.runner import RunnerConfig, task_runner

    try:
        import prefect_ray  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match=r"pip install .*\[ray\]"):
            task_runner(RunnerConfig(kind="ray"), 2)
    else:  # pragma: no cover - only where the extra is installed
        assert type(task_runner(RunnerConfig(kind="ray"), 2)).__name__ == "RayTaskRunner"


# --- ingest: parallel frame sampling ----------------------------------------------------------


def _items(path: Path) -> list[dict[str, object]]:
    # Paths of files ingest made name its output folder; their hashes are compared.
    made = ("tile_path", "judge_path", "frame_paths")
    return [{k: v for k, v in row.items() if k not in made}
            for row in pq.read_table(path / "items.parquet").to_pylist()]


@pytest.mark.heavy(seconds=6)
@pytest.mark.slow
def test_ingest_flow_samples_videos_in_parallel_with_the_serial_result(
        harness: None, sample_dir: Path, tmp_path: Path) -> None:
    from prefect.task_runners import ThreadPoolTaskRunner

    from capjudge.ingest import ingest, video_jobs
    from flows.ingest import ingest_flow

    media = tmp_path / "media"
    shutil.copytree(sample_dir, media)
    (media / "videos" / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"x" * 500)
    rows = (media / "manifest.jsonl").read_text().splitlines()
    rows.append(json.dumps({"id": "broken-video", "video": "videos/broken.mp4",
                            "candidate": "Nothing.", "references": ["Nothing."]}))
    (media / "manifest.jsonl").write_text("\n".join(rows) + "\n")
    assert len(video_jobs(media / "manifest.jsonl", media)) >= 3
    serial = ingest(media / "manifest.jsonl", media, tmp_path / "serial")
    threads: Any = ThreadPoolTaskRunner(max_workers=2)  # Prefect's stubs want a future type
    parallel = ingest_flow.with_options(task_runner=threads)(
        str(media / "manifest.jsonl"), str(media), str(tmp_path / "parallel"), None, 2)
    assert parallel.n_items == serial.n_items and parallel.reasons == serial.reasons
    assert _items(tmp_path / "parallel") == _items(tmp_path / "serial")
    bad = pq.read_table(tmp_path / "parallel" / "quarantine.parquet").to_pylist()
    serial_bad = pq.read_table(tmp_path / "serial" / "quarantine.parquet").to_pylist()
    assert [b["id"] for b in bad] == ["broken-video"] and bad == serial_bad


def test_a_chunk_reads_only_its_row_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    import pyarrow as pa

    from capjudge.item import load_items

    path = tmp_path / "items.parquet"
    rows = [{"id": f"i{k}", "candidate": f"c{k}"} for k in range(2500)]
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=1024)
    full = [i.id for i in load_items(path)]
    read: list[list[int]] = []
    original = pq.ParquetFile.read_row_groups

    def spy(self: pq.ParquetFile, groups: list[int], *args: object, **kwargs: object
            ) -> pa.Table:
        read.append(list(groups))
        return original(self, groups, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", spy)
    for start, stop in [(0, 10), (1020, 2050), (2000, None), (2400, 3000), (5, 5), (3000, 4000)]:
        assert [i.id for i in load_items(path, start, stop)] == full[start:stop]
    assert read[:3] == [[0], [0, 1, 2], [1, 2]]


# --- context: sharded by picture ---------------------------------------------------------------


def test_shards_partition_items_by_picture(ingested: Path) -> None:
    from capjudge.item import load_items
    from capjudge.judge.parts import picture_key, shard_by_picture

    items = load_items(ingested / "items.parquet")
    shards = [shard_by_picture(items, k, 4) for k in range(4)]
    assert sorted(i.id for s in shards for i in s) == sorted(i.id for i in items)
    owners: dict[str | None, set[int]] = {}
    for k, shard in enumerate(shards):
        for item in shard:
            owners.setdefault(picture_key(item), set()).add(k)
    assert all(len(v) == 1 for v in owners.values())


@pytest.mark.slow
def test_context_flow_sharded_writes_what_one_task_writes(harness: None, ingested: Path,
                                                          tmp_path: Path) -> None:
    from prefect.task_runners import ThreadPoolTaskRunner

    from capjudge.methods import get_method, method_names
    from flows.context import context_flow

    method = next(m for m in method_names() if get_method(m).needs_context)
    summaries = {}
    for workers in (1, 2):
        section = {"backend": "fake/hash+vision", "cache_dir": str(tmp_path / f"c{workers}")}
        threads: Any = ThreadPoolTaskRunner(max_workers=workers)
        summaries[workers] = context_flow.with_options(task_runner=threads)(
            "t", method, str(ingested / "items.parquet"), str(tmp_path / f"o{workers}"),
            section, workers)
    one = pq.read_table(tmp_path / "o1" / "contexts.parquet")
    two = pq.read_table(tmp_path / "o2" / "contexts.parquet")
    assert one.num_rows > 0 and one.equals(two)
    keys = ("pictures", "rows", "by_status", "requests", "model_calls", "cache_hits")
    assert {k: summaries[1][k] for k in keys} == {k: summaries[2][k] for k in keys}
    assert not (tmp_path / "o2" / ".parts").exists()


# --- the judge flow on a local Dask cluster ----------------------------------------------------


@pytest.mark.heavy(seconds=20)
@pytest.mark.slow
def test_judge_flow_on_two_dask_workers_holds_a_global_rpm(harness: None, ingested: Path,
                                                           tmp_path: Path) -> None:
    """Two Dask worker processes, one rate budget: the server's own arrival times respect
    the window, results equal a threads run's, and statistics are merged."""
    from dataclasses import replace

    from distributed import Client, LocalCluster
    from prefect.task_runners import ThreadPoolTaskRunner

    from capjudge.judge import JudgeConfig
    from capjudge.testing.openai_server import MockOpenAIServer
    from flows.judge import judge_flow
    from flows.runner import RunnerConfig, task_runner

    window, per_window, n = 3.0, 4, 12
    with MockOpenAIServer() as server, LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True,
            dashboard_address=None) as cluster, Client(cluster) as client:
        base = JudgeConfig(method="gveval", backend="openai/gpt-4o-2024-08-06",
                           modes=["ref-only"], limit=n, max_tokens=32,
                           backend_options={"base_url": server.url},
                           rpm=per_window * 60 / window, rate_window_s=window)
        runs = {}
        for name in ("threads", "dask"):
            config = replace(base, cache_dir=str(tmp_path / f"cache-{name}"))
            runner = RunnerConfig(kind="dask", address=cluster.scheduler_address) \
                if name == "dask" else None
            shared = runner.limits_dir(config.cache_dir) if runner else None
            task_runner_: Any = task_runner(runner, 2) if runner \
                else ThreadPoolTaskRunner(max_workers=2)
            start = len(server.arrivals)
            summary = judge_flow.with_options(task_runner=task_runner_)(
                "t", str(ingested / "items.parquet"), str(tmp_path / name), config,
                chunk_size=3, workers=2, shared_dir=shared)
            runs[name] = (summary, [t for t, _ in server.arrivals[start:]])
        # Both worker processes judged chunks (each built its own shared client).
        built = client.run(lambda: len(getattr(sys.modules.get("capjudge.judge.connect"),
                                               "_SHARED", {})))
    assert len(built) == 2 and all(v >= 1 for v in built.values())
    dask_summary, arrivals = runs["dask"]
    assert len(arrivals) == n
    # 12 requests at 4 per 3-s window: never more than 4 in any window, so at least two
    # windows' wait in all. The server sees arrivals, not admissions: 0.75 s of slack covers
    # a worker's first request, which is slower to arrive (the HTTP client's lazy set-up).
    # Two private limiters would let 8 through at once.
    slack = 0.75
    assert _max_in_window(arrivals, window - slack) <= per_window
    assert max(arrivals) - min(arrivals) >= 2 * window - slack
    keys = ("requests", "model_calls", "cache_hits", "prompt_tokens", "completion_tokens",
            "by_status")
    threads_summary = runs["threads"][0]
    assert {k: dask_summary[k] for k in keys} == {k: threads_summary[k] for k in keys}
    assert dask_summary["requests"] == n and dask_summary["model_calls"] == n
    a = pq.read_table(tmp_path / "threads" / "judgements.parquet")
    b = pq.read_table(tmp_path / "dask" / "judgements.parquet")
    cols = [c for c in a.column_names if c not in VOLATILE]
    assert a.select(cols).equals(b.select(cols))
    assert list(Path(tmp_path / "cache-dask" / "limits").glob("*.window.json"))
