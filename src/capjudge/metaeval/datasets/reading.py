"""Reading and checking the published files: the helpers every dataset loader shares.

Each helper turns a problem into a :class:`~capjudge.metaeval.datasets.DatasetError` naming
the file and the entry (``where``), so a loader reads a file as its authors published it and
reports anything else in one line. :func:`load_clipscore_json` reads CLIPScore's format, which
several datasets share.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from capjudge.records import JSONValue

from capjudge.metaeval.datasets import Candidate, DatasetError, MetaDataset


def error_at(path: Path, where: str, message: str) -> DatasetError:
    """The error for ``message`` at ``where`` (an entry, a line) in ``path``."""
    return DatasetError(f"{path}: {where}: {message}" if where else f"{path}: {message}")


def shape_error(path: Path, name: str, expected: str) -> DatasetError:
    """The error for a file whose overall shape is not the ``name`` format."""
    return DatasetError(f"{path}: not in the {name} format: expected {expected}")


def preview(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut at ``limit`` characters (for messages)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def read_text(path: Path) -> str:
    """The file's text (UTF-8, a byte-order mark dropped)."""
    try:
        # utf-8-sig: a byte-order mark (CSV exported from spreadsheets) is not part of the data.
        return path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read ({exc})") from exc


def read_json(path: Path) -> Any:
    """The file parsed as JSON."""
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc})") from exc


def read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line."""
    rows = []
    for n, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}: line {n}: not valid JSON ({exc})") from exc
        if not isinstance(row, dict):
            raise DatasetError(f"{path}: line {n}: expected a JSON object, got "
                               f"{type(row).__name__}")
        rows.append((n, row))
    return rows


def read_csv(path: Path, required: tuple[str, ...]
             ) -> list[tuple[int, dict[str, JSONValue]]]:
    """(line number, row) of a CSV file with a header; ``required`` columns must exist."""
    # StringIO, not splitlines(): a quoted cell may hold a newline.
    reader = csv.DictReader(io.StringIO(read_text(path), newline=""))
    try:
        header = reader.fieldnames or []
        missing = [c for c in required if c not in header]
        if missing:
            raise DatasetError(f"{path}: CSV header {header} lacks column(s) {missing}")
        rows = []
        for row in reader:
            rows.append((reader.line_num, dict(row)))
    except csv.Error as exc:
        raise DatasetError(f"{path}: line {reader.line_num}: malformed CSV ({exc})") from exc
    return rows


def norm(text: str) -> str:
    """``text`` with runs of whitespace made one space, stripped."""
    return " ".join(str(text).split())


def field(path: Path, where: str, entry: Any, *names: str, required: bool = True) -> Any:
    """The first of ``names`` present in the object ``entry`` (aliases of one field)."""
    if not isinstance(entry, dict):
        raise error_at(path, where, f"expected an object, got {type(entry).__name__}")
    for name in names:
        if name in entry:
            return entry[name]
    if required:
        alias = f" (or {', '.join(repr(n) for n in names[1:])})" if len(names) > 1 else ""
        raise error_at(path, where, f"missing key {names[0]!r}{alias}")
    return None


def text(path: Path, where: str, value: Any, name: str) -> str:
    """``value`` as a whitespace-normalised string (it must be a string)."""
    if not isinstance(value, str):
        raise error_at(path, where, f"{name} must be a string, got {preview(value)}")
    return norm(value)


def literal(path: Path, where: str, text: str, name: str) -> Any:
    """A JSON or Python literal held in a string (lists of references or scores)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        # Python literals, not JSON, in the published files (single quotes, e.g. Polaris refs;
        # EMScore-derived code reads VATEX-EVAL scores with eval/literal_eval).
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise error_at(path, where, f"{name} does not parse ({type(exc).__name__}): "
                                    f"{preview(text)}") from exc


def texts(path: Path, where: str, value: Any, name: str, *, min_len: int = 1) -> list[str]:
    """A list of strings (a string holding a list literal is parsed first, as in CSVs)."""
    if isinstance(value, str):
        value = literal(path, where, value, name)
    if not isinstance(value, list | tuple) or not all(isinstance(x, str) for x in value):
        raise error_at(path, where, f"{name} must be a list of strings, got {preview(value)}")
    if len(value) < min_len:
        raise error_at(path, where, f"{name} has {len(value)} entries, expected at least {min_len}")
    return [norm(x) for x in value]


