"""What the report's templates and files are built from: the report context, typed.

:func:`capjudge.report.run.run_report` builds a :class:`ReportContext`;
:func:`capjudge.report.run.report_view` narrows it to the series that ran
(:class:`ReportView`), which the Markdown and HTML templates render. These are plain dicts at
run time (Jinja reads them by key); the types say which keys each holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from capjudge.records import AgreementEntry, HistoryEntry, JudgeSummary, RunLineage, Scalar
from capjudge.report.judge_reliability import ReliabilitySections

SystemRow = dict[str, Scalar]
"""One row of the ``system_scores`` table: its fixed columns, then each method's declared
aggregates (:class:`capjudge.records.SystemScore`), NaN read back as None."""

Figures = dict[str, list[dict[str, str]]]
"""Plot files by section: each a dict of its ``path``, caption fields and ``relpath``."""


class JudgeRow(TypedDict):
    """One row of the "What ran" table: a judge and its run's counts."""

    name: str
    method: str | None
    backend: str | None
    snapshot: str
    """The backend's snapshot, cut to 23 characters."""
    modes_ran: str
    skipped: str
    """Skip reasons with their counts, deduplicated over modes."""
    statuses: str
    requests: int | str
    """``-`` when the summary does not say."""
    model_calls: int | None
    cache_hits: int | None
    tokens: int
    cost: float | str
    """``-`` without a price."""


class NotRunLine(TypedDict):
    """A judge whose modes could not run at all: the modes, why, and a hint."""

    judge: str
    mode: str
    reason: str
    count: int
    hint: str | None
    """A command that would run it (e.g. with a vision backend), or None."""


class Headline(TypedDict):
    """The headline numbers of one scored judge/mode series."""

    series: str
    method: str
    n: int
    entry: AgreementEntry
    failure_rate: float | None
    low_mass_rate: float | None
    best: str
    """The best system by mean score, ``name (mean)``, or ``-``."""
    worst: str


class SuiteCount(TypedDict):
    """One validation suite's counts."""

    name: str
    evaluated: int
    failed: int


class ValidationView(TypedDict):
    """The validate stage's ``validation.json``, as the report shows it."""

    success: bool
    suites: list[SuiteCount]
    failures: list[str]


class CriterionMatrix(TypedDict):
    """Kendall tau-b of each judge criterion (rows) against each human criterion."""

    humans: list[str]
    rows: dict[str, dict[str, float]]


class GalleryEntry(TypedDict):
    """One item of the gallery: where the lead series disagrees most with the humans."""

    series: str
    item_id: str
    system: str | None
    candidate: str
    human: float | None
    score: float | None
    rank_gap: float
    """How far apart the judge's and the humans' ranks are, as a share of the list."""
    direction: str
    reasoning: str
    thumb: str | None
    thumb_rel: str | None
    media_kind: str | None


class _ReportBase(TypedDict):
    """What the context and the view share."""

    title: str
    protocol: str
    """The protocol line: the protocol, then what the data is (:mod:`capjudge.report.dataset`)."""
    label_note: str | None
    """Why no item has a label for the human criterion, when none has."""
    gallery: list[GalleryEntry]
    human_criterion: str
    out_dir: Path
    judge_rows: list[JudgeRow]
    not_run: list[NotRunLine]
    agreement: list[AgreementEntry]
    headline: list[Headline]
    matrices: dict[str, CriterionMatrix]
    """``judge/mode`` -> its criterion matrix (judges with more than one criterion)."""
    systems: list[SystemRow]
    aggregate_names: list[str]
    """The system-level aggregates some method declared (columns after the fixed ones)."""
    lineage: RunLineage
    packages: str
    validation: ValidationView | None
    plots: Figures
    reliability: ReliabilitySections
    calibration_enabled: bool
    history: dict[str, list[HistoryEntry]]
    history_plots: Figures
    registry: str | None


class ReportContext(_ReportBase):
    """Everything a report is made from (what :func:`~capjudge.report.run.run_report` returns)."""

    judges: dict[str, JudgeSummary]
    """Each judge stage's ``summary.json``."""


class ReportView(_ReportBase):
    """What the report pages show: the context narrowed to the series that ran."""

    judges: list[JudgeRow]
    """The "What ran" rows (the context's ``judge_rows``)."""
    summaries: dict[str, str]
    """One line per collapsed table: what it holds and its most telling figure."""


SeriesMetrics = dict[str, float | int | None]
"""One series' (or one run's) figures in ``metrics.json``."""


__all__ = ["CriterionMatrix", "Figures", "GalleryEntry", "Headline", "JudgeRow", "NotRunLine",
           "ReportContext", "ReportView", "SeriesMetrics", "SuiteCount", "SystemRow",
           "ValidationView"]
