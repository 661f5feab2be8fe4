"""The one judge pipeline: items + a judge config -> judgement rows + run statistics.

:func:`judge_items` is the only place where items become requests, requests become answers
and answers become rows. ``capjudge judge`` (:func:`run_judge`), ``capjudge score``, the
Prefect judge flow (one call per chunk, on any worker) and meta-evaluation all call it.

This module is the judge stage's public face: it runs a judge in one process
(:func:`run_judge`) and re-exports the names of the modules that do the work, each with one
job:

- :mod:`capjudge.judge.config`: :class:`JudgeConfig`, its checks, profiles and params glue.
- :mod:`capjudge.judge.connect`: the backend and client (built, shared, or unbuilt).
- :mod:`capjudge.judge.run`: planning and :func:`judge_items`.
- :mod:`capjudge.judge.rows`: the one place a judgement row is built.
- :mod:`capjudge.judge.out`: the output folder (lock, what is there, summary and writes).
- :mod:`capjudge.judge.parts`: chunks of a stage and the part files they write.

Outputs of a judge stage (in ``out_dir``):

- ``judgements.parquet``: one row per (item, mode, criterion) with the full score distribution
  (``values``/``probs``), its expected value, argmax, sd, entropy and captured mass, the status
  and reason, the reasoning text, the template id@version, backend id, model snapshot and
  fingerprint, token usage and cost. Skipped (item, mode) pairs are rows with status
  ``skipped`` and the reason; failures are rows with their status and reason, never a score.
- ``summary.json``: counts by status and mode, requests, model calls, cache hits, tokens, cost,
  which modes ran and which were skipped and why. Computed from the rows and from statistics
  each call returns, so it is the same whichever workers did the work.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from capjudge.backends.base import Backend
from capjudge.client import JudgeClient, raise_if_stopped
from capjudge.item import load_items
from capjudge.judge.config import (
    DEFAULT_TIMEOUT_S,
    ENV_SETTINGS,
    JudgeConfig,
    apply_profile,
    check_settings,
    config_from_params,
    env_settings,
    judge_section,
)
from capjudge.judge.connect import (
    UnbuiltBackend,
    backend_options,
    check_reachable,
    make_backend,
    make_client,
    shared_client,
)
from capjudge.judge.out import (
    FAILURES,
    check_existing,
    check_writable_dir,
    merged_with_existing,
    output_lock,
    summarise,
    write_outputs,
    write_summary,
)
from capjudge.judge.parts import adaptive_chunk_size, chunk_bounds, combine_parts, write_part
from capjudge.judge.rows import JUDGEMENTS_SCHEMA, format_settings, judgement, rows_table
from capjudge.judge.run import (
    JudgeResult,
    check_repeatable,
    check_verdict_format,
    judge_items,
    judge_modes,
    method_options,
    plan,
    repeat_planned,
    shared_context_order,
    verify_media,
)
from capjudge.judge.selection import item_counts, selected
from capjudge.methods import MethodOptions, get_method
from capjudge.records import Judgement, JudgeSummary
from capjudge.util.atomic import OutputWriteError

log = logging.getLogger(__name__)


def progress_logger(label: str) -> Callable[[int, int], None]:
    """A progress callback that logs about every 5 % (and the end)."""
    state = {"last": -1.0, "t0": time.perf_counter()}

    def report(done: int, total: int) -> None:
        fraction = done / total if total else 1.0
        if fraction - state["last"] >= 0.05 or done == total:
            state["last"] = fraction
            elapsed = time.perf_counter() - state["t0"]
            eta = elapsed / fraction - elapsed if fraction > 0 else float("nan")
            log.info("%s: %d/%d requests (%.0f%%), %.0f s elapsed, ~%.0f s left", label, done,
                     total, 100 * fraction, elapsed, eta)

    return report


def run_judge(items_path: str | Path, out_dir: str | Path, config: JudgeConfig,
              backend: Backend | None = None,
              progress: Callable[[int, int], None] | None = None) -> JudgeSummary:
    """Run one judge over the ingested items in this process and write its outputs.

    Returns the summary (the same one the Prefect flow writes). ``progress`` is called with
    (done, total) requests (default: log lines about every 5 %).
    """
    started = time.perf_counter()
    items = load_items(items_path)
    total = len(items)
    items = selected(items, config)
    # Before any model call: an output that cannot be written must not be found after the
    # calls were paid for.
    check_writable_dir(out_dir)
    with output_lock(out_dir):
        backend = backend or make_backend(config)
        # Another judge's judgements in the folder are refused before anything is asked.
        check_existing(out_dir, {"method": [config.method], "backend": [backend.backend_id],
                                 "snapshot": [backend.snapshot()]}, {i.id for i in items})
        progress = progress or progress_logger(f"judge {config.method}")
        if config.submit == "batch":
            from capjudge.client.batch import make_batch_client

            # Batches are submitted and polled by this one process; their state (batches.json)
            # lives in the stage's output directory unless batch_options.state_dir says so.
            client: JudgeClient = make_batch_client(config, backend, out_dir, progress)
        else:
            client = make_client(config, backend, progress)
        result = judge_items(items, config, backend=backend, client=client)
        raise_if_stopped(result.stats)
        table = rows_table(result.rows)
        if not result.stats.interrupted:
            table = merged_with_existing(out_dir, table, dict(
                get_method(config.method).settings(MethodOptions())))
        summary = summarise(table, result.stats, config, backend.describe(),
                            time.perf_counter() - started)
        summary["items"] = item_counts(len(items), total, config)
        write_outputs(out_dir, table, summary, complete=not result.stats.interrupted)
    if result.stats.interrupted:
        answered = sum(r.status != "error" or "not sent" not in (r.reason or "")
                       for r in result.responses)
        raise RunInterrupted(
            f"stopped ({client.stop_reason or 'interrupted'}) with {answered} of "
            f"{len(result.responses)} requests answered; the answers are in the request "
            f"cache and {out_dir} is marked incomplete: run the same command again to "
            "finish (nothing answered is asked again)")
    return summary


class RunInterrupted(KeyboardInterrupt):
    """A signal stopped the run; what was answered is cached and written, marked incomplete."""


__all__ = ["DEFAULT_TIMEOUT_S", "ENV_SETTINGS", "FAILURES", "JUDGEMENTS_SCHEMA", "JudgeConfig",
           "JudgeResult", "Judgement", "OutputWriteError", "RunInterrupted", "UnbuiltBackend",
           "adaptive_chunk_size", "apply_profile", "backend_options", "check_reachable",
           "check_repeatable", "check_settings", "check_verdict_format", "check_writable_dir",
           "chunk_bounds", "combine_parts", "config_from_params", "env_settings",
           "format_settings", "judge_items", "judge_modes", "judge_section", "judgement",
           "load_items", "make_backend", "make_client", "method_options", "plan",
           "progress_logger", "repeat_planned", "rows_table", "run_judge", "shared_client",
           "shared_context_order", "summarise", "verify_media", "write_outputs", "write_part",
           "write_summary"]
