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
are kept in the ``extra`` column as JSON (see :func:`to_json_value` for values JSON cannot hold).

This module only checks field types and text; files are checked in :mod:`capjudge.ingest`.
A row that fails is not an exception: it becomes a quarantine reason.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import decimal
import json
import math
import numbers
import unicodedata
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capjudge.records import JSONValue

TASKS = ("caption", "vqa", "reg", "vdu")
MEDIA_KEYS = ("image", "video", "views")
KNOWN_KEYS = {"id", "task", *MEDIA_KEYS, "candidate", "references", "question", "system", "labels"}
# Tab, newline and carriage return are ordinary in captions; every other control character is a
# sign of binary junk or an injection attempt and is refused.
_ALLOWED_CONTROL = {"\t", "\n", "\r"}
# Characters that draw nothing but are not whitespace to str.isspace(): a text made only of these
# (and whitespace) is empty to a reader, so it is treated as empty. Format characters (category Cf:
# U+200B..U+200D, U+2060, U+FEFF, U+00AD, ...) are matched by category; these are the fillers and
# selectors of other categories.
_INVISIBLE = frozenset(
    {"\u034f", "\u115f", "\u1160", "\u17b4", "\u17b5", "\u2800", "\u3164", "\uffa0"}
    | {chr(c) for c in range(0xFE00, 0xFE10)}  # variation selectors
    | {chr(c) for c in range(0xE0100, 0xE01F0)}  # variation selectors supplement
)
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Labels further than this from zero are not ratings but junk (1e300, overflowed exports).
MAX_ABS_LABEL = 1e6
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_UTF8_BOM = b"\xef\xbb\xbf"
# csv's default field limit (131,072 characters) would make one long caption fail the whole
# file; long texts are refused per row instead (IngestConfig.max_candidate_chars).
_CSV_FIELD_LIMIT = 2**31 - 1


class ManifestError(Exception):
    """The manifest as a whole cannot be read; the message names the file and line."""


@dataclass
class RawRow:
    """One manifest row before validation: its 1-based line (or row number) and content."""

    line: int
    data: Mapping[str, object] | None
    """The row's fields as read (JSON values; Parquet also timestamps, decimals, bytes...)."""
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
    extra: dict[str, JSONValue] = field(default_factory=dict)


def text_problem(value: str) -> str | None:
    """Return why a text is unacceptable, else None.

    Refused: lone surrogates, control characters, and the bidirectional embedding, override
    and isolate controls (U+202A-U+202E, U+2066-U+2069), which make a text display in another
    order than a judge reads it ("Trojan Source"); the plain direction marks U+200E/U+200F of
    right-to-left text are accepted.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "not valid Unicode (lone surrogate escape)"
    bad = [c for c in value if unicodedata.category(c) == "Cc" and c not in _ALLOWED_CONTROL]
    if bad:
        shown = ", ".join(sorted({f"U+{ord(c):04X}" for c in bad}))
        return f"contains control characters ({shown})"
    bidi = {c for c in value if c in _BIDI_CONTROLS}
    if bidi:
        shown = ", ".join(sorted(f"U+{ord(c):04X}" for c in bidi))
        return f"contains bidirectional override/isolate characters ({shown})"
    return None


def is_blank(value: str) -> bool:
    """Return True when a text shows nothing: only whitespace, format or filler characters.

    Args:
        value: the text.

    Returns:
        True for ``""``, ``"   "`` and texts made only of zero-width or invisible characters
        (U+200B, U+200C, U+200D, U+2060, U+FEFF, Hangul fillers, variation selectors, ...).
    """
    return all(c.isspace() or c in _INVISIBLE or unicodedata.category(c) == "Cf" for c in value)


def safe_text(value: str) -> str:
    """Return ``value`` unchanged if it is valid Unicode, else with lone surrogates escaped.

    Quarantine tables must always be writable (Parquet strings are UTF-8), even when the row
    being quarantined is exactly the one with a lone surrogate in it.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _surrogate_escaped_byte(value: str) -> int | None:
    """The first undecodable byte of a text decoded with ``surrogateescape``, else None."""
    for c in value:
        if "\udc80" <= c <= "\udcff":
            return ord(c) - 0xDC00
    return None


