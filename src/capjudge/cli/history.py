"""``capjudge history``: each judge/mode's agreement with humans across registered runs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from capjudge.cli.common import EXIT_OK, UsageError


def run(args: argparse.Namespace) -> int:
    """Print the history (text, or JSON with ``--json``)."""
    from capjudge.history import format_history, history_path, load_history, series_history

    registry = Path(args.registry)
    if not history_path(registry).is_file():
        raise UsageError(f"no history in {registry} (the report stage writes "
                         f"{history_path(registry)} when report.registry is set)")
    entries = load_history(registry, args.judge)
    if args.judge and not entries:
        known = sorted({e["judge"] for e in load_history(registry)})
        raise UsageError(f"no judge {args.judge!r} in the history (known: {', '.join(known)})")
    if args.json:
        print(json.dumps(series_history(entries), indent=2, sort_keys=True))
    else:
        print(format_history(entries), end="")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add the subcommand."""
    p = sub.add_parser("history", help="agreement per judge/mode across registered runs: "
                                       "tau-b with CI, snapshot changes, paired deltas")
    p.add_argument("--judge", help="only this judge")
    p.add_argument("--json", action="store_true", help="the series as JSON")
    p.add_argument("--registry", default=".capjudge-runs")
    p.set_defaults(func=run)
