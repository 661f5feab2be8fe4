"""``capjudge runs``: list the registered runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from capjudge.cli.common import EXIT_OK


def run(args: argparse.Namespace) -> int:
    """One line per run: id, time, git revision, judges."""
    from capjudge.lineage import list_runs

    for entry in list_runs(Path(args.registry)):
        judges = ", ".join(f"{b['judge']}={b['backend']}@{b['snapshot']}"
                           for b in entry["backends"])
        print(f"{entry['run_id']}  {entry['time']}  git {str(entry['git_revision'])[:10]}  "
              f"{judges}")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add the subcommand."""
    p = sub.add_parser("runs", help="list the registered runs")
    p.add_argument("--registry", default=".capjudge-runs")
    p.set_defaults(func=run)