def to_json_value(value: object) -> JSONValue:
    """Convert one manifest value to something ``json.dumps(..., allow_nan=False)`` writes.

    JSON has no timestamps, decimals, bytes or non-finite numbers, but Parquet (and Python's own
    JSON reader, for ``NaN``) can produce them, so they are encoded without loss:

    - ``datetime``/``date``/``time`` (also pandas timestamps with nanoseconds): ISO 8601 text;
    - ``timedelta``: an ISO 8601 duration (``P1DT0H0M2.5S``);
    - ``Decimal``: its exact decimal text (``"1.2345678901234567890123"``);
    - ``bytes``: ``{"$base64": "<standard base64>"}``;
    - ``NaN``/``inf`` floats: ``{"$float": "NaN" | "Infinity" | "-Infinity"}``;
    - UUIDs: their text; Arrow intervals (named tuples): an object of their fields.

    Args:
        value: a value from a JSONL, CSV or Parquet row.

    Returns:
        The JSON-ready value.

    Raises:
        ValueError: a type with no faithful JSON form, or text that is not valid Unicode; the
            message is a readable quarantine reason.
    """
    if value is None or isinstance(value, (bool, str)):
        if isinstance(value, str) and (problem := _unicode_problem(value)):
            raise ValueError(problem)
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        if math.isfinite(number):
            return number
        return {"$float": "NaN" if math.isnan(number) else
                ("Infinity" if number > 0 else "-Infinity")}
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()  # pandas.Timestamp is a datetime and keeps its nanoseconds
    if isinstance(value, dt.timedelta):
        iso = getattr(value, "isoformat", None)  # pandas.Timedelta (nanoseconds) has one
        return str(iso()) if callable(iso) else _iso_duration(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$base64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # e.g. pyarrow MonthDayNano
        fields: tuple[str, ...] = value._fields
        return {k: to_json_value(v) for k, v in zip(fields, value, strict=True)}
    if isinstance(value, dict):
        out: dict[str, JSONValue] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"object key {key!r} is not a string")
            if problem := _unicode_problem(key):
                raise ValueError(f"key {safe_text(key)!r} {problem}")
            out[key] = to_json_value(item)
        return out
    if isinstance(value, (list, tuple)):
        return [to_json_value(v) for v in value]
    raise ValueError(f"a value of type {type(value).__name__} has no JSON form")


def _unicode_problem(value: str) -> str | None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode (lone surrogate escape)"
    return None


def _iso_duration(value: dt.timedelta) -> str:
    """``timedelta`` as ISO 8601 ``PnDTnHnMn.nnnnnnS`` (exact to the microsecond)."""
    sign = "-" if value < dt.timedelta(0) else ""
    micro = abs(value) // dt.timedelta(microseconds=1)
    days, micro = divmod(micro, 86_400_000_000)
    hours, micro = divmod(micro, 3_600_000_000)
    minutes, micro = divmod(micro, 60_000_000)
    seconds, micro = divmod(micro, 1_000_000)
    return f"{sign}P{days}DT{hours}H{minutes}M{seconds}.{micro:06d}S"


def read_rows(path: str | Path) -> Iterator[RawRow]:
    """Yield raw rows from a ``.jsonl``/``.json``-lines, ``.csv`` or ``.parquet`` manifest.

    A leading UTF-8 byte order mark is skipped (JSONL and CSV). A row that can be delimited but
    not used (not UTF-8, not an object, an unreadable Parquet value) comes with ``error`` set.

    Raises:
        ManifestError: the file is missing, of an unknown kind, UTF-16 encoded, or a JSONL line
            is not JSON (the error names the file and line: a broken line could hide any number
            of items, so the stage stops rather than guess).
    """
    p = Path(path)
    if not p.is_file():
        raise ManifestError(f"{p}: manifest not found")
    suffix = p.suffix.lower()
    _check_not_compressed(p, suffix)
    if suffix in {".jsonl", ".ndjson", ".json"}:
        if _starts_with_array(p):
            yield from _read_json_array(p)
        else:
            yield from _read_jsonl(p)
    elif suffix == ".csv":
        yield from _read_csv(p)
    elif suffix == ".parquet":
        yield from _read_parquet(p)
    else:
        raise ManifestError(f"{p}: unknown manifest kind {suffix!r} (use .jsonl, .csv, .parquet)")


_COMPRESSED = ((b"\x1f\x8b", "gzip", "gunzip"), (b"BZh", "bzip2", "bunzip2"),
               (b"\xfd7zXZ\x00", "xz", "unxz"), (b"\x28\xb5\x2f\xfd", "zstd", "unzstd"),
               (b"PK\x03\x04", "zip", "unzip"))


