"""``capjudge judge``: run one judge over ingested items in this process (no Prefect)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from capjudge.records import JSONValue

from capjudge.cli.common import (
    EXIT_OK,
    EXIT_STRICT,
    UsageError,
    add_judge_options,
    flag_message,
    judge_config,
)


def run(args: argparse.Namespace) -> int:
    """Judge and write judgements.parquet + summary.json (exit 3 on failures with --strict)."""
    from dataclasses import replace

    from capjudge.client import AuthError, WrongServerError
    from capjudge.judge import OutputWriteError, run_judge
    from capjudge.judge.out import OutputBusyError, OutputTakenError
    from capjudge.protocol import BackendError
    from capjudge.util.stopping import exit_promptly_on_signals

    # Ctrl-C / SIGTERM: nothing new is sent, what came is written (marked incomplete), and
    # the process is gone within seconds even with requests in flight.
    exit_promptly_on_signals()
    config = judge_config(args, args.modes)
    try:
        # replace() runs the config's checks again (--limit and --concurrency >= 1, batch
        # options).
        config = replace(config, limit=args.limit, submit=args.submit,
                         item_fraction=args.item_fraction, item_seed=args.item_seed,
                         batch_options=batch_options(args.batch_option),
                         concurrency=(config.concurrency if args.concurrency is None
                                      else args.concurrency))
    except ValueError as exc:  # an unknown batch option, a limit or concurrency below 1
        raise UsageError(flag_message(str(exc))) from exc
    from capjudge.util.progress import Progress

    progress = Progress(f"judge {config.method}", "request")
    try:
        summary = run_judge(args.items, args.out, config, progress=progress)
    except (BackendError, ValueError, AuthError, WrongServerError, OutputBusyError,
            OutputTakenError, OutputWriteError) as exc:
        raise UsageError(str(exc)) from exc
    finally:
        progress.close()
    print(json.dumps({k: summary[k] for k in ("by_status", "requests", "model_calls",
                                              "cache_hits", "modes_ran", "modes_skipped")},
                     indent=2))
    if args.strict and summary["failure_rate"] > 0:
        return EXIT_STRICT
    return EXIT_OK


def batch_options(pairs: list[str]) -> dict[str, JSONValue]:
    """``--batch-option KEY=VALUE`` pairs as ``batch_options`` (values read as YAML scalars).

    Raises:
        UsageError: a pair without ``=``.
    """
    import yaml

    out: dict[str, JSONValue] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--batch-option wants KEY=VALUE, got {pair!r}")
        out[key.strip()] = yaml.safe_load(value)
    return out


def register(sub: Any) -> None:
    """Add the subcommand."""
    p = sub.add_parser("judge", help="run one judge over ingested items (no Prefect)")
    add_judge_options(p)
    p.add_argument("--items", type=Path, default=Path("data/ingest/items.parquet"))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--modes", nargs="+")
    p.add_argument("--limit", type=int, help="only the first N items (of the sample, if any)")
    p.add_argument("--item-fraction", type=float, metavar="F",
                   help="judge a seeded sample of about this share of the items, each item in "
                        "or out by a hash of its id (stable as items are added)")
    p.add_argument("--item-seed", type=int, default=0, metavar="N",
                   help="the sample's seed (default 0)")
    p.add_argument("--concurrency", type=int, metavar="N",
                   help="requests in flight at once (judge setting concurrency; default: the "
                        "backend's, e.g. 8 for openai/...); the rpm/tpm limits still hold")
    p.add_argument("--strict", action="store_true", help="exit 3 if any judgement failed")
    p.add_argument("--submit", choices=("sync", "batch"), default="sync",
                   help="batch: through the OpenAI Batch API (openai/<model>; state in "
                        "OUT/batches.json, a rerun resumes the recorded batches)")
    p.add_argument("--batch-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a batch_options setting (poll_interval_s, max_wait_s, max_requests, "
                        "max_bytes, state_dir, write_only); repeatable")
    p.set_defaults(func=run)
