"""The typed item every stage after ingest works on (one row of ``items.parquet``).

Methods, the judge pipeline, the context stage and the CLI all take :class:`Item`, never a
loose dict, so a renamed or missing column fails where the item is built, not deep inside a
prompt renderer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from capjudge.records import JSONValue


@dataclass(frozen=True)
class Item:
    """One ingested item: the candidate text, its references and the picture a judge sees.

    ``media_sha256`` is the hash of the original file (for 3D objects, of the view hashes);
    ``tile_path``/``tile_sha256`` the frame or view tile made at ingest (videos, 3D objects);
    ``judge_path``/``judge_sha256`` a normalised copy of an image in a format judge APIs accept,
    when ingest had to make one. ``labels`` and ``extra`` are JSON text, as stored.

    ``frame_paths``/``frame_sha256``: a video's sampled frames on their own (what a judge
    shown the frames rather than the tile sees).

    Paths: ``media_path`` and ``view_paths`` are relative to ``media_root``; a relative
    ``media_root``, ``tile_path``, ``judge_path`` or frame path is relative to the items
    file's folder (``base_dir``, set by :func:`load_items`), so an ingest folder can be moved
    or read from any working directory. Use :meth:`resolve` / :meth:`root` rather than
    opening them directly.
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
    frame_paths: tuple[str, ...] = ()
    frame_sha256: tuple[str, ...] = ()
    other: dict[str, object] = field(default_factory=dict, compare=False, hash=False)
    # Where the item was loaded from (not a column): what relative paths resolve against.
    base_dir: str | None = field(default=None, compare=False, hash=False)

    @classmethod
    def from_row(cls, row: Mapping[str, object], base_dir: str | Path | None = None) -> Item:
        """Build from an ``items.parquet`` row.

        Columns this class does not name go to ``other`` (kept, never dropped).

        Args:
            row: the row.
            base_dir: the items file's folder (relative paths resolve against it).
        """
        known = {f.name for f in fields(cls)} - {"other", "base_dir"}
        values: dict[str, Any] = {}  # Any: keyword arguments of several field types
        other: dict[str, object] = {}
        for key, value in row.items():
            if key not in known:
                other[key] = value
            elif key in ("references", "view_paths", "frame_indices", "frame_timestamps_s",
                         "frame_paths", "frame_sha256"):
                values[key] = tuple(cast("Iterable[object]", value or ()))
            elif value is not None:
                values[key] = value
        if "id" not in values or "candidate" not in values:
            raise ValueError(f"an item needs 'id' and 'candidate' (got {sorted(row)})")
        base = str(Path(base_dir).absolute()) if base_dir is not None else None
        return cls(**values, other=other, base_dir=base)

    def resolve(self, value: str) -> Path:
        """A stored path (media root, tile, judge copy or frame) as an absolute path.

        A relative path is relative to the items file's folder (what ingest writes). Files
        written before that were relative to ingest's working directory, normally the project
        root, an ancestor of the items folder: those are found by trying the ancestors, then
        the current directory. The first candidate that exists wins; nothing is trusted for
        it: the judge-time check (:mod:`capjudge.media_check`) verifies containment and hashes.
        """
        path = Path(value)
        if path.is_absolute():
            return path
        bases: list[Path] = []
        if self.base_dir is not None:
            base = Path(self.base_dir)
            bases += [base, *base.parents]
        bases.append(Path.cwd())
        candidates = [b / path for b in bases]
        return next((c for c in candidates if c.exists() or c.is_symlink()), candidates[0])

    def root(self) -> Path:
        """The media root as an absolute path."""
        return self.resolve(self.media_root)

    def extra_dict(self) -> dict[str, JSONValue]:
        """The manifest's unknown keys (``extra`` JSON) as a dict."""
        data = json.loads(self.extra or "{}")
        return data if isinstance(data, dict) else {}

    def media_file(self) -> Path | None:
        """The original media file (first view for 3D objects), or None without media."""
        if not self.media_path:
            return None
        return self.root() / self.media_path


def load_items(path: str | Path, start: int = 0, stop: int | None = None) -> list[Item]:
    """``items.parquet`` (rows ``[start, stop)``) as typed items.

    Their relative paths resolve against the file's folder.

    Raises:
        ItemsError: the file is missing, not a readable Parquet table, or in a folder an
            ingest run left half-written (:func:`capjudge.util.atomic.check_complete`).
    """
    from capjudge.util.atomic import IncompleteOutputError, check_complete

    p = Path(path)
    if not p.is_file():
        raise ItemsError(f"{p}: items table not found (run ingest first)")
    try:
        check_complete(p.parent, "ingest")
        return _load_items(p, start, stop)
    except (IncompleteOutputError, ItemsError) as exc:
        raise ItemsError(str(exc)) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        # pyarrow raises ArrowInvalid (a ValueError) for a file that is not Parquet.
        raise ItemsError(f"{p}: not a readable items table ({type(exc).__name__}: {exc})"
                         ) from None


class ItemsError(ValueError):
    """``items.parquet`` cannot be used: missing, unreadable or incomplete."""


def _load_items(path: Path, start: int, stop: int | None) -> list[Item]:
    import pyarrow.parquet as pq

    if start or stop is not None:
        # Only the row groups that hold [start, stop): a judge flow loads one chunk per task,
        # and reading the whole table each time would cost O(items) per chunk.
        source = pq.ParquetFile(path)
        meta = source.metadata
        stop = meta.num_rows if stop is None else min(stop, meta.num_rows)
        groups, first, lo = [], None, 0
        for g in range(meta.num_row_groups):
            hi = lo + meta.row_group(g).num_rows
            if lo < stop and hi > start:
                groups.append(g)
                first = lo if first is None else first
            lo = hi
        table = source.read_row_groups(groups) if groups else source.schema_arrow.empty_table()
        table = table.slice(start - (first or 0), max(0, stop - start))
    else:
        table = pq.read_table(path)
    missing = {"id", "candidate"} - set(table.column_names)
    if missing:
        hint = " (this is ingest's quarantine table: the items are in items.parquet)" \
            if {"reason", "raw"} <= set(table.column_names) else ""
        raise ItemsError(f"{path}: not an items table (no {', '.join(sorted(missing))} "
                         f"column){hint}")
    base = Path(path).absolute().parent
    return [Item.from_row(row, base) for row in table.to_pylist()]
