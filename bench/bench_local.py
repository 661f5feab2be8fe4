"""Local-judge benchmarks on the embedded model (issue 20), measured side by side in one run.

    python bench/bench_local.py [--items 12] [--rounds 2] [--numerics] [--tree] [--generate]

1. Likelihood judge (npmi, pmi, conditional on the first ``--items`` sample candidates): the
   left-padded path (every pair encoded whole, the vocabulary head applied whole: the path
   before prefix sharing) vs prefix sharing (each context once, the texts packed as token
   tries over its cache) with the head applied whole vs in vocabulary slices, on PyTorch's own
   linear kernel (``shared-mkl``) and with the decoder's layers packed for oneDNN (today's) —
   seconds per candidate, tokens fed to the model per candidate vs the one-text-per-row
   minimum (every distinct context and every distinct pair's text once; the tries go below
   it), max |delta score| against the padded path.
2. ``--numerics``: the shared path in float32 vs bfloat16 vs int8 dynamic quantisation
   (seconds per candidate, max |delta score| against float32).
3. ``--tree``: the exact 0-100 distribution, level walk (4 passes) vs tree mask (2 passes).
3b. ``--generate``: G-VEval ref-only through generation (``--max-tokens``), each slot's
   distribution read on generation's own cache (``share_generated``, the default) vs the
   context re-encoded: seconds and tokens fed per request, max |delta p|.
4. ``--flickr8k PATH --limit N``: Kendall tau-c x100 of the npmi judge on the first N
   Flickr8k-Expert candidates (every rating a row) in float32, bfloat16 and int8, and the
   wall time of each (a numerics option is offered only within +-0.3 tau-c of float32).
5. ``--floor GFLOPS``: the least arithmetic a candidate needs (every distinct context and
   text once, the head at every scored position; and as whole-run tries: shared starts
   once, last tokens unfed, one head row per distinct position) and its time at that rate,
   on the sample and (with ``--flickr8k``) on the whole of Flickr8k-Expert.

The paths alternate round by round and each figure is the median of its rounds, so a machine
shared with other work slows both sides alike: read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from capjudge.backends import create_backend
from capjudge.backends.hf import HFBackend
from capjudge.item import Item, load_items
from capjudge.judge import JudgeConfig, plan, shared_context_order
from capjudge.methods import get_method
from capjudge.methods.base import Planned

MODES = ["npmi", "pmi", "conditional"]


def sample_items(n: int) -> list[Item]:
    """The first ``n`` candidates of the bundled sample (generated and ingested in a temp dir)."""
    from capjudge.ingest import ingest
    from capjudge.sample import generate_sample

    tmp = Path(tempfile.mkdtemp(prefix="bench-local-"))
    generate_sample(tmp / "sample", seed=0)
    ingest(tmp / "sample" / "manifest.jsonl", tmp / "sample", tmp / "ingest")
    return load_items(tmp / "ingest" / "items.parquet")[:n]


def run_once(backend: HFBackend, planned: list[Planned], batch: int
             ) -> tuple[float, int, list[float], int]:
    """Cold run (memo cleared) in the judge's batches: seconds, tokens fed, scores, passes."""
    backend.clear_memo()
    order = shared_context_order(range(len(planned)), planned)
    requests = [planned[k].request for k in order]
    tokens, passes = backend.stats.tokens, backend.stats.forward_passes
    started = time.perf_counter()
    answers: list[Any] = []
    for lo in range(0, len(requests), batch):
        answers += backend.generate(requests[lo:lo + batch])
    seconds = time.perf_counter() - started
    method = get_method("likelihood")
    scores = [0.0] * len(planned)
    for k, answer in zip(order, answers, strict=True):
        criteria = method.interpret(planned[k], answer)
        assert criteria[0].score is not None, criteria[0].reason
        scores[k] = criteria[0].score
    return seconds, backend.stats.tokens - tokens, scores, backend.stats.forward_passes - passes


