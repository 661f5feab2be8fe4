"""``capjudge judge``: run one judge over ingested items in this process (no Prefect)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from capjudge.cli.common import EXIT_OK, EXIT_STRICT, UsageError, add_judge_options, judge_config


def run(args: argparse.Namespace) -> int:
    """Judge and write judgements.parquet + summary.json (exit 3 on failures with --strict)."""
    from capjudge.backends.base import BackendError
    from capjudge.judge import run_judge

    config = judge_config(args, args.modes)
    config.limit = args.limit
    from capjudge.progress import Progress

    progress = Progress(f"judge {config.method}", "request")
    try:
        summary = run_judge(args.items, args.out, config, progress=progress)
    except (BackendError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    finally:
        progress.close()
    print(json.dumps({k: summary[k] for k in ("by_status", "requests", "model_calls",
                                              "cache_hits", "modes_ran", "modes_skipped")},
                     indent=2))
    if args.strict and summary["failure_rate"] > 0:
        return EXIT_STRICT
    return EXIT_OK


def register(sub: Any) -> None:
    """Add the subcommand."""
    p = sub.add_parser("judge", help="run one judge over ingested items (no Prefect)")
    add_judge_options(p)
    p.add_argument("--items", type=Path, default=Path("data/ingest/items.parquet"))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--modes", nargs="+")
    p.add_argument("--limit", type=int, help="only the first N items")
    p.add_argument("--strict", action="store_true", help="exit 3 if any judgement failed")
    p.set_defaults(func=run)
