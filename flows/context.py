"""Flow for a context stage: ``python -m flows.context --name NAME``
(``params.yaml: contexts.NAME``): the stage a method reads its context from (VisCE²'s
visual-context extraction, once per picture). The section's ``method`` names the method."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import cast

from prefect import flow, get_run_logger

from capjudge.judge import env_settings
from capjudge.judge.parts import combine_part_dirs
from capjudge.methods import context_method_names, default_context_method, get_method
from capjudge.records import ContextSummary
from capjudge.stage_files import default_dir, items_file
from capjudge.util.atomic import stage_outputs
from flows.params import load_params
from flows.runner import RunnerConfig, task_runner
from tasks.context import extract_shard_task, extract_task


@flow(name="capjudge-context")
def context_flow(name: str, method: str, items_path: str, out_dir: str,
                 section: Mapping[str, object], workers: int = 1) -> ContextSummary:
    """Run a method's context stage for every distinct picture of the ingested items.

    With ``workers > 1`` the pictures are split into contiguous shards run as parallel tasks,
    each writing its own folder, joined in order afterwards (the same rows as one task).
    """
    if workers <= 1:
        summary = extract_task(method, items_path, out_dir, section)
    else:
        started = time.perf_counter()
        count = 4 * workers  # a few shards per worker: the last ones finish together
        parts = Path(out_dir) / ".parts"
        shutil.rmtree(parts, ignore_errors=True)
        dirs = [str(parts / f"part-{k:04d}") for k in range(count)]
        futures = [extract_shard_task.submit(method, items_path, dirs[k], section, k, count)
                   for k in range(count)]
        for future in futures:
            future.result()
        with stage_outputs(out_dir):  # contexts.parquet + summary.json: one set
            # The shards' summaries (each a ContextSummary) merged key by key: counts added.
            summary = cast(ContextSummary, combine_part_dirs(dirs, out_dir,
                                                             time.perf_counter() - started))
        shutil.rmtree(parts, ignore_errors=True)
    get_run_logger().info("%s: %s over %d pictures; %d model calls, %d cache hits", name,
                          summary["by_status"], summary["pictures"], summary["model_calls"],
                          summary["cache_hits"])
    return summary


def main(argv: list[str] | None = None) -> int:
    """Run the named context stage as a flow."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", required=True)
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        params = load_params(args.params)  # refuses credentials in URLs before anything runs
    except ValueError as exc:
        print(f"context {args.name}: error: {exc}", file=sys.stderr)
        return 2
    section = dict((params.get("contexts") or {}).get(args.name) or {})
    if not section:
        print(f"context {args.name}: not defined under params.yaml contexts", file=sys.stderr)
        return 2
    method = str(section.pop("method", None) or default_context_method() or "")
    # (load_params has refused a method that does not exist or cannot be loaded.)
    if not method or not get_method(method).needs_context:
        print(f"context {args.name}: `method:` must name a method with a context stage "
              f"({', '.join(context_method_names())})", file=sys.stderr)
        return 2
    out_dir = section.pop("out", default_dir("context", args.name))
    # CAPJUDGE_CACHE_DIR wins over params.yaml (capjudge.judge.env_settings).
    section["cache_dir"] = (env_settings().get("cache_dir") or section.get("cache_dir")
                            or (params.get("judge") or {}).get("cache_dir"))
    try:
        runner = RunnerConfig.from_params(params)
    except ValueError as exc:
        print(f"context {args.name}: error: {exc}", file=sys.stderr)
        return 2
    workers = 1
    if runner.distributed:
        # Threads gain nothing over the client's own concurrency; other processes do (a local
        # model per worker), and they must share the rate limit and see the same cache.
        workers = runner.size(os.cpu_count() or 1)
        section["shared_dir"] = runner.limits_dir(section.get("cache_dir"))
        if section.get("cache_dir"):
            section["cache_dir"] = str(Path(section["cache_dir"]).absolute())
    try:
        context_flow.with_options(task_runner=task_runner(runner, workers))(
            args.name, method, str(items_file(params["ingest"]["out"])), out_dir, section,
            workers)
    except RuntimeError as exc:
        print(f"context {args.name}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