def minimum_tokens(backend: HFBackend, planned: list[Planned]) -> int:
    """Every distinct context once, plus every distinct (context, text) pair's text tokens."""
    pairs = {p for x in planned for p in x.request.continuations}
    contexts = {c for c, _ in pairs}
    total = 0
    for context in contexts:
        total += len(backend._pair_ids(context, "")[0])
    for context, text in pairs:
        full, begin = backend._pair_ids(context, text)
        total += len(full) - begin
    return total


def compare(backends: dict[str, HFBackend], planned: list[Planned], candidates: int,
            rounds: int, batch: int) -> dict[str, dict[str, Any]]:
    """Alternate the backends round by round; median seconds, tokens and scores of each."""
    runs: dict[str, list[tuple[float, int, list[float], int]]] = {name: [] for name in backends}
    for _ in range(rounds):
        for name, backend in backends.items():
            runs[name].append(run_once(backend, planned, batch))
    out = {}
    for name, rs in runs.items():
        out[name] = {"s_per_candidate": statistics.median(r[0] for r in rs) / candidates,
                     "tokens_per_candidate": rs[0][1] / candidates, "scores": rs[0][2],
                     "passes": rs[0][3]}
    return out


def likelihood_benchmark(items: list[Item], rounds: int, batch: int) -> None:
    config = JudgeConfig(method="likelihood", backend="embedded/gemma-3-270m", modes=MODES)
    planned, _ = plan(items, config)
    n = len(items)
    # The path before issue 20 (every pair whole, the head applied whole, PyTorch's own linear
    # kernel), prefix sharing with the head still applied whole, prefix sharing with the head
    # in slices on PyTorch's kernel, and today's (the decoder's layers packed for oneDNN).
    paths = {"padded": (False, False, "default"), "shared-whole": (True, False, "default"),
             "shared-mkl": (True, True, "default"), "shared": (True, True, "auto")}
    backends: dict[str, HFBackend] = {}
    for name, (sharing, sliced, kernel) in paths.items():
        # One instance each.
        b = _own_backend(batch, {"prefix_sharing": sharing, "linear_kernel": kernel})
        b.sliced_head = sliced
        backends[name] = b
    run_once(backends["shared"], planned[:3], batch)  # warm-up (first-call allocations)
    res = compare(backends, planned, n, rounds, batch)
    minimum = minimum_tokens(backends["shared"], planned) / n
    before = res["padded"]
    print(f"[likelihood] {n} candidates x {len(MODES)} modes ({len(planned)} requests, "
          f"batches of {batch}), median of {rounds} alternating rounds, threads "
          f"{backends['shared'].threads}")
    for name in paths:
        r = res[name]
        delta = max(abs(a - b) for a, b in zip(before["scores"], r["scores"], strict=True))
        print(f"  {name:<12} {r['s_per_candidate']:.3f} s/candidate "
              f"({before['s_per_candidate'] / r['s_per_candidate']:.2f}x padded)  "
              f"{r['tokens_per_candidate']:.0f} tokens/candidate "
              f"({r['tokens_per_candidate'] / minimum:.2f}x the minimum {minimum:.0f}), "
              f"{r['passes']} forward passes, max |delta score| {delta:.2e} (0-100 scale)")


def numerics_benchmark(items: list[Item], rounds: int, batch: int) -> None:
    config = JudgeConfig(method="likelihood", backend="embedded/gemma-3-270m", modes=MODES)
    planned, _ = plan(items, config)
    n = len(items)
    backends: dict[str, HFBackend] = {}
    for name, options in (("float32", {}), ("bfloat16", {"dtype": "bfloat16"}),
                          ("int8", {"quantize": "int8"})):
        b = _backend(batch, options)
        run_once(b, planned[:3], batch)
        backends[name] = b
    res = compare(backends, planned, n, rounds, batch)
    base = res["float32"]
    print(f"[numerics] shared path, {n} candidates x {len(MODES)} modes, median of {rounds}")
    for name, r in res.items():
        delta = max(abs(a - b) for a, b in zip(base["scores"], r["scores"], strict=True))
        print(f"  {name:<8} {r['s_per_candidate']:.3f} s/candidate "
              f"({base['s_per_candidate'] / r['s_per_candidate']:.2f}x float32), "
              f"max |delta score| {delta:.3f}, snapshot {backends[name].snapshot()[-20:]}")


