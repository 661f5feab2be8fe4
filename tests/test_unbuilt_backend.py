"""Work that produces nothing costs nothing: a stage whose every row is a recorded skip builds
no backend (no model loaded, no engine started) and writes the rows a built one writes.

The backends' constructors are made to fail: a stage that still built one would fail the test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from capjudge.backends.embedded import EmbeddedBackend
from capjudge.backends.fake import FakeBackend
from capjudge.backends.hf import HFBackend, weights_sha256
from capjudge.item import load_items
from capjudge.judge import JudgeConfig, judge_items
from capjudge.methods.visce2_context import ContextConfig, run_context


def refuse_construction(monkeypatch: pytest.MonkeyPatch, cls: type) -> None:
    def refuse(self: Any, *args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"{cls.__name__} was built for a stage of recorded skips")

    monkeypatch.setattr(cls, "__init__", refuse)


def image_items(ingested: Path, tmp_path: Path, n: int = 6) -> Path:
    rows = pq.read_table(ingested / "items.parquet").to_pylist()
    path = tmp_path / "items.parquet"
    pq.write_table(pa.Table.from_pylist([r for r in rows if r["media_kind"] == "image"][:n]),
                   path)
    return path


def test_judge_of_recorded_skips_builds_no_backend(ingested: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    items = load_items(image_items(ingested, tmp_path))
    config = JudgeConfig(method="cap3d", backend="fake/hash")  # cap3d needs views: all skips
    built = judge_items(items, config, backend=FakeBackend("hash"))
    assert built.rows and all(r.status == "skipped" for r in built.rows)

    refuse_construction(monkeypatch, FakeBackend)
    unbuilt = judge_items(items, config)
    assert unbuilt.rows == built.rows  # statuses, reasons, backend, snapshot, settings
    assert unbuilt.stats.to_dict() == built.stats.to_dict()
    assert unbuilt.backend is None
    assert unbuilt.backend_facts() == {"backend": "fake/hash", "snapshot": "fake-hash-v1",
                                       "loaded": False}


def test_judge_chunk_task_of_recorded_skips_builds_no_backend(
        ingested: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.judge import judge_chunk

    items_path = image_items(ingested, tmp_path)
    config = JudgeConfig(method="cap3d", backend="fake/hash", cache_dir=str(tmp_path / "c"))
    expected = judge_items(load_items(items_path), config, backend=FakeBackend("hash")).rows
    refuse_construction(monkeypatch, FakeBackend)
    out = judge_chunk.fn(config, str(items_path), 0, 6, str(tmp_path / "part.parquet"))
    assert out["planned"] == 0 and out["skipped"] == len(expected)
    assert out["backend"]["loaded"] is False
    written = pq.read_table(tmp_path / "part.parquet").to_pylist()
    assert [r["reason"] for r in written] == [r.reason for r in expected]
    assert {r["snapshot"] for r in written} == {"fake-hash-v1"}


def test_a_judge_with_requests_still_builds_its_backend(
        ingested: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    items = load_items(image_items(ingested, tmp_path, 2))
    refuse_construction(monkeypatch, FakeBackend)
    with pytest.raises(AssertionError, match="was built"):
        judge_items(items, JudgeConfig(method="gveval", backend="fake/hash",
                                       modes=["ref-only"]))


def test_context_stage_of_a_text_only_extractor_builds_no_backend(
        ingested: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    items_path = image_items(ingested, tmp_path)
    config = ContextConfig(backend="fake/hash", cache_dir=str(tmp_path / "cache"))
    built = run_context(items_path, tmp_path / "built", config, backend=FakeBackend("hash"))

    refuse_construction(monkeypatch, FakeBackend)
    unbuilt = run_context(items_path, tmp_path / "unbuilt", config)
    before = pq.read_table(tmp_path / "built" / "contexts.parquet")
    after = pq.read_table(tmp_path / "unbuilt" / "contexts.parquet")
    assert after.equals(before) and set(after.column("status").to_pylist()) == {"skipped"}
    differs = {k for k in built if built[k] != unbuilt[k]}  # type: ignore[literal-required]
    assert differs <= {"backend", "seconds"}
    assert unbuilt["backend"] == {**built["backend"], "loaded": False}


def test_embedded_snapshot_and_capabilities_without_loading(
        ingested: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The unloaded facts of a local model are those the loaded model gives."""
    from tests.tiny_llama import build_tiny_llama

    model = build_tiny_llama(tmp_path / "tiny")
    monkeypatch.setenv("CAPJUDGE_DEVICE", "cpu")
    loaded = HFBackend(model)
    monkeypatch.setattr("capjudge.backends.embedded.prepare_embedded", lambda name: model)
    facts = EmbeddedBackend.describe_unloaded("gemma-3-270m", {})
    assert facts is not None
    assert facts["snapshot"] == loaded.snapshot() == f"sha256:{weights_sha256(model)}"
    assert EmbeddedBackend.capabilities_for("gemma-3-270m", {}) == loaded.capabilities
    assert {k: loaded.describe()[k] for k in ("path", "vision", "device")} == \
        {k: facts[k] for k in ("path", "vision", "device")}  # type: ignore[literal-required]
    # bfloat16 weights answer differently: named in the snapshot, loaded or not.
    half = EmbeddedBackend.describe_unloaded("gemma-3-270m", {"dtype": "bfloat16"})
    assert half is not None and half["snapshot"] == \
        HFBackend(model, dtype="bfloat16").snapshot()

    # cap3d-embedded (params.yaml): every item needs the views, the model is never loaded.
    items = load_items(image_items(ingested, tmp_path))
    config = JudgeConfig(method="cap3d", backend="embedded/gemma-3-270m")
    built = judge_items(items, config,
                        backend=HFBackend(model, backend_id="embedded/gemma-3-270m"))
    refuse_construction(monkeypatch, HFBackend)
    unbuilt = judge_items(items, config)
    assert unbuilt.rows == built.rows and {r.snapshot for r in unbuilt.rows} == \
        {loaded.snapshot()}
