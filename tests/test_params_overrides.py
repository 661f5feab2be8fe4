"""YAML the docs show survives ``dvc exp run -S`` (which ``capjudge watch`` runs too).

``-S`` rewrites ``params.yaml`` through ruamel.yaml; a quoted URL in a flow-style mapping comes
back unquoted, and DVC's own reader then refuses the file ("YAML file structure is corrupted").
The tests call DVC's ``-S`` code path (``dvc.utils.hydra.apply_overrides``) and its reader
(``dvc.utils.serialize.parse_yaml``) directly: the same code, without running an experiment.
"""

from __future__ import annotations

import logging
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from capjudge.params import flow_style_hazards, load_params, validate_params

ROOT = Path(__file__).resolve().parents[1]
dvc_hydra = pytest.importorskip("dvc.utils.hydra")
dvc_serialize = pytest.importorskip("dvc.utils.serialize")


def _doc_yaml_blocks() -> list[tuple[str, str]]:
    """Every ```yaml block of the docs and the README that is a YAML mapping, and params.yaml."""
    blocks = [("params.yaml", (ROOT / "params.yaml").read_text(encoding="utf-8"))]
    for page in [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]:
        text = page.read_text(encoding="utf-8")
        for i, match in enumerate(re.finditer(r"```ya?ml\n(.*?)```", text, re.S)):
            try:
                data = yaml.safe_load(match.group(1))
            except yaml.YAMLError:
                continue  # a sketch with placeholders, not a file to copy
            if isinstance(data, dict):
                blocks.append((f"{page.relative_to(ROOT)}#{i}", match.group(1)))
    return blocks


def _set(path: Path, overrides: list[str]) -> dict[str, Any]:
    """Apply ``dvc exp run -S`` overrides to the file; return it as DVC then reads it."""
    dvc_hydra.apply_overrides(str(path), overrides)
    data: dict[str, Any] = dvc_serialize.parse_yaml(path.read_text(encoding="utf-8"),
                                                    str(path))
    return data


BLOCKS = _doc_yaml_blocks()


@pytest.mark.parametrize(("where", "text"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_every_yaml_the_docs_show_survives_dvc_set_param(tmp_path: Path, where: str,
                                                         text: str) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(text, encoding="utf-8")
    before = yaml.safe_load(text)
    after = _set(path, ["+capjudge_probe=1"])  # any -S rewrites the whole file
    assert after == {**before, "capjudge_probe": 1}, where
    assert flow_style_hazards(text) == [], where


def test_the_hazard_check_names_what_dvc_would_corrupt(tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    # The docs' example as it was: a quoted URL in a flow-style mapping.
    text = ('judges:\n  gveval-qwen:\n    method: gveval\n    backend: openai/qwen2.5-vl-7b\n'
            '    backend_options: {base_url: "http://gpu-host:8000/v1", concurrency: 64}\n')
    hazards = flow_style_hazards(text)
    assert len(hazards) == 1
    assert hazards[0].startswith("judges.gveval-qwen.backend_options.base_url: "
                                 "'http://gpu-host:8000/v1' in a flow-style")
    # ... and DVC really cannot read the file after -S (the check is not a guess).
    path = tmp_path / "params.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(dvc_serialize.YAMLFileCorruptedError):
        _set(path, ["judges.gveval-qwen.method=gveval"])
    # Flow style without a colon-bearing string is fine (params.yaml's own {engines: 2, ...}).
    assert flow_style_hazards("a: {engines: 2, x: 'y z', t: 'k: v'}\n") == []
    # Loading such a file works (it is valid as written) and warns, naming the key.
    path.write_text(text, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="capjudge.params"):
        load_params(path)
    assert any("judges.gveval-qwen.backend_options.base_url" in r.getMessage()
               and "block style" in r.getMessage() for r in caplog.records)


def _documented_switch() -> list[list[str]]:
    """The ``-S`` arguments of each documented ``dvc exp run`` that moves a judge to OpenAI."""
    runs = []
    for page in (ROOT / "params.yaml", ROOT / "docs" / "guides" / "lineage.md"):
        for line in page.read_text(encoding="utf-8").splitlines():
            if "dvc exp run -S" in line and "backend=openai/" in line:
                words = shlex.split(line.lstrip("# "))
                runs.append([words[i + 1] for i, w in enumerate(words) if w == "-S"])
    return runs


def test_the_documented_switch_to_an_openai_backend_gives_valid_params(tmp_path: Path) -> None:
    """``-S 'X.backend_options={}'`` kept the llama.cpp options (DVC merges mappings)."""
    runs = _documented_switch()
    assert len(runs) == 2
    for overrides in runs:
        path = tmp_path / "params.yaml"
        path.write_text((ROOT / "params.yaml").read_text(encoding="utf-8"), encoding="utf-8")
        after = _set(path, overrides)
        assert after["judges"]["gveval-embedded"]["backend"].startswith("openai/")
        validate_params(after)  # no llama.cpp option left on the OpenAI judge
