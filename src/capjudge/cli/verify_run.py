"""``capjudge verify-run``: rerun a sample of a judge stage from an empty cache and compare.

Prints "reproduced: N/N identical" or the differences (:mod:`capjudge.verify`); exit 0 when
every sampled judgement is identical, 5 when not.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from capjudge.cli.common import EXIT_OK, UsageError, bounded
from capjudge.stage_files import default_dir, items_file, judgements_file

EXIT_NOT_REPRODUCED = 5


def _retest_sd(report_db: Path, judge: str) -> float | None:
    """The judge's measured mean item SD over repeats (the report's reliability table)."""
    if not report_db.is_file():
        return None
    try:
        import duckdb

        con = duckdb.connect(str(report_db), read_only=True)
        try:
            row = con.execute("SELECT avg(mean_item_sd) FROM reliability_retest WHERE series "
                              "LIKE ?", [f"{judge}/%"]).fetchone()
        finally:
            con.close()
    except Exception:  # noqa: BLE001 - no table (no repeats measured): nothing to compare
        return None
    return float(row[0]) if row and row[0] is not None else None


def run(args: argparse.Namespace) -> int:
    """Verify one judge stage."""
    from capjudge.params import ParamsError, load_params
    from capjudge.verify import verify_judge

    try:
        params = load_params(args.params)
    except (OSError, ParamsError) as exc:
        raise UsageError(f"--params {exc}") from exc
    groups = {**(params.get("judges") or {}), **(params.get("context_judges") or {})}
    if args.name not in groups:
        raise UsageError(f"no judge {args.name!r} in {args.params} (known: "
                         f"{', '.join(groups) or 'none'})")
    judge_dir = Path(args.judge_dir or groups[args.name].get("out")
                     or default_dir("judge", args.name))
    items = Path(args.items) if args.items else items_file(
        (params.get("ingest") or {}).get("out", default_dir("ingest")))
    if not judgements_file(judge_dir).is_file():
        raise UsageError(f"{judge_dir}: no judgements.parquet (run the judge stage first)")
    try:
        found = verify_judge(params, args.name, items, judge_dir, sample=args.sample,
                             seed=args.seed,
                             retest_sd=_retest_sd(Path(args.report_db), args.name))
    except (ValueError, KeyError, OSError) as exc:
        raise UsageError(str(exc)) from exc
    print(f"{found['judge']} ({found['backend']}, {found['items']} items, "
          f"{found['judgements']} judgements): {found['verdict']}")
    print(f"  rerun: {found['rerun']}")
    if found["texts_differing"] or found["statuses_differing"]:
        print(f"  generated texts differing: {found['texts_differing']}; statuses differing: "
              f"{found['statuses_differing']}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(found, indent=2) + "\n")
    return EXIT_OK if found["identical"] == found["judgements"] else EXIT_NOT_REPRODUCED


def register(sub: Any) -> None:
    """Add the subcommand."""
    p = sub.add_parser("verify-run", help="rerun a sample of a judge stage from an empty "
                                          "cache and compare with its output")
    p.add_argument("--name", required=True, help="the judge (params.yaml judges.NAME)")
    p.add_argument("--sample", type=bounded(int, 1), default=20, help="items to rerun")
    p.add_argument("--seed", type=int, default=0, help="picks the sample")
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--items", help="items.parquet (default: the ingest stage's)")
    p.add_argument("--judge-dir", help="the judge stage's output (default: data/judge/NAME)")
    p.add_argument("--report-db", default="reports/capjudge.duckdb",
                   help="for an API judge's measured test-retest spread")
    p.add_argument("--json", help="also write the result here")
    p.set_defaults(func=run)
