"""Splitting a per-picture stage over workers, and joining what they wrote.

A context stage (VisCE²'s visual-context extraction) works once per distinct picture. To spread
it over the workers of a runner, each task takes a contiguous range of the pictures in order of
first appearance (:func:`shard_by_picture`), runs the stage's own code on the items showing
them into its own folder, and the flow joins the folders (:func:`combine_part_dirs`): tables
are concatenated in shard order, which is the order a single run writes (first appearance),
and counts in the summaries are added up. Nothing here knows which method it runs.

A judge stage is split by item ranges instead (:func:`adaptive_chunk_size`,
:func:`chunk_bounds`): each task writes its rows as a part file (:func:`write_part`) and the
flow concatenates the parts into one ``judgements.parquet`` (:func:`combine_parts`); what
travels back to the flow is a :class:`ChunkResult`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypedDict

import pyarrow as pa
import pyarrow.parquet as pq

from capjudge.client import ClientStatsDict
from capjudge.item import Item
from capjudge.judge.rows import JUDGEMENTS_SCHEMA, rows_table
from capjudge.methods.base import item_image
from capjudge.protocol import BackendFacts
from capjudge.records import JSONValue, Judgement
from capjudge.stage_files import summary_file
from capjudge.util.atomic import atomic_path, write_json


class ChunkResult(TypedDict):
    """What a judge chunk task returns to its flow (its rows are in its part file).

    A plain dict at run time (it crosses the Prefect boundary as a task's result).
    """

    stats: ClientStatsDict
    """The chunk's client statistics (:meth:`capjudge.client.ClientStats.to_dict`)."""
    rows: int
    """Judgement rows written to the part file."""
    planned: int
    """Requests sent (or answered from the cache)."""
    skipped: int
    """Recorded skips."""
    backend: BackendFacts
    """The backend's lineage facts (``loaded: False`` when the chunk built none)."""


def picture_key(item: Item) -> str | None:
    """The content hash of the picture a judge would see for ``item``.

    None: no picture, or none that can be shown; such items go to the first shard, where the
    stage records them.
    """
    if item.media_kind == "none":
        return None
    try:
        return item_image(item, "auto").sha256
    except ValueError:
        return None


def shard_by_picture(items: Sequence[Item], index: int, count: int) -> list[Item]:
    """The items of shard ``index`` of ``count``.

    Those are the items showing the ``index``-th contiguous range of distinct pictures (in
    order of first appearance). Every item of a picture lands in the same shard, so
    per-picture counts stay whole; items without a picture go to shard 0.
    """
    order: dict[str | None, int] = {}
    for item in items:
        key = picture_key(item)
        if key is not None and key not in order:
            order[key] = len(order)
    per_shard = -(-len(order) // max(1, count))  # ceiling division
    out = []
    for item in items:
        key = picture_key(item)
        shard = 0 if key is None or per_shard == 0 else order[key] // per_shard
        if shard == index:
            out.append(item)
    return out


def _numbers(values: Mapping[str, JSONValue]) -> dict[str, int | float] | None:
    """``values`` when every one is a number (not a bool), else None."""
    out: dict[str, int | float] = {}
    for k, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int | float):
            return None
        out[k] = v
    return out


def _merge(into: dict[str, JSONValue], other: Mapping[str, JSONValue]) -> None:
    """Add ``other``'s counts into ``into``.

    Numbers are summed, dicts of numbers summed key by key, anything else kept from the first
    part that had it.

    Raises:
        AttributeError: A key holds a dict in ``other`` but not in ``into``.
    """
    for key, value in other.items():
        if key not in into:
            into[key] = value.copy() if isinstance(value, dict) else value
        elif isinstance(value, bool) or not isinstance(value, int | float | dict):
            continue
        elif isinstance(value, dict):
            mine = into[key]
            if not isinstance(mine, dict):
                raise AttributeError(f"summary key {key!r} is a dict in one part and "
                                     f"{type(mine).__name__} in another")
            theirs, ours = _numbers(value), _numbers(mine)
            if theirs is not None and ours is not None:
                for k, v in theirs.items():
                    mine[k] = ours.get(k, 0) + v
        elif isinstance(mine := into[key], int | float):
            into[key] = mine + value


def combine_part_dirs(part_dirs: Sequence[str | Path], out_dir: str | Path,
                      seconds: float | None = None) -> dict[str, JSONValue]:
    """Join the folders written by the shards of a stage into ``out_dir``.

    Every ``*.parquet`` file is concatenated across the parts in shard order (parts without
    it are skipped); the parts' ``summary.json`` are merged (:func:`_merge`) and written.

    Args:
        part_dirs: the shards' folders, in shard order.
        out_dir: the stage's output folder.
        seconds: the stage's wall time, recorded as ``seconds`` (the parts' own times
            overlapped, so their sum means nothing).

    Returns:
        The merged summary.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = sorted({p.name for d in part_dirs for p in Path(d).glob("*.parquet")})
    for name in names:
        files = [Path(d) / name for d in part_dirs if (Path(d) / name).is_file()]
        schema = pq.read_schema(files[0])
        with atomic_path(out / name) as tmp, pq.ParquetWriter(tmp, schema) as writer:
            for file in files:
                writer.write_table(pq.read_table(file, schema=schema))
    summary: dict[str, JSONValue] = {}
    for d in part_dirs:
        file = summary_file(d)
        if file.is_file():
            _merge(summary, json.loads(file.read_text()))
    if seconds is not None:
        summary["seconds"] = round(seconds, 2)
    write_json(summary_file(out), summary)
    return summary


__all__ = ["combine_part_dirs", "picture_key", "shard_by_picture"]


def write_part(path: str | Path, rows: Sequence[Judgement]) -> Path:
    """Write one chunk's rows (a worker writes its own part; nothing travels back)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        pq.write_table(rows_table(rows), tmp)
    return path


def combine_parts(parts: Iterable[str | Path], out: str | Path) -> pa.Table:
    """Concatenate part files into one judgements.parquet, a part at a time (row groups).

    Returns the columns the summary needs.
    """
    out = Path(out)
    kept: list[pa.Table] = []
    summary_columns = ["status", "mode", "reason", "cost_usd", "template", "completion_tokens",
                       "confirmation"]
    with atomic_path(out) as tmp, pq.ParquetWriter(tmp, JUDGEMENTS_SCHEMA) as writer:
        for part in parts:
            table = pq.read_table(part, schema=JUDGEMENTS_SCHEMA)
            writer.write_table(table)
            kept.append(table.select(summary_columns))
    if not kept:
        return rows_table([]).select(summary_columns)
    return pa.concat_tables(kept)


def adaptive_chunk_size(n_items: int, workers: int, minimum: int = 16,
                        maximum: int = 2000) -> int:
    """Items per judge task: about four chunks per worker.

    That keeps workers busy and progress visible, without thousands of tiny tasks whose
    orchestration would cost more than the work.
    """
    return max(minimum, min(maximum, math.ceil(n_items / max(1, 4 * workers))))


def chunk_bounds(n_items: int, size: int) -> list[tuple[int, int]]:
    """The ``[start, stop)`` item ranges of a judge stage's chunks, in order."""
    return [(lo, min(n_items, lo + size)) for lo in range(0, n_items, max(1, size))]
