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
    backend = HFBackend(str(path), dtype="float32", linear_kernel="default")
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


def _image_context(backend: HFBackend, tmp_path: Path) -> tuple[list[int], dict[str, object]]:
    """A rendered judge prompt with one image, then "Score: ": ids and the row's vision inputs."""
    image = Image.new("RGB", (64, 48), (200, 40, 40))
    messages = [{"role": "user", "content": [
        {"type": "image"}, {"type": "text", "text": "Rate the caption 0-100. A red square."}]}]
    prompt = backend.processor.apply_chat_template(messages, add_generation_prompt=True,
                                                   tokenize=False)
    extras = backend._row_vision(prompt, [image])
    ids = backend.processor(text=[prompt], images=[image], return_tensors="pt")["input_ids"]
    return ids[0].tolist() + backend.tokenizer.encode("Score: ", add_special_tokens=False), extras


def _full_forward(backend: HFBackend, context: list[int], value: int,
                  extras: dict[str, object]) -> float:
    """P(value, then the number ends) from one full forward of context + value with the image."""
    import torch

    tail = backend._value_ids(value)
    with torch.inference_mode():
        logits = backend.model(input_ids=torch.tensor([context + tail], device=backend.device),
                               **backend._fit_extras(extras, len(context) + len(tail))).logits
    logp = torch.log_softmax(logits[0].float(), dim=-1)
    total = sum(float(logp[len(context) - 1 + k, t]) for k, t in enumerate(tail))
    return math.exp(total) * backend._end_prob(logp[-1])


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_digit_tree_equals_full_forwards_with_the_image(family: str,
                                                            tmp_path: Path) -> None:
    """The tree's P(value) is what one full forward of context + value with the image gives.

    The masked tree places its nodes with explicit position ids; the Qwen families' multimodal
    RoPE gives an image fewer positions than tokens, so a node's position is its index plus
    the model's ``rope_deltas`` (without it Qwen3-VL was off by 5 % relative, Qwen2-VL by
    0.03 %, every row looking valid).
    """
    if family not in STOCK_FAMILIES:
        install_shims()
    backend = HFBackend(str(build(family, tmp_path / family)), dtype="float32",
                        linear_kernel="default", prune=0.0)
    context, extras = _image_context(backend, tmp_path)
    backend._tree_checked = True  # the tree as it is, not rescued by the first-use check
    tree = backend.distribution(context, list(range(101)), extras)
    for value in (0, 3, 7, 10, 42, 58, 99, 100):
        assert tree[value] == pytest.approx(_full_forward(backend, context, value, extras),
                                            rel=1e-4, abs=1e-12), (family, value)


