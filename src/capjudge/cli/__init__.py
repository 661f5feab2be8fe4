"""The ``capjudge`` command line: one module per subcommand, each with ``register(sub)``.

Exit codes (all subcommands):

- 0: success (for ``ingest``: also when rows were quarantined; they are counted and reported).
- 1: an unexpected internal error (a bug: please report it with the traceback).
- 2: bad usage or unreadable input (a manifest that cannot be parsed, a missing file); the
  message names the file and, where it applies, the line.
- 3: ``--strict`` was given and rows were quarantined / judgements failed; ``score`` when the
  item got no score.
- 4: ``watch --once``: a re-evaluated judge raised an alert (agreement dropped past
  ``watch.alert_drop``, or its failure / low-mass rate is above its limit).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from capjudge.cli.common import EXIT_INTERNAL, EXIT_OK, EXIT_STRICT, EXIT_USAGE, UsageError
from capjudge.registry import RegistryError

SUBCOMMANDS = ("init", "sample", "ingest", "score", "judge", "batch", "report", "estimate_cost",
               "meta_eval", "compare", "watch", "runs", "history", "verify_run", "prepare_model",
               "serve")
"""Modules of this package, in help order; each defines ``register(subparsers)``."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    parser = argparse.ArgumentParser(prog="capjudge", description=__doc__.split("\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMANDS:
        importlib.import_module(f"capjudge.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``capjudge`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr,
    )
    for noisy in ("httpx", "httpx2", "openai"):  # one INFO line per HTTP request otherwise
        logging.getLogger(noisy).setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    try:
        code: int = args.func(args)
    except (UsageError, RegistryError) as exc:  # RegistryError: a plugin that fails to load
        print(f"capjudge {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        # A run stopped by Ctrl-C says what it kept and how to go on (RunInterrupted).
        message = str(exc) or "interrupted; answers already received are in the request cache"
        print(f"capjudge {args.command}: {message}", file=sys.stderr)
        return 130
    return code


__all__ = ["EXIT_INTERNAL", "EXIT_OK", "EXIT_STRICT", "EXIT_USAGE", "UsageError",
           "build_parser", "main"]

if __name__ == "__main__":
    sys.exit(main())
