"""``capjudge watch``: re-evaluate when a judge's backend model changes (the watch flow)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from capjudge.cli.common import UsageError


def run(args: argparse.Namespace) -> int:
    """Run ``flows.watch`` once, or serve it on a cron schedule."""
    if not Path("flows/watch.py").is_file():
        raise UsageError("run `capjudge watch` from the project root (flows/watch.py)")
    cmd = [sys.executable, "-m", "flows.watch", "--params", args.params,
           "--registry", args.registry]
    cmd += ["--cron", args.cron] if args.cron else ["--once"]
    if args.no_probe:
        cmd.append("--no-probe")
    return subprocess.call(cmd)


def register(sub: Any) -> None:
    """Add the subcommand."""
    p = sub.add_parser("watch", help="re-evaluate when a judge's backend model changes")
    p.add_argument("--cron", help="serve on this cron schedule (needs a Prefect server); "
                                  "without it, check once now")
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--registry", default=".capjudge-runs")
    p.add_argument("--no-probe", action="store_true")
    p.set_defaults(func=run)
