"""``capjudge watch``: re-evaluate when a judge's backend model changes (the watch flow)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from capjudge.cli.common import UsageError


def run(args: argparse.Namespace) -> int:
    """Run ``flows.watch`` once, or serve it on a cron schedule.

    Exit codes: 0 done, 1 a backend unreachable or the re-evaluation failed, 2 bad usage,
    4 an alert (a drop past ``watch.alert_drop`` or a failure / low-mass rate past its limit).
    """
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
    when = p.add_mutually_exclusive_group()
    when.add_argument("--cron", help="serve on this cron schedule (needs a Prefect server); "
                                     "without it, check once now")
    when.add_argument("--once", action="store_true",
                      help="check once now (the default); exit 4 when a re-evaluated judge "
                           "raised an alert")
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--registry", default=".capjudge-runs")
    p.add_argument("--no-probe", action="store_true")
    p.set_defaults(func=run)
