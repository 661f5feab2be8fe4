"""Flow for a context stage: ``python -m flows.context --name NAME``
(``params.yaml: contexts.NAME``): VisCE²'s visual-context extraction, once per picture."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from prefect import flow, get_run_logger

from capjudge.context import ContextConfig
from flows.params import load_params
from tasks.context import extract_task


@flow(name="capjudge-context")
def context_flow(name: str, items_path: str, out_dir: str, config: ContextConfig
                 ) -> dict[str, Any]:
    """Extract visual contexts for every distinct picture of the ingested items."""
    summary = extract_task(items_path, out_dir, config)
    get_run_logger().info("%s: %s over %d pictures; %d model calls, %d cache hits", name,
                          summary["by_status"], summary["pictures"], summary["model_calls"],
                          summary["cache_hits"])
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", required=True)
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    params = load_params(args.params)
    section = dict(params.get("contexts", {})[args.name])
    out_dir = section.pop("out", f"data/context/{args.name}")
    section.setdefault("cache_dir", (params.get("judge") or {}).get("cache_dir"))
    context_flow(args.name, f"{params['ingest']['out']}/items.parquet", out_dir,
                 ContextConfig(**section))
    return 0


if __name__ == "__main__":
    sys.exit(main())
