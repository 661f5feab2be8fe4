"""Scale benchmark: N items (fake judge) through ingest -> judge -> aggregate -> validate -> report.

    python bench/bench_scale.py [--n 10000] [--judge-n 100000] [--videos 8] [--workers 2]
                                [--stages ingest,judge,aggregate,validate,report]
                                [--dir DIR] [--skip-dask]

(On 2 cores the whole run takes ~15 minutes; ``--stages``, ``--judge-n 0`` and ``--videos 0``
run parts of it, and ``--dir`` lets a later part reuse an earlier one's outputs.)

Every stage runs as its own process, as ``dvc repro`` runs it: the *library* path calls the
function the ``capjudge`` CLI calls; the *flow* path runs ``python -m flows.<stage>`` against
one Prefect server started for the whole run (as ``scripts/repro.sh`` does; its start-up is
printed separately). Judge: G-VEval, one mode (``combined``: references and picture), on the
in-process fake backend (``fake/hash+vision``), so the figures measure the pipeline, not a
model. Measured side by side in one run:

1. N items (``--n``), every stage: library vs flow on threads (``runner.kind: threads``),
   ingest and judge also on a local Dask cluster of ``--workers`` processes; the judge cold
   (empty request cache) and warm (rerun: every answer from the cache).
2. Ingest of ``--videos`` distinct clips: library (serial) vs the flow's parallel frame
   sampling on threads and on Dask.
3. The judge stage alone at ``--judge-n`` items (0 skips it): library vs flow, cold. Its
   items are the N-item ingest's rows repeated with new ids and candidates (an ingest of
   100,000 rows would take minutes and is not what is measured here).

Per run: wall seconds (process start to exit, imports included), items/s, and peak RSS of the
stage's whole process tree (psutil, sampled every 50 ms: the sum over the stage's processes,
Dask workers and decoder children included; the Prefect server is not part of a stage). The
outputs of every variant are compared with the library's (``identical``), and the judge's
summaries give model calls and cache hits. Ratios: flow / library, warm / cold, dask / threads.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pyarrow.parquet as pq
import yaml

ROOT = Path(__file__).resolve().parents[1]
JUDGE = "scale"
# Columns that differ between runs by nature (timing, where the answer came from).
VOLATILE = {"latency_s", "cached", "attempts", "cost_usd"}


@dataclass
class Run:
    """One measured stage run."""

    stage: str
    n: int
    variant: str
    seconds: float
    peak_mb: float
    note: str = ""


# --------------------------------------------------------------------------------------------
# Child mode: the library path of one stage, in its own process.


def child(stage: str, params_path: str) -> None:
    """Run one stage through the library (what the ``capjudge`` CLI calls)."""
    params = yaml.safe_load(Path(params_path).read_text())
    ing = params["ingest"]
    judge_dir = params["judges"][JUDGE]["out"]
    if stage == "ingest":
        from capjudge.ingest import IngestConfig, ingest

        cfg = {k: ing[k] for k in ("frame_policy", "decode_timeout_s") if k in ing}
        ingest(ing["manifest"], ing["media_root"], ing["out"], IngestConfig(**cfg))
    elif stage == "judge":
        from capjudge.judge import JudgeConfig, run_judge

        section = {k: v for k, v in params["judges"][JUDGE].items() if k != "out"}
        config = JudgeConfig.from_params(section, params["judge"])
        run_judge(f"{ing['out']}/items.parquet", judge_dir, config)
    elif stage == "aggregate":
        from capjudge.aggregate import AggregateConfig, run_aggregate

        section = dict(params["aggregate"])
        run_aggregate([judge_dir], section.pop("out"), AggregateConfig(**section))
    elif stage == "validate":
        from capjudge.validate import ValidateConfig, run_validate

        section = dict(params["validate"])
        run_validate(f"{ing['out']}/items.parquet", [judge_dir], section.pop("out"),
                     ValidateConfig(**section))
    elif stage == "report":
        from capjudge.report import ReportConfig, run_report

        section = dict(params["report"])
        run_report(ing["out"], [judge_dir], params["aggregate"]["out"], section.pop("out"),
                   ReportConfig(**section))
    else:
        raise SystemExit(f"unknown stage {stage}")


# --------------------------------------------------------------------------------------------
# Measuring a process tree.


def measure(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[float, float]:
    """Run ``cmd``; returns (wall seconds, peak RSS of its process tree in MB).

    Raises:
        RuntimeError: the command failed (the log's tail is in the message).
    """
    peak = 0
    started = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        root = psutil.Process(proc.pid)
        stop = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not stop.is_set():
                total = 0
                try:
                    procs = [root, *root.children(recursive=True)]
                except psutil.Error:
                    procs = []
                for p in procs:
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        pass
                peak = max(peak, total)
                stop.wait(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        code = proc.wait()
        seconds = time.perf_counter() - started
        stop.set()
        sampler.join()
    if code != 0:
        tail = "\n".join(log.read_text().splitlines()[-30:])
        raise RuntimeError(f"{' '.join(cmd)} exited {code}:\n{tail}")
    return seconds, peak / 2**20


# --------------------------------------------------------------------------------------------
# Data.


def make_manifest(sample: Path, n: int, path: Path) -> None:
    """``n`` distinct rows cycling over the sample suite's rows (images, videos, 3D objects);
    each candidate gets a variant number so that every request is a different question."""
    rows = [json.loads(line) for line in (sample / "manifest.jsonl").read_text().splitlines()]
    with path.open("w") as handle:
        for k in range(n):
            row = dict(rows[k % len(rows)])
            row["id"] = f"{row['id']}-{k}"
            row["candidate"] = f"{row['candidate']} (variant {k})"
            handle.write(json.dumps(row) + "\n")


def make_videos(folder: Path, count: int, seconds: int = 10) -> Path:
    """``count`` distinct 640x360 clips and a manifest with one row per clip."""
    from PIL import Image, ImageDraw

    from capjudge.sample import encode_video

    (folder / "videos").mkdir(parents=True, exist_ok=True)
    rows = []
    for v in range(count):
        frames = []
        for i in range(seconds * 25):
            img = Image.new("RGB", (640, 360), (30 + 20 * v % 200, 30, 30))
            ImageDraw.Draw(img).ellipse((i * 2 % 600, 150, i * 2 % 600 + 40, 190),
                                        fill=(200, 50 + 20 * v % 200, 50))
            frames.append(img)
        encode_video(frames, folder / "videos" / f"clip-{v}.mp4", fps=25)
        rows.append({"id": f"clip-{v}", "video": f"videos/clip-{v}.mp4",
                     "candidate": "A red ball moves from left to right.",
                     "references": ["A ball rolls across a dark screen."]})
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return manifest


def params_for(work: Path, variant: str, manifest: Path, media_root: Path, ingest_out: str,
               workers: int, tag: str, cache_root: Path | None = None) -> Path:
    """A params file for one variant (own outputs and request cache, under ``cache_root``
    or the work folder)."""
    base = yaml.safe_load((ROOT / "params.yaml").read_text())
    kind = "dask" if variant == "dask" else "threads"
    params = {
        "ingest": {"manifest": str(manifest), "media_root": str(media_root), "out": ingest_out,
                   "frame_policy": "first_middle_last", "decode_timeout_s": 120},
        "judge": {**{k: v for k, v in base["judge"].items() if k != "cache_dir"},
                  "cache_dir": str((cache_root or work) / f"cache-{tag}-{variant}")},
        "judges": {JUDGE: {"method": "gveval", "backend": "fake/hash+vision",
                           "modes": ["combined"], "out": f"judge-{tag}-{variant}/{JUDGE}"}},
        "runner": {"kind": kind, "workers": workers if kind == "dask" else None},
        "aggregate": {**base["aggregate"], "out": f"aggregate-{tag}-{variant}"},
        "validate": {**base["validate"], "out": f"reports-{tag}-{variant}"},
        "report": {**base["report"], "out": f"reports-{tag}-{variant}"},
    }
    path = work / f"params-{tag}-{variant}.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


# --------------------------------------------------------------------------------------------
# The Prefect server (one per run, as scripts/repro.sh starts one per `dvc repro`).


def start_server(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str, float]:
    """Start ``prefect server start`` on a free port; returns it, its API URL and the
    seconds until it answered."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.perf_counter()
    proc = subprocess.Popen(["prefect", "server", "start", "--host", "127.0.0.1", "--port",
                             str(port)], env=env, stdout=log.open("w"),
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/api"
    for _ in range(360):
        try:
            urllib.request.urlopen(url + "/health", timeout=2).read()
            return proc, url, time.perf_counter() - started
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.5)
    proc.terminate()
    raise RuntimeError(f"the Prefect server did not start (see {log})")


# --------------------------------------------------------------------------------------------
# Comparisons.


def same_table(a: Path, b: Path, drop: set[str] | None = None, key: str = "item_id") -> bool:
    """Whether two Parquet tables hold the same rows (in the same order), ``drop`` aside."""
    ta, tb = pq.read_table(a), pq.read_table(b)
    cols = [c for c in ta.column_names if c not in (drop or set())]
    return ta.num_rows == tb.num_rows and ta.select(cols).equals(tb.select(cols))


def same_items(a: Path, b: Path) -> bool:
    """items.parquet equality, paths aside (each variant wrote its own tiles folder)."""
    drop = {"tile_path", "judge_path"}
    return same_table(a / "items.parquet", b / "items.parquet", drop)


def summary_of(path: Path) -> dict[str, Any]:
    return json.loads((path / "summary.json").read_text())


def expand_items(source: Path, n: int, out: Path) -> None:
    """``n`` items made from an ingest's items by repeating its rows with new ids and
    candidates (the media and tiles stay those of the source, referenced by path)."""
    import pyarrow as pa

    from capjudge.ingest import ITEMS_ROW_GROUP

    table = pq.read_table(source / "items.parquet")
    rows = table.to_pylist()
    out.mkdir(parents=True, exist_ok=True)
    # Tiles and normalised images must lie in the items' own folder (the judge-time media
    # check refuses pictures elsewhere): copy them and point the rows at the copies.
    for folder in ("tiles", "judge_images"):
        if (source / folder).is_dir():
            shutil.copytree(source / folder, out / folder, dirs_exist_ok=True)
    old, new = str(source.absolute()), str(out.absolute())
    for row in rows:
        for key in ("tile_path", "judge_path"):
            if row[key] and row[key].startswith(old):
                row[key] = new + row[key][len(old):]
    with pq.ParquetWriter(out / "items.parquet", table.schema) as writer:
        for lo in range(0, n, ITEMS_ROW_GROUP):
            batch = []
            for k in range(lo, min(n, lo + ITEMS_ROW_GROUP)):
                row = dict(rows[k % len(rows)])
                row["id"] = f"x{k}-{row['id']}"
                row["candidate"] = f"{row['candidate']} (copy {k})"
                batch.append(row)
            writer.write_table(pa.Table.from_pylist(batch, schema=table.schema))


# --------------------------------------------------------------------------------------------


class Bench:
    """Runs stages and collects their measurements."""

    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.work, self.env = work, env
        self.runs: list[Run] = []

    def stage(self, stage: str, n: int, variant: str, params: Path, note: str = "") -> Run:
        if variant == "library":
            cmd = [sys.executable, str(Path(__file__).resolve()), "--child", stage,
                   "--params", str(params)]
        else:
            module = {"ingest": "flows.ingest", "judge": "flows.judge"}.get(stage, "flows.report")
            cmd = [sys.executable, "-m", module, "--params", str(params)]
            if stage == "judge":
                cmd += ["--name", JUDGE]
            elif module == "flows.report":
                cmd.insert(3, stage)
        log = self.work / "logs" / f"{stage}-{n}-{variant}-{note or 'run'}.log"
        log.parent.mkdir(exist_ok=True)
        seconds, peak = measure(cmd, self.work, self.env, log)
        run = Run(stage, n, variant, seconds, peak, note)
        self.runs.append(run)
        print(f"  {stage:<9} n={n:<7} {variant:<8} {note:<5} {seconds:8.1f} s "
              f"{n / seconds:9.0f} items/s  peak RSS {peak:7.0f} MB", flush=True)
        return run


def ratio(a: Run, b: Run) -> str:
    return f"{a.seconds / b.seconds:.2f}"


STAGES = ("ingest", "judge", "aggregate", "validate", "report")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000, help="items through every stage")
    parser.add_argument("--judge-n", type=int, default=100_000,
                        help="items for the judge-only comparison (0: skip)")
    parser.add_argument("--videos", type=int, default=8, help="distinct clips (0: skip)")
    parser.add_argument("--workers", type=int, default=2, help="Dask worker processes")
    parser.add_argument("--stages", default=",".join(STAGES),
                        help="stages of part 1 to run (later ones reuse --dir's outputs)")
    parser.add_argument("--dir", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--big-cache-dir", type=Path,
                        help="part 3's request caches (e.g. a tmpfs: its cold run then "
                             "measures the pipeline, not the disk's fsync; default: --dir)")
    parser.add_argument("--skip-dask", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--params", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.params)
        return
    stages = [s for s in args.stages.split(",") if s]
    unknown = sorted(set(stages) - set(STAGES))
    if unknown:
        parser.error(f"unknown stages: {', '.join(unknown)}")

    work = (args.dir or Path(tempfile.mkdtemp(prefix="capjudge-scale-"))).absolute()
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "PREFECT_HOME": str(work / "prefect-home"), "DO_NOT_TRACK": "1",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DVC_NO_ANALYTICS": "1",
           "TQDM_DISABLE": "1", "HF_HUB_OFFLINE": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("PREFECT_API_URL", None)
    server, url, server_s = start_server(env, work / "prefect-server.log")
    env["PREFECT_API_URL"] = url
    variants = ["library", "threads"] + ([] if args.skip_dask else ["dask"])
    print(f"work folder {work}; {os.cpu_count()} cores; Prefect server up in {server_s:.1f} s "
          "(once per run, as scripts/repro.sh)", flush=True)
    checks: list[str] = []
    bench = Bench(work, env)
    try:
        from capjudge.sample import generate_sample

        if not (work / "sample" / "manifest.jsonl").is_file():
            generate_sample(work / "sample", seed=0)
        n = args.n
        manifest = work / f"manifest-{n}.jsonl"
        if n and not manifest.is_file():
            make_manifest(work / "sample", n, manifest)
        params = {v: params_for(work, v, manifest, work / "sample", f"ingest-{n}-library",
                                args.workers, str(n)) for v in variants}

        # 1. N items through every stage.
        if n and stages:
            print(f"[1] {n} items: {', '.join(stages)}", flush=True)
        if n and "ingest" in stages:
            for v in variants:
                ingest_params = params_for(work, v, manifest, work / "sample",
                                           f"ingest-{n}-{v}", args.workers, f"{n}i")
                bench.stage("ingest", n, v, ingest_params)
            for v in variants[1:]:
                same = same_items(work / f"ingest-{n}-library", work / f"ingest-{n}-{v}")
                checks.append(f"ingest {v}: items identical to the library's: {same}")
        if n and "judge" in stages:
            for temp in ("cold", "warm"):
                for v in variants:
                    if temp == "cold":
                        shutil.rmtree(work / f"cache-{n}-{v}", ignore_errors=True)
                    bench.stage("judge", n, v, params[v], temp)
                    s = summary_of(work / f"judge-{n}-{v}" / JUDGE)
                    checks.append(f"judge {v} {temp}: {s['requests']} requests, "
                                  f"{s['model_calls']} model calls, {s['cache_hits']} cache hits")
            for v in variants[1:]:
                same = same_table(work / f"judge-{n}-library/{JUDGE}/judgements.parquet",
                                  work / f"judge-{n}-{v}/{JUDGE}/judgements.parquet", VOLATILE)
                checks.append(f"judge {v}: judgements identical to the library's: {same}")
        for stage in ("aggregate", "validate", "report"):
            if n and stage in stages:
                for v in variants[:2]:  # these stages have no runner: threads only
                    bench.stage(stage, n, v, params[v])

        # 2. Distinct videos: parallel frame sampling.
        if args.videos:
            print(f"[2] ingest of {args.videos} distinct 10 s 640x360 clips", flush=True)
            clips = work / "clips" / "manifest.jsonl"
            if not clips.is_file():
                make_videos(work / "clips", args.videos)
            for v in variants:
                shutil.rmtree(work / f"ingest-clips-{v}", ignore_errors=True)
                p = params_for(work, v, clips, work / "clips", f"ingest-clips-{v}",
                               args.workers, "clips")
                bench.stage("ingest", args.videos, v, p, "clips")
            for v in variants[1:]:
                same = same_items(work / "ingest-clips-library", work / f"ingest-clips-{v}")
                checks.append(f"clips {v}: items identical to the library's: {same}")

        # 3. The judge alone at a larger N (library vs flow on threads, cold).
        if args.judge_n:
            big = args.judge_n
            print(f"[3] judge stage alone, {big} items", flush=True)
            source = work / f"ingest-{n}-library"
            if not (source / "items.parquet").is_file():
                raise SystemExit(f"part 3 needs {source} (run part 1's ingest first)")
            expand_items(source, big, work / f"ingest-{big}-library")
            cache_root = (args.big_cache_dir or work).absolute()
            for v in variants[:2]:
                shutil.rmtree(cache_root / f"cache-{big}-{v}", ignore_errors=True)
                p = params_for(work, v, manifest, work / "sample", f"ingest-{big}-library",
                               args.workers, str(big), cache_root)
                bench.stage("judge", big, v, p, "cold")
                s = summary_of(work / f"judge-{big}-{v}" / JUDGE)
                checks.append(f"judge {big} {v}: {s['requests']} requests, "
                              f"{s['model_calls']} model calls")
            same = same_table(work / f"judge-{big}-library/{JUDGE}/judgements.parquet",
                              work / f"judge-{big}-threads/{JUDGE}/judgements.parquet", VOLATILE)
            checks.append(f"judge {big} threads: judgements identical to the library's: {same}")
            if args.big_cache_dir:
                for v in variants[:2]:
                    shutil.rmtree(cache_root / f"cache-{big}-{v}", ignore_errors=True)
    finally:
        server.terminate()
        server.wait()

    print_table(bench.runs, server_s)
    print("\nchecks:")
    for line in checks:
        print(f"  {line}")
    if args.dir is None:
        shutil.rmtree(work, ignore_errors=True)


def print_table(runs: list[Run], server_s: float) -> None:
    """The Markdown table for docs/results/scale.md, and the ratios."""
    lib = {(r.stage, r.n, r.note): r for r in runs if r.variant == "library"}
    thr = {(r.stage, r.n, r.note): r for r in runs if r.variant == "threads"}
    print(f"\nPrefect server start-up: {server_s:.1f} s (once per `dvc repro`, not in the rows)\n")
    print("| stage | items | run | library s | flow (threads) s | flow (Dask) s | "
          "flow / library | Dask / threads | peak RSS MB (lib / threads / Dask) |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---|")
    for key in lib:
        stage, n, note = key
        t = thr.get(key)
        d = next((r for r in runs if r.variant == "dask" and (r.stage, r.n, r.note) == key),
                 None)
        row = [stage, str(n), note or "-", f"{lib[key].seconds:.1f}",
               f"{t.seconds:.1f}" if t else "-", f"{d.seconds:.1f}" if d else "-",
               ratio(t, lib[key]) if t else "-", ratio(d, t) if d and t else "-",
               " / ".join(f"{r.peak_mb:.0f}" if r else "-" for r in (lib[key], t, d))]
        print("| " + " | ".join(row) + " |")
    print()
    for v in ("library", "threads", "dask"):
        warm = next((r for r in runs if r.variant == v and r.note == "warm"), None)
        cold = next((r for r in runs if r.variant == v and r.note == "cold"
                     and warm is not None and r.n == warm.n), None)
        if cold and warm:
            print(f"judge warm / cold, {v}: {warm.seconds / cold.seconds:.2f}")


if __name__ == "__main__":
    main()
