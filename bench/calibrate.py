"""This machine's speed, for comparing the main job's time across machines (issue 42).

    python bench/calibrate.py [--json]

Two figures, each the best of a few short rounds (about 3 s in all):

- ``matmul``: float32 matrix products in PyTorch (1024 x 1024), GFLOP/s on one thread and on
  every thread PyTorch uses: what the embedded model's likelihood and llama.cpp's prompt
  processing scale with;
- ``python``: a fixed pure-Python workload (dictionary and string work on one thread), in
  millions of loop steps per second: what Prefect, DVC, the reader and the report scale with.

``scripts/repro.sh`` prints them after ``dvc repro``, beside its time; the figures measured
with the documented timings are in docs/results/benchmarks.md ("The main job's time").
"""

from __future__ import annotations

import argparse
import json
import time


def matmul_gflops(threads: int | None, size: int = 1024, rounds: int = 5) -> float:
    """Best float32 ``size x size`` matmul speed on ``threads`` threads (None: PyTorch's)."""
    import torch

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        a, b = torch.rand(size, size), torch.rand(size, size)
        torch.mm(a, b)  # warm-up
        best = float("inf")
        for _ in range(rounds):
            started = time.perf_counter()
            torch.mm(a, b)
            best = min(best, time.perf_counter() - started)
        return 2 * size**3 / best / 1e9
    finally:
        torch.set_num_threads(before)


def python_msteps(steps: int = 300_000, rounds: int = 3) -> float:
    """Best speed of a fixed pure-Python loop (dict, str and int work), million steps/s."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        counts: dict[str, int] = {}
        for i in range(steps):
            key = f"k{i % 97}"
            counts[key] = counts.get(key, 0) + (i & 7)
        best = min(best, time.perf_counter() - started)
    return steps / best / 1e6


def calibrate() -> dict[str, float]:
    """The figures (see the module docstring)."""
    import torch

    return {"matmul_gflops_1_thread": round(matmul_gflops(1), 1),
            "matmul_gflops_all_threads": round(matmul_gflops(None), 1),
            "torch_threads": torch.get_num_threads(),
            "python_msteps_per_s": round(python_msteps(), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    figures = calibrate()
    if args.json:
        print(json.dumps(figures))
        return
    print(f"this machine: float32 matmul {figures['matmul_gflops_1_thread']:.0f} GFLOP/s on 1 "
          f"thread, {figures['matmul_gflops_all_threads']:.0f} on "
          f"{figures['torch_threads']:.0f}; Python {figures['python_msteps_per_s']:.2f} M "
          "steps/s (bench/calibrate.py)")


if __name__ == "__main__":
    main()
