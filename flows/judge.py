"""Flow for a judge stage: ``python -m flows.judge --name NAME`` (``params.yaml: judges.NAME``).

Requests are split into chunks answered by ``judge-chunk`` tasks, run concurrently on Prefect's
thread pool (as many workers as the judge's ``concurrency``; 1 for local models). Every answer
goes to the request cache the moment it arrives, so a killed run resumes where it stopped.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Any

from prefect import flow, get_run_logger
from prefect.task_runners import ThreadPoolTaskRunner

from capjudge.backends.base import BackendError
from capjudge.judge import JudgeConfig, build_rows, explain, load_items, plan, summarise_run
from flows.params import load_params
from tasks.judge import judge_chunk, shared_client, write_task


def judge_section(params: dict[str, Any], name: str) -> dict[str, Any]:
    """``judges.NAME`` or ``context_judges.NAME`` from params.yaml."""
    for group in ("judges", "context_judges"):
        if name in (params.get(group) or {}):
            return dict(params[group][name])
    known = [*(params.get("judges") or {}), *(params.get("context_judges") or {})]
    raise KeyError(f"no judge {name!r} in params.yaml (known: {', '.join(known)})")


def judge_config(params: dict[str, Any], name: str) -> JudgeConfig:
    """The named judge's config, with the shared ``judge`` section as defaults."""
    section = judge_section(params, name)
    section.pop("out", None)
    context = section.pop("context", None)
    if context is not None:
        ctx = (params.get("contexts") or {}).get(context)
        if ctx is None:
            raise KeyError(f"judge {name!r} reads contexts.{context}, which is not defined")
        out = ctx.get("out", f"data/context/{context}")
        section["method_options"] = {**section.get("method_options", {}),
                                     "contexts": f"{out}/contexts.parquet"}
    common = dict(params.get("judge") or {})
    return JudgeConfig.from_params(section, common)


@flow(name="capjudge-judge")
def judge_flow(name: str, items_path: str, out_dir: str, config: JudgeConfig,
               chunk_size: int = 16) -> dict[str, Any]:
    """Judge every ingested item with one method/backend; write judgements and summary."""
    logger = get_run_logger()
    started = time.perf_counter()
    items = load_items(items_path)
    by_id = {i["id"]: i for i in items}
    backend, client = shared_client(config)
    planned, skips = plan(items, config, backend.capabilities.vision)
    logger.info("%s: %d requests, %d skipped (%s)", name, len(planned), len(skips),
                ", ".join(sorted({f"{s.mode}: {s.reason}" for s in skips})) or "none")
    chunks = [planned[i:i + chunk_size] for i in range(0, len(planned), chunk_size)]
    futures = [judge_chunk.submit(config, [p.request for p in chunk]) for chunk in chunks]
    responses = []
    for k, future in enumerate(futures, start=1):
        responses.extend(future.result())
        logger.info("%s: %d/%d chunks done (%d calls, %d cache hits)", name, k, len(chunks),
                    client.stats.calls, client.stats.cache_hits)
    explanations = explain(config, planned, responses, client)
    rows = build_rows(config, backend, client, planned, responses, explanations, skips, by_id)
    summary = summarise_run(rows, skips, client, config, backend, time.perf_counter() - started)
    write_task(out_dir, rows, summary)
    logger.info("%s: %s; %d model calls, %d cache hits", name, summary["by_status"],
                summary["model_calls"], summary["cache_hits"])
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", required=True, help="judge name under params.yaml judges")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    params = load_params(args.params)
    config = judge_config(params, args.name)
    workers = config.concurrency or (1 if config.backend.split("/")[0] in ("hf", "embedded")
                                     else 8)
    out_dir = judge_section(params, args.name).get("out", f"data/judge/{args.name}")
    items_path = f"{params['ingest']['out']}/items.parquet"
    runner: Any = ThreadPoolTaskRunner(max_workers=workers)
    try:
        judge_flow.with_options(task_runner=runner)(args.name, items_path, out_dir, config)
    except BackendError as exc:
        print(f"judge {args.name}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
