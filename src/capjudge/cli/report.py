"""``capjudge report``: the report for judge output folders and ingested items (no pipeline).

``capjudge judge --items data/ingest/items.parquet --out out/judge/mine`` then
``capjudge report out/judge/mine --items data/ingest --out reports-mine``: the aggregate and
report stages' code (:mod:`capjudge.report.standalone`), with the human labels the items carry.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from capjudge.cli.common import EXIT_OK, UsageError, bounded


def _settings(params: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``report`` and ``aggregate`` sections of the params file (the flags' defaults)."""
    path = Path(params or "params.yaml")
    if params and not path.is_file():
        raise UsageError(f"--params {params}: no such file")
    if not path.is_file():
        return {}, {}
    from capjudge.params import load_params

    try:
        data = load_params(path)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--params {exc}") from None
    report = {k: v for k, v in (data.get("report") or {}).items() if k not in ("out", "registry")}
    aggregate = {k: v for k, v in (data.get("aggregate") or {}).items() if k != "out"}
    return report | {"params": str(path)}, aggregate


def run(args: argparse.Namespace) -> int:
    """Aggregate, then write the report; a label-key mismatch is said on stderr."""
    from capjudge.aggregate import AggregateConfig
    from capjudge.report import ReportConfig
    from capjudge.report.standalone import ReportInputError, build_report
    from capjudge.util.atomic import IncompleteOutputError

    report, aggregate = _settings(args.params)
    flags = {"human_criterion": args.human_criterion, "bootstrap": args.bootstrap,
             "title": args.title}
    report |= {k: v for k, v in flags.items() if v is not None}
    # Filed for `capjudge compare` / `history` only when asked: an ad-hoc report is not a run
    # of the project's pipeline.
    report["registry"] = args.registry
    dirs = [*args.judge_dirs, *args.judge_dir]
    try:
        ctx = build_report(args.items, dirs, args.out, ReportConfig(**report),
                           AggregateConfig.from_section(aggregate))
    except (ReportInputError, IncompleteOutputError, FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if ctx.get("label_note"):
        print(f"capjudge report: {ctx['label_note']}", file=sys.stderr)
    scored = [h["series"] for h in ctx["headline"]]
    print(f"report: {Path(args.out) / 'report.html'} ({len(scored)} series with agreement "
          f"against human '{ctx['human_criterion']}'"
          + (f": {', '.join(scored)})" if scored else ")"))
    return EXIT_OK


def register(sub: Any) -> None:
    """Add the subcommand."""
    p = sub.add_parser("report", help="the report (agreement with humans, plots) for judge "
                       "output folders, without running the pipeline")
    p.add_argument("judge_dirs", nargs="*", type=Path, metavar="JUDGE_DIR",
                   help="a judge output folder (capjudge judge --out); its name is the judge's")
    p.add_argument("--judge-dir", action="append", default=[], type=Path,
                   help="a judge output folder (repeatable; as JUDGE_DIR)")
    p.add_argument("--items", type=Path, default=Path("data/ingest"),
                   help="the ingest output folder (or its items.parquet) the judges read; the "
                        "human labels are its items' (default data/ingest)")
    p.add_argument("--out", type=Path, required=True, help="report folder (aggregate tables "
                   "in OUT/aggregate)")
    p.add_argument("--human-criterion", help="the label to compare with (default: "
                   "report.human_criterion of --params, else 'overall')")
    p.add_argument("--bootstrap", type=bounded(int, 0), help="bootstrap resamples for the "
                   "CIs (default: the params file's, else 500)")
    p.add_argument("--title", help="the report's title")
    p.add_argument("--params", help="report and aggregate settings (default: params.yaml "
                   "when there is one)")
    p.add_argument("--registry", help="file this run in that run registry (for capjudge "
                   "compare and history); default: not filed")
    p.set_defaults(func=run)
