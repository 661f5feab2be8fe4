"""A three-item data set of the user's own (not the bundled sample), ingested and judged.

For the your-own-data tests (``capjudge report``, ``capjudge init``, the report's protocol
line and label-key check): plain images, labels under a key the user chose (``rating``), the
fake backend (no model, no network), all in about a second.
"""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image

ROWS = [("red", "sys-a", 5), ("green", "sys-b", 2), ("blue", "sys-a", 4), ("grey", "sys-b", 1)]


def write_manifest(root: Path, label_key: str = "rating") -> Path:
    """``root/my.jsonl`` and its pictures in ``root/media``; returns the manifest."""
    media = root / "media"
    media.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, (colour, system, rating) in enumerate(ROWS):
        Image.new("RGB", (64, 48), colour).save(media / f"p{i}.png")
        lines.append(json.dumps({"id": f"i{i}", "image": f"p{i}.png",
                                 "candidate": f"A {colour} square.",
                                 "references": [f"a {colour} square"], "system": system,
                                 "labels": {label_key: rating}}))
    manifest = root / "my.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


def ingest_and_judge(root: Path, label_key: str = "rating") -> tuple[Path, Path]:
    """Ingest the tiny manifest and judge it with ``fake/hash+vision``; (ingest, judge dir)."""
    from capjudge.ingest import ingest
    from capjudge.judge import JudgeConfig, run_judge

    manifest = write_manifest(root, label_key)
    ingest(manifest, root / "media", root / "ingest")
    judge_dir = root / "judge" / "fk"
    method = "gveval"
    config = JudgeConfig(method=method, backend="fake/hash+vision",
                         cache_dir=str(root / "cache"), modes=["ref-only"])
    run_judge(root / "ingest" / "items.parquet", judge_dir, config)
    return root / "ingest", judge_dir
