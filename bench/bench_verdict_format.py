"""What ``verdict_format: json_schema`` changes on the bundled sample (issue 30, item 3).

Runs the main job's G-VEval judge (llama.cpp's server engine on the embedded Gemma 3 270M,
params.yaml's settings) on the sample's items in ref-only mode, once with the paper's
free-text answer and once with the answer constrained to the method's JSON schema, side by
side in one process, each from an empty request cache, and prints per format: statuses, the
captured mass of the scored rows, Kendall tau-b with the human labels, and how the two formats'
scores agree on the items both scored.

    python bench/bench_verdict_format.py                 # data/ingest/items.parquet
    python bench/bench_verdict_format.py --max-tokens 24 96 --limit 60
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
from scipy.stats import kendalltau

from capjudge.item import load_items
from capjudge.judge import JudgeConfig, judge_items

ROOT = Path(__file__).resolve().parents[1]


def run(items_path: Path, verdict_format: str, max_tokens: int, limit: int | None
        ) -> dict[str, tuple[str, float | None, float | None]]:
    items = load_items(items_path)[:limit]
    with tempfile.TemporaryDirectory() as cache:
        config = JudgeConfig(method="gveval", backend="llamacpp/gemma-3-270m",
                             modes=["ref-only"], max_tokens=max_tokens,
                             backend_options={"threads": 2, "poll": 0},
                             cache_dir=cache,
                             method_options={"verdict_format": verdict_format})
        result = judge_items(items, config)
    return {r.item_id: (r.status, r.score, r.mass) for r in result.rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=Path, default=ROOT / "data/ingest/items.parquet")
    parser.add_argument("--max-tokens", type=int, nargs="+", default=[24, 96])
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    human = {r["id"]: statistics.mean(v if isinstance(v, list) else [v])
             for r in pq.read_table(args.items).to_pylist()
             if r["labels"] and (v := json.loads(r["labels"]).get("overall")) is not None}
    results = {}
    for max_tokens in args.max_tokens:
        for fmt in ("paper", "json_schema"):
            start = time.perf_counter()
            rows = run(args.items, fmt, max_tokens, args.limit)
            seconds = time.perf_counter() - start
            results[(fmt, max_tokens)] = rows
            scored = {k: v for k, v in rows.items() if v[1] is not None}
            masses = [v[2] for v in scored.values() if v[2] is not None]
            pairs = [(v[1], human[k]) for k, v in scored.items() if k in human]
            tau = kendalltau(*zip(*pairs, strict=True)).statistic if len(pairs) > 2 else None
            print(f"{fmt:<12} max_tokens {max_tokens:>3}: {len(rows)} items in {seconds:.0f} s; "
                  f"statuses {dict(Counter(v[0] for v in rows.values()))}; "
                  f"median mass {statistics.median(masses) if masses else float('nan'):.3f}; "
                  f"tau-b with humans {100 * tau if tau is not None else float('nan'):.1f} "
                  f"(n {len(pairs)})")
        paper, constrained = results[("paper", max_tokens)], results[("json_schema",
                                                                       max_tokens)]
        both = [k for k in paper if paper[k][1] is not None and constrained.get(k, ("", None))[1]
                is not None]
        if len(both) > 2:
            tau = kendalltau([paper[k][1] for k in both], [constrained[k][1] for k in both])
            print(f"  paper vs json_schema at {max_tokens}: tau-b {100 * tau.statistic:.1f} on "
                  f"{len(both)} items both scored")


if __name__ == "__main__":
    main()
