"""The manifest format: each row's fields validated (files read by :mod:`.manifest_files`).

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
import datetime as dt
import decimal
import json
import math
import numbers
import unicodedata
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Reading the files is manifest_files' job; its names are this module's too (re-exported).
from capjudge.manifest_files import MEDIA_KEYS as MEDIA_KEYS
from capjudge.manifest_files import ManifestError as ManifestError
from capjudge.manifest_files import RawRow as RawRow
from capjudge.manifest_files import read_rows as read_rows
from capjudge.manifest_files import safe_text as safe_text
from capjudge.records import JSONValue

TASKS = ("caption", "vqa", "reg", "vdu")
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
