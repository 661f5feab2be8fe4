"""Unit tests of :mod:`capjudge.stage_files`: one home for the stages' folders and files,
and dvc.yaml spelling the same ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from capjudge import stage_files
from capjudge.stage_files import DEFAULT_DIRS, default_dir, items_file

ROOT = Path(__file__).resolve().parents[1]


def _stages() -> dict[str, dict[str, Any]]:
    stages: dict[str, dict[str, Any]] = yaml.safe_load(
        (ROOT / "dvc.yaml").read_text())["stages"]
    return {name: stage.get("do", stage) for name, stage in stages.items()}


def _outs(stage: dict[str, Any]) -> list[str]:
    outs = stage.get("outs") or []
    assert isinstance(outs, list)
    return [next(iter(o)) if isinstance(o, dict) else str(o) for o in outs]


def test_dvc_yaml_writes_each_stage_to_its_default_folder() -> None:
    stages = _stages()
    assert _outs(stages["ingest"]) == [default_dir("ingest")]
    assert _outs(stages["context"]) == [default_dir("context", "${key}")]
    assert _outs(stages["judge"]) == [default_dir("judge", "${key}")]
    assert _outs(stages["judge-ctx"]) == [default_dir("judge", "${key}")]
    assert _outs(stages["aggregate"]) == [default_dir("aggregate")]
    assert all(o.startswith(default_dir("validate") + "/") for o in _outs(stages["validate"]))
    assert all(o.startswith(default_dir("report") + "/") for o in _outs(stages["report"]))


def test_dvc_yaml_reads_what_the_stages_write() -> None:
    stages = _stages()
    assert str(items_file(default_dir("ingest"))) in stages["validate"]["deps"]
    assert default_dir("context", "${item.context}") in stages["judge-ctx"]["deps"]
    for stage in ("aggregate", "validate", "report"):
        assert str(Path(default_dir("judge", "x")).parent) in stages[stage]["deps"]


def test_every_stage_has_a_default_folder_and_the_file_names_are_distinct() -> None:
    assert set(DEFAULT_DIRS) == {"ingest", "context", "judge", "aggregate", "validate", "report"}
    names = [v for k, v in vars(stage_files).items() if k.isupper() and isinstance(v, str)]
    assert len(names) == len(set(names)) and all("/" not in n for n in names)
    assert stage_files.summary_file("data/judge/a") == Path("data/judge/a/summary.json")
    assert stage_files.judgements_file("j") == Path("j/judgements.parquet")
