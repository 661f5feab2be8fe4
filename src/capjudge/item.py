"""The typed item every stage after ingest works on (one row of ``items.parquet``).

Methods, the judge pipeline, the context stage and the CLI all take :class:`Item`, never a
loose dict, so a renamed or missing column fails where the item is built, not deep inside a
prompt renderer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Item:
    """One ingested item: the candidate text, its references and the picture a judge sees.

    ``media_sha256`` is the hash of the original file (for 3D objects, of the view hashes);
    ``tile_path``/``tile_sha256`` the frame or view tile made at ingest (videos, 3D objects);
    ``judge_path``/``judge_sha256`` a normalised copy of an image in a format judge APIs accept,
    when ingest had to make one. ``labels`` and ``extra`` are JSON text, as stored.
    """

    id: str
    candidate: str
    task: str = "caption"
    media_kind: str = "none"  # image | video | views | none
    media_root: str = "."
    media_path: str | None = None
    media_sha256: str | None = None
    tile_path: str | None = None
    tile_sha256: str | None = None
    judge_path: str | None = None
    judge_sha256: str | None = None
    references: tuple[str, ...] = ()
    question: str | None = None
    system: str | None = None
    labels: str | None = None
    extra: str | None = None
    line: int | None = None
    view_paths: tuple[str, ...] = ()
    frame_policy: str | None = None
    frame_indices: tuple[int, ...] = ()
    frame_timestamps_s: tuple[float, ...] = ()
    other: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Item:
        """Build from an ``items.parquet`` row; columns this class does not name go to
        ``other`` (kept, never dropped)."""
        known = {f.name for f in fields(cls)} - {"other"}
        values: dict[str, Any] = {}
        other: dict[str, Any] = {}
        for key, value in row.items():
            if key not in known:
                other[key] = value
            elif key in ("references", "view_paths", "frame_indices", "frame_timestamps_s"):
                values[key] = tuple(value or ())
            elif value is not None:
                values[key] = value
        if "id" not in values or "candidate" not in values:
            raise ValueError(f"an item needs 'id' and 'candidate' (got {sorted(row)})")
        return cls(**values, other=other)

    def extra_dict(self) -> dict[str, Any]:
        """The manifest's unknown keys (``extra`` JSON) as a dict."""
        data = json.loads(self.extra or "{}")
        return data if isinstance(data, dict) else {}

    def labels_dict(self) -> dict[str, Any]:
        """The human labels (``labels`` JSON): criterion -> number or list of numbers."""
        data = json.loads(self.labels or "{}")
        return data if isinstance(data, dict) else {}

    def media_file(self) -> Path | None:
        """The original media file (first view for 3D objects), or None without media."""
        if not self.media_path:
            return None
        return Path(self.media_root) / self.media_path


def load_items(path: str | Path) -> list[Item]:
    """``items.parquet`` as typed items."""
    import pyarrow.parquet as pq

    return [Item.from_row(row) for row in pq.read_table(path).to_pylist()]
