"""Task wrappers for the aggregate, validate and report stages."""

from __future__ import annotations

from collections.abc import Sequence

from prefect import task
from prefect.cache_policies import NO_CACHE

from capjudge.aggregate import AggregateConfig, run_aggregate
from capjudge.records import AggregateSummary, PublishedHeadline, ReportOutcome
from capjudge.report import ReportConfig
from capjudge.validate import ValidateConfig, run_validate


@task(name="aggregate", cache_policy=NO_CACHE)
def aggregate_task(judge_dirs: Sequence[str], out_dir: str, config: AggregateConfig
                   ) -> AggregateSummary:
    """Aggregate the judges' rows into per-item and per-system scores."""
    return run_aggregate(judge_dirs, out_dir, config)


@task(name="validate", cache_policy=NO_CACHE)
def validate_task(items_path: str, judge_dirs: Sequence[str], out_dir: str,
                  config: ValidateConfig) -> bool:
    """Run the Great Expectations suites; whether every one passed."""
    return bool(run_validate(items_path, judge_dirs, out_dir, config)["success"])


@task(name="report", cache_policy=NO_CACHE)
def report_task(ingest_dir: str, judge_dirs: Sequence[str], aggregate_dir: str, out_dir: str,
                config: ReportConfig) -> ReportOutcome:
    """Write the report; return what the flow publishes (headline rows, the HTML's path)."""
    # Imported here: the aggregate and validate stages' processes import this module too.
    from capjudge.report import run_report

    ctx = run_report(ingest_dir, judge_dirs, aggregate_dir, out_dir, config)
    headline: list[PublishedHeadline] = [
        {"series": h["series"], "method": h["method"], "n": h["n"],
         "failure_rate": h["failure_rate"], "low_mass_rate": h["low_mass_rate"],
         "entry": {"kendall_tau_b": h["entry"].get("kendall_tau_b"),
                   "ci95": {"kendall_tau_b": (h["entry"].get("ci95") or {}).get(
                       "kendall_tau_b")}}}
        for h in ctx["headline"]]
    return {"headline": headline, "series": len(ctx["agreement"]),
            "report_html": str(ctx["out_dir"] / "report.html")}