def _check_not_compressed(p: Path, suffix: str) -> None:
    """A compressed file under a text manifest's name is named as such, not read as text."""
    if suffix == ".parquet":
        return
    try:
        with p.open("rb") as handle:
            head = handle.read(8)
    except OSError:
        return
    for magic, kind, tool in _COMPRESSED:
        if head.startswith(magic):
            raise ManifestError(f"{p}: the file is {kind}-compressed, not {suffix} text; "
                                f"decompress it first ({tool} {p.name})")


def _check_not_utf16(p: Path, head: bytes) -> None:
    # A UTF-16 file (Windows "Unicode" text) is unreadable as a whole; saying so beats
    # quarantining every line as "not valid UTF-8".
    if head.startswith(_UTF16_BOMS):
        raise ManifestError(f"{p}:1: the file is UTF-16 encoded; save it as UTF-8")


class _Duplicates(list[str]):
    """Keys seen twice in one JSON object while parsing (json keeps the last silently).

    ``by_object`` maps each object that held a key twice (by id; the objects are kept alive
    in ``_keep``) to those keys, so an array's elements can be told apart.
    """

    def __init__(self) -> None:
        super().__init__()
        self.by_object: dict[int, list[str]] = {}
        self._keep: list[dict[str, JSONValue]] = []

    def hook(self, pairs: list[tuple[str, JSONValue]]) -> dict[str, JSONValue]:
        out: dict[str, JSONValue] = {}
        dups: list[str] = []
        for key, value in pairs:
            if key in out and key not in dups:
                dups.append(key)
            out[key] = value
        if dups:
            self.by_object[id(out)] = dups
            self._keep.append(out)
            self.extend(k for k in dups if k not in self)
        return out

    def within(self, value: JSONValue) -> list[str]:
        """The duplicated keys of ``value`` and of every object nested in it."""
        found: list[str] = []
        stack = [value]
        while stack:
            v = stack.pop()
            if isinstance(v, dict):
                found += [k for k in self.by_object.get(id(v), []) if k not in found]
                stack.extend(v.values())
            elif isinstance(v, list):
                stack.extend(v)
        return found


def _loads(text: str) -> tuple[JSONValue, list[str]]:
    """``json.loads`` that also returns the keys an object held twice."""
    dups = _Duplicates()
    return json.loads(text, object_pairs_hook=dups.hook), list(dups)


def _duplicate_error(dups: list[str]) -> str | None:
    if not dups:
        return None
    shown = ", ".join(repr(safe_text(k)) for k in dups[:5])
    return f"duplicate key(s) {shown} in the row (which value is meant is unknown)"


def _starts_with_array(p: Path) -> bool:
    """Whether a JSON manifest's first non-blank byte (after a BOM) opens an array."""
    with p.open("rb") as handle:
        head = handle.read(4096)
    _check_not_utf16(p, head)
    return head.removeprefix(_UTF8_BOM).lstrip()[:1] == b"["


def _read_json_array(p: Path) -> Iterator[RawRow]:
    """A ``.json`` manifest holding one array of row objects (row n is element n, 1-based)."""
    dups = _Duplicates()
    try:
        text = p.read_bytes().removeprefix(_UTF8_BOM).decode("utf-8")
        rows = json.loads(text, object_pairs_hook=dups.hook)
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{p}: not valid UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{p}:{exc.lineno}: not valid JSON ({exc.msg} at column "
                            f"{exc.colno}); a .json manifest is one array of objects or one "
                            "object per line") from None
    except (ValueError, RecursionError) as exc:
        raise ManifestError(f"{p}: cannot read the JSON array ({exc})") from None
    if not isinstance(rows, list):
        raise ManifestError(f"{p}: expected an array of objects")
    for index, obj in enumerate(rows, start=1):
        raw = safe_text(json.dumps(obj, ensure_ascii=False))[:500]
        if not isinstance(obj, dict):
            yield RawRow(index, None, raw, f"row is a JSON {type(obj).__name__}, not an object")
            continue
        yield RawRow(index, obj, raw, _duplicate_error(dups.within(obj)))