def number(path: Path, where: str, value: Any, name: str, *, lo: float | None = None,
           hi: float | None = None, allow_nan: bool = False) -> float:
   """A finite number (numeric strings accepted: CSV cells), optionally in [lo, hi]."""
   if isinstance(value, bool):
       raise error_at(path, where, f"{name} must be a number, got {value!r}")
   if isinstance(value, int | float):
       number = float(value)
   elif isinstance(value, str):
       try:
           number = float(value.strip())
       except ValueError:
           raise error_at(path, where, f"{name} is not a number: {preview(value)}") from None
   else:
       raise error_at(path, where, f"{name} must be a number, got {preview(value)}")
   if math.isnan(number):
       if allow_nan:
           return number
       raise error_at(path, where, f"{name} is NaN")
   if math.isinf(number):
       raise error_at(path, where, f"{name} is infinite")
   if (lo is not None and number < lo) or (hi is not None and number > hi):
       raise error_at(path, where, f"{name} {number:g} is outside [{lo:g}, {hi:g}]"
                  if lo is not None and hi is not None else f"{name} {number:g} out of range")
   return number


_NUMPY_MATRIX = re.compile(r"[\s\[\].\deE+-]*")  # no commas: str(ndarray)


def score_matrix(path: Path, where: str, value: Any, name: str) -> list[list[Any]]:
    """Rows of ratings: a list of lists, or a string holding one (VATEX-EVAL's ``scores``)."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = literal(path, where, text, name)
        except DatasetError:
            # A numpy repr ("[[3 4 3]\n [2 2 1]]") has no commas; read its rows by brackets.
            rows = re.findall(r"\[([^\[\]]*)\]", text)
            if not (rows and _NUMPY_MATRIX.fullmatch(text) and text.startswith("[[")
                    and text.endswith("]]") and text.count("[") == text.count("]")):
                raise
            value = [[x for x in re.split(r"[\s,]+", row.strip()) if x] for row in rows]
    if not isinstance(value, list | tuple) or not all(isinstance(r, list | tuple) for r in value):
        raise error_at(path, where, f"{name} must be a list of rating lists (one per candidate), "
                                    f"got {preview(value)}")
    return [list(r) for r in value]


def mapping(path: Path, data: Any, name: str, expected: str) -> dict[str, Any]:
    """``data`` when it is a JSON object, else the shape error naming ``expected``."""
    if not isinstance(data, dict):
        raise shape_error(path, name, expected)
    return data


def caption_rows(path: Path, name: str) -> list[tuple[str, Any]]:
    """(where, row) of a CSV, JSON-list or JSONL file of caption rows (Polaris, Nebula)."""
    if path.suffix.lower() == ".csv":
        return [(f"line {n}", row) for n, row in read_csv(path, ("mt",))]
    text = read_text(path)
    if path.suffix.lower() != ".jsonl":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if text.lstrip().startswith("["):
                raise DatasetError(f"{path}: not valid JSON ({exc})") from exc
            data = None  # several objects, one a line: JSONL
        if isinstance(data, list):
            return [(f"entry {i}", row) for i, row in enumerate(data)]
        if data is not None and not (isinstance(data, dict) and len(text.strip().splitlines())
                                     == 1):
            raise shape_error(path, name, "a JSON list of caption rows, a CSV or JSONL")
    return [(f"line {n}", row) for n, row in read_jsonl(path)]


def load_clipscore_json(path: Path, name: str, rating_range: tuple[float, float] | None = None
                        ) -> MetaDataset:
    """CLIPScore's ``flickr8k.json`` format (also its ``crowdflower_flickr8k.json``).

    Consecutive rows of the same (image, caption) are one candidate's ratings by different
    annotators (Flickr8k-Expert has 3 per caption). NaN ratings are skipped, as CLIPScore does.
    """
    data = mapping(path, read_json(path), name,
                   "an object keyed by image id: {ground_truth, human_judgement: [...]}")
    out = MetaDataset(name)
    lo, hi = rating_range or (None, None)
    for image_id, entry in data.items():
        where = f"image {image_id!r}"
        refs = texts(path, where, field(path, where, entry, "ground_truth"), "ground_truth",
                     min_len=0)
        judgements = field(path, where, entry, "human_judgement")
        if not isinstance(judgements, list):
            raise error_at(path, where,
                           f"human_judgement must be a list, got {preview(judgements)}")
        current: Candidate | None = None
        for n, row in enumerate(judgements):
            row_where = f"{where}, human_judgement {n}"
            rating = number(path, row_where, field(path, row_where, row, "rating"), "rating",
                            lo=lo, hi=hi, allow_nan=True)
            if math.isnan(rating):
                continue
            caption = text(path, row_where, field(path, row_where, row, "caption"), "caption")
            if current is None or current.candidate != caption:
                current = Candidate(key=f"{image_id}#{len(out.candidates)}", candidate=caption,
                                    references=refs, ratings={"overall": []},
                                    image=row.get("image_path") or image_id, group=image_id)
                out.candidates.append(current)
            current.ratings["overall"].append(rating)
    if not out.has_references:
        out.notes = "some captions have no references: reference-free metrics only"
    return out