@pytest.mark.slow
def test_a_masked_tree_that_misplaces_positions_is_caught_on_first_use(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A family whose positions the backend does not know is caught, not scored wrongly.

    Simulated by hiding Qwen3-VL's rope offset: the first distribution is checked against the
    level walk (where the model places every token itself), the gap is found, and that walk's
    exact distribution is returned and used from then on.
    """
    install_shims()
    backend = HFBackend(str(build("qwen3_vl", tmp_path / "qwen3_vl")), dtype="float32",
                        linear_kernel="default", prune=0.0)
    monkeypatch.setattr(backend, "_rope_offset", lambda: 0)
    context, extras = _image_context(backend, tmp_path)
    values = list(range(101))
    with caplog.at_level("WARNING"):
        first = backend.distribution(context, values, extras)
    assert backend.tree_mask is False and backend.stats.tree_check_gap is not None
    assert backend.stats.tree_check_gap > 1e-4
    assert "differs from the level-by-level tree" in caplog.text
    for value in (0, 42, 100):
        assert first[value] == pytest.approx(_full_forward(backend, context, value, extras),
                                             rel=1e-4, abs=1e-12)
    assert backend.distribution(context, values, extras) == first  # the level walk from now on


@pytest.mark.slow
def test_the_first_use_check_keeps_a_correct_masked_tree(tmp_path: Path) -> None:
    backend = HFBackend(str(build("llava", tmp_path / "llava")), dtype="float32",
                        linear_kernel="default", prune=0.0)
    context, extras = _image_context(backend, tmp_path)
    backend.distribution(context, list(range(101)), extras)
    assert backend.tree_mask is True and backend.stats.tree_check_gap is not None
    assert backend.stats.tree_check_gap < 1e-6


def _planned_requests(tmp_path: Path) -> list:
    method = get_method("gveval")
    options = MethodOptions(decoding=Decoding(max_tokens=6), vision=True)
    return [p.request for item in _items(tmp_path)
            for p in method.plan(item, "ref-free", options) if isinstance(p, Planned)]


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_scores_read_on_generations_cache_equal_re_encoding(family: str,
                                                            tmp_path: Path) -> None:
    """Each slot's distribution on generation's own cache is the re-encoded one (issue 31).

    A batch of two images of different sizes (so one row is left-padded, and the Qwen rows
    have different RoPE offsets) is generated once with the cache reused and once with every
    context re-encoded (image and all): the distributions agree to float32 rounding, and the
    reuse feeds fewer tokens. Gemma 3's tiny model has a 16-token sliding window, which drops
    early keys: it re-encodes, and says so in its facts.
    """
    if family not in STOCK_FAMILIES:
        install_shims()
    path = build(family, tmp_path / family)
    requests = _planned_requests(tmp_path)
    answers, fed = {}, {}
    for share in (True, False):
        backend = HFBackend(str(path), dtype="float32", linear_kernel="default",
                            share_generated=share)
        backend._tree_checked = True
        answers[share] = backend.generate(requests)
        fed[share] = backend.stats.tokens
        assert backend.describe()["share_generated"] is share
    for shared, encoded in zip(answers[True], answers[False], strict=True):
        assert isinstance(shared, JudgeResponse) and isinstance(encoded, JudgeResponse)
        assert shared.text == encoded.text
        for a, b in zip(shared.slots, encoded.slots, strict=True):
            assert a.probs is not None and b.probs is not None
            assert a.probs == pytest.approx(b.probs, abs=1e-5)
            assert a.mass == pytest.approx(b.mass, rel=1e-4)
    if family == "gemma3":
        assert fed[True] == fed[False]
    else:
        assert fed[True] < fed[False]


@pytest.mark.slow
def test_a_wrong_continuation_of_generations_cache_is_caught_on_first_use(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A cache that does not continue as assumed is caught once, never read as a score.

    Simulated by giving Qwen2-VL's rows a wrong RoPE offset: the first score read on the cache
    is compared with re-encoding, the gap is found, and every context is re-encoded from then
    on: the answers are the re-encoded ones.
    """
    import capjudge.backends.hf as hf
    from capjudge.backends.generated_prefix import row_prefixes

    install_shims()
    path = build("qwen2_vl", tmp_path / "qwen2_vl")
    requests = _planned_requests(tmp_path)
    reference = HFBackend(str(path), dtype="float32", linear_kernel="default",
                          share_generated=False).generate(requests)

    def shifted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - wraps the real one
        rows = row_prefixes(*args, **kwargs)
        for row in rows or []:
            if row is not None and row.rope_delta is not None:
                row.rope_delta += 3
        return rows

    monkeypatch.setattr(hf, "row_prefixes", shifted)
    backend = HFBackend(str(path), dtype="float32", linear_kernel="default")
    with caplog.at_level("WARNING"):
        answers = backend.generate(requests)
    assert backend.share_generated is False and backend.stats.sharing_check_gap is not None
    assert backend.stats.sharing_check_gap > 1e-4
    assert "contexts are re-encoded" in caplog.text
    for got, want in zip(answers, reference, strict=True):
        assert isinstance(got, JudgeResponse) and isinstance(want, JudgeResponse)
        for a, b in zip(got.slots, want.slots, strict=True):
            assert a.probs == pytest.approx(b.probs, abs=1e-6)


@pytest.mark.slow
def test_gemma3_within_its_sliding_window_reads_on_generations_cache(tmp_path: Path) -> None:
    """Gemma 3's sliding-window layers hold the whole row while it fits their window.

    Real Gemma 3 windows (512-1024 tokens) hold a judge prompt with its image and answer; the
    tiny model's is widened to 4,096 here: its rows are read on generation's cache (the
    first-use check passes) and equal re-encoding.
    """
    import json

    path = build("gemma3", tmp_path / "gemma3")
    config = json.loads((path / "config.json").read_text())
    config["text_config"]["sliding_window"] = 4096
    (path / "config.json").write_text(json.dumps(config))
    requests = _planned_requests(tmp_path)
    answers, fed = {}, {}
    for share in (True, False):
        backend = HFBackend(str(path), dtype="float32", linear_kernel="default",
                            share_generated=share)
        answers[share] = backend.generate(requests)
        fed[share] = backend.stats.tokens
        assert backend.share_generated is share
    assert fed[True] < fed[False] / 2
    for shared, encoded in zip(answers[True], answers[False], strict=True):
        assert isinstance(shared, JudgeResponse) and isinstance(encoded, JudgeResponse)
        assert shared.slots[0].probs == pytest.approx(encoded.slots[0].probs, abs=1e-5)


def _video_item(tmp_path: Path, name: str, levels: tuple[int, ...]) -> Item:
    """A video item whose sampled frames (flat colours ``levels``) are kept on their own."""
    from capjudge.media import sha256_file

    paths, shas = [], []
    for k, level in enumerate(levels):
        path = tmp_path / f"{name}-frame{k + 1}.png"
        Image.new("RGB", (48, 36), (level, 255 - level, 90)).save(path)
        paths.append(str(path))
        shas.append(sha256_file(path))
    return Item(id=name, candidate="A ball rolls.", media_kind="video",
                media_root=str(tmp_path), media_path=f"{name}.mp4", media_sha256="c" * 64,
                tile_path=paths[0], tile_sha256=shas[0], frame_policy="first_middle_last",
                frame_indices=(0, 4, 8), frame_paths=tuple(paths), frame_sha256=tuple(shas))


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_judges_a_videos_frames_as_separate_images(family: str,
                                                                tmp_path: Path) -> None:
    """``visual_input: frames``: three pictures in one request, each of them seen.

    A batch of a three-frame request and a one-image request gives each the distribution it
    gets alone, and changing the middle frame alone changes the score distribution (the
    model saw it: a family that kept only the first picture would not move).
    """
    if family not in STOCK_FAMILIES:
        install_shims()
    path = build(family, tmp_path / family)
    backend = HFBackend(str(path), dtype="float32", linear_kernel="default")
    method = get_method("gveval")
    options = MethodOptions(decoding=Decoding(max_tokens=4), vision=True,
                            extra={"visual_input": "frames"})

    def request(item: Item):
        planned = method.plan(item, "ref-free", options)[0]
        assert isinstance(planned, Planned), planned
        return planned.request

    video = request(_video_item(tmp_path, "v", (10, 120, 240)))
    assert len(video.messages[-1].images) == 3
    image = request(_items(tmp_path)[0])
    both = backend.generate([video, image])
    alone = backend.generate([video])[0]
    for answer in (*both, alone):
        assert isinstance(answer, JudgeResponse), answer
        assert answer.slots[0].probs is not None and answer.slots[0].mass, answer.slots[0]
    assert isinstance(both[0], JudgeResponse) and isinstance(alone, JudgeResponse)
    assert alone.slots[0].probs == pytest.approx(both[0].slots[0].probs, abs=1e-4)
    # Only the middle frame differs.
    other = backend.generate([request(_video_item(tmp_path, "w", (10, 200, 240)))])[0]
    assert isinstance(other, JudgeResponse) and other.slots[0].probs is not None
    gap = max(abs(a - b) for a, b in zip(other.slots[0].probs, alone.slots[0].probs,
                                         strict=True))
    assert gap > 1e-6, f"{family}: the middle frame did not reach the model"
