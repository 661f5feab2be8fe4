"""The main job's levers, measured side by side in one run (issue: a main job in minutes).

    python bench/bench_main_job.py [--items 8]

1. Orchestration per stage: a trivial Prefect flow run in a fresh process with its own
   temporary server (what every stage did) vs against one running local server (what
   ``scripts/repro.sh`` now starts once for the whole ``dvc repro``).
2. The embedded judge per item on the bundled sample: G-VEval ref-only (a chain of thought,
   24 new tokens, then the digit tree) vs the likelihood judge (PMI: a few scored sequences,
   no generation), cold cache, the same items.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

FLOW = ("from prefect import flow\n@flow\ndef noop():\n    return 1\nnoop()\n")


def flow_seconds(env: dict[str, str], repeat: int) -> float:
    """Median wall time of a fresh process that runs one trivial flow."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", FLOW], env=env, check=True,
                       capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def start_server(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """``prefect server start`` on a free port; returns the process and its API URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(["prefect", "server", "start", "--host", "127.0.0.1", "--port",
                             str(port)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/api"
    for _ in range(240):
        try:
            urllib.request.urlopen(url + "/health", timeout=2).read()
            return proc, url
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("prefect server did not start")


def judge_seconds(items_path: Path, method: str, modes: list[str], n: int, tmp: Path,
                  **extra: object) -> tuple[float, int]:
    """Seconds per item of an embedded judge on the first ``n`` items (cold cache)."""
    from capjudge.judge import JudgeConfig, run_judge

    config = JudgeConfig(method=method, backend="embedded/gemma-3-270m", modes=modes,
                         limit=n, cache_dir=str(tmp / f"cache-{method}"), **extra)  # type: ignore[arg-type]
    started = time.perf_counter()
    summary = run_judge(items_path, tmp / f"out-{method}", config)
    return (time.perf_counter() - started) / n, summary["requests"]


def main() -> None:
    """Run both measurements and print them with their ratios."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        env = {**os.environ, "PREFECT_HOME": str(tmp / "prefect"), "DO_NOT_TRACK": "1",
               "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
        env.pop("PREFECT_API_URL", None)
        own = flow_seconds(env, args.repeat)
        proc, url = start_server(env)
        try:
            shared = flow_seconds({**env, "PREFECT_API_URL": url}, args.repeat)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        print("orchestration per stage (fresh process + one trivial flow, median of "
              f"{args.repeat}):")
        print(f"  temporary server per stage {own:6.2f} s   one shared server {shared:6.2f} s"
              f"   ratio {own / shared:4.1f}x")

        from capjudge.ingest import ingest
        from capjudge.sample import generate_sample

        generate_sample(tmp / "sample", seed=0)
        ingest(tmp / "sample" / "manifest.jsonl", tmp / "sample", tmp / "ingest")
        items = tmp / "ingest" / "items.parquet"
        judge_seconds(items, "likelihood", ["pmi"], 1, tmp / "warmup")  # model load
        pmi, pmi_requests = judge_seconds(items, "likelihood", ["pmi"], args.items, tmp,
                                          backend_options={"batch_size": 16})
        gv, gv_requests = judge_seconds(items, "gveval", ["ref-only"], args.items, tmp,
                                        max_tokens=24, backend_options={"batch_size": 8})
        print(f"embedded judge per item ({args.items} sample items, cold cache, 2 cores):")
        print(f"  G-VEval ref-only {gv:6.2f} s ({gv_requests} requests)   likelihood PMI "
              f"{pmi:6.2f} s ({pmi_requests} requests)   ratio {gv / pmi:4.1f}x")


if __name__ == "__main__":
    main()