def _read_jsonl(p: Path) -> Iterator[RawRow]:
    with p.open("rb") as handle:
        _check_not_utf16(p, handle.read(2))
        handle.seek(0)
        for line_no, raw_bytes in enumerate(handle, start=1):
            # A UTF-8 byte order mark (Windows editors write one; concatenated exports can carry
            # one per part) is not content: json.loads would refuse the line over it.
            raw_bytes = raw_bytes.removeprefix(_UTF8_BOM)
            if not raw_bytes.strip():
                continue
            try:
                text = raw_bytes.decode("utf-8")
            except UnicodeDecodeError as exc:
                # Keep the row (quarantined) rather than fail: the rest of the file is readable.
                yield _non_utf8_row(line_no, raw_bytes, exc)
                continue
            try:
                obj, dups = _loads(text)
            except json.JSONDecodeError as exc:
                raise ManifestError(
                    f"{p}:{line_no}: not valid JSON ({exc.msg} at column {exc.colno})"
                ) from exc
            except RecursionError:
                # Valid JSON nested deeper than Python's recursion limit: still a row.
                yield RawRow(line_no, None, text.strip()[:500], "row nested too deeply")
                continue
            except ValueError:
                # Valid JSON with an integer over Python's 4,300-digit limit: still a row. Read
                # it again without such integers, only to name the row's id in the quarantine.
                try:
                    obj = json.loads(text, parse_int=lambda s: None if len(s) > 4300 else int(s))
                except (ValueError, RecursionError):
                    obj = None
                row_id = obj.get("id") if isinstance(obj, dict) else None
                yield RawRow(line_no, {"id": row_id} if isinstance(row_id, str) else None,
                             text.strip()[:500], "row holds an integer too long to read "
                             "(over 4,300 digits)")
                continue
            if not isinstance(obj, dict):
                yield RawRow(line_no, None, text.strip()[:500],
                             f"row is a JSON {type(obj).__name__}, not an object")
                continue
            # The row keeps its id (for the quarantine table) but is not used.
            yield RawRow(line_no, obj, text.strip()[:500], _duplicate_error(dups))


def _non_utf8_row(line_no: int, raw_bytes: bytes, exc: UnicodeDecodeError) -> RawRow:
    """A quarantined row for a line that is not UTF-8; its id is kept when it can be read."""
    shown = raw_bytes.decode("utf-8", errors="replace").strip()
    data: dict[str, object] | None = None
    try:
        obj: JSONValue = json.loads(raw_bytes.decode("utf-8", errors="surrogateescape"))
    except (ValueError, RecursionError):
        obj = None
    row_id = obj.get("id") if isinstance(obj, dict) else None
    if isinstance(row_id, str) and _surrogate_escaped_byte(row_id) is None:
        data = {"id": row_id}  # only the id: the rest is not trustworthy text
    return RawRow(line_no, data, shown[:500],
                  f"not valid UTF-8 (byte {exc.start}: {raw_bytes[exc.start]:#04x})")


def _maybe_json(value: str) -> JSONValue:
    value = value.strip()
    if value[:1] in "[{":
        try:
            parsed: JSONValue = json.loads(value)
        except (ValueError, RecursionError):  # left as text: the field check names the problem
            return value
        return parsed
    return value


def _read_csv(p: Path) -> Iterator[RawRow]:
    with p.open("rb") as probe:
        _check_not_utf16(p, probe.read(2))
    if csv.field_size_limit() < _CSV_FIELD_LIMIT:
        csv.field_size_limit(_CSV_FIELD_LIMIT)
    try:
        # utf-8-sig drops the byte order mark Excel's "CSV UTF-8" writes (otherwise the first
        # header would be "\ufeffid" and every row "missing 'id'"); surrogateescape keeps a row
        # with a stray Latin-1 byte readable so it alone is quarantined, not the whole file.
        with p.open(newline="", encoding="utf-8-sig", errors="surrogateescape") as handle:
            text = handle.read()
    except OSError as exc:
        raise ManifestError(f"{p}: cannot read ({exc})") from None
    lines = _physical_lines(text)
    if not lines:
        return
    try:
        header = next(csv.reader([lines[0]], strict=True))
    except (csv.Error, StopIteration) as exc:
        raise ManifestError(f"{p}:1: CSV header cannot be read ({exc})") from None
    _check_columns(p, header)
    for row_no, fields, error in _csv_records(lines, len(header)):
        if error is not None:
            raw = safe_text("".join(fields))[:500]
            yield RawRow(row_no, None, raw, error)
            continue
        # csv.DictReader's layout: cells beyond the header are a list under the key None.
        row: dict[str | None, str | list[str]] = dict(zip(header, fields, strict=False))
        if len(fields) > len(header):
            row[None] = fields[len(header):]
        raw = safe_text(json.dumps(row, ensure_ascii=False))[:500]
        if None in row:
            row_id = row.get("id")
            yield RawRow(row_no, {"id": row_id} if isinstance(row_id, str) else None, raw,
                         f"row has {len(fields)} fields, the header {len(header)} (a comma "
                         "in an unquoted field?)")
            continue
        bad = _row_bad_byte(row)
        if bad is not None:
            row_id = row.get("id")
            data = {"id": row_id} if isinstance(row_id, str) and \
                _surrogate_escaped_byte(row_id) is None else None
            yield RawRow(row_no, data, raw, f"not valid UTF-8 (byte {bad:#04x})")
            continue
        obj: dict[str, object] = {}
        broken: list[str] = []
        for key, value in row.items():
            if key is None or not isinstance(value, str) or value == "":
                continue
            # List/dict columns (references, views, labels) are JSON inside the cell.
            obj[key] = _maybe_json(value) if key in _JSON_COLUMNS else value
            if key in _JSON_COLUMNS and value.strip()[:1] in ("[", "{") \
                    and isinstance(obj[key], str):
                broken.append(key)
        error = (f"column(s) {', '.join(map(repr, broken))} start like JSON but are not "
                 "valid JSON") if broken else None
        yield RawRow(row_no, obj, raw, error)


