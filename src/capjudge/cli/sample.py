"""``capjudge sample``: generate the bundled synthetic sample suite (CC0)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from capjudge.cli.common import EXIT_OK, UsageError, bounded


def run(args: argparse.Namespace) -> int:
    """Write the sample and print its counts."""
    from capjudge.sample import generate_sample

    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise UsageError(f"--out {args.out}: exists and is not a folder")
    counts = generate_sample(args.out, seed=args.seed, n_images=args.images)
    print(json.dumps({"out": str(args.out), **counts}))
    return EXIT_OK


def register(sub: Any) -> None:
    """Add the subcommand."""
    p = sub.add_parser("sample", help="generate the bundled synthetic sample suite (CC0)")
    p.add_argument("--out", type=Path, default=Path("data/sample"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--images", type=bounded(int, 1, 10_000), default=20,
                   help="number of synthetic images (1..10000)")
    p.set_defaults(func=run)
