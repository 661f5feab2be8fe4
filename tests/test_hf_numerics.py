"""The local backend names the numerics it really computes in, and keeps them apart (issue 31).

``dtype: auto`` picks bfloat16 only on a GPU that computes in it; whatever asked for it, the
numerics are read from the loaded weights and named in ``describe()`` and in the snapshot, so a
bfloat16 run and a float32 run never share a cached answer. A model already in memory can be
judged with (``HFBackend.from_loaded``); weights are hashed once per file identity, in the
models cache when their folder is read-only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from tiny_llama import build_tiny_llama

from capjudge.backends.hf import HFBackend, auto_dtype, numerics_of, weights_sha256
from capjudge.protocol import JudgeRequest, Message, ScoreSlot


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


def _request() -> JudgeRequest:
    return JudgeRequest(messages=(Message("user", ("Rate it.",)),),
                        slots=(ScoreSlot("score", 0, 100),), template="t@1")


def test_numerics_come_from_the_loaded_weights_and_part_the_cache(tiny: Path) -> None:
    import torch

    f32 = HFBackend(str(tiny), device="cpu", dtype="float32")
    bf16 = HFBackend(str(tiny), device="cpu", dtype="bfloat16")
    auto = HFBackend(str(tiny), device="cpu", dtype="auto")
    assert (f32.numerics, bf16.numerics, auto.numerics) == ("float32", "bfloat16", "float32")
    assert bf16.model.dtype == torch.bfloat16 and bf16.describe()["numerics"] == "bfloat16"
    assert bf16.snapshot() == f32.snapshot() + "+bfloat16"
    assert auto.snapshot() == f32.snapshot() and auto.describe()["dtype_option"] == "auto"
    # The CPU's kernel path is a lineage fact, never part of the snapshot (a cache entry is the
    # same judge's answer on any machine; the report says when reruns differ).
    assert f32.describe()["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    key = _request().cache_key
    assert key(bf16.backend_id, bf16.snapshot()) != key(f32.backend_id, f32.snapshot())


def test_auto_is_float32_on_the_cpu() -> None:
    import torch

    assert auto_dtype("cpu") == torch.float32
    if not torch.cuda.is_available():
        assert auto_dtype("cuda") == torch.float32  # no GPU: nothing else to compute in


def test_a_model_in_memory_is_judged_with_its_own_snapshot(tiny: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    backend = HFBackend.from_loaded(model, tokenizer, snapshot="step-1200")
    assert backend.snapshot() == "step-1200+bfloat16" and numerics_of(model) == "bfloat16"
    assert backend.linear_kernel == "default"  # the caller's model is never changed
    answer = backend.generate([_request()])[0]
    assert not isinstance(answer, Exception) and answer.slots[0].probs is not None
    from_disk = HFBackend(str(tiny), device="cpu", dtype="bfloat16", linear_kernel="default")
    again = from_disk.generate([_request()])[0]
    assert not isinstance(again, Exception)
    assert answer.slots[0].probs == pytest.approx(again.slots[0].probs, abs=1e-6)
    with pytest.raises(Exception, match="tokenizer or processor"):
        HFBackend.from_loaded(model, snapshot="x")


def _fresh_copy(tiny: Path, folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the model with no remembered hash, and an empty models cache."""
    import shutil

    shutil.copytree(tiny, folder)
    for memo in folder.glob(".capjudge*"):
        memo.unlink()
    monkeypatch.setenv("CAPJUDGE_MODELS_DIR", str(folder.parent / "models"))
    return folder


def test_weights_are_hashed_once_even_in_a_read_only_folder(
        tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _fresh_copy(tiny, tmp_path / "ro-model", monkeypatch)
    os.chmod(folder, stat.S_IRUSR | stat.S_IXUSR)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as a user who can write to a read-only folder (root)")
        first = weights_sha256(folder)
        assert list((tmp_path / "models" / "weight-hashes").glob("*.json"))
        opened = []
        real_open = Path.open

        def counting_open(self: Path, *args: object, **kwargs: object) -> object:
            if self.suffix == ".safetensors":
                opened.append(self)
            return real_open(self, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(Path, "open", counting_open)
        assert weights_sha256(folder) == first and not opened  # remembered, not re-read
    finally:
        os.chmod(folder, stat.S_IRWXU)


def test_an_unwritable_model_folder_still_remembers_its_hash(
        tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As root a folder's mode does not stop a write: the beside-the-weights memo is made to
    # fail instead, so the models cache is what remembers.
    folder = _fresh_copy(tiny, tmp_path / "model", monkeypatch)
    real_write = Path.write_text

    def refuse_beside(self: Path, *args: object, **kwargs: object) -> int:
        if self.parent == folder:
            raise PermissionError(13, "read-only", str(self))
        return real_write(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", refuse_beside)
    first = weights_sha256(folder)
    assert not list(folder.glob(".capjudge*"))
    assert len(list((tmp_path / "models" / "weight-hashes").glob("*.json"))) == 1
    assert weights_sha256(folder) == first