_JSON_COLUMNS = frozenset({"references", "views", "labels"})


def _check_columns(p: Path, columns: list[str]) -> None:
    """Refuse a table without the columns every row needs (rather than quarantine them all).

    Raises:
        ManifestError: no ``id`` or no ``candidate`` column, or no media column.
    """
    missing = [c for c in ("id", "candidate") if c not in columns]
    if not any(c in columns for c in MEDIA_KEYS):
        missing.append("image/video/views")
    if missing:
        raise ManifestError(f"{p}:1: no {', '.join(repr(m) for m in missing)} column "
                            f"(columns: {', '.join(map(repr, columns[:20]))})")


# The most physical lines one CSV record may span (a caption with line breaks); an unclosed
# quote would otherwise swallow the rest of the file into one field.
_CSV_MAX_SPAN = 64


def _physical_lines(text: str) -> list[str]:
    """``text`` split after each line feed (line ends kept; other separators are content)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _one_record(text: str) -> list[str] | None:
    """The fields of ``text`` if it is exactly one well-formed CSV record, else None."""
    try:
        rows = list(csv.reader([text] if "\n" not in text.rstrip("\r\n") else
                               text.splitlines(keepends=True), strict=True))
    except csv.Error:
        return None
    return rows[0] if len(rows) == 1 else None


def _csv_records(lines: list[str], width: int) -> Iterator[tuple[int, list[str], str | None]]:
    """(first line number, fields, error) for every record after the header line.

    A record is the shortest run of physical lines that parses as one well-formed record
    (strict quoting). A run of several lines (a quoted line break) is accepted only when none
    of its continuation lines is on its own a complete record of the header's width, so an
    unclosed quote can never merge the next rows into a field: the line that opens it is
    quarantined (``error``) and reading resumes on the next line.
    """
    i = 1
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        found: tuple[int, list[str]] | None = None
        for j in range(i, min(len(lines), i + _CSV_MAX_SPAN)):
            fields = _one_record("".join(lines[i:j + 1]))
            if fields is not None:
                found = (j, fields)
                break
        if found is not None and found[0] > i and any(
                (alone := _one_record(line)) is not None and len(alone) == width
                and alone[0].strip() for line in lines[i + 1:found[0] + 1]):
            found = None  # it would swallow whole rows: an unclosed quote, not a line break
        if found is None:
            yield i + 1, [lines[i].rstrip("\r\n")], (
                "CSV parse error: unclosed or misplaced quote (the row is quarantined alone; "
                "the next lines are read as their own rows)")
            i += 1
            continue
        j, fields = found
        yield i + 1, fields, None
        i = j + 1


def _row_bad_byte(row: Mapping[str | None, str | list[str]]) -> int | None:
    """The first undecodable byte (decoded with surrogateescape) in a CSV row, else None."""
    for part in [*row.keys(), *row.values()]:
        texts = part if isinstance(part, list) else [part]  # restkey collects extra cells
        for text in texts:
            if isinstance(text, str) and (byte := _surrogate_escaped_byte(text)) is not None:
                return byte
    return None


def _read_parquet(p: Path) -> Iterator[RawRow]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(p)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a broken file
        raise ManifestError(f"{p}: not a readable Parquet file ({exc})") from exc
    _check_columns(p, list(table.column_names))
    columns: dict[str, list[Any]] = {}
    errors: dict[int, str] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        columns[name] = _arrow_column(name, column, errors)
    for index in range(table.num_rows):
        obj = {name: values[index] for name, values in columns.items()
               if values[index] is not None}
        labels = obj.get("labels")
        if isinstance(labels, str):
            obj["labels"] = _maybe_json(labels)
        elif isinstance(labels, dict):
            # A struct or map column: a null entry means "no label for this criterion".
            obj["labels"] = {k: v for k, v in labels.items() if v is not None}
        raw = safe_text(json.dumps(obj, ensure_ascii=False, default=str))[:500]
        yield RawRow(index + 1, obj, raw, errors.get(index))


def _arrow_column(name: str, column: Any, errors: dict[int, str]) -> list[Any]:
    """Python values of one Parquet column; a value that cannot convert is a row error."""
    import pyarrow as pa

    typ = column.type
    if pa.types.is_time64(typ) and typ.unit == "ns":
        # datetime.time has microseconds only, and pyarrow silently truncates to them.
        return [None if v is None else _time_ns(v)
                for v in column.cast(pa.int64()).to_pylist()]
    # ``column`` is a pyarrow ChunkedArray (untyped here): to_pylist gives the column's values.
    values: list[Any]
    try:
        values = column.to_pylist()
    except Exception:  # noqa: BLE001 - e.g. a timestamp out of datetime's range
        values = []
        for index in range(len(column)):
            try:
                values.append(column[index].as_py())
            except Exception as exc:  # noqa: BLE001 - any conversion failure is per value
                values.append(None)
                errors.setdefault(index, f"column {name!r}: value cannot be read ({exc})")
    if _has_map(typ):
        values = [_from_arrow(v, typ) for v in values]
    return values


def _time_ns(nanoseconds: int) -> str:
    seconds, ns = divmod(nanoseconds, 1_000_000_000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}.{ns:09d}"


def _has_map(typ: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_map(typ):
        return True
    if pa.types.is_struct(typ):
        return any(_has_map(f.type) for f in typ)
    if pa.types.is_dictionary(typ):
        return _has_map(typ.value_type)
    if hasattr(typ, "value_type"):  # list, large_list, fixed_size_list, list_view
        return _has_map(typ.value_type)
    return False


def _from_arrow(value: Any, typ: Any) -> Any:
    """Turn Arrow maps (which pyarrow gives as lists of key/value tuples) into dicts.

    A map whose keys are unique strings becomes an object, like a JSON object would; any other
    map (duplicate or non-string keys) stays a list of ``[key, value]`` pairs, losing nothing.
    """
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_map(typ):
        pairs = [(k, _from_arrow(v, typ.item_type)) for k, v in value]
        keys = [k for k, _ in pairs]
        if all(isinstance(k, str) for k in keys) and len(set(keys)) == len(keys):
            return dict(pairs)
        return [[k, v] for k, v in pairs]
    if pa.types.is_struct(typ):
        return {f.name: _from_arrow(value.get(f.name), f.type) for f in typ}
    if pa.types.is_dictionary(typ):
        return _from_arrow(value, typ.value_type)
    if hasattr(typ, "value_type") and isinstance(value, list):
        return [_from_arrow(v, typ.value_type) for v in value]
    return value


@dataclass(frozen=True)
class FieldLimits:
    """Caps on what a row may hold besides its candidate (``params.yaml: ingest``).

    Attributes:
        max_reference_chars: the longest reference (references are sent whole; None: no
            limit).
        max_references: the most references a row may have (None: no limit).
        label_scales: a declared scale per label name (``{"overall": [1, 5]}``): a label
            outside its scale is refused. Labels without one must lie within
            +-:data:`MAX_ABS_LABEL`.
    """

    max_reference_chars: int | None = 20_000
    max_references: int | None = 100
    label_scales: dict[str, tuple[float, float]] = field(default_factory=dict)

    def label_problem(self, name: str, value: float | None) -> str | None:
        """Why a finite label value is refused (outside its declared scale or absurd), else None."""
        if value is None:
            return None
        scale = self.label_scales.get(name)
        if scale is not None:
            low, high = scale
            if not low <= value <= high:
                return f"is {value:g}, outside its declared scale {low:g}..{high:g}"
            return None
        if abs(value) > MAX_ABS_LABEL:
            return f"is {value:g}, not a rating (|label| > {MAX_ABS_LABEL:g})"
        return None


def _number(value: Any) -> tuple[float | None, str | None]:
    """A label value as a finite float, or (None, what is wrong with it)."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, decimal.Decimal)):
        return None, f"must be a number or a list of numbers, got {type(value).__name__}"
    try:
        number = float(value)
    except OverflowError:
        # float(int) raises for integers beyond ~1.8e308 (the 401-digit probe).
        try:
            size = f"{len(str(abs(value)))} digits"
        except ValueError:  # str() refuses over 4,300 digits (only a Python caller gets here)
            size = "over 4,300 digits"
        return None, f"must be a finite number, got an integer of {size}"
    if math.isnan(number):
        return None, "must be a finite number, got NaN"
    if not math.isfinite(number):
        # A huge Decimal becomes inf here without raising.
        return None, "must be a finite number, got an infinite or out-of-range value"
    return number, None


