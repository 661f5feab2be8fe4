"""The report renders whatever the data (issue 33, item 1).

A user's first run is small: one or two items, one system, a judge whose every row failed, no
human labels. The report stage must write both pages over such inputs, saying what could not be
measured, never crash (its templates are strict: a missing key is an error, not a blank).

Each case below builds a real ingest folder (a subset of the bundled sample's items, edited),
runs real judges (``fake/...`` backends: deterministic, no model) through aggregate and report,
then checks that both pages and the metrics file were written and say what the case implies.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from capjudge.aggregate import AggregateConfig, run_aggregate
from capjudge.judge import JudgeConfig, run_judge
from capjudge.report import ReportConfig, run_report

Edit = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


@dataclass(frozen=True)
class Case:
    """One degenerate input: which items, how they are edited, and which judges run."""

    name: str
    n_items: int
    judges: tuple[tuple[str, str, str, tuple[str, ...] | None], ...]
    """(judge name, method, backend, modes)."""
    edit: Edit | None = None
    reps: int = 1
    expect_in_md: tuple[str, ...] = field(default_factory=tuple)


def _image_items(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["media_kind"] == "image" and r["references"]]


def _no_labels(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "labels": None} for r in rows]


def _one_system(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "system": "only-system"} for r in rows]


def _constant_labels(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "labels": json.dumps({"overall": [3.0]})} for r in rows]


GV = ("gv", "gveval", "fake/hash", ("ref-only",))
HE = ("he", "harmoniceval", "fake/hash", None)
CONST = ("gv-const", "gveval", "fake/const:70", ("ref-only",))
FAILING = ("gv-fail", "gveval", "fake/fail", ("ref-only",))
VISION_ONLY = ("gv-vision", "gveval", "fake/hash", ("ref-free",))  # text-only backend: skipped

CASES = [
    Case("two-items-two-judges", 2, (GV, HE)),
    Case("one-item", 1, (GV,)),
    Case("one-system", 6, (GV, HE), edit=_one_system),
    Case("constant-scores", 8, (CONST,)),
    # Enough items for the reliability sections (length bias, calibration: 10), all constant:
    # rows without an estimate (the small-run crash of issue 33).
    Case("constant-scores-reliability", 14, (CONST, GV)),
    Case("constant-labels-reliability", 14, (GV,), edit=_constant_labels),
    Case("constant-human-labels", 8, (GV,), edit=_constant_labels),
    Case("no-human-labels", 5, (GV, HE), edit=_no_labels),
    Case("every-row-failed", 4, (FAILING,), expect_in_md=("error",)),
    Case("failed-beside-ok", 4, (GV, FAILING)),
    Case("only-skipped-modes", 3, (VISION_ONLY,), expect_in_md=("ref-free",)),
    Case("single-mode-repeats", 3, (("gv-rep", "gveval", "fake/hash", ("ref-only",)),),
         reps=2),
    Case("no-items", 0, (GV,)),
]


def _ingest_subset(ingested: Path, out: Path, case: Case) -> Path:
    """A copy of the sample's ingest folder holding ``case.n_items`` edited image items."""
    shutil.copytree(ingested, out)
    table = pq.read_table(ingested / "items.parquet")
    rows = _image_items(table.to_pylist())[:case.n_items]
    if case.edit:
        rows = case.edit(rows)
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), out / "items.parquet")
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_report_renders_on_degenerate_inputs(case: Case, ingested: Path,
                                                 tmp_path: Path) -> None:
    ingest = _ingest_subset(ingested, tmp_path / "ingest", case)
    dirs = []
    for name, method, backend, modes in case.judges:
        config = JudgeConfig(method=method, backend=backend, modes=list(modes) if modes else None,
                             cache_dir=str(tmp_path / "cache"), repeats=case.reps,
                             temperature=0.7 if case.reps > 1 else 0.0)
        run_judge(ingest / "items.parquet", tmp_path / name, config)
        dirs.append(tmp_path / name)
    run_aggregate(dirs, tmp_path / "agg", AggregateConfig())
    out = tmp_path / "reports"
    ctx = run_report(ingest, dirs, tmp_path / "agg", out,
                     ReportConfig(bootstrap=30, registry=str(tmp_path / "runs"),
                                  params=str(tmp_path / "absent-params.yaml")))
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    assert md.startswith("# ") and "## Agreement with humans" in md
    assert html.lstrip().lower().startswith("<!doctype html") and html.rstrip().endswith("</html>")
    # A missing figure is a dash with its reason, never a NaN or a Python None on the page.
    for page in (md, html):
        assert not re.search(r"\bnan\b|\bNone\b", page), re.findall(
            r"[^\n]{0,80}(?:nan|None)[^\n]{0,30}", page)[:3]
    for text in case.expect_in_md:
        assert text in md, text
    metrics = json.loads((out / "metrics.json").read_text())
    scored = [a for a in ctx["agreement"] if "kendall_tau_b" in a]
    for a in scored:
        series = f"{a['judge']}/{a['mode']}"
        assert series in metrics
        tau = a["kendall_tau_b"]
        # A correlation that cannot exist (n < 2, a constant side) is null, never a number.
        assert tau is None or -1 <= tau <= 1
    # What ran is listed, and a failing judge's failures are counted, not hidden.
    for name, *_ in case.judges:
        assert name in md and name in html
    if case.name == "every-row-failed":
        assert metrics["runs"]["gv-fail"]["failure_rate"] == pytest.approx(1.0)
