"""llama.cpp vs the PyTorch path on the embedded Gemma 3 270M, side by side in one run.

    python bench/bench_llamacpp.py [--items 8] [--threads 1] [--parallel 16] [--concurrency 4]
                                   [--torch 1]
    python bench/bench_llamacpp.py --ab threads=1,parallel=4 threads=2,parallel=4 [--items 16]

The same requests (G-VEval ref-only with 24 tokens of reasoning; HarmonicEval clarity, fluency
and conciseness with 4 tokens) go to ``llamacpp/gemma-3-270m`` (llama.cpp's server engine in
process: the reasoning generated once, the score's digits read by prefilled follow-ups over
the cached prompt) and to ``embedded/gemma-3-270m`` (transformers: generation, then the exact
digit tree by teacher forcing), each through the client without a request cache. Printed per
backend and method: seconds per judged item, model calls per item, generated tokens per second
of wall time, the engine's own prompt/generation speed (llama.cpp's timings), and the
PyTorch/llama.cpp ratio. The process's CPU seconds per request are printed beside the wall
time: on a shared machine they are what a request costs an idle one. ``--torch 0`` skips the
PyTorch side (it loads the model, ~5-10 s).

``--ab A B``: two llama.cpp engine settings (``threads=..,parallel=..``) on the same G-VEval
items, interleaved in rounds of ``--concurrency`` items (A, B, A, B, ...) so a shared machine's
load falls on both alike; printed per setting: wall and CPU seconds per item, engine
milliseconds, prompt tokens computed vs taken from the cache, the load average, and the
largest difference between the two settings' score distributions (llama.cpp's numerics move a
little with the thread count and batching).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from capjudge.backends import create_backend
from capjudge.backends.base import Backend
from capjudge.client import JudgeClient
from capjudge.item import Item
from capjudge.methods import get_method
from capjudge.methods.base import MethodOptions, Planned
from capjudge.protocol import Decoding, JudgeRequest

CAPTIONS = [
    ("A brown dog runs across a grassy field.", ["A dog running on the grass.",
                                                 "A brown dog plays outside in a park."]),
    ("Two children are building a sandcastle on the beach.",
     ["Kids make a sand castle by the sea.", "Two young children play in the sand."]),
    ("A man in a red jacket rides a bicycle down the street.",
     ["A cyclist in red on a city road.", "A man is riding his bike in town."]),
    ("A cat sleeps on a windowsill in the sun.", ["A cat naps by the window.",
                                                  "A sleepy cat lies in the sunlight."]),
    ("A group of people hike up a snowy mountain.", ["Hikers climb a mountain covered in snow.",
                                                     "People walk up a snowy slope."]),
    ("A woman is cooking pasta in a small kitchen.", ["A lady prepares noodles at the stove.",
                                                      "Someone cooks dinner in a kitchen."]),
    ("A red car is parked next to a tree.", ["A red automobile parked by a tree.",
                                             "A car stands under a tree."]),
    ("A boy jumps into a swimming pool.", ["A child leaps into the water.",
                                           "A kid dives into a pool on a sunny day."]),
]


def requests_for(method_name: str, mode: str, max_tokens: int, n: int) -> list[JudgeRequest]:
    """The method's text-only requests for ``n`` items (the captions above, cycled)."""
    method = get_method(method_name)
    options = MethodOptions(decoding=Decoding(max_tokens=max_tokens), vision=False)
    out: list[JudgeRequest] = []
    for i in range(n):
        candidate, refs = CAPTIONS[i % len(CAPTIONS)]
        item = Item(id=f"bench-{i}", candidate=candidate if i < len(CAPTIONS)
                    else f"{candidate} ({i})", references=tuple(refs))
        out += [p.request for p in method.plan(item, mode, options) if isinstance(p, Planned)]
    return out


def run(backend: Backend, requests: list[JudgeRequest], concurrency: int) -> dict[str, Any]:
    """Answer ``requests`` without a cache; wall time, calls and tokens."""
    client = JudgeClient(backend, None, concurrency=concurrency)
    stats = getattr(backend, "server_stats", None)
    before = (stats.prompt_ms, stats.predicted_ms, stats.prompt_tokens, stats.cached_tokens) \
        if stats is not None else None
    t0, c0 = time.perf_counter(), time.process_time()
    answers = client.run(requests)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out: dict[str, Any] = {
        "wall": wall, "cpu": cpu, "n": len(requests), "calls": client.stats.calls,
        "completion": sum(a.usage.completion_tokens for a in answers),
        "scored": sum(a.status in ("ok", "low_mass") for a in answers),
    }
    if stats is not None and before is not None:
        out["prompt_ms"] = stats.prompt_ms - before[0]
        out["predicted_ms"] = stats.predicted_ms - before[1]
        out["prompt_tokens"] = stats.prompt_tokens - before[2]
        out["cached_tokens"] = stats.cached_tokens - before[3]
    return out


def show(label: str, r: dict[str, Any]) -> None:
    """One result line."""
    line = (f"  {label:<10} {r['wall'] / r['n']:6.3f} s/request ({r['cpu'] / r['n']:6.3f} CPU s) "
            f" {r['calls'] / r['n']:5.1f} "
            f"calls/request  {r['completion'] / r['wall']:6.1f} generated tok/s (wall)  "
            f"scored {r['scored']}/{r['n']}")
    if "prompt_ms" in r:
        computed = r["prompt_tokens"] - r["cached_tokens"]
        line += (f"  | engine: prompt {computed / max(r['prompt_ms'], 1e-9) * 1e3:6.0f} tok/s "
                 f"({r['cached_tokens'] / max(r['prompt_tokens'], 1):.0%} of prompt tokens "
                 f"from the cache), generation "
                 f"{r['completion'] / max(r['predicted_ms'], 1e-9) * 1e3:5.1f} tok/s")
    print(line)


