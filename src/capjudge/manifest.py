"""The manifest format: reading JSONL/CSV/Parquet and validating each row's fields.

One object per row (JSONL is the reference form)::

    {"id": "img-001-c1", "task": "caption", "image": "images/img-001.png",
     "candidate": "Two red circles.", "references": ["Two red circles on grey."],
     "system": "model-a", "labels": {"overall": [4, 5]}}

Keys: ``id`` (unique string), ``task`` (``caption``, ``vqa``, ``reg``, ``vdu``), exactly one of
``image`` (path), ``video`` (path) or ``views`` (list of paths: a 3D object's renders),
``candidate`` (the text to judge), ``references`` (list of strings, may be empty), optional
``question``, ``system`` (which model wrote the candidate), ``labels`` (criterion -> number, or a
list of numbers for several annotators). Relative paths resolve under the media root. Other keys
are kept verbatim in the ``extra`` column.

This module only checks field types and text; files are checked in :mod:`capjudge.ingest`.
A row that fails is not an exception: it becomes a quarantine reason.
"""

from __future__ import annotations

import csv
import json
import math
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TASKS = ("caption", "vqa", "reg", "vdu")
MEDIA_KEYS = ("image", "video", "views")
KNOWN_KEYS = {"id", "task", *MEDIA_KEYS, "candidate", "references", "question", "system", "labels"}
# Tab, newline and carriage return are ordinary in captions; every other control character is a
# sign of binary junk or an injection attempt and is refused.
_ALLOWED_CONTROL = {"\t", "\n", "\r"}


class ManifestError(Exception):
    """The manifest as a whole cannot be read; the message names the file and line."""


@dataclass
class RawRow:
    """One manifest row before validation: its 1-based line (or row number) and content."""

    line: int
    data: dict[str, Any] | None
    raw: str
    error: str | None = None  # set when the row is unusable before any field check


@dataclass
class ValidRow:
    """Field-validated row; media paths are still unchecked strings."""

    line: int
    id: str
    task: str
    media_kind: str  # image | video | views
    media: list[str]  # one path, or the views
    candidate: str
    references: list[str]
    question: str | None
    system: str | None
    labels: dict[str, float | list[float]]
    extra: dict[str, Any] = field(default_factory=dict)


