"""Flow for a judge stage: ``python -m flows.judge --name NAME`` (``params.yaml: judges.NAME``).

The items are split into chunks sized to the run (:func:`chunk_size`); ``judge-chunk`` tasks
answer them on the configured task runner with a bounded number in flight, each writing its own
part file and returning its own statistics; the flow merges the statistics and concatenates the
parts. Every answer goes to the request cache the moment it arrives, so a killed run resumes
where it stopped.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import time
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from prefect import flow, get_run_logger
from prefect.futures import PrefectFuture

from capjudge.backends import backend_class, default_concurrency
from capjudge.client import ClientStats, raise_if_stopped
from capjudge.judge import (
    JudgeConfig,
    adaptive_chunk_size,
    check_reachable,
    chunk_bounds,
    combine_parts,
    config_from_params,
    summarise,
    write_summary,
)
from capjudge.judge import judge_section as library_judge_section
from capjudge.judge.parts import ChunkResult
from capjudge.judge.selection import item_counts, selection_span
from capjudge.protocol import BackendError
from capjudge.records import JudgeSummary
from capjudge.stage_files import default_dir, items_file, judgements_file
from capjudge.util.atomic import stage_outputs
from capjudge.util.stopping import exit_promptly_on_signals, stop_requested, terminate_children
from flows.artifacts import Progress
from flows.params import load_params
from flows.runner import RunnerConfig, task_runner
from tasks.judge import judge_chunk

# Chunk tasks the flow keeps submitted per worker: memory and the runner's queue stay flat,
# and a worker never waits for the flow to hand it the next chunk.
WINDOW = 3


def judge_section(params: dict[str, Any], name: str) -> dict[str, Any]:
    """``judges.NAME`` or ``context_judges.NAME`` from params.yaml."""
    return library_judge_section(params, name)


def judge_config(params: dict[str, Any], name: str) -> JudgeConfig:
    """The named judge's config, with the shared ``judge`` section as defaults."""
    return config_from_params(params, name)


