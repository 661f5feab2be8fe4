"""A report from judge output folders and ingested items, without the pipeline.

What ``capjudge report`` runs: the aggregate stage's code into ``<out>/aggregate``, then the
report stage's (:func:`~capjudge.report.run.run_report`) into ``<out>``. The judge folders are
what ``capjudge judge --out DIR`` (or a pipeline judge stage) wrote; the human labels are the
ones the items carry (the manifest's ``labels``, kept by ingest).

Inputs are checked first, each refusal one line naming the path: a missing folder, a folder
that holds no judgements, two judges with one folder name, items without labels, judgements of
other items.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq

from capjudge.aggregate import AggregateConfig, run_aggregate
from capjudge.records import ItemRow
from capjudge.report.context import ReportContext
from capjudge.report.dataset import label_keys
from capjudge.report.run import ReportConfig, run_report
from capjudge.stage_files import JUDGEMENTS, SUMMARY, items_file, judgements_file


class ReportInputError(ValueError):
    """An input of a standalone report is missing or unusable (the message is one line)."""


def ingest_folder(items: str | Path) -> Path:
    """The ingest folder of ``items`` (an ``items.parquet`` file or the folder holding it).

    Raises:
        ReportInputError: neither exists.
    """
    p = Path(items)
    folder = p if p.is_dir() else p.parent
    if not items_file(folder).is_file():
        raise ReportInputError(f"{items}: no items.parquet there (give the ingest output "
                               "folder, e.g. data/ingest, or its items.parquet)")
    return folder


def check_judge_dirs(judge_dirs: Sequence[str | Path], item_ids: set[str]) -> None:
    """Refuse judge folders the report could not use.

    Raises:
        ReportInputError: none given, a folder missing or without ``judgements.parquet`` and
            ``summary.json``, two folders with one name (the name is the judge's), or
            judgements none of whose items are among ``item_ids``.
    """
    if not judge_dirs:
        raise ReportInputError("no judge output folder given")
    seen: dict[str, Path] = {}
    for d in map(Path, judge_dirs):
        if not d.is_dir():
            raise ReportInputError(f"{d}: no such judge output folder")
        missing = [f for f in (JUDGEMENTS, SUMMARY) if not (d / f).is_file()]
        if missing:
            raise ReportInputError(f"{d}: not a judge output folder (no {' or '.join(missing)};"
                                   " write one with capjudge judge --out DIR)")
        if d.name in seen:
            raise ReportInputError(f"{d} and {seen[d.name]}: two judges named {d.name!r} (a "
                                   "judge is named by its folder; rename one)")
        seen[d.name] = d
        judged = set(pq.read_table(judgements_file(d), columns=["item_id"])
                     .column("item_id").to_pylist())
        if judged and not judged & item_ids:
            raise ReportInputError(f"{d}: none of its {len(judged)} judged items is among the "
                                   "given items (judged from another ingest?)")


def build_report(items: str | Path, judge_dirs: Sequence[str | Path], out_dir: str | Path,
                 config: ReportConfig, aggregate: AggregateConfig | None = None
                 ) -> ReportContext:
    """Aggregate the judges' outputs and write the report for them; returns its context.

    Args:
        items: the ingest folder (or its ``items.parquet``); its items carry the labels.
        judge_dirs: judge output folders (each folder's name is its judge's name).
        out_dir: where the report goes; the aggregate tables go to ``<out_dir>/aggregate``.
        config: the report's settings (``human_criterion`` names the label compared with).
        aggregate: the aggregate stage's settings (default: its defaults).

    Raises:
        ReportInputError: an input is missing or unusable, or no item carries a label.
    """
    ingest = ingest_folder(items)
    rows = ItemRow.from_table(pq.read_table(items_file(ingest)))
    if not label_keys(rows):
        raise ReportInputError(f"{ingest}: no item carries human labels (the manifest's "
                               "`labels` key), so there is no agreement to report")
    check_judge_dirs(judge_dirs, {r.id for r in rows})
    out = Path(out_dir)
    run_aggregate(judge_dirs, out / "aggregate", aggregate or AggregateConfig())
    return run_report(ingest, judge_dirs, out / "aggregate", out, config)


__all__ = ["ReportInputError", "build_report", "check_judge_dirs", "ingest_folder"]