def _own_backend(batch: int, options: dict[str, Any]) -> HFBackend:
    """A new embedded backend instance (``create_backend`` shares one per set of options)."""
    from capjudge.backends.embedded import EmbeddedBackend, prepare_embedded

    return EmbeddedBackend(prepare_embedded(), backend_id="embedded/gemma-3-270m",
                           batch_size=batch, **options)


def _backend(batch: int, options: dict[str, Any]) -> HFBackend:
    """The embedded backend; int8 is built directly (measured, not a backend option)."""
    if "quantize" in options:
        return _own_backend(batch, options)
    b = create_backend("embedded/gemma-3-270m", batch_size=batch, **options)
    assert isinstance(b, HFBackend)
    return b


def tree_benchmark(rounds: int) -> None:
    backend = create_backend("embedded/gemma-3-270m")
    assert isinstance(backend, HFBackend)
    context = backend.tokenizer.encode(
        "Captions of the same image:\n- A dog runs on the grass.\n- A brown dog in a park."
        "\nRate the candidate caption from 0 to 100.\nThe final score is $")
    values = list(range(101))
    times: dict[bool, list[float]] = {True: [], False: []}
    results: dict[bool, dict[int, float]] = {}
    passes: dict[bool, int] = {}
    backend.distribution(context, values)  # warm-up
    for _ in range(rounds):
        for masked in (False, True):
            backend.tree_mask = masked
            before = backend.stats.forward_passes
            started = time.perf_counter()
            results[masked] = backend.distribution(context, values)
            times[masked].append(time.perf_counter() - started)
            passes[masked] = backend.stats.forward_passes - before
    backend.tree_mask = True
    delta = max(abs(results[True][v] - results[False][v]) for v in values)
    walk, tree = statistics.median(times[False]), statistics.median(times[True])
    print(f"[tree] 0-100 distribution after a {len(context)}-token context, median of {rounds}")
    print(f"  level walk {passes[False]} passes {walk:.3f} s; tree mask {passes[True]} passes "
          f"{tree:.3f} s ({walk / tree:.2f}x); max |delta p| {delta:.1e}")


def generate_benchmark(items: list[Item], rounds: int, batch: int, max_tokens: int) -> None:
    """G-VEval ref-only through generation: scores read on generation's cache vs re-encoded."""
    from capjudge.methods import MethodOptions
    from capjudge.protocol import Decoding, JudgeResponse

    method = get_method("gveval")
    options = MethodOptions(decoding=Decoding(max_tokens=max_tokens))
    requests = [p.request for item in items for p in method.plan(item, "ref-only", options)
                if isinstance(p, Planned)]
    backends = {share: _own_backend(batch, {"share_generated": share}) for share in (True, False)}
    times: dict[bool, list[float]] = {True: [], False: []}
    fed: dict[bool, int] = {}
    answers: dict[bool, list[Any]] = {}
    for backend in backends.values():  # the one-time checks and warm-up, not timed
        backend.generate(requests[:2])
    for _ in range(rounds):
        for share, backend in backends.items():
            before = backend.stats.tokens
            started = time.perf_counter()
            answers[share] = []
            for k in range(0, len(requests), batch):
                answers[share] += backend.generate(requests[k:k + batch])
            times[share].append(time.perf_counter() - started)
            fed[share] = backend.stats.tokens - before
    probs = {share: [p for a in got if isinstance(a, JudgeResponse)
                     for s in a.slots for p in (s.probs or [])]
             for share, got in answers.items()}
    delta = max(abs(a - b) for a, b in zip(probs[True], probs[False], strict=True))
    shared, encoded = statistics.median(times[True]), statistics.median(times[False])
    n = len(requests)
    print(f"[generate] G-VEval ref-only, {n} requests, {max_tokens} generated tokens, batch "
          f"{batch}, median of {rounds}")
    print(f"  re-encoding each context {encoded / n:.3f} s/request ({fed[False] // n} tokens "
          f"fed for the scores); on generation's cache {shared / n:.3f} s/request "
          f"({fed[True] // n} tokens) ({encoded / shared:.2f}x); max |delta p| {delta:.1e}")