@flow(name="capjudge-judge")
def judge_flow(name: str, items_path: str, out_dir: str, config: JudgeConfig,
               chunk_size: int | None = None, workers: int = 1,
               shared_dir: str | None = None) -> JudgeSummary:
    """Judge every ingested item with one method/backend; write judgements and summary.

    Args:
        name: the judge's name (for the log).
        items_path: ``items.parquet`` (every worker must see it at this path).
        out_dir: where ``judgements.parquet`` and ``summary.json`` go.
        config: the judge.
        chunk_size: items per task (default: :func:`adaptive_chunk_size`).
        workers: how many tasks the runner runs at once (sizes the chunks and the window of
            tasks in flight).
        shared_dir: a folder every worker sees, where the rpm/tpm window and the
            ``Retry-After`` pause are kept when tasks run in several processes or hosts
            (:mod:`capjudge.util.limits`); None: per process.
    """
    # Installed here, over Prefect's own handler (set for the flow run): SIGTERM/SIGINT end
    # the stage within seconds even while engine threads are busy (capjudge.util.stopping).
    exit_promptly_on_signals()
    logger = get_run_logger()
    started = time.perf_counter()
    ids = pq.read_table(items_path, columns=["id"]).column("id").to_pylist()
    total = len(ids)
    # Chunks cover the leading rows that hold the judged items (all of them, unless limit or
    # item_fraction leave some out); each chunk keeps its own rows of the selection.
    rows, n = selection_span(ids, config)
    # Rows per chunk: about adaptive_chunk_size's number of judged items in each.
    size = chunk_size or -(-adaptive_chunk_size(n, workers) * rows // max(1, n))
    out = Path(out_dir)
    parts_dir = out / ".parts"
    shutil.rmtree(parts_dir, ignore_errors=True)
    bounds = chunk_bounds(rows, size) if n else []
    parts = [str(parts_dir / f"part-{k:05d}.parquet") for k in range(len(bounds))]
    logger.info("%s: %d items in %d chunk(s) of <= %d rows on %d worker(s)", name, n, len(bounds),
                size, workers)
    results: list[ChunkResult | None] = [None] * len(bounds)
    in_flight: deque[tuple[int, PrefectFuture[ChunkResult]]] = deque()
    stats = ClientStats()
    done = 0
    progress = Progress(name, len(bounds))  # the UI's progress bar for this judge
    # A bounded window of submitted chunks: memory and the task runner's queue stay flat
    # whatever the number of items.
    for k, (lo, hi) in enumerate(bounds):
        in_flight.append((k, judge_chunk.submit(config, items_path, lo, hi, parts[k],
                                                shared_dir)))
        while len(in_flight) >= WINDOW * workers or (k == len(bounds) - 1 and in_flight):
            j, future = in_flight.popleft()
            result = results[j] = future.result()
            stats.merge(ClientStats.from_dict(result["stats"]))
            # Every worker's client stops sending at its first 401 or wrong-server answer; the
            # stage stops here and writes nothing (answers so far are in the request cache).
            raise_if_stopped(stats)
            done += 1
            progress.update(done)
            logger.info("%s: %d/%d chunks done (%d requests, %d model calls, %d cache hits, "
                        "%.0f s)", name, done, len(bounds), stats.requests, stats.calls,
                        stats.cache_hits, time.perf_counter() - started)
    # judgements.parquet and summary.json are one set (capjudge.util.atomic.stage_outputs).
    with stage_outputs(out):
        table = combine_parts(parts, judgements_file(out))
        # A built backend's facts (a chunk of recorded skips builds none and says less).
        facts = [r["backend"] for r in results if r]
        backend = next((f for f in facts if f.get("loaded", True)),
                       facts[0] if facts else {"backend": config.backend})
        summary = summarise(table, stats, config, backend, time.perf_counter() - started)
        summary["items"] = item_counts(n, total, config)
        # A rerun that must batch as this one did (capjudge verify-run) needs the chunks.
        summary["chunk_size"] = size
        write_summary(out, summary)
    shutil.rmtree(parts_dir, ignore_errors=True)
    logger.info("%s: %s; %d requests, %d model calls, %d cache hits", name,
                summary["by_status"], summary["requests"], summary["model_calls"],
                summary["cache_hits"])
    return summary


def main(argv: list[str] | None = None) -> int:
    """Run the named judge's stage as a flow."""
    # Before the flow starts: Prefect's flow engine turns a SIGTERM into TerminationSignal,
    # then puts back the handler it found and signals the process again. With the default
    # handler found, the process died at once and its ephemeral Prefect server outlived it
    # (about 1 run in 3); with this one found, the second signal ends the children first.
    exit_promptly_on_signals()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", required=True, help="judge name under params.yaml judges")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        # Refused settings (credentials in a URL, unknown keys) stop the stage before Prefect
        # records the config as flow parameters.
        params = load_params(args.params)
        config = judge_config(params, args.name)
        workers = config.concurrency or default_concurrency(config.backend,
                                                            config.backend_options)
        runner = RunnerConfig.from_params(params)
        # A remote judge's server is asked what it serves now: a wrong address is one line
        # naming it, not a failed task retried and a traceback.
        check_reachable(config)
    except (BackendError, ValueError) as exc:
        print(f"judge {args.name}: error: {exc}", file=sys.stderr)
        return 2
    out_dir = judge_section(params, args.name).get("out", default_dir("judge", args.name))
    items_path = str(items_file(params["ingest"]["out"]))
    if config.submit == "batch":  # one process submits and polls: see flows/judge_batch.py
        from flows.judge_batch import run_batch_stage

        return run_batch_stage(args.name, items_path, out_dir, config)
    size = runner.size(workers)
    if not runner.distributed and backend_class(config.backend).pipelined:
        # An API judge's chunk tasks overlap on this process's threads, and the one shared
        # client still bounds the requests in flight (and the rpm/tpm budget) across them.
        # Every chunk of the flow's window runs at once (a thread each): the next chunks are
        # planned and their requests queued while the earlier ones are answered, so a chunk
        # boundary never drains the pipe (with only the chunks that were sending, the ones
        # that ended together left it empty while the next were planned: issue 42).
        size = max(2, runner.worker_count(workers))
        runner = replace(runner, workers=WINDOW * size)
    shared_dir = runner.limits_dir(config.cache_dir)
    if runner.distributed and config.cache_dir:
        # Every worker must mean the same cache folder, whatever its working directory.
        config = replace(config, cache_dir=str(Path(config.cache_dir).absolute()))
    try:
        judge_flow.with_options(task_runner=task_runner(runner, workers))(
            args.name, items_path, out_dir, config, workers=size, shared_dir=shared_dir)
    except (BackendError, RuntimeError) as exc:
        print(f"judge {args.name}: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if stop_requested():
            # Stopped by a signal: what the stage started (the ephemeral Prefect server) ends
            # now, while it is still this process's child, not after it (observed: an
            # orphaned uvicorn when the run ended through Prefect's own signal handling).
            terminate_children()
    return 0


if __name__ == "__main__":
    sys.exit(main())
