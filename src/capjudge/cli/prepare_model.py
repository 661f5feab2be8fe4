"""``capjudge prepare-model``: convert the embedded judge once (cached)."""

from __future__ import annotations

import argparse
from typing import Any

from capjudge.cli.common import EXIT_OK


def run(args: argparse.Namespace) -> int:
    """Convert (if needed) and print the cached model folder."""
    from capjudge.backends.embedded import prepare_embedded

    print(prepare_embedded(args.name))
    return EXIT_OK


def register(sub: Any) -> None:
    """Add the subcommand."""
    p = sub.add_parser("prepare-model", help="convert the embedded judge once (cached)")
    p.add_argument("--name", default="gemma-3-270m")
    p.set_defaults(func=run)