def flickr_benchmark(path: str, limit: int) -> None:
    from capjudge.metaeval import judge_scorer, run_meta_eval

    print(f"[flickr8k-expert] npmi judge, first {limit} candidates, no cache, no bootstrap")
    base = None
    for name, options in (("float32", {}), ("bfloat16", {"dtype": "bfloat16"}),
                          ("int8", {"quantize": "int8"})):
        # A new, empty request cache each (None would mean the default .capjudge-cache, and
        # a second run would time cache hits).
        cache = tempfile.mkdtemp(prefix="bench-local-cache-")
        started = time.perf_counter()
        if "quantize" in options:  # not a backend option: the scorer gets the instance
            from unittest import mock

            backend = _backend(16, options)
            with mock.patch("capjudge.judge.run.make_backend", lambda _config, b=backend: b):
                scorer = judge_scorer("likelihood", "npmi", "embedded/gemma-3-270m", {}, cache)
                result = run_meta_eval("flickr8k-expert", path, metrics=[],
                                       judges={name: scorer}, n_boot=0, limit=limit)
        else:
            scorer = judge_scorer("likelihood", "npmi", "embedded/gemma-3-270m", options, cache)
            result = run_meta_eval("flickr8k-expert", path, metrics=[], judges={name: scorer},
                                   n_boot=0, limit=limit)
        seconds = time.perf_counter() - started
        m = result["metrics"][name]
        tau = 100 * m["kendall_tau_c"]
        base = tau if base is None else base
        print(f"  {name:<8} tau-c {tau:.2f} ({tau - base:+.2f} vs float32), n {m['n']}, "
              f"{seconds:.0f} s")


# Gemma 3 270M: 100.3 M parameters outside the head (18 layers of 5.57 M), so 2 x that in
# FLOP per token fed; the 262,144 x 640 head 2 x 167.8 M per scored position.
DECODER_GFLOP_PER_TOKEN = 0.2006
HEAD_GFLOP_PER_POSITION = 0.3355


def trie_counts(backend: HFBackend, planned: list[Planned]) -> tuple[int, int]:
    """Tokens fed and head rows when the whole run is one trie per context (the packed
    path's own floor): every context as one trie, each context's texts as one trie without
    their last tokens, and one head row per distinct predicting position."""
    from capjudge.backends.packing import Pack, pack_paths

    pairs = {p for x in planned for p in x.request.continuations}
    by_context: dict[tuple[int, ...], list[tuple[int, list[int], int]]] = {}
    for k, (context, text) in enumerate(sorted(pairs)):
        full, begin = backend._pair_ids(context, text)
        if len(full) > begin:
            prefix = tuple(full[:begin])
            by_context.setdefault(prefix, []).append((k, full[begin:], 0))
    paths = list(by_context)
    tokens = sum(len(pack) for pack, _ in pack_paths(paths, sum(map(len, paths))))
    rows = 0
    for prefix, texts in by_context.items():
        pack = Pack(prefix)
        for k, suffix, first in texts:
            pack.add(k, suffix, first)
        tokens += len(pack)
        rows += len({node for node, _, _ in pack.scored})
    return tokens, rows