def validate_fields(row: RawRow, max_candidate_chars: int | None = None,
                    limits: FieldLimits | None = None) -> tuple[ValidRow | None, list[str]]:
    """Check types and texts of one row.

    Args:
        row: a row from :func:`read_rows`.
        max_candidate_chars: the longest candidate accepted, in characters (None: no limit). A
            longer one is refused rather than cut: a judge must see the whole text it scores.
        limits: caps on references and label values (default: :class:`FieldLimits`).

    Returns:
        ``(row, [])`` for a valid row, ``(None, reasons)`` otherwise.
    """
    if row.error is not None or row.data is None:
        return None, [row.error or "unreadable row"]
    d = row.data
    # Each check appends its reasons, in the order of the fields (the order users see).
    reasons: list[str] = []
    item_id = _text_field(d, "id", True, reasons)
    if item_id is not None and is_blank(item_id):
        reasons.append("'id' is empty")
    task = _text_field(d, "task", False, reasons) or "caption"
    if task not in TASKS:
        reasons.append(f"'task' must be one of {', '.join(TASKS)}, got {task!r}")
    kind, media = _media_field(d, reasons)
    candidate = _text_field(d, "candidate", True, reasons, max_chars=max_candidate_chars)
    if candidate is not None and is_blank(candidate):
        reasons.append("'candidate' is empty" + (
            " (only invisible characters)" if candidate.strip() else ""))
    limits = limits or FieldLimits()
    references = _references_field(d, limits, reasons)
    question = _text_field(d, "question", False, reasons)
    system = _text_field(d, "system", False, reasons)
    labels = _labels_field(d, limits, reasons)
    extra = _extra_fields(d, reasons)
    if reasons:
        return None, reasons
    assert item_id is not None and candidate is not None
    return ValidRow(
        line=row.line, id=item_id, task=task, media_kind=kind, media=media,
        candidate=candidate, references=references, question=question, system=system,
        labels=labels, extra=extra,
    ), []


