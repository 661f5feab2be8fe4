"""The validate stage: Great Expectations suites, built in code, over items, judgements and runs.

- items: ids unique and non-null, media hashes non-null and 64 hex characters.
- judgements, per method: every criterion is one the method declares, and its scores lie on
  the scale the method declares for it (the method's metadata, never a table here); every
  stored distribution sums to 1;
  judgements with status ``ok`` captured at least ``min_mass``; statuses from the known set;
  ``text_only`` judgements carry their printed score and no distribution.
- runs: each judge's failure rate (error, refused, parse failure among judged rows) at most
  ``max_failure_rate``.

A failing expectation fails the stage with a readable summary; the full result is saved as
``validation.json`` (GE's ``describe_dict``) and ``validation.md`` next to the report.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd
import pyarrow.parquet as pq

from capjudge.methods import Method, Scale, get_method
from capjudge.protocol import STATUSES
from capjudge.stage_files import judgements_file

log = logging.getLogger(__name__)


def scale_groups(method: Method) -> dict[str, tuple[Scale, list[str]]]:
    """The method's criteria grouped by scale.

    ``{"all": ...}`` when they share one (suite ``scores-<method>-all``), else one group per
    criterion.
    """
    scales = {c.scale for c in method.criteria}
    if len(scales) == 1:
        return {"all": (scales.pop(), [c.name for c in method.criteria])}
    return {c.name: (c.scale, [c.name]) for c in method.criteria}


@dataclass(frozen=True)
class ValidateConfig:
    """``params.yaml: validate``."""

    min_mass: float = 0.5
    max_failure_rate: float = 0.2
    prob_tolerance: float = 1e-6


class ValidationFailed(Exception):
    """At least one expectation failed; the message is the readable summary."""


def _gx() -> Any:
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return gx, context


def build_checks(items: pd.DataFrame, judgements: pd.DataFrame, config: ValidateConfig
                 ) -> list[tuple[str, pd.DataFrame, list[Any]]]:
    """(name, dataframe, expectations) for every suite."""
    import great_expectations as gx

    e = gx.expectations
    checks: list[tuple[str, pd.DataFrame, list[Any]]] = [(
        "items", items, [
            e.ExpectColumnValuesToBeUnique(column="id"),
            e.ExpectColumnValuesToNotBeNull(column="id"),
            e.ExpectColumnValuesToNotBeNull(column="media_sha256"),
            e.ExpectColumnValueLengthsToEqual(column="media_sha256", value=64),
        ])]
    if judgements.empty:
        return checks
    checks.append(("judgement-statuses", judgements, [
        e.ExpectColumnValuesToBeInSet(column="status", value_set=list(STATUSES)),
        e.ExpectColumnValuesToNotBeNull(column="item_id"),
    ]))
    scored = judgements[judgements["score"].notna()]
    for method_name in sorted(scored["method"].dropna().unique()):
        sub = scored[scored["method"] == method_name]
        try:
            method = get_method(str(method_name))
        except KeyError as exc:
            # A judgement of an unregistered method cannot be range-checked: fail loudly.
            checks.append((f"scores-{method_name}-method", sub, [
                e.ExpectColumnValuesToBeInSet(column="method", value_set=[])]))
            log.error("%s", exc)
            continue
        checks.append((f"criteria-{method_name}", sub, [
            e.ExpectColumnValuesToBeInSet(column="criterion",
                                          value_set=[c.name for c in method.criteria])]))
        for group, (scale, names) in scale_groups(method).items():
            part = sub[sub["criterion"].isin(names)]
            if part.empty:
                continue
            checks.append((f"scores-{method_name}-{group}", part, [
                e.ExpectColumnValuesToBeBetween(column="score", min_value=scale.low,
                                                max_value=scale.high)]))
    with_probs = judgements[judgements["probs"].notna()].copy()
    if not with_probs.empty:
        with_probs["prob_sum"] = with_probs["probs"].map(lambda p: float(sum(p)))
        checks.append(("distributions", with_probs, [
            e.ExpectColumnValuesToBeBetween(column="prob_sum",
                                            min_value=1 - config.prob_tolerance,
                                            max_value=1 + config.prob_tolerance)]))
    ok = judgements[(judgements["status"] == "ok") & judgements["mass"].notna()]
    if not ok.empty:
        checks.append(("mass", ok, [
            e.ExpectColumnValuesToBeBetween(column="mass", min_value=config.min_mass,
                                            max_value=1 + config.prob_tolerance)]))
    text_only = judgements[judgements["status"] == "text_only"]
    if not text_only.empty and "printed" in text_only:
        # Scored from the printed number alone: it must be there, and no distribution may
        # pretend otherwise (a point mass would read as sd 0, the most confident judgement).
        shaped = text_only.assign(has_probs=text_only["probs"].notna())
        checks.append(("text-only", shaped, [
            e.ExpectColumnValuesToNotBeNull(column="printed"),
            e.ExpectColumnValuesToBeInSet(column="has_probs", value_set=[False])]))
    judged = judgements[judgements["status"] != "skipped"]
    if not judged.empty:
        rates = judged.groupby("judge")["status"].apply(
            lambda s: float(s.isin(["error", "refused", "parse_failure"]).mean())
        ).rename("failure_rate").reset_index()
        checks.append(("runs", rates, [
            e.ExpectColumnValuesToBeBetween(column="failure_rate", min_value=0,
                                            max_value=config.max_failure_rate)]))
    return checks


class ExpectationDetail(TypedDict, total=False):
    """The part of an expectation's ``result`` the summary reads (GE writes more)."""

    unexpected_count: int
    partial_unexpected_list: list[object]
    """Examples of the offending values, as Great Expectations found them."""