def floor_report(label: str, items: list[Item], gflops: float) -> None:
    """The arithmetic a candidate needs at least, and its time at ``gflops``."""
    config = JudgeConfig(method="likelihood", backend="embedded/gemma-3-270m", modes=MODES)
    planned, _ = plan(items, config)
    backend = _backend(16, {})
    pairs = {p for x in planned for p in x.request.continuations}
    positions = 0
    for context, text in pairs:
        full, begin = backend._pair_ids(context, text)
        positions += len(full) - begin
    n = len(items)
    tokens = minimum_tokens(backend, planned) / n
    per = tokens * DECODER_GFLOP_PER_TOKEN + positions / n * HEAD_GFLOP_PER_POSITION
    print(f"[floor] {label}: {n} candidates, one text per row: at least {tokens:.0f} tokens "
          f"fed and {positions / n:.0f} scored positions each = {per:.1f} GFLOP; at "
          f"{gflops:.0f} GFLOP/s {per / gflops:.3f} s per candidate, "
          f"{per / gflops * n / 60:.1f} min for all")
    fed, rows = trie_counts(backend, planned)
    per = fed / n * DECODER_GFLOP_PER_TOKEN + rows / n * HEAD_GFLOP_PER_POSITION
    print(f"[floor] {label}: as tries (shared starts once, last tokens unfed): {fed / n:.0f} "
          f"tokens and {rows / n:.0f} head rows each = {per:.1f} GFLOP; "
          f"{per / gflops:.3f} s per candidate, {per / gflops * n / 60:.1f} min for all")


def flickr_items(path: str) -> list[Item]:
    """Flickr8k-Expert's candidates and references exactly as meta-eval gives them a judge."""
    from capjudge.metaeval import run_meta_eval

    got: list[Item] = []

    class Captured(Exception):
        pass

    def capture(texts: Any, references: Any) -> list[float | None]:
        got.extend(Item(id=str(i), candidate=t, references=tuple(r))
                   for i, (t, r) in enumerate(zip(texts, references, strict=True)))
        raise Captured

    try:
        run_meta_eval("flickr8k-expert", path, metrics=[], judges={"x": capture}, n_boot=0)
    except Captured:
        pass
    return got


def main() -> None:
    """Run the selected benchmarks and print their ratios."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=12, help="sample candidates (slice)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per path")
    parser.add_argument("--batch", type=int, default=16, help="requests per backend call")
    parser.add_argument("--numerics", action="store_true", help="float32 vs bf16 vs int8")
    parser.add_argument("--tree", action="store_true", help="4-pass walk vs 2-pass tree")
    parser.add_argument("--generate", action="store_true",
                        help="G-VEval through generation: scores on its cache vs re-encoded")
    parser.add_argument("--max-tokens", type=int, default=24, help="tokens generated")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default: the backend's, the cores this process "
                             "may use); 1 keeps ratios fair on a machine shared with others")
    parser.add_argument("--skip-likelihood", action="store_true")
    parser.add_argument("--flickr8k", help="flickr8k.json: tau-c per numerics option")
    parser.add_argument("--limit", type=int, default=120, help="Flickr8k candidates")
    parser.add_argument("--floor", type=float, metavar="GFLOPS",
                        help="the arithmetic floor at this rate (sample; all of Flickr8k "
                             "with --flickr8k) instead of the benchmarks")
    args = parser.parse_args()
    if args.floor:
        floor_report("sample", sample_items(args.items), args.floor)
        if args.flickr8k:
            floor_report("flickr8k-expert", flickr_items(args.flickr8k), args.floor)
        return
    if args.threads:
        os.environ["CAPJUDGE_THREADS"] = str(args.threads)
    items = sample_items(args.items) if not args.skip_likelihood or args.numerics \
        or args.generate else []
    if not args.skip_likelihood:
        likelihood_benchmark(items, args.rounds, args.batch)
    if args.numerics:
        numerics_benchmark(items, args.rounds, args.batch)
    if args.tree:
        tree_benchmark(max(3, args.rounds))
    if args.generate:
        generate_benchmark(items, args.rounds, args.batch, args.max_tokens)
    if args.flickr8k:
        flickr_benchmark(args.flickr8k, args.limit)


if __name__ == "__main__":
    main()
