"""``capjudge ingest``: validate a manifest, hash media, sample video frames."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from capjudge.cli.common import EXIT_OK, EXIT_STRICT, UsageError


def run(args: argparse.Namespace) -> int:
    """Ingest; quarantined rows are counted on stderr (exit 3 with --strict)."""
    from capjudge.ingest import IngestConfig, ingest, nothing_ingested
    from capjudge.manifest import ManifestError
    from capjudge.util.atomic import OutputWriteError

    # 0 means no limit (documented), a negative is refused by IngestConfig.
    def cap(value: int) -> int | None:
        return None if value == 0 else value  # 0: no limit (documented); negatives refused

    try:
        config = IngestConfig(frame_policy=args.frame_policy, uniform_frames=args.frames,
                              decode_timeout_s=args.decode_timeout,
                              max_candidate_chars=cap(args.max_candidate_chars),
                              max_reference_chars=cap(args.max_reference_chars),
                              max_references=cap(args.max_references))
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a folder")
    if not args.media_root.is_dir():
        raise UsageError(f"--media-root {args.media_root}: not a folder")
    from capjudge.util.progress import Progress

    progress = Progress("ingest", "row")
    try:
        result = ingest(args.manifest, args.media_root, args.out, config, progress=progress)
    except (ManifestError, OutputWriteError) as exc:  # a full disk: one line naming the path
        raise UsageError(str(exc)) from exc
    finally:
        progress.close()
    print(f"ingest: {result.n_rows} rows -> {result.n_items} items "
          f"({', '.join(f'{k} {v}' for k, v in sorted(result.by_kind.items())) or 'none'}), "
          f"{result.n_quarantined} quarantined", file=sys.stderr)
    for reason, count in sorted(result.reasons.items()):
        print(f"  quarantined: {count} x {reason}", file=sys.stderr)
    if result.n_quarantined:
        print(f"  details: {Path(result.out_dir) / 'quarantine.parquet'}", file=sys.stderr)
    empty = nothing_ingested(result, args.media_root)
    if empty is not None:
        print(f"ingest: error: {empty}", file=sys.stderr)
        return EXIT_STRICT
    if args.strict and result.n_quarantined:
        return EXIT_STRICT
    return EXIT_OK


def register(sub: Any) -> None:
    """Add the subcommand."""
    from capjudge.media import FRAME_POLICIES

    p = sub.add_parser("ingest", help="validate a manifest, hash media, sample video frames")
    p.add_argument("manifest", type=Path, help="JSONL (reference), CSV or Parquet manifest")
    p.add_argument("--media-root", type=Path, required=True,
                   help="relative media paths resolve here; nothing outside it is read")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--frame-policy", choices=FRAME_POLICIES, default="first_middle_last")
    p.add_argument("--frames", type=int, default=3, help="frames for --frame-policy uniform")
    p.add_argument("--decode-timeout", type=float, default=60.0,
                   help="seconds allowed to decode one video")
    p.add_argument("--max-candidate-chars", type=int, default=20_000,
                   help="longer candidates are quarantined (0: no limit)")
    p.add_argument("--max-reference-chars", type=int, default=20_000,
                   help="longer references are quarantined (0: no limit)")
    p.add_argument("--max-references", type=int, default=100,
                   help="rows with more references are quarantined (0: no limit)")
    p.add_argument("--strict", action="store_true", help="exit 3 if any row is quarantined")
    p.set_defaults(func=run)
