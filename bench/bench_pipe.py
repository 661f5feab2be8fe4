"""Keeping the pipe full (issue 42): an API judge's requests in flight, side by side with a
plain asyncio client, against the same OpenAI-protocol stand-in server with a fixed latency.

    python bench/bench_pipe.py [--latency 1.0] [--concurrency 8 64 256] [--waves 12]
                               [--big 10000] [--quick] [--timeline]

Per concurrency C, ``waves x C`` text items (G-VEval ref-only: one request each; the stand-in
writes a score as one token, so there are no digit follow-ups) are judged three ways on a cold
cache, each against the same server process:

- ``plain``: aiohttp (or ``--plain httpx``) + an asyncio semaphore of C, sending the very
  bodies capjudge sends (``OpenAIBackend.request_body``) and parsing nothing: the floor of
  what a client can do;
- ``flow``: the Prefect judge flow (``flows.judge.main``) with the project's ``runner`` section
  (params.yaml), as ``dvc repro`` runs a judge stage;
- ``library``: :func:`capjudge.judge.judge_items` in one call (no Prefect).

The server counts requests in flight (``GET /_stats/in_flight``), averaged over the time from
its first receipt to its last answer. Printed: that mean, as a fraction of C and as a ratio to
the plain client's; the sending span against the ideal ``ceil(n / C) x latency``; and the
flow's whole wall time (Prefect's start included). ``--big`` runs once more at C = the largest
concurrency with that many items. ``--quick``: 4 waves and 2,000 big items.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # flows/ is a top-level package of the checkout
BACKEND = "openai/gpt-4o-2024-08-06"


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    """The stand-in in its own process (sharing the client's GIL would measure Python)."""
    proc = subprocess.Popen([sys.executable, "-m", "capjudge.testing.openai_server",
                             "--latency", str(latency)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def in_flight(url: str, reset: bool = False) -> dict[str, float]:
    """The server's in-flight summary (``reset``: and start a new count)."""
    root = url.removesuffix("/v1")
    with urllib.request.urlopen(f"{root}/_stats/in_flight{'?reset' if reset else ''}") as r:
        return dict(json.loads(r.read()))


def write_items(path: Path, n: int) -> Path:
    """``n`` text items with two references each (G-VEval ref-only needs no picture)."""
    from capjudge.records import ItemRow

    rows = [ItemRow(id=f"pipe-{i:06d}", task="caption", media_kind="none",
                    candidate=f"A dog number {i} runs across the grass.",
                    references=(f"A dog runs on a lawn ({i}).", "A brown dog in a park."))
            for i in range(n)]
    import pyarrow.parquet as pq

    pq.write_table(ItemRow.table(rows), path)
    return path


def judge_settings(url: str, concurrency: int, cache: Path) -> dict[str, Any]:
    return {"method": "gveval", "backend": BACKEND, "modes": ["ref-only"], "max_tokens": 64,
            "concurrency": concurrency, "cache_dir": str(cache),
            "backend_options": {"base_url": url}}


def plain_client(url: str, items: Path, concurrency: int, library: str = "aiohttp") -> float:
    """Send every item's request with an asyncio client + a semaphore; seconds taken.

    ``library``: ``aiohttp`` (the default: httpx's connection pool slowed to a crawl here at
    256 connections, 0.16 of C, see docs/results/benchmarks.md) or ``httpx``.
    """
    from capjudge.backends import create_backend
    from capjudge.item import load_items
    from capjudge.judge import JudgeConfig, plan

    config = JudgeConfig(method="gveval", backend=BACKEND, modes=["ref-only"], max_tokens=64)
    planned, _ = plan(load_items(items), config, vision=True)
    backend: Any = create_backend(BACKEND, base_url=url)
    bodies = [backend.request_body(p.request) for p in planned]

    async def with_aiohttp() -> None:
        import aiohttp

        gate = asyncio.Semaphore(concurrency)
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(connector=connector) as session:
            async def one(body: dict[str, Any]) -> None:
                async with gate, session.post(f"{url}/chat/completions", json=body) as r:
                    r.raise_for_status()
                    await r.read()

            await asyncio.gather(*(one(b) for b in bodies))

    async def with_httpx() -> None:
        import httpx

        limits = httpx.Limits(max_connections=concurrency,
                              max_keepalive_connections=concurrency)
        gate = asyncio.Semaphore(concurrency)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:
            async def one(body: dict[str, Any]) -> None:
                async with gate:
                    (await client.post("/chat/completions", json=body)).raise_for_status()

            await asyncio.gather(*(one(b) for b in bodies))

    started = time.perf_counter()
    asyncio.run(with_aiohttp() if library == "aiohttp" else with_httpx())
    return time.perf_counter() - started


def flow_run(url: str, items: Path, concurrency: int, tmp: Path) -> float:
    """The judge stage as ``dvc repro`` runs it (the project's runner section); seconds."""
    from flows.judge import main

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    doc = {"ingest": {"out": str(items.parent)}, "runner": params.get("runner") or {},
           "judge": {}, "judges": {"pipe": {**judge_settings(url, concurrency, tmp / "cache"),
                                            "out": str(tmp / "out")}}}
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "params.yaml").write_text(yaml.safe_dump(doc))
    started = time.perf_counter()
    code = main(["--name", "pipe", "--params", str(tmp / "params.yaml")])
    if code:
        raise SystemExit(f"the judge flow failed ({code})")
    return time.perf_counter() - started


def library_run(url: str, items: Path, concurrency: int, tmp: Path) -> float:
    """:func:`judge_items` over every item in one call; seconds."""
    from capjudge.item import load_items
    from capjudge.judge import JudgeConfig, judge_items

    config = JudgeConfig(**judge_settings(url, concurrency, tmp / "lib-cache"))
    loaded = load_items(items)
    started = time.perf_counter()
    result = judge_items(loaded, config)
    bad = sum(r.status not in ("ok", "low_mass") for r in result.rows)
    if bad:
        raise SystemExit(f"{bad} judgements failed")
    return time.perf_counter() - started


def measure(url: str, name: str, run: Any, timeline: bool = False) -> dict[str, float]:
    """``run()`` against the server's in-flight count; with ``timeline``, the count sampled
    every 0.1 s is printed per second (its lowest and mean), to see where the pipe drains."""
    import threading

    in_flight(url, reset=True)
    samples: list[tuple[float, float]] = []
    done = threading.Event()

    def sample() -> None:
        started = time.perf_counter()
        while not done.wait(0.1):
            samples.append((time.perf_counter() - started, in_flight(url)["now"]))

    sampler = threading.Thread(target=sample, daemon=True)
    if timeline:
        sampler.start()
    try:
        seconds = run()
    finally:
        done.set()
    if timeline:
        sampler.join()
        for second in sorted({int(t) for t, _ in samples}):
            counts = [c for t, c in samples if int(t) == second]
            print(f"  {name:8s} {second:4d} s: in flight lowest {min(counts):4.0f}, "
                  f"mean {sum(counts) / len(counts):6.1f}", flush=True)
    stats = in_flight(url)
    stats["wall_s"] = seconds
    return stats


def one_size(url: str, concurrency: int, n: int, latency: float, plain: str,
             timeline: bool = False) -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        items = write_items(tmp / "items.parquet", n)
        ideal = math.ceil(n / concurrency) * latency
        rows = {"plain": measure(url, "plain", lambda: plain_client(url, items, concurrency,
                                                                    plain), timeline),
                "flow": measure(url, "flow", lambda: flow_run(url, items, concurrency,
                                                              tmp / "f"), timeline),
                "library": measure(url, "library", lambda: library_run(url, items,
                                                                       concurrency, tmp),
                                   timeline)}
    base = rows["plain"]["mean"]
    for name, s in rows.items():
        print(f"C={concurrency:4d} n={n:6d} {name:8s} in flight {s['mean']:6.1f} "
              f"({s['mean'] / concurrency:.2f} of C, {s['mean'] / base:.2f} of plain), "
              f"peak {s['peak']:.0f}; sending {s['span_s']:6.1f} s vs ideal {ideal:.0f} s "
              f"({ideal / s['span_s']:.2f}); wall {s['wall_s']:6.1f} s, "
              f"{n / s['wall_s']:.0f} items/s; {s['requests']:.0f} requests", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 64, 256])
    parser.add_argument("--waves", type=int, default=12, help="items = waves x concurrency")
    parser.add_argument("--big", type=int, default=10_000, help="0: skip the big run")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--plain", choices=("aiohttp", "httpx"), default="aiohttp",
                        help="the plain asyncio client's HTTP library")
    parser.add_argument("--timeline", action="store_true",
                        help="print the in-flight count per second of each run")
    args = parser.parse_args()
    waves, big = (4, min(args.big, 2000)) if args.quick else (args.waves, args.big)
    proc, url = start_server(args.latency)
    try:
        for c in args.concurrency:
            one_size(url, c, waves * c, args.latency, args.plain, args.timeline)
        if big:
            one_size(url, max(args.concurrency), big, args.latency, args.plain, args.timeline)
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
