"""The one home of the stages' file names and default folders.

Every stage writes a folder; what is in it is named here, and the library, the flows, the tasks
and the CLI build their paths from these names. ``dvc.yaml`` spells the same folders (a test
checks it against :data:`DEFAULT_DIRS`, and that every file a stage writes is named here).

=============  ====================================  ==============================
stage          folder (default)                      files
=============  ====================================  ==============================
ingest         ``data/ingest``                       items, quarantine, summary
context        ``data/context/<name>``               contexts, summary
judge          ``data/judge/<name>``                 judgements, summary
aggregate      ``data/aggregate``                    criteria, item/system/repeat scores, summary
validate       ``reports``                           validation.json / .md
report         ``reports``                           report.md / .html, metrics.json, ...
=============  ====================================  ==============================
"""

from __future__ import annotations

from pathlib import Path

ITEMS = "items.parquet"
"""The ingest stage's valid items (:class:`capjudge.records.ItemRow`)."""
QUARANTINE = "quarantine.parquet"
"""The ingest stage's refused manifest rows, each with its reason."""
SUMMARY = "summary.json"
"""Every stage's counts (ingest, context, judge, aggregate)."""
CONTEXTS = "contexts.parquet"
"""A context stage's extractions (:class:`capjudge.records.ContextRow`)."""
JUDGEMENTS = "judgements.parquet"
"""A judge stage's rows (:class:`capjudge.records.Judgement`)."""
CRITERIA = "criteria.parquet"
ITEM_SCORES = "item_scores.parquet"
SYSTEM_SCORES = "system_scores.parquet"
REPEAT_SCORES = "repeat_scores.parquet"
AGGREGATE_TABLES = (CRITERIA, ITEM_SCORES, REPEAT_SCORES, SYSTEM_SCORES)
"""The aggregate stage's tables (with its :data:`SUMMARY`)."""

DEFAULT_DIRS = {
    "ingest": "data/ingest",
    "context": "data/context/{name}",
    "judge": "data/judge/{name}",
    "aggregate": "data/aggregate",
    "validate": "reports",
    "report": "reports",
}
"""Each stage's folder when ``params.yaml`` names none (``{name}``: the judge or context)."""


def default_dir(stage: str, name: str = "") -> str:
    """The stage's default folder (a judge's or context's with its ``name``)."""
    return DEFAULT_DIRS[stage].format(name=name)


def items_file(ingest_dir: str | Path) -> Path:
    """The items file of an ingest folder."""
    return Path(ingest_dir) / ITEMS


def judgements_file(judge_dir: str | Path) -> Path:
    """The rows file of a judge folder."""
    return Path(judge_dir) / JUDGEMENTS


def summary_file(stage_dir: str | Path) -> Path:
    """The summary of any stage's folder."""
    return Path(stage_dir) / SUMMARY
