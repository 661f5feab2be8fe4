"""``capjudge batch``: a judge's Batch API state (``submit: batch``).

- ``capjudge batch import RESULTS --state-dir DIR``: record a results file (``vllm run-batch``
  output, or a Batch API output file) in ``DIR/batches.json``; the judge stage's next run
  reads its answers into the request cache (the request is needed to read an answer, and that
  run has it), so nothing it answers is asked again.
- ``capjudge batch status --state-dir DIR``: the recorded batches, their statuses and counts.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from capjudge.cli.common import EXIT_OK, UsageError


def run_import(args: argparse.Namespace) -> int:
    """Record the results file; print the entry."""
    from capjudge.backends.openai_batch import import_results

    try:
        entry = import_results(args.results, args.state_dir)
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    print(json.dumps({"imported": str(args.results), "as": entry.name,
                      "results": entry.requests, "state": str(args.state_dir),
                      "next": "run the judge stage again: it reads these answers into the "
                              "request cache"}, indent=2))
    return EXIT_OK


def run_status(args: argparse.Namespace) -> int:
    """Print the recorded batches."""
    from capjudge.backends.openai_batch import STATE_FILE, BatchState

    if not (Path(args.state_dir) / STATE_FILE).is_file():
        raise UsageError(f"no {STATE_FILE} in {args.state_dir}")
    try:
        state = BatchState(args.state_dir)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    print(json.dumps([{"name": e.name, "id": e.id, "status": e.status,
                       "requests": e.requests, "counts": e.request_counts,
                       "collected": e.collected, "errors": e.errors}
                      for e in state.entries], indent=2))
    return EXIT_OK


def register(sub: Any) -> None:
    """Add the subcommand."""
    p = sub.add_parser("batch", help="Batch API state of a judge (import vllm run-batch "
                                     "results, status)")
    actions = p.add_subparsers(dest="action", required=True)
    imp = actions.add_parser("import", help="record a results file; the stage's next run "
                                            "reads it into the request cache")
    imp.add_argument("results", type=Path, help="vllm run-batch / Batch API output JSONL")
    imp.add_argument("--state-dir", type=Path, required=True,
                     help="the judge's batch state directory (its output directory unless "
                          "batch_options.state_dir is set)")
    imp.set_defaults(func=run_import)
    status = actions.add_parser("status", help="the recorded batches")
    status.add_argument("--state-dir", type=Path, required=True)
    status.set_defaults(func=run_status)
