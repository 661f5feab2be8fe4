"""Reading a manifest file into raw rows: JSONL, a JSON array, CSV or Parquet.

:func:`read_rows` yields one :class:`RawRow` per row, with its 1-based line (or row number);
a row that cannot be read is a row with an ``error`` (quarantined by ingest with that reason),
never an exception. A file that cannot be read at all (compressed, UTF-16, not a manifest) is a
:class:`ManifestError` naming it. Field checks are :mod:`capjudge.manifest`'s.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capjudge.records import JSONValue

_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_UTF8_BOM = b"\xef\xbb\xbf"
# csv's default field limit (131,072 characters) would make one long caption fail the whole
# file; long texts are refused per row instead (IngestConfig.max_candidate_chars).
_CSV_FIELD_LIMIT = 2**31 - 1


MEDIA_KEYS = ("image", "video", "views")


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