def text_problem(value: str) -> str | None:
    """Return why a text is unacceptable (lone surrogates, control characters), else None."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "not valid Unicode (lone surrogate escape)"
    bad = [c for c in value if unicodedata.category(c) == "Cc" and c not in _ALLOWED_CONTROL]
    if bad:
        shown = ", ".join(sorted({f"U+{ord(c):04X}" for c in bad}))
        return f"contains control characters ({shown})"
    return None


def read_rows(path: str | Path) -> Iterator[RawRow]:
    """Yield raw rows from a ``.jsonl``/``.json``-lines, ``.csv`` or ``.parquet`` manifest.

    Raises:
        ManifestError: the file is missing, of an unknown kind, or a JSONL line is not JSON
            (the error names the file and line: a broken line could hide any number of items,
            so the stage stops rather than guess).
    """
    p = Path(path)
    if not p.is_file():
        raise ManifestError(f"{p}: manifest not found")
    suffix = p.suffix.lower()
    if suffix in {".jsonl", ".ndjson", ".json"}:
        yield from _read_jsonl(p)
    elif suffix == ".csv":
        yield from _read_csv(p)
    elif suffix == ".parquet":
        yield from _read_parquet(p)
    else:
        raise ManifestError(f"{p}: unknown manifest kind {suffix!r} (use .jsonl, .csv, .parquet)")


def _read_jsonl(p: Path) -> Iterator[RawRow]:
    with p.open("rb") as handle:
        for line_no, raw_bytes in enumerate(handle, start=1):
            if not raw_bytes.strip():
                continue
            try:
                text = raw_bytes.decode("utf-8")
            except UnicodeDecodeError as exc:
                # Keep the row (quarantined) rather than fail: the rest of the file is readable.
                shown = raw_bytes.decode("utf-8", errors="replace").strip()
                yield RawRow(line_no, None, shown[:500],
                             f"not valid UTF-8 (byte {exc.start}: {raw_bytes[exc.start]:#04x})")
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ManifestError(
                    f"{p}:{line_no}: not valid JSON ({exc.msg} at column {exc.colno})"
                ) from exc
            if not isinstance(obj, dict):
                yield RawRow(line_no, None, text.strip()[:500],
                             f"row is a JSON {type(obj).__name__}, not an object")
                continue
            yield RawRow(line_no, obj, text.strip()[:500])


def _maybe_json(value: str) -> Any:
    value = value.strip()
    if value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _read_csv(p: Path) -> Iterator[RawRow]:
    try:
        with p.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            for row_no, row in enumerate(reader, start=2):  # line 1 is the header
                obj: dict[str, Any] = {}
                for key, value in row.items():
                    if key is None or value is None or value == "":
                        continue
                    # List/dict columns (references, views, labels) are JSON inside the cell.
                    obj[key] = _maybe_json(value) if key in {"references", "views", "labels"} \
                        else value
                yield RawRow(row_no, obj, json.dumps(row, ensure_ascii=False)[:500])
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{p}: not valid UTF-8 ({exc})") from exc
    except csv.Error as exc:
        raise ManifestError(f"{p}: CSV error: {exc}") from exc


def _read_parquet(p: Path) -> Iterator[RawRow]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(p)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a broken file
        raise ManifestError(f"{p}: not a readable Parquet file ({exc})") from exc
    for row_no, row in enumerate(table.to_pylist(), start=1):
        obj = {k: v for k, v in row.items() if v is not None}
        if isinstance(obj.get("labels"), str):
            obj["labels"] = _maybe_json(obj["labels"])
        yield RawRow(row_no, obj, json.dumps(obj, ensure_ascii=False, default=str)[:500])


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def validate_fields(row: RawRow) -> tuple[ValidRow | None, list[str]]:
    """Check types and texts of one row. Returns (row, []) or (None, reasons)."""
    if row.data is None:
        return None, [row.error or "unreadable row"]
    d = row.data
    reasons: list[str] = []

    def text_field(key: str, required: bool) -> str | None:
        value = d.get(key)
        if value is None:
            if required:
                reasons.append(f"missing {key!r}")
            return None
        if not isinstance(value, str):
            reasons.append(f"{key!r} must be a string, got {type(value).__name__}")
            return None
        problem = text_problem(value)
        if problem:
            reasons.append(f"{key!r} {problem}")
            return None
        return value

    item_id = text_field("id", required=True)
    if item_id is not None and not item_id.strip():
        reasons.append("'id' is empty")
    task = text_field("task", required=False) or "caption"
    if task not in TASKS:
        reasons.append(f"'task' must be one of {', '.join(TASKS)}, got {task!r}")

    present = [k for k in MEDIA_KEYS if d.get(k) not in (None, "", [])]
    media: list[str] = []
    kind = ""
    if len(present) != 1:
        reasons.append(
            "exactly one of 'image', 'video' or 'views' is required"
            + (f" (got {', '.join(present)})" if present else "")
        )
    else:
        kind = present[0]
        value = d[kind]
        if kind == "views":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                reasons.append("'views' must be a list of paths")
            else:
                media = list(value)
        elif not isinstance(value, str):
            reasons.append(f"{kind!r} must be a path string, got {type(value).__name__}")
        else:
            media = [value]
        for m in media:
            problem = text_problem(m)
            if problem:
                reasons.append(f"media path {problem}")

    candidate = text_field("candidate", required=True)
    if candidate is not None and not candidate.strip():
        reasons.append("'candidate' is empty")

    references: list[str] = []
    refs = d.get("references", [])
    if isinstance(refs, str):
        refs = [refs]  # a lone reference string is unambiguous; accept it
    if not isinstance(refs, list):
        reasons.append(f"'references' must be a list of strings, got {type(refs).__name__}")
    else:
        for i, ref in enumerate(refs):
            if not isinstance(ref, str):
                reasons.append(f"references[{i}] must be a string, got {type(ref).__name__}")
            elif (problem := text_problem(ref)) is not None:
                reasons.append(f"references[{i}] {problem}")
            elif ref.strip():
                references.append(ref)

    question = text_field("question", required=False)
    system = text_field("system", required=False)

    labels: dict[str, float | list[float]] = {}
    raw_labels = d.get("labels", {})
    if not isinstance(raw_labels, dict):
        reasons.append(f"'labels' must be an object, got {type(raw_labels).__name__}")
    else:
        for name, value in raw_labels.items():
            if isinstance(value, list):
                nums = [_number(v) for v in value]
                if not nums or any(n is None for n in nums):
                    reasons.append(f"labels[{name!r}] must be a number or a list of numbers")
                else:
                    labels[name] = [n for n in nums if n is not None]
            else:
                num = _number(value)
                if num is None:
                    reasons.append(f"labels[{name!r}] must be a number or a list of numbers")
                else:
                    labels[name] = num

    if reasons:
        return None, reasons
    assert item_id is not None and candidate is not None
    extra = {k: v for k, v in d.items() if k not in KNOWN_KEYS}
    return ValidRow(
        line=row.line, id=item_id, task=task, media_kind=kind, media=media,
        candidate=candidate, references=references, question=question, system=system,
        labels=labels, extra=extra,
    ), []