def _setting(text: str) -> dict[str, int | str]:
    """``threads=1,parallel=4`` as engine options (several slots: determinism fast)."""
    out: dict[str, int | str] = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        out[key.strip()] = value.strip() if key.strip() == "determinism" else int(value)
    if int(out.get("parallel", 1)) > 1:
        out.setdefault("determinism", "fast")
    return out


def ab(settings: list[str], items: int, concurrency: int) -> None:
    """Two engine settings on the same G-VEval items, interleaved round by round."""
    import os

    requests = requests_for("gveval", "ref-only", 24, items)
    engines = []
    for text in settings:
        backend = create_backend("llamacpp/gemma-3-270m", **_setting(text))
        run(backend, requests[:1], 1)  # warm-up (not measured)
        engines.append(backend)
    totals: list[dict[str, Any]] = [{} for _ in engines]
    answers: list[list[Any]] = [[] for _ in engines]
    load0 = os.getloadavg()[0]
    for start in range(0, items, concurrency):
        chunk = requests[start:start + concurrency]
        for k, backend in enumerate(engines):
            client = JudgeClient(backend, None, concurrency=concurrency)
            stats = backend.server_stats
            before = (stats.prompt_ms, stats.predicted_ms, stats.prompt_tokens,
                      stats.cached_tokens, stats.calls)
            t0, c0 = time.perf_counter(), time.process_time()
            answers[k] += client.run(chunk)
            figures = {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                       "prompt_ms": stats.prompt_ms - before[0],
                       "predicted_ms": stats.predicted_ms - before[1],
                       "prompt_tokens": stats.prompt_tokens - before[2],
                       "cached_tokens": stats.cached_tokens - before[3],
                       "calls": stats.calls - before[4]}
            for key, value in figures.items():
                totals[k][key] = totals[k].get(key, 0) + value
    load1 = os.getloadavg()[0]
    print(f"G-VEval ref-only, {items} items, {concurrency} in flight; load average "
          f"{load0:.1f} -> {load1:.1f}")
    for text, t in zip(settings, totals, strict=True):
        computed = t["prompt_tokens"] - t["cached_tokens"]
        print(f"  {text:<22} {t['wall'] / items:6.3f} s/item wall "
              f"{t['cpu'] / items:6.3f} CPU s/item  {t['calls'] / items:5.1f} calls/item  "
              f"engine prompt "
              f"{t['prompt_ms'] / items:6.0f} ms/item ({computed / items:.0f} tokens computed, "
              f"{t['cached_tokens'] / items:.0f} from the cache), generation "
              f"{t['predicted_ms'] / items:6.0f} ms/item")
    worst = {True: 0.0, False: 0.0}
    for a, b in zip(answers[0], answers[1], strict=True):
        pa = dict(zip(a.slots[0].values or [], a.slots[0].probs or [], strict=True))
        pb = dict(zip(b.slots[0].values or [], b.slots[0].probs or [], strict=True))
        same = a.text == b.text
        worst[same] = max([worst[same],
                           *(abs(pa.get(v, 0.0) - pb.get(v, 0.0)) for v in set(pa) | set(pb))])
    same_text = sum(a.text == b.text for a, b in zip(answers[0], answers[1], strict=True))
    print(f"  same answer text on {same_text}/{items} items: largest |dp| between the two "
          f"settings' distributions {worst[True]:.4f} there, {worst[False]:.4f} where the "
          f"greedy reasoning took another word")


def main() -> None:
    """Run the comparison and print it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--parallel", type=int, default=16, help="server slots")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight")
    parser.add_argument("--ctx", type=int, default=16384, help="context shared by the slots")
    parser.add_argument("--torch", type=int, default=1, help="1: also run the PyTorch path")
    parser.add_argument("--ab", nargs=2, metavar="SETTING",
                        help="compare two engine settings, e.g. threads=1,parallel=4")
    args = parser.parse_args()
    if args.ab:
        ab(args.ab, args.items, args.concurrency)
        return
    suites = [("gveval ref-only", requests_for("gveval", "ref-only", 24, args.items)),
              ("harmoniceval", requests_for("harmoniceval", "default", 4, args.items))]
    t0 = time.perf_counter()
    llama = create_backend("llamacpp/gemma-3-270m", parallel=args.parallel,
                           threads=args.threads, ctx=args.ctx,
                           determinism="fast" if args.parallel > 1 else "deterministic")
    print(f"llama.cpp engine loaded in {time.perf_counter() - t0:.1f} s (threads "
          f"{args.threads}, {args.parallel} slots, {args.concurrency} requests in flight)")
    torch_backend = None
    if args.torch:
        t0 = time.perf_counter()
        torch_backend = create_backend("embedded/gemma-3-270m")
        print(f"PyTorch model loaded in {time.perf_counter() - t0:.1f} s")
    for name, requests in suites:
        print(f"{name}: {len(requests)} requests")
        run(llama, requests[:1], 1)  # warm-up (not measured): first graph allocations
        a = run(llama, requests, args.concurrency)
        show("llama.cpp", a)
        if torch_backend is not None:
            b = run(torch_backend, requests, 1)
            show("PyTorch", b)
            print(f"  PyTorch / llama.cpp: {b['wall'] / a['wall']:.1f}x the wall time, "
                  f"{b['cpu'] / a['cpu']:.1f}x the CPU time per request")


if __name__ == "__main__":
    main()
