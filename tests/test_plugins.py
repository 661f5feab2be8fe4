"""Components from an installed package: entry points, not edits to src/ (#23).

tests/plugins/ holds a distribution as pip would leave it (``capjudge_demo_plugin`` and its
``.dist-info`` with ``entry_points.txt``). With that folder on ``sys.path``, the registries
list its method, backend kind, dataset and protocol, import them only when asked, and the CLI
scores an item with them. Broken and clashing plugins are written here, per test.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import install_plugin_path, uninstall_plugin_path

from capjudge.backends import BACKEND_REGISTRY, backend_kinds, create_backend
from capjudge.metaeval import run_meta_eval
from capjudge.metaeval.datasets import DATASET_REGISTRY, DatasetError, dataset_names, load
from capjudge.metaeval.protocols import get_protocol, protocol_names
from capjudge.methods import METHOD_REGISTRY, get_method, method_names
from capjudge.protocol import BackendError
from capjudge.registry import Registry, RegistryError


def test_the_registries_list_the_plugin_and_import_it_only_when_asked(demo_plugin: Path
                                                                       ) -> None:
    assert "demo-overlap" in method_names() and "demo" in backend_kinds()
    assert "demo-ratings" in dataset_names()
    assert "capjudge_demo_plugin.method" not in sys.modules  # listed, not imported
    origin = METHOD_REGISTRY.origin("demo-overlap")
    assert "capjudge-demo-plugin 0.1.0" in origin and "capjudge.methods" in origin
    assert not METHOD_REGISTRY.is_builtin("demo-overlap") and METHOD_REGISTRY.is_builtin("gveval")
    method = get_method("demo-overlap")
    assert "capjudge_demo_plugin.method" in sys.modules
    assert method.name == "demo-overlap" and method.criteria[0].name == "overlap"
    assert BACKEND_REGISTRY.get("demo").__module__ == "capjudge_demo_plugin.backend"
    # The dataset's own protocol and the one registered through capjudge.protocols.
    assert protocol_names("demo-ratings") == ["demo-ratings-rows", "demo-ratings-mean"]
    assert get_protocol("demo-ratings").name == "demo-ratings-rows"


def test_the_cli_scores_an_item_with_the_plugin_method_and_backend(
        demo_plugin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from capjudge.cli import main

    code = main(["score", "--method", "demo-overlap", "--backend", "demo/4",
                 "--caption", "a dog runs on the beach", "--ref", "a dog running on sand",
                 "--cache-dir", str(tmp_path / "cache"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    # demo/4 puts all its probability on 4: the expected score is 4 exactly.
    assert out["score"] == 4.0 and out["status"] == "ok"
    assert out["distribution"] == {"4": 1.0}
    assert out["backend"] == "demo/4" and out["snapshot"] == "demo-4-v1"
    # The template comes from the plugin's own folder, versioned by its content hash.
    assert out["template"].startswith("demo/overlap@sha256-")
    # No references: the method's recorded skip, not a score.
    code = main(["score", "--method", "demo-overlap", "--backend", "demo/4",
                 "--caption", "a dog", "--cache-dir", str(tmp_path / "cache"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and out["score"] is None and "needs references" in out["reason"]


def test_the_plugin_backend_validates_like_a_built_in(demo_plugin: Path) -> None:
    with pytest.raises(BackendError, match="does not accept the option.*colour"):
        create_backend("demo/3", colour="red")


def test_the_plugin_dataset_is_meta_evaluated(demo_plugin: Path, tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    path.write_text(json.dumps([
        {"id": i, "candidate": f"c{i}", "references": ["r"], "ratings": [i, i + 1]}
        for i in range(4)]))
    data = load("demo-ratings", path)
    assert [c.ratings["overall"] for c in data.candidates] == [[0, 1], [1, 2], [2, 3], [3, 4]]
    judge = {"id": lambda cands, refs: [float(c[1:]) for c in cands]}
    rows = run_meta_eval("demo-ratings", str(path), metrics=[], judges=judge, n_boot=0)
    assert rows["protocol"] == "demo-ratings-rows" and rows["n_rows"] == 8
    mean = run_meta_eval("demo-ratings", str(path), protocol="demo-ratings-mean", metrics=[],
                         judges=judge, n_boot=0)
    # Scores 0..3 against means 0.5..3.5: a perfect line.
    assert mean["n_rows"] == 4 and mean["metrics"]["id"]["pearson"] == pytest.approx(1.0)


def _write_dist(root: Path, name: str, entry_points: str) -> Path:
    info = root / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)
    return root


@pytest.fixture
def bad_plugins(tmp_path: Path, demo_plugin: Path) -> Iterator[Path]:
    """A plugin that cannot be imported, one that claims a built-in's name, one of the wrong
    kind, and one whose dataset module fails when imported."""
    root = tmp_path / "site"
    _write_dist(root, "capjudge_broken", "[capjudge.methods]\n"
                "broken = capjudge_no_such_module:Method\n"
                "gveval = capjudge_clash:GVEval\n"
                "not-a-method = json:loads\n"
                "[capjudge.backends]\n"
                "demo = capjudge_clash:Backend\n"
                "[capjudge.datasets]\n"
                "explodes = capjudge_explodes:SPEC\n")
    (root / "capjudge_explodes.py").write_text("raise RuntimeError('boom\\nsecond line')\n")
    install_plugin_path(root)
    yield root
    uninstall_plugin_path(root, "capjudge_explodes")


def test_a_broken_plugin_fails_alone_with_a_one_line_error(bad_plugins: Path) -> None:
    names = method_names()
    assert {"broken", "gveval", "not-a-method", "demo-overlap", "visce2"} <= set(names)
    with pytest.raises(RegistryError) as info:
        get_method("broken")
    message = str(info.value)
    assert "\n" not in message and "'broken = capjudge_no_such_module:Method'" in message
    assert "capjudge_broken 1.0" in message and "ModuleNotFoundError" in message
    with pytest.raises(RegistryError, match="is not a Method subclass"):
        get_method("not-a-method")
    with pytest.raises(DatasetError) as data_info:
        load("explodes", bad_plugins / "capjudge_explodes.py")
    assert "RuntimeError: boom second line" in str(data_info.value)
    assert "\n" not in str(data_info.value)
    # Everything else still works, the listing of protocols included.
    assert get_method("visce2").name == "visce2" and get_method("demo-overlap")
    assert "flickr8k-expert-rows" in protocol_names()


def test_a_plugin_may_not_replace_a_built_in_or_another_plugin(bad_plugins: Path) -> None:
    with pytest.raises(RegistryError) as info:
        get_method("gveval")
    message = str(info.value)
    assert "built-in capjudge.methods.gveval:GVEval" in message
    assert "'gveval = capjudge_clash:GVEval'" in message and "capjudge_broken 1.0" in message
    with pytest.raises(BackendError) as backend_info:
        create_backend("demo/4")
    message = str(backend_info.value)
    assert "backend kind 'demo' is claimed by" in message
    assert "capjudge-demo-plugin 0.1.0" in message and "capjudge_broken 1.0" in message
    assert METHOD_REGISTRY.get("harmoniceval").name == "harmoniceval"


def test_the_cli_reports_a_broken_plugin_in_one_line(bad_plugins: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from capjudge.cli import main

    code = main(["score", "--method", "broken", "--backend", "fake/hash", "--caption", "a dog",
                 "--ref", "a dog", "--cache-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("capjudge score: error: method 'broken': cannot load its entry point")


def test_code_registration_may_not_silently_replace_either() -> None:
    registry: Registry[int] = Registry("thing")
    registry.add_lazy("one", "json:loads")
    with pytest.raises(ValueError, match="'one' is already registered .built-in json:loads"):
        registry.add("one", 1)
    registry.add("one", 1, replace=True)
    assert registry.get("one") == 1
    with pytest.raises(RegistryError, match="unknown thing 'two'; known: one"):
        registry.get("two")
    with pytest.raises(ValueError, match="already registered"):
        DATASET_REGISTRY.add("vatex-eval", DATASET_REGISTRY.get("foil"))


def test_a_broken_plugin_leaves_the_context_stage_default_alone(
        bad_plugins: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without ``method:`` a contexts section runs the one method with a context stage; the
    methods that cannot be loaded are left out with a warning, and naming one is a one-line
    error of the stage."""
    import logging

    import yaml

    from capjudge.methods import context_method_names, default_context_method
    from flows.context import main as context_main

    warnings: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: warnings.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("capjudge.methods").addHandler(handler)
    try:
        assert context_method_names() == ["visce2"] and default_context_method() == "visce2"
    finally:
        logging.getLogger("capjudge.methods").removeHandler(handler)
    assert any(w.startswith("method broken left out") for w in warnings), warnings
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"ingest": {"out": str(tmp_path / "ingest")},
                                      "contexts": {"c": {"method": "broken"}}}))
    capsys.readouterr()  # the warnings above
    assert context_main(["--name", "c", "--params", str(params)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"context c: error: {params}: contexts.c.method: method 'broken': "
                          "cannot load its entry point")
