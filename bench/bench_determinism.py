"""Are the llama.cpp judges' judgements reproducible, and at what cost? (issue 32)

For each engine setting, runs the main job's G-VEval judge (and optionally HarmonicEval) on the
sample's first N items from an empty request cache, four times:

1. a fresh engine, quiet machine;
2. another fresh engine, quiet;
3. the engine of run 2 again (its prompt cache warm from run 2: another cache state);
4. a fresh engine with a busy loop competing for a core.

Each judgement row is reduced to what a user reads (status, text, printed number, the
distribution's probabilities, score; bit for bit) and the runs are compared with run 1:
"identical N/N", the largest score difference, and how many generated texts differ. Wall time
per run is printed side by side, so the cost of a deterministic setting is measured against
today's in the same process.

    python bench/bench_determinism.py --items 40
    python bench/bench_determinism.py --items 40 --settings fast deterministic
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from capjudge.item import load_items
from capjudge.judge import JudgeConfig, judge_items

ROOT = Path(__file__).resolve().parents[1]

SETTINGS: dict[str, dict[str, Any]] = {
    # params.yaml before issue 32: 4 slots decoded together.
    "fast": {"parallel": 4, "threads": 2, "poll": 0, "determinism": "fast"},
    # One slot, requests in order, each prompt split the same way (the primed template prefix).
    "deterministic": {"threads": 2, "poll": 0, "determinism": "deterministic"},
    # Two single-slot engines of one thread each, a request and its follow-ups on one engine.
    "engines2": {"threads": 1, "poll": 0, "determinism": "deterministic", "engines": 2},
}


def busy_loop(stop: Any) -> None:
    x = 0
    while not stop.is_set():
        x = (x * 31 + 7) % 1000003


def fingerprint(row: Any) -> tuple[str, Any, Any, str]:
    """What a user reads of a judgement row, exactly (floats by their repr)."""
    probs = None if row.probs is None else [float(p).hex() for p in row.probs]
    score = None if row.score is None else float(row.score).hex()
    return (row.status, row.printed, score, hashlib.sha256(json.dumps(
        [row.reasoning, probs]).encode()).hexdigest())


def run_once(items: list[Any], method: str, modes: list[str], options: dict[str, Any],
             max_tokens: int, backend: Any = None) -> tuple[dict[tuple[str, str, str], Any],
                                                            float, Any]:
    from capjudge.backends.llamacpp import LlamaCppBackend

    with tempfile.TemporaryDirectory() as cache:
        if backend is None:
            backend = LlamaCppBackend("gemma-3-270m", **options)
        config = JudgeConfig(method=method, backend="llamacpp/gemma-3-270m", modes=modes,
                             max_tokens=max_tokens, backend_options=options, cache_dir=cache)
        start = time.perf_counter()
        result = judge_items(items, config, backend=backend)
        seconds = time.perf_counter() - start
    rows = {(r.item_id, r.mode, r.criterion): r for r in result.rows if r.status != "skipped"}
    return rows, seconds, backend


def compare(base: dict[tuple[str, str, str], Any], other: dict[tuple[str, str, str], Any]
            ) -> str:
    same = sum(fingerprint(base[k]) == fingerprint(other.get(k, base[k])) and k in other
               for k in base)
    diffs = [abs(base[k].score - other[k].score) for k in base
             if k in other and base[k].score is not None and other[k].score is not None]
    texts = sum(base[k].reasoning != other[k].reasoning for k in base if k in other)
    return (f"identical {same}/{len(base)}; max |score diff| {max(diffs, default=0.0):.4g}; "
            f"texts differing {texts}")


def measure(name: str, items: list[Any], method: str, modes: list[str], max_tokens: int
            ) -> None:
    options = {k: v for k, v in SETTINGS[name].items()}
    runs: list[tuple[str, Callable[[], Any]]] = []
    first, t1, _ = run_once(items, method, modes, options, max_tokens)
    second, t2, engine = run_once(items, method, modes, options, max_tokens)
    third, t3, _ = run_once(items, method, modes, options, max_tokens, backend=engine)
    stop = multiprocessing.Event()
    loop = multiprocessing.Process(target=busy_loop, args=(stop,), daemon=True)
    loop.start()
    try:
        fourth, t4, _ = run_once(items, method, modes, options, max_tokens)
    finally:
        stop.set()
        loop.join(timeout=5)
    del runs
    print(f"{method} [{name}] {len(first)} judgements; s per run: quiet {t1:.1f}, {t2:.1f}, "
          f"warm engine {t3:.1f}, busy {t4:.1f}", flush=True)
    print(f"  run 2 vs 1 (fresh engines):       {compare(first, second)}", flush=True)
    print(f"  run 3 vs 1 (warm prompt cache):   {compare(first, third)}", flush=True)
    print(f"  run 4 vs 1 (busy loop on a core): {compare(first, fourth)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--path", type=Path, default=ROOT / "data/ingest/items.parquet")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS))
    parser.add_argument("--methods", nargs="+", default=["gveval"])
    args = parser.parse_args()
    items = [i for i in load_items(args.path) if i.references][: args.items]
    for method in args.methods:
        modes = ["ref-only"] if method == "gveval" else ["default"]
        max_tokens = 24 if method == "gveval" else 4
        for name in args.settings:
            measure(name, items, method, modes, max_tokens)


if __name__ == "__main__":
    main()
