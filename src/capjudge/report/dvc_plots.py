"""Plot data for ``dvc plots``: CSV files the report stage writes and ``dvc.yaml`` declares.

- ``agreement.csv``: per scored judge/mode, Kendall τ-b with its 95 % CI and n;
- ``history/<judge>__<mode>.csv``: τ-b with its CI per registered run (the run history);
- ``scores/<judge>__<mode>.csv``: every scored item's score with its system (the score
  distribution per system);
- ``calibration/<judge>__<mode>.csv``: the calibration curve — labelled items sorted by score
  into (up to) ten equal-count bins, each bin's mean score against its mean human label.

``dvc plots show`` renders them; ``dvc plots diff`` between two experiments overlays them.
Every file and folder ``dvc.yaml`` declares is written whatever the data: a folder with no
series (no scored judge/mode, no run with a Kendall τ-b yet, fewer than three labelled items)
holds :data:`EMPTY_SERIES`, its header alone, since DVC fails a stage whose declared output is
missing and ``dvc plots show`` renders a header-only file as an empty plot.
"""

from __future__ import annotations

import csv
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from capjudge.records import ScoredItem
from capjudge.report.context import ReportContext

CALIBRATION_BINS = 10
# The file a per-series folder holds when it has no series; real series are ``judge__mode``,
# so the name never clashes with one.
EMPTY_SERIES = "none.csv"
AGREEMENT_HEADER = ("series", "n", "kendall_tau_b", "ci_low", "ci_high")
HISTORY_HEADER = ("run", "run_id", "time", "snapshot", "snapshot_changed", "n",
                  "kendall_tau_b", "ci_low", "ci_high")
SCORES_HEADER = ("system", "item_id", "score")
CALIBRATION_HEADER = ("bin", "mean_score", "mean_human", "items")
# The per-series folders dvc.yaml declares, with their files' header.
SERIES_FOLDERS = {"history": HISTORY_HEADER, "scores": SCORES_HEADER,
                  "calibration": CALIBRATION_HEADER}


def _name(series: str) -> str:
    return series.replace("/", "__")


def _write(path: Path, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for row in rows:
            writer.writerow(["" if v is None else (f"{v:.6f}" if isinstance(v, float) else v)
                             for v in row])


def calibration_curve(scores: Sequence[float], human: Sequence[float],
                      bins: int = CALIBRATION_BINS) -> list[tuple[float, float, int]]:
    """(mean score, mean human label, items) per equal-count bin of the scores, low to high."""
    order = np.argsort(np.asarray(scores, float), kind="stable")
    s, h = np.asarray(scores, float)[order], np.asarray(human, float)[order]
    out = []
    for chunk in np.array_split(np.arange(len(s)), min(bins, len(s))):
        if len(chunk):
            out.append((float(s[chunk].mean()), float(h[chunk].mean()), len(chunk)))
    return out


def write_dvc_plots(out_dir: Path, ctx: ReportContext, rows: Sequence[ScoredItem]
                    ) -> list[Path]:
    """Write every plot file under ``out_dir`` (replacing the previous ones); returns them."""
    shutil.rmtree(out_dir, ignore_errors=True)
    written = []
    scored = [a for a in ctx["agreement"] if "kendall_tau_b" in a]
    path = out_dir / "agreement.csv"
    _write(path, AGREEMENT_HEADER,
           [(f"{a['judge']}/{a['mode']}", a["n"], a["kendall_tau_b"],
             *((a.get("ci95") or {}).get("kendall_tau_b") or (None, None))) for a in scored])
    written.append(path)
    for series, points in (ctx.get("history") or {}).items():
        path = out_dir / "history" / f"{_name(series)}.csv"
        _write(path, HISTORY_HEADER,
               [(k, p["run_id"], p["time"], p["snapshot"], int(bool(p.get("snapshot_changed"))),
                 p["n"], p["kendall_tau_b"], *(p.get("ci95") or (None, None)))
                for k, p in enumerate(points)])
        written.append(path)
    by_series: dict[str, list[tuple[ScoredItem, float]]] = {}
    for r in rows:
        if (score := r["score"]) is not None:
            by_series.setdefault(r["series"], []).append((r, float(score)))
    for series, items in sorted(by_series.items()):
        path = out_dir / "scores" / f"{_name(series)}.csv"
        _write(path, SCORES_HEADER,
               [(r.get("system") or "(none)", r["item_id"], s) for r, s in items])
        written.append(path)
        labelled = [(s, float(h)) for r, s in items if (h := r["human"]) is not None]
        if len(labelled) >= 3:
            path = out_dir / "calibration" / f"{_name(series)}.csv"
            curve = calibration_curve([s for s, _ in labelled], [h for _, h in labelled])
            _write(path, CALIBRATION_HEADER,
                   [(k, s, h, n) for k, (s, h, n) in enumerate(curve)])
            written.append(path)
    for folder, header in SERIES_FOLDERS.items():
        # A new project's first run has no registered run with a τ-b, a small one may have
        # no series with three labelled items: the declared folder is still there, empty.
        if not (out_dir / folder).is_dir():
            path = out_dir / folder / EMPTY_SERIES
            _write(path, header, [])
            written.append(path)
    return written