def _text_field(d: Mapping[str, object], key: str, required: bool, reasons: list[str],
                max_chars: int | None = None) -> str | None:
    """A text field's value, or None with the reason appended (absent, not text, too long)."""
    value = d.get(key)
    if value is None:
        if required:
            reasons.append(f"missing {key!r}")
        return None
    if not isinstance(value, str):
        reasons.append(f"{key!r} must be a string, got {type(value).__name__}")
        return None
    if max_chars is not None and len(value) > max_chars:
        # Checked first: scanning megabytes for control characters is wasted work.
        reasons.append(f"{key!r} is too long ({len(value):,} characters; "
                       f"the limit is {max_chars:,})")
        return None
    problem = text_problem(value)
    if problem:
        reasons.append(f"{key!r} {problem}")
        return None
    return value


def _media_field(d: Mapping[str, object], reasons: list[str]) -> tuple[str, list[str]]:
    """The media kind and paths (exactly one of image, video, views); reasons appended."""
    present = [k for k in MEDIA_KEYS if d.get(k) not in (None, "", [])]
    media: list[str] = []
    if len(present) != 1:
        reasons.append(
            "exactly one of 'image', 'video' or 'views' is required"
            + (f" (got {', '.join(present)})" if present else "")
        )
        return "", media
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
    return kind, media


def _references_field(d: Mapping[str, object], limits: FieldLimits, reasons: list[str]
                      ) -> list[str]:
    """The non-blank references; reasons appended for a wrong type, too many or a bad one."""
    references: list[str] = []
    refs = d.get("references", [])
    if isinstance(refs, str):
        refs = [refs]  # a lone reference string is unambiguous; accept it
    if not isinstance(refs, list):
        reasons.append(f"'references' must be a list of strings, got {type(refs).__name__}")
    elif limits.max_references is not None and len(refs) > limits.max_references:
        # References are sent in the prompt, whole: 10,000 of them are not a caption's.
        reasons.append(f"too many references ({len(refs):,}; the limit is "
                       f"{limits.max_references:,}, max_references)")
    else:
        for i, ref in enumerate(refs):
            if isinstance(ref, str) and limits.max_reference_chars is not None \
                    and len(ref) > limits.max_reference_chars:
                reasons.append(f"references[{i}] is too long ({len(ref):,} characters; the "
                               f"limit is {limits.max_reference_chars:,}, "
                               "max_reference_chars)")
            elif not isinstance(ref, str):
                reasons.append(f"references[{i}] must be a string, got {type(ref).__name__}")
            elif (problem := text_problem(ref)) is not None:
                reasons.append(f"references[{i}] {problem}")
            elif not is_blank(ref):
                references.append(ref)
    return references


