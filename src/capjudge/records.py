"""The rows the stages write, each defined once: a frozen dataclass and its Arrow schema.

Every Parquet table of the pipeline is built from one of these records, and its schema is
*derived* from the record's fields (:func:`arrow_type`): the field order is the column order,
``str``/``int``/``float``/``bool`` are ``string``/``int64``/``float64``/``bool``, a
``tuple[X, ...]`` (or ``list[X]``) is a list of X, and ``X | None`` is a nullable X (every
Arrow column is nullable). A column is added, renamed or retyped here and nowhere else.

- :class:`ItemRow`: ``ingest/items.parquet``, one row per valid manifest item.
- :class:`QuarantineRow`: ``ingest/quarantine.parquet``, one row per refused manifest row.
- :class:`Judgement`: ``judge/<name>/judgements.parquet``, one row per (item, mode,
  criterion[, repeat]).
- :class:`CriterionScore`: ``aggregate/criteria.parquet``.
- :class:`ItemScore`: ``aggregate/item_scores.parquet``.
- :class:`RepeatScore`: ``aggregate/repeat_scores.parquet``.
- :class:`SystemScore`: ``aggregate/system_scores.parquet`` (its fixed columns; each
  method's declared system-level aggregates follow as float columns).
- :class:`ContextRow`: ``context/contexts.parquet`` (VisCE² extractions).

:meth:`Record.table` builds a table from records, :meth:`Record.from_table` reads one back
(a column the file lacks, as in files written before it existed, takes the field's default).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, NotRequired, TypedDict, TypeVar, Union

import pyarrow as pa

Scalar = None | bool | int | float | str
"""A scalar cell of a table."""
CellValue = Scalar | Sequence[Scalar]
"""What one cell of a record's table holds: a scalar or a list of scalars."""
JSONValue = None | bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"]
"""Any JSON value (for documents, or parts of them, whose shape is open)."""

_SCALARS: dict[object, pa.DataType] = {
    str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_(),
}

R = TypeVar("R", bound="Record")


def arrow_type(tp: object) -> pa.DataType:
    """The Arrow type of a record field's Python type.

    ``str``, ``int``, ``float``, ``bool`` map to ``string``, ``int64``, ``float64``,
    ``bool``; ``tuple[X, ...]`` and ``list[X]`` to ``list<X>``; ``X | None`` to X (Arrow
    columns are nullable).

    Raises:
        TypeError: a type with no column type (a union of two types, a mapping, ...).
    """
    if tp in _SCALARS:
        return _SCALARS[tp]
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):  # a struct column
        hints = typing.get_type_hints(tp)
        return pa.struct([(f.name, arrow_type(hints[f.name])) for f in dataclasses.fields(tp)])
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        kept = [a for a in args if a is not type(None)]
        if len(kept) == 1:
            return arrow_type(kept[0])
    elif origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return pa.list_(arrow_type(args[0]))
    elif origin is list and len(args) == 1:
        return pa.list_(arrow_type(args[0]))
    raise TypeError(f"no Arrow column type for {tp!r}")


