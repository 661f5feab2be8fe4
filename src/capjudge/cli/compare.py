"""``capjudge compare RUN_A RUN_B``: score shifts, agreement, flips and cost between runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from capjudge.cli.common import EXIT_OK, UsageError, bounded


def run(args: argparse.Namespace) -> int:
    """Compare two runs and write comparison.md / .json."""
    from capjudge.compare import compare_runs, write_comparison
    from capjudge.history import default_bootstrap
    from capjudge.lineage import resolve_run

    registry = Path(args.registry)
    try:
        db_a, db_b = resolve_run(args.run_a, registry), resolve_run(args.run_b, registry)
        # Not told: as many resamples as the history used, so both print the same CI.
        n_boot = args.bootstrap if args.bootstrap is not None else default_bootstrap(
            registry, db_a, db_b, Path(args.params))
        result = compare_runs(db_a, db_b, series=tuple(args.series) if args.series else None,
                              n_boot=n_boot, threshold=args.threshold)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    md, js = write_comparison(result, Path(args.out))
    print(md.read_text())
    print(f"written: {md}, {js}", file=sys.stderr)
    return EXIT_OK


def register(sub: Any) -> None:
    """Add the subcommand."""
    p = sub.add_parser("compare", help="compare two runs: score shifts, agreement, flips, cost")
    p.add_argument("run_a", help="run id (or prefix, 'latest', 'previous'), report dir or .duckdb")
    p.add_argument("run_b")
    p.add_argument("--registry", default=".capjudge-runs")
    p.add_argument("--series", nargs=2, metavar=("A_KEY", "B_KEY"),
                   help="compare judge/mode A_KEY of run A with B_KEY of run B")
    p.add_argument("--threshold", type=bounded(float),
                   help="pass/fail cut (default: the method's declared pass mark)")
    p.add_argument("--bootstrap", type=bounded(int, 0), default=None,
                   help="resamples of the 95 %% CIs (default: as many as `capjudge history` "
                        "used for these two runs, else report.bootstrap of --params, else 500)")
    p.add_argument("--params", default="params.yaml",
                   help="where report.bootstrap is read for the default of --bootstrap")
    p.add_argument("--out", default="reports/compare")
    p.set_defaults(func=run)
