"""The ``capjudge`` command line. Subcommands mirror the pipeline stages.

Exit codes (all subcommands):

- 0: success (for ``ingest``: also when rows were quarantined; they are counted and reported).
- 1: an unexpected internal error (a bug: please report it with the traceback).
- 2: bad usage or unreadable input (a manifest that cannot be parsed, a missing file); the
  message names the file and, where it applies, the line.
- 3: ``--strict`` was given and rows were quarantined / judgements failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_STRICT = 0, 1, 2, 3


class UsageError(Exception):
    """Bad arguments or unreadable input: exit code 2 with the message."""


def _cmd_sample(args: argparse.Namespace) -> int:
    from capjudge.sample import generate_sample

    counts = generate_sample(args.out, seed=args.seed, n_images=args.images)
    print(json.dumps({"out": str(args.out), **counts}))
    return EXIT_OK


def _cmd_ingest(args: argparse.Namespace) -> int:
    from capjudge.ingest import IngestConfig, ingest
    from capjudge.manifest import ManifestError

    config = IngestConfig(frame_policy=args.frame_policy, uniform_frames=args.frames,
                          decode_timeout_s=args.decode_timeout)
    try:
        result = ingest(args.manifest, args.media_root, args.out, config)
    except ManifestError as exc:
        raise UsageError(str(exc)) from exc
    print(f"ingest: {result.n_rows} rows -> {result.n_items} items "
          f"({', '.join(f'{k} {v}' for k, v in sorted(result.by_kind.items())) or 'none'}), "
          f"{result.n_quarantined} quarantined", file=sys.stderr)
    for reason, count in sorted(result.reasons.items()):
        print(f"  quarantined: {count} x {reason}", file=sys.stderr)
    if result.n_quarantined:
        print(f"  details: {Path(result.out_dir) / 'quarantine.parquet'}", file=sys.stderr)
    if args.strict and result.n_quarantined:
        return EXIT_STRICT
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    from capjudge.media import FRAME_POLICIES

    parser = argparse.ArgumentParser(prog="capjudge", description=__doc__.split("\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("sample", help="generate the bundled synthetic sample suite (CC0)")
    p.add_argument("--out", type=Path, default=Path("data/sample"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--images", type=int, default=20, help="number of synthetic images")
    p.set_defaults(func=_cmd_sample)

    p = sub.add_parser("ingest", help="validate a manifest, hash media, sample video frames")
    p.add_argument("manifest", type=Path, help="JSONL (reference), CSV or Parquet manifest")
    p.add_argument("--media-root", type=Path, required=True,
                   help="relative media paths resolve here; nothing outside it is read")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--frame-policy", choices=FRAME_POLICIES, default="first_middle_last")
    p.add_argument("--frames", type=int, default=3, help="frames for --frame-policy uniform")
    p.add_argument("--decode-timeout", type=float, default=60.0,
                   help="seconds allowed to decode one video")
    p.add_argument("--strict", action="store_true", help="exit 3 if any row is quarantined")
    p.set_defaults(func=_cmd_ingest)

    for register in _EXTENSIONS:
        register(sub)
    return parser


# Later stages register their subcommands here (keeps this module's imports light).
_EXTENSIONS: list[Callable[[Any], None]] = []


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``capjudge`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr,
    )
    try:
        code: int = args.func(args)
    except UsageError as exc:
        print(f"capjudge {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