def _labels_field(d: Mapping[str, object], limits: FieldLimits, reasons: list[str]
                  ) -> dict[str, float | list[float]]:
    """The human labels (a number or a list of numbers each); reasons appended."""
    labels: dict[str, float | list[float]] = {}
    raw_labels = d.get("labels", {})
    if not isinstance(raw_labels, dict):
        reasons.append(f"'labels' must be an object, got {type(raw_labels).__name__}")
        return labels
    for name, value in raw_labels.items():
        if isinstance(value, list):
            if not value:
                reasons.append(f"labels[{name!r}] is an empty list")
                continue
            checked = [_number(v) for v in value]
            checked = [(n, why or limits.label_problem(name, n)) for n, why in checked]
            problems = [(i, bad) for i, (_, bad) in enumerate(checked) if bad]
            if problems:
                reasons.append(f"labels[{name!r}][{problems[0][0]}] {problems[0][1]}")
            else:
                labels[name] = [n for n, _ in checked if n is not None]
        else:
            num, why = _number(value)
            why = why or limits.label_problem(name, num)
            if why:
                reasons.append(f"labels[{name!r}] {why}")
            elif num is not None:
                labels[name] = num
    return labels


def _extra_fields(d: Mapping[str, object], reasons: list[str]) -> dict[str, JSONValue]:
    """The row's unknown keys as JSON values; reasons appended for what JSON cannot hold.

    Converted now, so a value JSON cannot hold is a reason here instead of a crash when the
    items table is written.
    """
    extra: dict[str, JSONValue] = {}
    for key, value in d.items():
        if key in KNOWN_KEYS:
            continue
        problem = _unicode_problem(key)
        if problem:
            reasons.append(f"extra key {safe_text(key)!r} {problem}")
            continue
        try:
            extra[key] = to_json_value(value)
        except ValueError as exc:
            reasons.append(f"extra {key!r} cannot be stored: {exc}")
    return extra


# -- the dataset card ------------------------------------------------------------------------
#
# What the rows cannot say about themselves: where the labels come from. A report must not
# describe a user's data with the bundled sample's provenance, and must not guess it from a
# path; the data declares it, in a small JSON file beside the manifest.

DATASET_CARD_KEYS = ("name", "protocol", "description")
"""The keys a dataset card may hold (each a string; all optional)."""


def dataset_card_path(manifest: str | Path) -> Path:
    """Where a manifest's dataset card lives: ``<stem>.dataset.json`` beside it.

    ``manifest.jsonl`` -> ``manifest.dataset.json``; ``my.csv`` -> ``my.dataset.json``.
    """
    p = Path(manifest)
    return p.with_name(f"{p.stem}.dataset.json")


def read_dataset_card(manifest: str | Path) -> dict[str, str]:
    """A manifest's dataset card (:func:`dataset_card_path`); empty when there is none.

    The card names the data set (``name``), the protocol its labels follow (``protocol``, a
    short id recorded with every agreement figure) and, in one sentence, what the labels are
    (``description``), e.g. ``{"name": "my-captions-v1", "protocol": "crowd-3",
    "description": "three crowd raters per caption, 1-5"}``.

    Raises:
        ManifestError: the card exists but is not a JSON object of known string keys.
    """
    path = dataset_card_path(manifest)
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ManifestError(f"{path}: dataset card is not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: dataset card must be a JSON object")
    unknown = sorted(set(data) - set(DATASET_CARD_KEYS))
    if unknown:
        raise ManifestError(f"{path}: unknown dataset card key(s) {', '.join(unknown)} "
                            f"(known: {', '.join(DATASET_CARD_KEYS)})")
    bad = sorted(k for k, v in data.items() if not isinstance(v, str))
    if bad:
        raise ManifestError(f"{path}: dataset card value(s) of {', '.join(bad)} must be text")
    return {k: data[k] for k in DATASET_CARD_KEYS if k in data}
