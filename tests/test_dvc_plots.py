"""The report stage's ``dvc plots`` files: hand-computed calibration bins, and ``dvc plots show``
renders every declared file (agreement, history, scores, calibration) with dvc.yaml's plots."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from capjudge.report.dvc_plots import (
    EMPTY_SERIES,
    SERIES_FOLDERS,
    calibration_curve,
    write_dvc_plots,
)


def test_calibration_curve_bins_by_score() -> None:
    # Six items in three equal-count bins, sorted by score (human labels follow along).
    curve = calibration_curve([50, 10, 30, 20, 60, 40], [5, 1, 3, 2, 4, 4], bins=3)
    assert curve == [(15.0, 1.5, 2), (35.0, 3.5, 2), (55.0, 4.5, 2)]


def _ctx() -> tuple[dict, list[dict]]:
    agreement = [{"judge": "j", "mode": "m", "n": 4, "kendall_tau_b": 0.5,
                  "ci95": {"kendall_tau_b": [0.1, 0.9]}},
                 {"judge": "k", "mode": "m", "n": 0, "ci95": {}}]  # not scored: no row
    history = {"j/m": [{"run_id": f"r{k}", "time": f"2026-01-0{k + 1}T00:00:00",
                        "snapshot": "s1" if k < 2 else "s2", "snapshot_changed": k == 2,
                        "n": 4, "kendall_tau_b": tau, "ci95": [tau - 0.2, tau + 0.2]}
                       for k, tau in enumerate((0.5, 0.4, -0.1))]}
    rows = [{"series": "j/m", "item_id": f"i{k}", "system": "a" if k < 2 else "b",
             "score": float(10 * k), "human": float(k)} for k in range(4)]
    return {"agreement": agreement, "history": history}, rows


def test_plot_files(tmp_path: Path) -> None:
    ctx, rows = _ctx()
    written = write_dvc_plots(tmp_path / "dvcplots", ctx, rows)
    names = sorted(p.relative_to(tmp_path / "dvcplots").as_posix() for p in written)
    assert names == ["agreement.csv", "calibration/j__m.csv", "history/j__m.csv",
                     "scores/j__m.csv"]
    assert (tmp_path / "dvcplots" / "agreement.csv").read_text().splitlines() == [
        "series,n,kendall_tau_b,ci_low,ci_high", "j/m,4,0.500000,0.100000,0.900000"]
    history = (tmp_path / "dvcplots" / "history" / "j__m.csv").read_text().splitlines()
    assert len(history) == 4 and history[3].startswith("2,r2,") and ",s2,1,4,-0.100000," \
        in history[3]


@pytest.mark.skipif(shutil.which("dvc") is None and not (ROOT / ".venv").is_dir(),
                    reason="dvc is not installed")
def test_dvc_plots_show_renders_the_declared_files(tmp_path: Path) -> None:
    ctx, rows = _ctx()
    write_dvc_plots(tmp_path / "reports" / "dvcplots", ctx, rows)
    (tmp_path / "reports" / "agreement_points.csv").write_text("series,item_id,human,score\n"
                                                             "j/m,i0,0,0\n")
    stage = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["report"]
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump(
        {"stages": {"report": {"cmd": "true", "plots": stage["plots"]}}}))
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["dvc", "init", "-q"], cwd=tmp_path, check=True)
    shown = subprocess.run(["dvc", "plots", "show", "--json"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)["data"]
    assert {f"reports/dvcplots/{name}" for name in (
        "agreement.csv", "history/j__m.csv", "scores/j__m.csv", "calibration/j__m.csv")
            } <= set(data)
    values = data["reports/dvcplots/history/j__m.csv"][0]["content"]["data"]["values"]
    assert [float(v["kendall_tau_b"]) for v in values] == [0.5, 0.4, -0.1]


def test_every_declared_folder_is_written_when_there_is_no_series(tmp_path: Path) -> None:
    """A new project's first run: no registered run with a tau-b, nothing scored or labelled;
    DVC fails the stage on a missing declared output, so each folder holds its header."""
    written = write_dvc_plots(tmp_path / "reports" / "dvcplots",
                              {"agreement": [], "history": {}}, [])
    names = sorted(p.relative_to(tmp_path / "reports" / "dvcplots").as_posix() for p in written)
    assert names == ["agreement.csv", f"calibration/{EMPTY_SERIES}", f"history/{EMPTY_SERIES}",
                     f"scores/{EMPTY_SERIES}"]
    for folder, header in SERIES_FOLDERS.items():
        path = tmp_path / "reports" / "dvcplots" / folder / EMPTY_SERIES
        assert path.read_text().splitlines() == [",".join(header)]
    # Scored series but fewer than three labelled items: only calibration is left empty.
    ctx, rows = _ctx()
    partly = write_dvc_plots(tmp_path / "partly", ctx, [dict(r, human=None) for r in rows])
    assert sorted(p.relative_to(tmp_path / "partly").as_posix() for p in partly) == [
        "agreement.csv", f"calibration/{EMPTY_SERIES}", "history/j__m.csv", "scores/j__m.csv"]
    if shutil.which("dvc") is None:
        return
    stage = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["report"]
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump(
        {"stages": {"report": {"cmd": "true", "plots": [
            p for p in stage["plots"] if next(iter(p)).startswith("reports/dvcplots/")]}}}))
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["dvc", "init", "-q"], cwd=tmp_path, check=True)
    shown = subprocess.run(["dvc", "plots", "show", "--json"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)["data"]
    assert data[f"reports/dvcplots/history/{EMPTY_SERIES}"] == []  # an empty plot, no error
