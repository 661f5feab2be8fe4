"""Contract test: every registered method on every kind of backend, through plan -> request ->
parse -> aggregate -> validate -> report.

Backends: the scripted fake, the OpenAI-protocol server (the real HTTP client and response
format), a tiny random-weight local VLM (transformers, exact distributions), and the embedded
GGUF on llama.cpp's server engine (``llamacpp/``, in process; text-only). Whatever the
answers say, every row must respect the contract: a known status, a criterion the method
declares, a score on the scale the method declares for it (or no score, with a reason), and a
report that renders.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from capjudge.aggregate import AggregateConfig, run_aggregate
from capjudge.backends import BACKEND_REGISTRY
from capjudge.judge import JudgeConfig, run_judge
from capjudge.methods import get_method, method_names
from capjudge.protocol import STATUSES
from capjudge.report import ReportConfig, run_report
from capjudge.testing.openai_server import MockOpenAIServer
from capjudge.validate import ValidateConfig, run_validate


@pytest.fixture(scope="module")
def subset(ingested: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two images, one video and one 3D object of the sample, as an ingest folder."""
    rows = pq.read_table(ingested / "items.parquet").to_pylist()
    chosen = [r for r in rows if r["media_kind"] == "image"][:2]
    chosen += [next(r for r in rows if r["media_kind"] == kind) for kind in ("video", "views")]
    out = tmp_path_factory.mktemp("contract-ingest")
    pq.write_table(pa.Table.from_pylist(chosen), out / "items.parquet")
    pq.write_table(pq.read_table(ingested / "quarantine.parquet"), out / "quarantine.parquet")
    return out


@pytest.fixture(scope="module")
def server() -> Iterator[MockOpenAIServer]:
    with MockOpenAIServer() as s:
        yield s


@pytest.fixture(scope="module")
def tiny_vlm_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tiny_vlm import build_tiny_llava

    return str(build_tiny_llava(tmp_path_factory.mktemp("contract-llava")))


BACKENDS = ["fake", "openai-protocol",
            pytest.param("hf-tiny-vlm", marks=pytest.mark.heavy(seconds=8)),
            pytest.param("llamacpp", marks=pytest.mark.heavy(seconds=49))]
TEXT_ONLY = {"llamacpp"}  # the embedded GGUF has no mmproj: vision-only methods are skipped


def _backend(kind: str, server: MockOpenAIServer, tiny: str) -> tuple[str, dict[str, Any]]:
    if kind == "fake":
        return "fake/hash+vision", {}
    if kind == "openai-protocol":
        return "openai/gpt-4o-2024-08-06", {"base_url": server.url}
    if kind == "llamacpp":
        pytest.importorskip("xllamacpp", reason="xllamacpp (llama.cpp's engine) is not installed")
        return "llamacpp/gemma-3-270m", {"threads": 1}
    return f"hf/{tiny}", {"batch_size": 4}


# Every method registered, plugins included: the demo plugin (tests/plugins) is installed for
# this module, and any other installed plugin is listed by the registries like a built-in.
pytestmark = pytest.mark.usefixtures("demo_plugin")


@pytest.mark.slow
@pytest.mark.parametrize("kind", BACKENDS)
def test_every_method_on_every_backend(kind: str, subset: Path, server: MockOpenAIServer,
                                       tiny_vlm_path: str, tmp_path: Path) -> None:
    backend, options = _backend(kind, server, tiny_vlm_path)
    _check_contract(backend, options, kind in TEXT_ONLY, subset, tmp_path)


@pytest.mark.slow
def test_every_method_on_every_plugin_backend(subset: Path, tmp_path: Path) -> None:
    """Backend kinds from installed packages (here the demo plugin's ``demo``).

    A plugin backend is built from its class's ``example_id`` (default ``KIND/example``).
    """
    plugins = [k for k in BACKEND_REGISTRY.names() if not BACKEND_REGISTRY.is_builtin(k)]
    assert "demo" in plugins
    for kind in plugins:
        cls = BACKEND_REGISTRY.get(kind)
        backend = getattr(cls, "example_id", f"{kind}/example")
        _check_contract(backend, {}, not cls(backend.partition("/")[2]).capabilities.vision,
                        subset, tmp_path / kind)


def _check_contract(backend: str, options: dict[str, Any], text_only: bool, subset: Path,
                    tmp_path: Path) -> None:
    """Every method on ``backend``: the rows, the aggregate, validation and the report."""
    kind = backend
    cache = str(tmp_path / "cache")
    dirs = []
    for name in method_names():
        method = get_method(name)
        method_options: dict[str, Any] = {"all_media": True}
        if method.needs_context:
            summary = method.run_context(
                [], tmp_path / "ctx-empty", {"backend": backend, "backend_options": options,
                                             "cache_dir": cache})
            assert summary["rows"] == 0  # no items: nothing asked, nothing invented
            from capjudge.item import load_items

            method.run_context(load_items(subset / "items.parquet"), tmp_path / "ctx",
                               {"backend": backend, "backend_options": options,
                                "max_tokens": 16, "cache_dir": cache})
            method_options["contexts"] = str(tmp_path / "ctx")
        config = JudgeConfig(method=name, backend=backend, backend_options=dict(options),
                             max_tokens=16, cache_dir=cache, method_options=method_options)
        out = tmp_path / "judge" / name
        summary = run_judge(subset / "items.parquet", out, config)
        rows = pq.read_table(out / "judgements.parquet").to_pylist()
        assert rows and summary["rows"] == len(rows)
        judged = [r for r in rows if r["status"] != "skipped"]
        if text_only and not judged:
            # A method that needs the picture in every mode: recorded skips that say why.
            assert all("no vision input" in r["reason"] for r in rows), summary["skips"]
        else:
            assert judged, f"{name} on {kind}: nothing was judged ({summary['skips']})"
            assert summary["requests"] >= 1
        declared = {c.name for c in method.criteria}
        for r in rows:
            assert r["status"] in STATUSES
            assert r["method"] == name and r["backend"] == backend
            if r["status"] == "skipped":
                assert r["reason"]
                continue
            assert r["criterion"] in declared, (name, r["criterion"])
            if r["score"] is None:
                assert r["reason"], r  # no score without a reason
                continue
            scale = method.scale_of(r["criterion"])
            assert scale is not None and scale.contains(r["score"]), (name, r)
            if r["probs"] is not None:
                assert math.isclose(sum(r["probs"]), 1.0, rel_tol=1e-6)
        dirs.append(out)
    run_aggregate(dirs, tmp_path / "agg", AggregateConfig())
    items = pq.read_table(tmp_path / "agg" / "item_scores.parquet").to_pylist()
    for it in items:
        scale = get_method(it["method"]).overall_scale
        assert it["score"] is None or scale.contains(it["score"]), it
        assert it["status"] in ("ok", "low_mass", "partial", "failed", "skipped")
    # Quality is not the contract (random weights write nonsense): every range check is.
    report = run_validate(subset / "items.parquet", dirs, tmp_path / "reports",
                          ValidateConfig(max_failure_rate=1.0))
    assert report["success"], report
    ctx = run_report(subset, dirs, tmp_path / "agg", tmp_path / "reports",
                     ReportConfig(bootstrap=0, registry=None))
    assert (tmp_path / "reports" / "report.html").read_text().count("<section") >= 5
    assert {a["judge"] for a in ctx["agreement"]} <= set(method_names())
