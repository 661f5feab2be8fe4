"""Judge-stage benchmarks, each measured side by side in one run; prints ratios.

    python bench/bench_judge.py [--requests 400] [--latency 0.5] [--concurrency 16] [--local 2]

1. API throughput against the local OpenAI-protocol server with injected latency:
   achieved requests/s divided by the ideal concurrency / latency (goal >= 0.9).
2. Rerun with a warm cache: model calls made (goal 0) and wall time, vs the cold run.
3. Local exact distribution on the embedded model: digit tree vs naive 101-candidate scoring
   (forward passes and seconds per item, same contexts); ``--local 0`` skips it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time

from capjudge.backends import create_backend
from capjudge.cache import RequestCache
from capjudge.client import JudgeClient
from capjudge.methods.gveval import score_slot
from capjudge.protocol import Decoding, JudgeRequest, Message


def api_benchmark(n: int, latency: float, concurrency: int) -> None:
    requests = [JudgeRequest(messages=(Message("user", (f"Rate caption number {i}.",)),),
                             slots=(score_slot(),), decoding=Decoding(max_tokens=64),
                             template="bench@1") for i in range(n)]
    # The server runs in its own process, as a real one would: sharing the client's GIL would
    # measure Python's thread scheduling, not the client.
    proc = subprocess.Popen([sys.executable, "-m", "capjudge.testing.openai_server",
                             "--latency", str(latency)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    try:
        _api_run(url, requests, n, latency, concurrency)
    finally:
        proc.terminate()
        proc.wait()


def _api_run(url: str, requests: list[JudgeRequest], n: int, latency: float,
             concurrency: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        backend = create_backend("openai/gpt-4o-2024-08-06", base_url=url,
                                 concurrency=concurrency)
        # One unmeasured request opens the connection pool.
        JudgeClient(backend, None).run([JudgeRequest(messages=(Message("user", ("hi",)),),
                                                     slots=(score_slot(),), template="w@1")])
        cold = JudgeClient(backend, RequestCache(tmp), concurrency=concurrency)
        t0 = time.perf_counter()
        results = cold.run(requests)
        cold_s = time.perf_counter() - t0
        ok = sum(r.status == "ok" for r in results)
        throughput = n / cold_s
        ideal = concurrency / latency
        print(f"[api] {n} requests, latency {latency * 1e3:.0f} ms, concurrency {concurrency}: "
              f"{cold_s:.2f} s, {throughput:.1f} req/s (ideal {ideal:.1f}), ok {ok}/{n}")
        print(f"[api] throughput / ideal = {throughput / ideal:.3f}  (goal >= 0.9)")
        warm = JudgeClient(backend, RequestCache(tmp), concurrency=concurrency)
        t0 = time.perf_counter()
        warm.run(requests)
        warm_s = time.perf_counter() - t0
        print(f"[cache] warm rerun: {warm.stats.calls} model calls (goal 0), "
              f"{warm_s:.3f} s vs cold {cold_s:.2f} s  (speed-up {cold_s / warm_s:.0f}x)")


def local_benchmark(n_items: int) -> None:
    from capjudge.backends.hf import HFBackend

    backend = create_backend("embedded/gemma-3-270m")
    assert isinstance(backend, HFBackend)
    tok = backend.tokenizer
    values = list(range(0, 101))
    tree_t = naive_t = 0.0
    tree_passes = naive_passes = 0
    worst = 0.0
    # The first distribution of a loaded model is also checked against the level walk.
    backend.distribution(tok.encode("The final score is $"), values)
    for i in range(n_items):
        text = (f"Reference captions:\n- Two red circles and a blue square.\nGenerated caption: "
                f"{'Two red circles' if i % 2 == 0 else 'A green triangle'} next to a square.\n"
                "Rate the caption from 0 to 100.\nThe final score is $")
        context = tok.encode(text)
        before = backend.stats.forward_passes
        t0 = time.perf_counter()
        tree = backend.distribution(context, values)
        tree_t += time.perf_counter() - t0
        tree_passes += backend.stats.forward_passes - before
        before = backend.stats.forward_passes
        t0 = time.perf_counter()
        naive = backend.naive_distribution(context, values)
        naive_t += time.perf_counter() - t0
        naive_passes += backend.stats.forward_passes - before
        worst = max(worst, max(abs(tree[v] - naive[v]) for v in values))
    print(f"[local] {n_items} item(s), 0-100 scale, context ~{len(context)} tokens")
    print(f"[local] digit tree: {tree_passes / n_items:.1f} forward passes, "
          f"{tree_t / n_items:.2f} s per item")
    print(f"[local] naive 101 candidates: {naive_passes / n_items:.1f} forward passes, "
          f"{naive_t / n_items:.2f} s per item")
    print(f"[local] naive / tree time = {naive_t / tree_t:.1f}x, passes "
          f"{naive_passes / tree_passes:.1f}x; max |p_tree - p_naive| = {worst:.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--local", type=int, default=2, help="items for the local benchmark")
    args = parser.parse_args()
    api_benchmark(args.requests, args.latency, args.concurrency)
    if args.local:
        local_benchmark(args.local)


if __name__ == "__main__":
    main()
