"""``capjudge init DIR``: a starter params.yaml for your own data, in a capjudge checkout."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tiny_project import write_manifest

from capjudge.cli import main as cli_main
from capjudge.params import load_params


def _checkout(root: Path) -> Path:
    """A folder with what makes a capjudge checkout (the pipeline's entry points)."""
    for name in ("dvc.yaml", "flows/__init__.py", "tasks/__init__.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    return root


def test_init_writes_params_pointing_at_the_users_data(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    root = _checkout(tmp_path / "eval")
    manifest = write_manifest(root / "mine")
    code = cli_main(["init", str(root), "--manifest", str(manifest), "--media-root",
                     str(root / "mine" / "media"), "--backend", "openai/my-model",
                     "--base-url", "http://127.0.0.1:8000/v1"])
    assert code == 0, capsys.readouterr().err
    params = load_params(root / "params.yaml")  # the schema every stage reads
    assert params["ingest"]["manifest"] == "mine/my.jsonl"  # relative to the project
    assert params["ingest"]["media_root"] == "mine/media"
    assert params["report"]["human_criterion"] == "rating"  # the manifest's one label key
    assert params["judges"] == {"mine": {"method": "gveval", "backend": "openai/my-model",
                                         "backend_options": {
                                             "base_url": "http://127.0.0.1:8000/v1"}}}
    assert params["contexts"] == {} and params["context_judges"] == {}
    text = (root / "params.yaml").read_text()
    # Block style: `dvc exp run -S` unquotes a URL inside a flow-style mapping.
    assert "backend_options:\n      base_url:" in text
    # Every section dvc.yaml's stages read is there.
    repo_stages = yaml.safe_load((Path(__file__).parents[1] / "dvc.yaml").read_text())
    for stage in repo_stages["stages"].values():
        for key in (stage.get("do") or stage).get("params") or []:
            assert key.split(".")[0] in params, key


@pytest.mark.parametrize(("backend", "base_url", "forced"), [
    ("openai/gemma-3-270m", "http://127.0.0.1:8731/v1", True),  # capjudge serve's embedded
    ("llamacpp/gemma-3-270m", None, True),
    ("openai/my-model", "http://127.0.0.1:8000/v1", False),
])
def test_init_asks_for_the_forced_anchor_only_for_the_embedded_base_model(
        tmp_path: Path, backend: str, base_url: str | None, forced: bool) -> None:
    root = _checkout(tmp_path / "eval")
    manifest = write_manifest(root / "mine")
    argv = ["init", str(root), "--manifest", str(manifest), "--backend", backend]
    argv += ["--base-url", base_url] if base_url else []
    assert cli_main(argv) == 0
    options = load_params(root / "params.yaml")["judges"]["mine"].get("backend_options") or {}
    assert options.get("force_anchor") is (True if forced else None)
    # Elsewhere the option is there to switch on, commented.
    assert forced or "# force_anchor: true" in (root / "params.yaml").read_text()


def test_init_refuses_to_overwrite_without_force(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    root = _checkout(tmp_path)
    (root / "params.yaml").write_text("keep: me\n")
    assert cli_main(["init", str(root)]) == 2
    err = capsys.readouterr().err
    assert "params.yaml exists" in err and "--force" in err
    assert (root / "params.yaml").read_text() == "keep: me\n"
    assert cli_main(["init", str(root), "--force"]) == 0
    assert load_params(root / "params.yaml")["ingest"]["manifest"] == "my-data/manifest.jsonl"


@pytest.mark.parametrize(("extra", "fragment"), [
    (["--manifest", "{root}/none.jsonl"], "--manifest"),
    (["--media-root", "{root}/none"], "--media-root"),
    (["--media-root", "{root}"], "holds the pipeline's outputs"),
    (["--base-url", "http://127.0.0.1:8000/v1"], "openai/<served-name>"),
    (["--backend", "nope/x"], "unknown backend kind"),
])
def test_init_bad_flags_are_one_line_and_write_nothing(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str],
                                                       extra: list[str], fragment: str) -> None:
    root = _checkout(tmp_path)
    assert cli_main(["init", str(root), *[e.format(root=root) for e in extra]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("capjudge init: error: ") and fragment in err[-1]
    assert not (root / "params.yaml").exists()


def test_init_outside_a_checkout_says_where_to_run_it(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["init", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a capjudge checkout" in err and "clone" in err
    assert not (tmp_path / "params.yaml").exists()
