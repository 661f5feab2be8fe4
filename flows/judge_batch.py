"""The judge stage in batch mode (``submit: batch``), called by ``python -m flows.judge``.

One process writes, submits, polls and collects the batches
(:mod:`capjudge.backends.openai_batch`): the Batch API does the parallel work, so the chunked
task flow would only split the requests into more batches and poll each of them from another
worker.

The batch state (``batches.json``, the JSONL) does not live in the stage's output directory
here: ``dvc repro`` deletes a stage's outputs before it runs it again, which would forget the
batches a killed or timed-out run left running and submit them a second time. Unless
``batch_options.state_dir`` says otherwise it lives in the request cache's directory, under
``batches/<judge name>``, which DVC does not touch.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

from prefect import flow, get_run_logger

from capjudge.cache import default_cache_dir
from capjudge.judge import JudgeConfig, run_judge
from capjudge.protocol import BackendError
from capjudge.records import JudgeSummary


def batch_state_dir(config: JudgeConfig, name: str) -> Path:
    """Where the named judge's batch state lives (``batch_options.state_dir``, else
    ``<cache_dir>/batches/<name>``)."""
    explicit = config.batch_options.get("state_dir")
    if explicit:
        return Path(explicit)
    return Path(config.cache_dir or default_cache_dir()) / "batches" / name


@flow(name="capjudge-judge-batch")
def judge_batch_flow(name: str, items_path: str, out_dir: str, config: JudgeConfig
                     ) -> JudgeSummary:
    """Judge through the Batch API in this process; write judgements and summary."""
    logger = get_run_logger()
    state = batch_state_dir(config, name)
    logger.info("%s: batch mode, state in %s", name, state)
    started = time.perf_counter()
    summary = run_judge(items_path, out_dir, replace(
        config, batch_options={**config.batch_options, "state_dir": str(state)}))
    logger.info("%s: %s; %d requests, %d model calls, %d cache hits (%.0f s)", name,
                summary["by_status"], summary["requests"], summary["model_calls"],
                summary["cache_hits"], time.perf_counter() - started)
    return summary


def run_batch_stage(name: str, items_path: str, out_dir: str, config: JudgeConfig) -> int:
    """Run the batch flow; an exit code for ``flows.judge.main``."""
    try:
        judge_batch_flow(name, items_path, out_dir, config)
    except (BackendError, ValueError) as exc:
        print(f"judge {name}: error: {exc}", file=sys.stderr)
        return 2
    return 0
