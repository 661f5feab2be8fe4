"""What changes across machines: the main job's judges on each kernel path selectable here.

A judgement depends on the machine only through the kernels its engine runs. This pins each
path that can be chosen on this machine and compares the judgements side by side:

- PyTorch (the likelihood judge): ATen's vector kernels (``ATEN_CPU_CAPABILITY``: ``default``
  scalar code vs ``avx2``; set per process, before torch loads) x the linear layers' kernel
  (``linear_kernel``: oneDNN packed vs PyTorch's MKL path);
- llama.cpp (G-VEval, HarmonicEval): the engine's thread count (1 vs 2; its CPU kernels are
  chosen from the CPU's features at load, named in the lineage, and cannot be switched here).

Each setting runs in its own process from an empty cache on the sample's first ``--items``
items; printed: the largest score difference to the first setting, and how many generated
texts differ.

    python bench/bench_kernels.py --items 30
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LIKELIHOOD = [("default", "onednn"), ("avx2", "onednn"), ("default", "default"),
              ("avx2", "default")]
LLAMA = [1, 2]


def child(kind: str, setting: str, items: int, out: str) -> None:
    """One setting's judgements, written as JSON (run in a fresh process)."""
    from capjudge.item import load_items
    from capjudge.judge import JudgeConfig, judge_items

    chosen = [i for i in load_items(ROOT / "data/ingest/items.parquet") if i.references][:items]
    with tempfile.TemporaryDirectory() as cache:
        if kind == "likelihood":
            config = JudgeConfig(method="likelihood", backend="embedded/gemma-3-270m",
                                 modes=["npmi", "pmi", "conditional"], cache_dir=cache,
                                 backend_options={"batch_size": 16,
                                                  "linear_kernel": setting.split(":")[1]})
        else:
            method = kind
            config = JudgeConfig(method=method, backend="llamacpp/gemma-3-270m",
                                 modes=["ref-only"] if method == "gveval" else None,
                                 max_tokens=24 if method == "gveval" else 4, cache_dir=cache,
                                 backend_options={"threads": int(setting), "poll": 0})
        rows = judge_items(chosen, config).rows
    Path(out).write_text(json.dumps([[r.item_id, r.mode, r.criterion, r.score, r.reasoning]
                                     for r in rows if r.status != "skipped"]))


def run(kind: str, setting: str, items: int) -> list[list[object]]:
    out = tempfile.mktemp(suffix=".json")
    env = dict(os.environ)
    if kind == "likelihood":
        env["ATEN_CPU_CAPABILITY"] = setting.split(":")[0]
    subprocess.run([sys.executable, __file__, "--child", kind, setting, str(items), out],
                   check=True, env=env, cwd=ROOT)
    rows: list[list[object]] = json.loads(Path(out).read_text())
    return rows


def compare(base: list[list[object]], other: list[list[object]]) -> str:
    b = {tuple(r[:3]): r for r in base}
    o = {tuple(r[:3]): r for r in other}
    diffs = [abs(float(b[k][3]) - float(o[k][3])) for k in b  # type: ignore[arg-type]
             if k in o and b[k][3] is not None and o[k][3] is not None]
    texts = sum(b[k][4] != o[k][4] for k in b if k in o)
    same = sum(b[k][3] == o[k][3] and b[k][4] == o[k][4] for k in b if k in o)
    return (f"identical {same}/{len(b)}; max |score diff| {max(diffs, default=0.0):.3g}; "
            f"texts differing {texts}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=30)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]), args.child[3])
        return
    settings = [f"{cap}:{kernel}" for cap, kernel in LIKELIHOOD]
    base = run("likelihood", settings[0], args.items)
    print(f"likelihood judge, {len(base)} scores; against ATEN_CPU_CAPABILITY=default, "
          f"linear_kernel onednn:", flush=True)
    for setting in settings[1:]:
        print(f"  {setting:<18} {compare(base, run('likelihood', setting, args.items))}",
              flush=True)
    for method in ("gveval", "harmoniceval"):
        base = run(method, str(LLAMA[0]), args.items)
        for threads in LLAMA[1:]:
            print(f"{method} on llama.cpp, {len(base)} judgements, {threads} threads vs "
                  f"{LLAMA[0]}: {compare(base, run(method, str(threads), args.items))}",
                  flush=True)


if __name__ == "__main__":
    main()
