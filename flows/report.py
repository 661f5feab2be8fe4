"""Flows for the stages after judging: ``python -m flows.report {aggregate,validate,report}``.

The judges are every entry of ``params.yaml: judges`` and ``context_judges``; each one's
outputs live in ``data/judge/<name>``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from capjudge.aggregate import AggregateConfig
from capjudge.records import AggregateSummary, ReportOutcome
from capjudge.report import ReportConfig
from capjudge.stage_files import default_dir, items_file
from capjudge.validate import ValidateConfig, ValidationFailed
from flows.artifacts import publish_report
from flows.params import load_params
from tasks.report import aggregate_task, report_task, validate_task


def judge_dirs(params: dict[str, Any]) -> list[str]:
    """Output folders of every configured judge, in params order."""
    out = []
    for group in ("judges", "context_judges"):
        for name, section in (params.get(group) or {}).items():
            out.append(section.get("out", default_dir("judge", name)))
    return out


@flow(name="capjudge-aggregate")
def aggregate_flow(dirs: list[str], out_dir: str, config: AggregateConfig
                   ) -> AggregateSummary:
    """Per-item and per-system scores from the judges' raw distributions."""
    summary = aggregate_task(dirs, out_dir, config)
    get_run_logger().info("aggregate: %s", summary["item_status"])
    return summary


@flow(name="capjudge-validate")
def validate_flow(items_path: str, dirs: list[str], out_dir: str, config: ValidateConfig
                  ) -> bool:
    """Great Expectations suites over items, judgements and runs."""
    return validate_task(items_path, dirs, out_dir, config)


@flow(name="capjudge-report")
def report_flow(ingest_dir: str, dirs: list[str], aggregate_dir: str, out_dir: str,
                config: ReportConfig) -> ReportOutcome:
    """Agreement with humans, plots, Markdown/HTML report and DVC metrics.

    Publishes the headline as a table artifact and a link to the HTML report
    (:mod:`flows.artifacts`).
    """
    result = report_task(ingest_dir, dirs, aggregate_dir, out_dir, config)
    result["artifacts"] = publish_report(result["headline"], Path(result["report_html"]))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("stage", choices=["aggregate", "validate", "report"])
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    try:
        params = load_params(args.params)  # the schema: a typo fails before anything runs
    except (OSError, ValueError) as exc:
        print(f"{args.stage}: error: {exc}", file=sys.stderr)
        return 2
    dirs = judge_dirs(params)
    ingest_dir = params["ingest"]["out"]
    section = dict(params.get(args.stage) or {})
    out = section.pop("out", default_dir(args.stage))
    if args.stage == "aggregate":
        try:
            config = AggregateConfig.from_section(section)
        except ValueError as exc:
            print(f"aggregate: error: {exc}", file=sys.stderr)
            return 2
        aggregate_flow(dirs, out, config)
    elif args.stage == "validate":
        try:
            validate_flow(str(items_file(ingest_dir)), dirs, out, ValidateConfig(**section))
        except ValidationFailed as exc:
            print(str(exc), file=sys.stderr)
            print(f"(details: {out}/validation.md, {out}/validation.json)", file=sys.stderr)
            return 1
    else:
        aggregate_out = (params.get("aggregate") or {}).get("out", default_dir("aggregate"))
        report_flow(ingest_dir, dirs, aggregate_out, out, ReportConfig(**section))
    return 0


if __name__ == "__main__":
    sys.exit(main())