def _to_cell(value: object) -> object:
    """A field's value as Arrow takes it (a nested dataclass as the dict of its struct)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return value


def _from_cell(tp: object, value: object) -> object:
    """A cell read back as its field's type (a struct's dict as its dataclass)."""
    if isinstance(value, dict):
        kept = [a for a in typing.get_args(tp) if a is not type(None)] or [tp]
        target = kept[0]
        if isinstance(target, type) and dataclasses.is_dataclass(target):
            return target(**value)
    return value


def _fields(cls: type) -> tuple[dataclasses.Field[object], ...]:
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a dataclass")
    return dataclasses.fields(cls)


_HINTS: dict[type, dict[str, object]] = {}
_SCHEMAS: dict[type, pa.Schema] = {}


def _hints(cls: type) -> dict[str, object]:
    """Field name -> resolved type, once per class.

    The annotations are strings here; resolving them again for every row read back was most
    of :meth:`Record.from_row`'s time.
    """
    if cls not in _HINTS:
        resolved = typing.get_type_hints(cls)
        _HINTS[cls] = {f.name: resolved[f.name] for f in _fields(cls)}
    return _HINTS[cls]


def _schema(cls: type[Record]) -> pa.Schema:
    if cls not in _SCHEMAS:
        _SCHEMAS[cls] = pa.schema([(name, arrow_type(tp)) for name, tp in _hints(cls).items()
                                   if name not in cls.not_columns])
    return _SCHEMAS[cls]


class Record:
    """What every row record shares: its schema, and conversion to and from tables.

    Subclasses are frozen, keyword-only dataclasses; their fields are the table's columns in
    order (except those named in ``not_columns``).
    """

    not_columns: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def schema(cls) -> pa.Schema:
        """The Arrow schema derived from the fields (:func:`arrow_type`)."""
        return _schema(cls)

    def to_row(self) -> dict[str, CellValue]:
        """The record as a row: column name -> value, in column order."""
        return {name: getattr(self, name) for name in self.schema().names}

    @classmethod
    def from_row(cls: type[R], row: Mapping[str, object]) -> R:
        """A record from a row; a missing column takes the field's default.

        Columns the record does not name are ignored.

        Raises:
            TypeError: a column without a default is missing.
        """
        hints = _hints(cls)
        return cls(**{k: _from_cell(hints[k], v) for k, v in row.items() if k in hints})

    @classmethod
    def table(cls: type[R], records: Iterable[R]) -> pa.Table:
        """Records as an Arrow table with the derived schema."""
        schema = cls.schema()
        rows = list(records)
        columns = [pa.array([_to_cell(getattr(r, name)) for r in rows], type=f.type)
                   for name, f in zip(schema.names, schema, strict=True)]
        return pa.Table.from_arrays(columns, schema=schema)

    @classmethod
    def from_table(cls: type[R], table: pa.Table) -> list[R]:
        """The rows of a table as records (see :meth:`from_row`)."""
        return [cls.from_row(row) for row in table.to_pylist()]


@dataclass(frozen=True)
class ServerTimings:
    """What a server says it spent on one answer (llama.cpp's ``timings`` object).

    Summed over a judgement's calls (its answer and its digit follow-ups). Servers that send
    no timings (OpenAI, vLLM, the PyTorch backends) leave a response's ``timings`` None.

    Attributes:
        prompt_n: prompt tokens the server computed (not taken from its cache).
        prompt_ms: milliseconds it spent on them.
        predicted_n: tokens it generated.
        predicted_ms: milliseconds it spent generating.
        cache_n: prompt tokens it reused from its prompt cache.
    """

    prompt_n: int = 0
    prompt_ms: float = 0.0
    predicted_n: int = 0
    predicted_ms: float = 0.0
    cache_n: int = 0

    @classmethod
    def from_server(cls, timings: object) -> ServerTimings | None:
        """A server's ``timings`` dict as a record; None when there is none."""
        if not isinstance(timings, dict):
            return None
        return cls(prompt_n=int(timings.get("prompt_n") or 0),
                   prompt_ms=float(timings.get("prompt_ms") or 0.0),
                   predicted_n=int(timings.get("predicted_n") or 0),
                   predicted_ms=float(timings.get("predicted_ms") or 0.0),
                   cache_n=int(timings.get("cache_n") or 0))

    def plus(self, other: ServerTimings | None) -> ServerTimings:
        """The sum of two answers' timings (``other`` None adds nothing)."""
        if other is None:
            return self
        return ServerTimings(self.prompt_n + other.prompt_n, self.prompt_ms + other.prompt_ms,
                             self.predicted_n + other.predicted_n,
                             self.predicted_ms + other.predicted_ms,
                             self.cache_n + other.cache_n)

    def to_json(self) -> dict[str, int | float]:
        """The record as a dict (a row's ``server_timings`` struct, a cache entry's field)."""
        return {"prompt_n": self.prompt_n, "prompt_ms": self.prompt_ms,
                "predicted_n": self.predicted_n, "predicted_ms": self.predicted_ms,
                "cache_n": self.cache_n}


@dataclass(frozen=True, kw_only=True)
class ItemRow(Record):
    """One row of ``items.parquet``: a valid manifest item after ingest.

    :class:`capjudge.item.Item` is the typed item later stages build from it.
    """

    id: str
    line: int | None = None
    """The manifest line the item came from."""
    task: str
    media_kind: str
    """``image`` | ``video`` | ``views`` | ``none``."""
    media_root: str | None = None
    """The folder media paths are relative to."""
    media_path: str | None = None
    """As written in the manifest (first view for 3D items)."""
    view_paths: tuple[str, ...] | None = None
    view_sha256: tuple[str, ...] | None = None
    media_sha256: str | None = None
    """File hash; for views, the hash of the view hashes."""
    width: int | None = None
    """As displayed (EXIF orientation applied); video: frame size."""
    height: int | None = None
    n_frames: int | None = None
    fps: float | None = None
    duration_s: float | None = None
    tile_path: str | None = None
    tile_sha256: str | None = None
    judge_path: str | None = None
    """The picture to send to a judge. Image items: the original (judge_sha256 =
    media_sha256) when a vision API takes it as is (8-bit RGB/RGBA/L JPEG, PNG or WebP, one
    frame, upright), else a normalised copy in judge_images/ (media_sha256 stays the
    original's hash). Video and 3D items: their tile (= tile_path / tile_sha256)."""
    judge_sha256: str | None = None
    judge_note: str | None = None
    """What normalisation did ("CMYK JPEG -> ..."), or null."""
    frame_policy: str | None = None
    frame_indices: tuple[int, ...] | None = None
    frame_timestamps_s: tuple[float, ...] | None = None
    frame_paths: tuple[str, ...] | None = None
    """Video items: each sampled frame on its own, as decoded (the tile shows them letterboxed
    and labelled), in temporal order; paths stored as ``tile_path`` is."""
    frame_sha256: tuple[str, ...] | None = None
    candidate: str
    references: tuple[str, ...] | None = None
    question: str | None = None
    system: str | None = None
    labels: str | None = None
    """JSON: criterion -> number | [numbers]."""
    extra: str | None = None
    """JSON: unknown manifest keys; values JSON cannot hold are encoded without loss (ISO
    8601 timestamps, decimals as exact text, {"$base64": ...} bytes; see
    manifest.to_json_value)."""


@dataclass(frozen=True, kw_only=True)
class QuarantineRow(Record):
    """One row of ``quarantine.parquet``: a manifest row ingest refused, and why."""

    id: str | None
    line: int | None
    reason: str
    """Why the row was refused."""
    raw: str | None
    """The manifest line as read."""


@dataclass(frozen=True, kw_only=True)
class LabelRow(Record):
    """One human label in long form (the report database's ``labels`` table)."""

    item_id: str
    criterion: str
    annotator: int
    """The annotator's position in the item's list of values for the criterion."""
    value: float


@dataclass(frozen=True, kw_only=True)
class Judgement(Record):
    """One row of ``judgements.parquet``: one criterion of one answered (or skipped) request.

    A failure or skip has its status and reason and no score, never a stand-in value.
    """

    item_id: str
    """The item (``items.parquet`` ``id``)."""
    method: str
    mode: str
    """The method's mode (e.g. G-VEval ``ref-free``)."""
    criterion: str
    """The criterion scored; ``*`` for a skip of the whole (item, mode)."""
    status: str
    """A :data:`capjudge.backends.base.Status`: ``ok``, ``low_mass``, ``text_only`` (scored);
    ``parse_failure``, ``refused``, ``error``, ``undefined`` (no score); ``skipped``."""
    reason: str | None = None
    """Why the status is not ``ok`` (never empty for a failure or skip)."""
    score: float | None = None
    """The method's score (its paper's definition unless an option)."""
    expected: float | None = None
    """Expected value over the renormalised distribution."""
    paths_disagree: bool | None = None
    """The distribution's argmax is not the printed number."""
    argmax: int | None = None
    sd: float | None = None
    entropy: float | None = None
    mass: float | None = None
    """The probability mass the score values captured before renormalising."""
    printed: float | None = None
    """The number the judge wrote, if any."""
    values: list[int] | None = None
    """The score values the distribution is over."""
    probs: list[float] | None = None
    """Their probabilities (renormalised over ``values``)."""
    source: str | None = None
    """``logprobs`` | ``teacher_forcing`` | ``text`` | ``none``."""
    anchor_forced: bool | None = False
    read_by: str | None = None
    """How the reader found the number ("JSON key 'rating'", "label 'final score' and '$'",
    "the number the answer opens with"): the reading's confidence reason."""
    confirmation: str | None = None
    """Whether the reading is in the method's verdict format (``on-contract``) or, off it,
    confirmed by a second channel (``forced-anchor``, ``follow-up``), unconfirmed (no channel:
    the rules' reading stands), or ``contradicted`` (a ``parse_failure``); None: nothing read.
    See :mod:`capjudge.reading.confirm`."""
    reasoning: str | None = None
    explanation: str | None = None
    """The method's optional explanation turn."""
    template: str | None = None
    """``id@version``."""
    settings: str | None = None
    """The method's named options: "prompt_variant=paper; score=..."."""
    backend: str | None = None
    model: str | None = None
    """As reported by the backend."""
    snapshot: str | None = None
    """What the cache is keyed on (snapshot name, weights hash)."""
    system_fingerprint: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    """What the answer cost (0 from the cache; null without a price)."""
    latency_s: float | None = None
    attempts: int | None = None
    cached: bool | None = False
    cache_key: str | None = None
    """The request cache's key for the answer."""
    media_sha256: str | None = None
    system: str | None = None
    """Which captioner wrote the candidate."""
    repeat: int | None = 0
    """Test-retest repeat index (JudgeConfig.repeats); 0 otherwise."""
    server_timings: ServerTimings | None = None
    """What the server says it spent on the judgement (llama.cpp's timings, summed over the
    digit follow-ups; ``cache_n``: prompt tokens from its prompt cache); null for servers
    that send none."""


@dataclass(frozen=True, kw_only=True)
class CriterionScore(Record):
    """One row of ``criteria.parquet``: a judgement row's score columns, per judge."""

    judge: str
    method: str | None = None
    mode: str | None = None
    item_id: str | None = None
    system: str | None = None
    criterion: str | None = None
    status: str | None = None
    reason: str | None = None
    score: float | None = None
    argmax: int | None = None
    sd: float | None = None
    mass: float | None = None
    backend: str | None = None
    snapshot: str | None = None
    template: str | None = None
    repeat: int = 0


@dataclass(frozen=True, kw_only=True)
class ItemScore(Record):
    """One row of ``item_scores.parquet``: a judge's overall verdict on one item and mode."""

    judge: str
    method: str
    mode: str
    item_id: str
    system: str | None = None
    score: float | None = None
    status: str
    """``ok`` | ``low_mass`` | ``partial`` | ``failed`` | ``skipped`` (the one rule:
    capjudge.methods.verdict)."""
    cause: str | None = None
    """Why a failed item failed (the worst criterion status)."""
    reason: str | None = None
    criteria_scored: int
    """Criteria with a score."""
    criteria_total: int
    backend: str | None = None
    snapshot: str | None = None


@dataclass(frozen=True, kw_only=True)
class RepeatScore(Record):
    """One row of ``repeat_scores.parquet``: one test-retest repeat's verdict on an item."""

    judge: str
    method: str
    mode: str
    item_id: str
    system: str | None = None
    repeat: int
    """The test-retest repeat index."""
    score: float | None = None
    status: str
    cause: str | None = None


@dataclass(frozen=True, kw_only=True)
class SystemScore(Record):
    """One row of ``system_scores.parquet``: a judge's scores of one captioning system.

    ``aggregates`` holds the method's declared system-level numbers (e.g. 3D
    ``precision_macro``); they are float columns after the fixed ones (:meth:`table`).
    """

    not_columns: ClassVar[frozenset[str]] = frozenset({"aggregates"})

    judge: str
    method: str
    mode: str
    system: str
    mean_score: float | None = None
    """Mean overall score of the scored items."""
    items: int
    scored: int
    """Items with a score."""
    failed: int
    """Items whose status is ``failed``."""
    aggregates: Mapping[str, float | None] = field(default_factory=dict)

    @classmethod
    def full_schema(cls, records: Iterable[SystemScore]) -> pa.Schema:
        """The fixed columns, then every aggregate some record has (sorted, float)."""
        fixed = cls.schema()
        extra = sorted({k for r in records for k in r.aggregates if k not in fixed.names})
        return pa.schema(list(fixed) + [(k, pa.float64()) for k in extra])

    def to_row(self) -> dict[str, CellValue]:
        """The fixed columns, then the aggregates."""
        return {**super().to_row(), **self.aggregates}

    @classmethod
    def table(cls, records: Iterable[SystemScore]) -> pa.Table:
        """The records as a table: the fixed columns, then every aggregate (null if absent)."""
        rows = list(records)
        schema = cls.full_schema(rows)
        return pa.Table.from_pylist([{k: r.to_row().get(k) for k in schema.names}
                                     for r in rows], schema=schema)


@dataclass(frozen=True, kw_only=True)
class ContextRow(Record):
    """One row of ``contexts.parquet``: one VisCE² extraction (or why it is missing)."""

    media_sha256: str
    kind: str
    """``context`` or ``description``."""
    status: str
    reason: str | None = None
    text: str | None = None
    """The extraction (only when ``status`` is ``ok``)."""
    template: str | None = None
    backend: str | None = None
    snapshot: str | None = None
    model: str | None = None
    system_fingerprint: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached: bool | None = None
    items: int | None = None
    """How many items share the picture."""


# --- Rows read back from the report database and JSON documents --------------------------------
# These stay plain dicts at run time (TypedDicts): they come from DuckDB queries and JSON files
# and go to JSON files and the report templates unchanged; the type says which keys they have.


class ItemCounts(TypedDict):
    """How many items a judge stage judged, of how many ingested, and how they were chosen.

    ``fraction`` and ``seed``: a seeded sample (``item_fraction``, ``item_seed``); ``limit``:
    the first N (:mod:`capjudge.judge.selection`). Absent keys: not used.
    """

    judged: int
    total: int
    fraction: NotRequired[float]
    seed: NotRequired[int]
    limit: NotRequired[int]


class JudgeSummary(TypedDict):
    """A judge stage's ``summary.json``: counts from its rows and its clients' statistics."""

    method: str
    backend: Mapping[str, object]
    """What the backend says about itself (:meth:`capjudge.backends.base.Backend.describe`)."""
    modes_ran: list[str]
    modes_skipped: dict[str, dict[str, int]]
    """Modes with no judged row: mode -> skip reason -> rows."""
    skips: dict[str, dict[str, int]]
    rows: int
    by_status: dict[str, int]
    failure_rate: float
    low_mass_rate: float
    requests: int
    model_calls: int
    cache_hits: int
    retries: int
    cache_write_failures: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    templates: list[str]
    settings: list[str]
    seconds: float
    text_only_rate: float
    by_confirmation: NotRequired[dict[str, int]]
    """Criterion rows by ``confirmation`` (issue 40): on-contract, forced-anchor, follow-up,
    unconfirmed, contradicted."""
    chunk_size: NotRequired[int]
    """Items per chunk of the stage (a rerun that must batch the same way reads it)."""
    reasoning_cut: int
    notes: list[str]
    items: NotRequired[ItemCounts]


class ContextSummary(TypedDict):
    """A context stage's ``summary.json`` (VisCE²'s visual-context extraction)."""

    backend: Mapping[str, object]
    """What the backend says about itself (:meth:`capjudge.backends.base.Backend.describe`)."""
    kinds: list[str]
    pictures: int
    rows: int
    by_status: dict[str, int]
    requests: int
    model_calls: int
    cache_hits: int
    seconds: float


class AggregateSummary(TypedDict):
    """The aggregate stage's ``summary.json``."""

    settings: dict[str, float]
    """Every method's aggregate setting in force (HarmonicEval's ``gamma``)."""
    include_low_mass: bool
    judges: list[str]
    item_status: dict[str, dict[str, int]]
    """``judge/mode`` -> item status -> items."""


class HeadlineFigure(TypedDict):
    """A headline's agreement figure as the report stage publishes it: tau-b and its CI."""

    kendall_tau_b: float | None
    ci95: dict[str, list[float] | None]
    """``{"kendall_tau_b": [low, high]}`` (None: no interval)."""


class PublishedHeadline(TypedDict):
    """One judge/mode series of the report's headline, as the report task returns it.

    Its flow publishes it as a Prefect table artifact.
    """

    series: str
    method: str
    n: int
    failure_rate: float | None
    low_mass_rate: float | None
    entry: HeadlineFigure


class ReportOutcome(TypedDict):
    """What the report stage returns to its flow: the headline, its size and the HTML."""

    headline: list[PublishedHeadline]
    series: int
    """Scored judge/mode series in the agreement table."""
    report_html: str
    artifacts: NotRequired[dict[str, str]]
    """Published artifact key -> id (set by the flow)."""


class JudgedItem(TypedDict):
    """What every per-item report row carries: one series' score of an item and its human label.

    ``human`` is the mean of the annotators' values for the report's human criterion.
    """

    judge: str
    method: str
    mode: str
    series: str
    item_id: str
    system: str | None
    score: float | None
    human: float | None


class ScoredItem(JudgedItem):
    """One row of the report database's ``scored_items`` view (and why an item has no score)."""

    status: str
    cause: str | None
    reason: str | None


class AgreementEntry(TypedDict):
    """One judge/mode series' agreement with the human label (the report's ``agreement`` table).

    The statistics (``capjudge.stats.STATS`` and the system-level Pearson) are present only
    when the series scored enough labelled items.
    """

    judge: str
    method: str
    mode: str
    protocol: str
    items: int
    """Labelled items."""
    n: int
    """Labelled items with a score."""
    not_scored: dict[str, int]
    """Why labelled items have no score: cause or status -> items."""
    ci95: dict[str, list[float]]
    """Statistic -> its 95 % bootstrap CI (low, high)."""
    text_only: int
    """Scored from the printed number alone (no distribution)."""
    kendall_tau_b: NotRequired[float]
    kendall_tau_c: NotRequired[float]
    pearson: NotRequired[float]
    spearman: NotRequired[float]
    system_pearson: NotRequired[float]
    systems: NotRequired[int]
    not_scored_text: NotRequired[str]
    """``not_scored`` as one line for the report's tables."""
    note: NotRequired[str]
    """Why the statistics are absent (too few items, a constant judge or human side)."""


class ReliabilityItem(JudgedItem):
    """A ``scored_items`` row joined with its item's text (the reliability sections' input)."""

    candidate: str | None
    extra: str | None
    media_sha256: str | None


class BackendLineage(TypedDict):
    """Per judge of a run: the backend and what its answers reported (``lineage.json``)."""

    judge: str
    method: str | None
    backend: str | None
    snapshot: str | None
    backend_facts: str
    models: list[str]
    fingerprints: list[str]
    templates: list[str]
    settings: list[str]
    judgements: int
    pinned: NotRequired[bool]
    """Whether the snapshot identifies the weights (False: a remote server that reports
    nothing identifying them, and no ``backend_options.snapshot`` pin)."""
    pinning: NotRequired[str | None]
    """How the snapshot is pinned, or why it is not (one clause)."""
    judgements_sha256: NotRequired[str]
    """What a user reads of every judgement row (status, score, printed number, distribution,
    text; floats bit for bit), hashed: equal hashes, identical judgements."""
    reproduced: NotRequired[bool | None]
    """Whether ``judgements_sha256`` equals the one committed in git (HEAD's lineage.json);
    None: nothing committed to compare with."""


class RunLineage(TypedDict):
    """What produced a report (``lineage.json``; the registry files it under ``run_id``)."""

    run_id: str
    time: str
    git_revision: str | None
    git_dirty: bool | None
    dvc_lock_sha256: str | None
    params_sha256: str | None
    dataset_sha256: str | None
    packages: dict[str, str | None]
    backends: list[BackendLineage]


class PairedDifference(TypedDict):
    """A series' Kendall τ-b change to its previous run, on the items both scored."""

    n: int
    difference: float | None
    ci95: list[float | None]
    p_value: float | None
    n_boot: NotRequired[int]
    """The bootstrap resamples behind ``ci95`` (absent from entries written before)."""


class HistoryEntry(TypedDict):
    """One line of the registry's ``history.jsonl``: one run of one judge/mode series."""

    run_id: str
    time: str
    judge: str
    mode: str
    series: str
    method: str
    templates: list[str]
    settings: NotRequired[list[str]]
    """The method's named options (absent from entries written before they were kept)."""
    backend: str | None
    snapshot: str | None
    models: list[str]
    fingerprints: list[str]
    identity: str
    data_version: str | None
    code_version: str | None
    protocol: str | None
    n: int
    kendall_tau_b: float | None
    ci95: list[float | None] | None
    failure_rate: float | None
    low_mass_rate: float | None
    system_means: dict[str, float | None]
    previous_run: NotRequired[str | None]
    snapshot_changed: NotRequired[bool]
    paired: NotRequired[PairedDifference | None]
    paired_note: NotRequired[str]
    retest_tau_spread: NotRequired[float | None]
    """How far tau-b moves between the judge's own repeats (None: not measured)."""


ROW_RECORDS: tuple[type[Record], ...] = (ItemRow, QuarantineRow, Judgement, CriterionScore,
                                          ItemScore, RepeatScore, SystemScore, ContextRow,
                                          LabelRow)
"""Every row record, in pipeline order."""

__all__ = ["ROW_RECORDS", "AggregateSummary", "AgreementEntry", "BackendLineage", "CellValue",
           "ContextRow", "CriterionScore", "HistoryEntry", "ItemCounts", "ItemRow",
           "ItemScore", "JSONValue", "JudgeSummary", "Judgement", "LabelRow",
           "PairedDifference", "QuarantineRow", "Record", "ReliabilityItem", "RepeatScore",
           "RunLineage", "Scalar", "ScoredItem", "SystemScore", "arrow_type"]