class ExpectationResult(TypedDict):
    """One expectation's outcome in a suite's ``describe_dict()`` (the keys read here)."""

    expectation_type: str
    success: bool
    kwargs: dict[str, object]
    """The expectation's arguments (column, bounds, ``batch_id``, ...)."""
    result: ExpectationDetail


class SuiteStatistics(TypedDict):
    """A suite's counts in its ``describe_dict()``."""

    evaluated_expectations: int
    successful_expectations: int
    unsuccessful_expectations: int
    success_percent: float | None


class SuiteResult(TypedDict):
    """One suite's ``describe_dict()`` (Great Expectations; the keys read here)."""

    success: bool
    statistics: SuiteStatistics
    expectations: list[ExpectationResult]


class ValidationReport(TypedDict):
    """``validation.json``: every suite's result and whether all passed."""

    success: bool
    suites: dict[str, SuiteResult]


def validate(items: pd.DataFrame, judgements: pd.DataFrame, config: ValidateConfig
             ) -> ValidationReport:
    """Run every suite; returns {suite: describe_dict} plus an overall ``success``."""
    gx, context = _gx()
    source = context.data_sources.add_pandas("capjudge")
    results: dict[str, SuiteResult] = {}
    for name, frame, expectations in build_checks(items, judgements, config):
        batch_def = source.add_dataframe_asset(name).add_batch_definition_whole_dataframe("all")
        suite = context.suites.add(gx.ExpectationSuite(name=name))
        for expectation in expectations:
            suite.add_expectation(expectation)
        # List-valued columns (distributions, references) are not what GE compares.
        scalar = frame[[c for c in frame.columns if not _is_list_column(frame[c])]]
        result = batch_def.get_batch(batch_parameters={"dataframe": scalar}).validate(suite)
        results[name] = result.describe_dict()
    return {"success": all(r["success"] for r in results.values()), "suites": results}


def _is_list_column(column: pd.Series) -> bool:
    sample = column.dropna()
    return not sample.empty and hasattr(sample.iloc[0], "__len__") and not isinstance(
        sample.iloc[0], str)


def summary_lines(report: ValidationReport) -> list[str]:
    """Readable lines: one per failed expectation, with examples of offending values."""
    lines = []
    for suite, result in report["suites"].items():
        for exp in result["expectations"]:
            if exp["success"]:
                continue
            kwargs = {k: v for k, v in exp["kwargs"].items() if k != "batch_id"}
            res: ExpectationDetail = exp.get("result") or {}
            examples = res.get("partial_unexpected_list", [])[:5]
            count = res.get("unexpected_count")
            lines.append(f"{suite}: {exp['expectation_type']} {kwargs} failed"
                         + (f" for {count} row(s), e.g. {examples}" if count else ""))
    return lines


def write_report(report: ValidationReport, out_dir: Path) -> None:
    """Write validation.json (GE's results) and validation.md (a readable summary)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "validation.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    lines = ["# Validation", "", f"Overall: {'PASSED' if report['success'] else 'FAILED'}", "",
             "| suite | expectations | failed |", "|---|---|---|"]
    for suite, result in report["suites"].items():
        stats = result["statistics"]
        lines.append(f"| {suite} | {stats['evaluated_expectations']} | "
                     f"{stats['unsuccessful_expectations']} |")
    failed = summary_lines(report)
    if failed:
        lines += ["", "## Failed expectations", ""] + [f"- {x}" for x in failed]
    (out_dir / "validation.md").write_text("\n".join(lines) + "\n")


def load_judgements(judge_dirs: Sequence[str | Path]) -> pd.DataFrame:
    """Every judge's judgements.parquet with a ``judge`` column."""
    frames = []
    for d in judge_dirs:
        df = pq.read_table(judgements_file(d)).to_pandas()
        df.insert(0, "judge", Path(d).name)
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["judge", "method", "criterion", "status", "score", "mass", "probs", "item_id"])


def run_validate(items_path: str | Path, judge_dirs: Sequence[str | Path], out_dir: str | Path,
                 config: ValidateConfig) -> ValidationReport:
    """Validate, write the results, and raise :class:`ValidationFailed` on any failure."""
    items = pq.read_table(items_path).to_pandas()
    judgements = load_judgements(judge_dirs)
    report = validate(items, judgements, config)
    write_report(report, Path(out_dir))
    if not report["success"]:
        raise ValidationFailed("validation failed:\n  " + "\n  ".join(summary_lines(report)))
    return report
