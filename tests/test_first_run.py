"""The path a real user takes (issue 39): a new project, their own manifest outside ``data/``,
``dvc repro`` the first time, then a corrected human label re-runs ingest and reaches the report.

The project is the tracked tree without ``data/`` and ``reports/`` (what a clone has before any
run: no registered run, no plot files), in a new git repository; the judge is the scripted
``fake/hash+vision`` backend (no model, no network): about a minute on 2 cores, mostly the
start-up of each stage's process.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from PIL import Image

# Six captions by three systems; the user has rated two of them so far (1-5, ``overall``):
# too few for a Kendall tau-b or a calibration curve, so no run enters the history and no
# series has calibration bins, yet every plot file dvc.yaml declares must be written.
ITEMS = [
    ("red-1", "red", "model-a", "A red square.", 5),
    ("red-2", "red", "model-b", "A blue circle on grass.", 1),
    ("green-1", "green", "model-c", "A green square.", None),
    ("green-2", "green", "model-a", "Two dogs playing.", None),
    ("blue-1", "blue", "model-b", "A plain blue picture.", None),
    ("blue-2", "blue", "model-c", "A crowded street at night.", None),
]
COLOURS = {"red": (200, 30, 30), "green": (30, 160, 60), "blue": (30, 60, 200)}


def _write_manifest(path: Path, labels: dict[str, float | None]) -> None:
    """The user's JSONL manifest (docs/guides/manifest.md), media paths under its folder."""
    rows = [{"id": i, "image": f"img/{colour}.png", "candidate": text,
             "references": [f"A {colour} square."], "system": system}
            | ({"labels": {"overall": labels[i]}} if labels[i] is not None else {})
            for i, colour, system, text, _ in ITEMS]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _new_project(tmp_path: Path) -> Path:
    """The tracked tree without data/ and reports/, a new git repository, and a user's data."""
    # Tracked files, and new ones not yet added (none in CI): the copy's own src/ is what runs.
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    root = tmp_path / "project"
    for name in files:
        if name.split("/")[0] in ("data", "reports") or not (ROOT / name).is_file():
            continue
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, root / name)
    (root / "dvc.lock").unlink(missing_ok=True)  # never run here
    user = root / "userdata"
    (user / "img").mkdir(parents=True)
    for colour, rgb in COLOURS.items():
        Image.new("RGB", (64, 48), rgb).save(user / "img" / f"{colour}.png")
    _write_manifest(user / "manifest.jsonl", {i: label for i, *_, label in ITEMS})
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["sample"]["images"] = 2
    params["ingest"]["manifest"] = "userdata/manifest.jsonl"
    params["ingest"]["media_root"] = "userdata"
    params["judges"] = {"fake": {"method": "gveval", "backend": "fake/hash+vision",
                                 "modes": ["ref-only"]}}
    params["contexts"] = {}
    params["context_judges"] = {}
    params["judge"]["cache_dir"] = str(tmp_path / "cache")
    params["report"]["bootstrap"] = 20
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    # `git init` and nothing committed yet: what a user has before their first run.
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def _env(root: Path, tmp_path: Path, api_url: str) -> dict[str, str]:
    """What `dvc repro` needs to run the project copy's flows on the test's Prefect server."""
    env = dict(os.environ)
    # `dvc repro` runs `python -m flows.x`: the venv's python, importing this copy's library
    # (not the checkout the editable install points at), and one Prefect server for every
    # stage instead of a temporary one each (8-15 s apiece on 2 cores).
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(root / "src")
    env["PREFECT_API_URL"] = api_url
    env["PREFECT_HOME"] = str(tmp_path / "prefect")
    env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "90"
    return env


def _dvc(root: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["dvc", *args], cwd=root, capture_output=True, text=True,
                          timeout=600, env=env)


def _points(root: Path) -> dict[str, float]:
    """Each labelled item's human label as the report's agreement points give it."""
    with (root / "reports" / "agreement_points.csv").open() as handle:
        return {r["item_id"]: float(r["human"]) for r in csv.DictReader(handle)}


def _declared_outputs(root: Path) -> list[str]:
    """Every out, metric and plot of every stage in the copy's dvc.yaml (foreach stages too)."""
    names = []
    for stage in yaml.safe_load((root / "dvc.yaml").read_text())["stages"].values():
        body = stage.get("do", stage)
        for section in ("outs", "metrics", "plots"):
            names += [e if isinstance(e, str) else next(iter(e)) for e in body.get(section, [])]
    return [n for n in names if "${" not in n]  # per-entry stages: checked by their folders


@pytest.mark.heavy(seconds=56)
@pytest.mark.slow
def test_a_new_project_runs_the_first_time_and_tracks_the_users_manifest(
        tmp_path: Path, prefect_api: str) -> None:
    root = _new_project(tmp_path)
    env = _env(root, tmp_path, prefect_api)
    first = _dvc(root, "repro", env=env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    # Every output dvc.yaml declares was written, though nothing had a tau-b to plot.
    for name in _declared_outputs(root):
        assert (root / name).exists(), f"{name} was not written"
    assert (root / "data/judge/fake/judgements.parquet").is_file()
    assert (root / "reports/dvcplots/history/none.csv").read_text().startswith("run,")
    shown = _dvc(root, "plots", "show", "--json", env=env)
    assert shown.returncode == 0, shown.stdout[-2000:] + shown.stderr[-2000:]
    assert _points(root) == {"red-1": 5.0, "red-2": 1.0}

    # A human rating corrected in the user's manifest (outside data/): ingest is stale.
    labels = {i: label for i, *_, label in ITEMS} | {"red-2": 3}
    _write_manifest(root / "userdata" / "manifest.jsonl", labels)
    status = _dvc(root, "status", env=env)
    assert status.returncode == 0, status.stderr
    assert "ingest:" in status.stdout and "userdata/manifest.jsonl" in status.stdout, \
        status.stdout
    assert "sample:" not in status.stdout, status.stdout
    second = _dvc(root, "repro", env=env)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "Running stage 'ingest'" in second.stdout
    assert "Stage 'sample' didn't change, skipping" in second.stdout
    assert _points(root) == {"red-1": 5.0, "red-2": 3.0}  # the new label is reported
    assert "Data and pipelines are up to date" in _dvc(root, "status", env=env).stdout

    # A picture replaced under the same name makes ingest stale too, and nothing upstream.
    Image.new("RGB", (64, 48), (250, 250, 0)).save(root / "userdata" / "img" / "red.png")
    status = _dvc(root, "status", env=env)
    assert "ingest:" in status.stdout, status.stdout
    assert re.search(r"modified:\s+userdata$", status.stdout, re.M), status.stdout
    assert "sample:" not in status.stdout, status.stdout
