"""Every supported VLM family judges images on the local backend (issue 31).

A tiny randomly initialised model of each family (tests/tiny_vlms.py: real architecture, real
processor, built offline) goes through the judge path a GPU user runs: a batch of two image
requests of different sizes generated together, each score slot's exact distribution read
with the digit tree at the number's position (the row's image inputs as its processor makes
them), and the numerics named in the snapshot. Qwen2-VL lays its images out as concatenated
patches with ``image_grid_thw``, LLaVA one tensor per image, Idefics3/SmolVLM as tiles with a
mask, Gemma 3 with per-token ``token_type_ids``: the backend asks each processor.

Five families' processors need torchvision for their video processor in transformers 5.23;
``install_shims`` lets them load here for images (a user's environment has torchvision).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from PIL import Image
from tiny_vlms import FAMILIES, STOCK_FAMILIES, build, install_shims

from capjudge.backends.hf import HFBackend
from capjudge.item import Item
from capjudge.methods import MethodOptions, get_method
from capjudge.methods.base import Planned
from capjudge.protocol import Decoding, JudgeResponse


def _items(tmp_path: Path) -> list[Item]:
    out = []
    for k, size in enumerate(((64, 48), (40, 40))):
        path = tmp_path / f"img{k}.png"
        Image.new("RGB", size, (200, 40 + 80 * k, 40)).save(path)
        from capjudge.media import sha256_file

        sha = sha256_file(path)
        out.append(Item(id=f"i{k}", candidate="A red square.", media_kind="image",
                        media_root=str(tmp_path), media_path=path.name, media_sha256=sha,
                        judge_path=str(path), judge_sha256=sha))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_generates_and_reads_exact_distributions(family: str,
                                                             tmp_path: Path) -> None:
    if family not in STOCK_FAMILIES:
        install_shims()
    path = build(family, tmp_path / family)
    backend = HFBackend(str(path), device="cpu", linear_kernel="default")
    assert backend.capabilities.vision and backend.numerics == "float32"
    assert backend.describe()["numerics"] == "float32" and "+" not in backend.snapshot()
    method = get_method("gveval")
    options = MethodOptions(decoding=Decoding(max_tokens=6), vision=True)
    planned = [p for item in _items(tmp_path) for p in method.plan(item, "ref-free", options)
               if isinstance(p, Planned)]
    assert len(planned) == 2
    answers = backend.generate([p.request for p in planned])  # one batch, two image sizes
    for answer in answers:
        assert isinstance(answer, JudgeResponse), answer
        slot = answer.slots[0]
        # Random weights write no score: it is read where the anchor is forced, over 0-100.
        assert slot.probs is not None and slot.mass is not None and slot.mass > 0, slot
        assert math.isclose(sum(slot.probs), 1.0, rel_tol=1e-6)
        assert slot.source == "teacher_forcing"
    # The same request alone gives the same distribution as in the batch.
    alone = backend.generate([planned[1].request])[0]
    assert isinstance(alone, JudgeResponse) and isinstance(answers[1], JudgeResponse)
    assert alone.slots[0].probs == pytest.approx(answers[1].slots[0].probs, abs=1e-4)
