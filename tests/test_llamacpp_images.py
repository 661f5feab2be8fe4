"""Images reach the model on llama.cpp: ``llamacpp/<gguf>`` with ``mmproj``, and ``capjudge serve``.

No vision GGUF is downloaded: the text model is the embedded Gemma 3 270M GGUF and the
multimodal projector a tiny random LLaVA-style one built here (tests/tiny_gguf_vlm.py: a
4 x 4-patch ViT and an ``mlp`` projector to the text model's width, 0.4 MB). Its image
embeddings have the norm of the text model's own token embeddings, so the picture moves the
next-token distribution; what is checked is that it does, through capjudge's paths:

* the in-process backend built with ``mmproj`` says it takes images (capabilities, facts,
  snapshot), and a G-VEval ``ref-free`` request planned with an ``ImagePart`` gets an answer
  whose log-probabilities differ between two different pictures and are bit-identical for the
  same picture asked again;
* without ``mmproj`` the same request is a clean, non-transient refusal naming images;
* ``capjudge serve --mmproj`` answers raw OpenAI requests with ``image_url`` data URIs the same
  way, each picture adding its (image_size / patch_size)^2 tokens to the prompt.
"""

from __future__ import annotations

import base64
import hashlib
import json
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("xllamacpp", reason="no llama.cpp engine to test against")
pytest.importorskip("gguf", reason="the gguf package writes the test's projector")

# Every test here starts an engine of its own (with the projector, without it, a server).
pytestmark = pytest.mark.slow

from test_llamacpp import MODEL, _free_port, _post  # noqa: E402
from tiny_gguf_vlm import PROJECTOR_TYPE, build_tiny_mmproj, text_model_width  # noqa: E402

from capjudge.backends import create_backend  # noqa: E402
from capjudge.backends.llamacpp import LlamaCppBackend, embedded_gguf, file_sha256  # noqa: E402
from capjudge.client import JudgeClient  # noqa: E402
from capjudge.item import Item  # noqa: E402
from capjudge.media import sha256_file  # noqa: E402
from capjudge.methods import MethodOptions, get_method  # noqa: E402
from capjudge.methods.base import Planned, Skip  # noqa: E402
from capjudge.protocol import Decoding, JudgeRequest, JudgeResponse  # noqa: E402

IMAGE_SIZE, PATCH_SIZE = 32, 8
IMAGE_TOKENS = (IMAGE_SIZE // PATCH_SIZE) ** 2
"""Tokens one picture takes in the prompt: one per patch (LLaVA's projector adds none)."""

CANDIDATE = "A red square on a plain background."


@pytest.fixture(scope="module")
def text_gguf() -> Path:
    """The embedded Gemma 3 270M GGUF, by path (the text model of a ``llamacpp/<path>``)."""
    return embedded_gguf(MODEL)


@pytest.fixture(scope="module")
def mmproj(text_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random projector to the text model's width (read from its GGUF)."""
    n_embd = text_model_width(text_gguf)
    return build_tiny_mmproj(tmp_path_factory.mktemp("mmproj") / "tiny-mmproj.gguf", n_embd,
                             image_size=IMAGE_SIZE, patch_size=PATCH_SIZE)


@pytest.fixture(scope="module")
def pictures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two visually different PNGs: a red square, and blue and yellow stripes (another size)."""
    from PIL import Image

    folder = tmp_path_factory.mktemp("pictures")
    red = Image.new("RGB", (48, 48), (220, 30, 30))
    stripes = Image.new("RGB", (64, 40), (30, 60, 220))
    for x in range(0, 64, 16):
        stripes.paste((240, 220, 40), (x, 0, x + 8, 40))
    paths = {"red": folder / "red.png", "stripes": folder / "stripes.png"}
    red.save(paths["red"])
    stripes.save(paths["stripes"])
    return paths


@pytest.fixture(scope="module")
def vision_backend(text_gguf: Path, mmproj: Path) -> LlamaCppBackend:
    """``llamacpp/<text gguf>`` with the projector: deterministic, one slot, one thread."""
    # (force_anchor: the tiny test model writes no score; its distribution is read at the
    # forced anchor, which is what these tests compare between pictures.)
    backend = create_backend(f"llamacpp/{text_gguf}", mmproj=str(mmproj), threads=1,
                             force_anchor=True)
    assert isinstance(backend, LlamaCppBackend)
    return backend


def _item(picture: Path) -> Item:
    sha = sha256_file(picture)
    return Item(id=picture.stem, candidate=CANDIDATE, media_kind="image",
                media_root=str(picture.parent), media_path=picture.name, media_sha256=sha,
                judge_path=str(picture), judge_sha256=sha)


def _image_request(picture: Path) -> JudgeRequest:
    """G-VEval's ref-free request on ``picture`` (its prompt shows the picture)."""
    [planned] = get_method("gveval").plan(
        _item(picture), "ref-free", MethodOptions(decoding=Decoding(max_tokens=4), vision=True))
    assert isinstance(planned, Planned), planned
    return planned.request


def _first_top(response: JudgeResponse) -> dict[str, float]:
    """The top log-probabilities at the first generated token of an answer."""
    assert response.raw is not None and response.raw.get("tokens"), response
    return {token: logprob for token, logprob in response.raw["tokens"][0][2]}


def _max_delta(a: dict[str, float], b: dict[str, float]) -> float:
    """The largest |difference| of log-probability over the tokens both top lists hold."""
    shared = set(a) & set(b)
    assert shared, (a, b)
    return max(abs(a[t] - b[t]) for t in shared)


def test_the_backend_with_an_mmproj_says_it_takes_images(
        vision_backend: LlamaCppBackend, mmproj: Path, text_gguf: Path,
        pictures: dict[str, Path]) -> None:
    import gguf

    fields = gguf.GGUFReader(mmproj).fields
    assert fields["clip.projector_type"].contents() == PROJECTOR_TYPE
    assert mmproj.stat().st_size < 5_000_000
    assert vision_backend.capabilities.vision is True
    facts = vision_backend.describe()
    assert facts["mmproj"] == str(mmproj) and facts["gguf"] == str(text_gguf)
    # The projector is part of the snapshot: another projector is another judge.
    digest = hashlib.sha256(mmproj.read_bytes()).hexdigest()
    assert file_sha256(mmproj) == digest
    assert vision_backend.snapshot() == (f"gguf-sha256:{file_sha256(text_gguf)}"
                                         f"+mmproj:{digest[:16]}")
    # A method plans its picture modes for it (a text-only backend's are skipped).
    [planned] = get_method("gveval").plan(_item(pictures["red"]), "ref-free",
                                          MethodOptions(vision=vision_backend.capabilities.vision))
    assert isinstance(planned, Planned)
    [part] = [p for m in planned.request.messages for p in m.images]
    assert part.path == str(pictures["red"]) and part.sha256 == sha256_file(pictures["red"])


def test_the_picture_changes_the_answer_and_the_same_picture_gives_the_same(
        vision_backend: LlamaCppBackend, pictures: dict[str, Path]) -> None:
    red, stripes = (_image_request(pictures[k]) for k in ("red", "stripes"))
    assert red.messages[-1].images and red.messages[-1].images[0].sha256 == \
        sha256_file(pictures["red"])
    client = JudgeClient(vision_backend, None)
    [first] = client.run([red])
    [other] = client.run([stripes])
    [again] = client.run([red])
    for answer in (first, other, again):
        # Answered with log-probabilities, the score read as a distribution over 0-100 (this
        # random picture on a 270M base model may leave under min_mass there: low_mass).
        assert answer.status in ("ok", "low_mass"), answer.reason
        assert answer.attempts == 1 and not answer.cached
        slot = answer.slots[0]
        assert slot.probs is not None and slot.mass is not None and slot.mass > 0, slot
    top_red, top_stripes = _first_top(first), _first_top(other)
    assert len(top_red) >= 5
    delta = _max_delta(top_red, top_stripes)
    assert delta > 0.05, (delta, top_red, top_stripes)
    assert first.slots[0].probs != other.slots[0].probs
    # The same picture again: bit-identical (deterministic: a picture's prompt is computed
    # whole, never split between the engine's cache and a batch).
    assert again.raw == first.raw and again.text == first.text
    assert [s.probs for s in again.slots] == [s.probs for s in first.slots]
    print(f"\nin process: max |delta logprob| between the pictures at the first token: "
          f"{delta:.4f}; top tokens red {sorted(top_red.items(), key=lambda kv: -kv[1])[:3]}, "
          f"stripes {sorted(top_stripes.items(), key=lambda kv: -kv[1])[:3]}")


def _frames_request(pictures: list[Path]) -> JudgeRequest:
    """G-VEval's ref-free request on a video whose sampled frames are ``pictures``, attached
    one by one (``visual_input: frames``)."""
    shas = tuple(sha256_file(p) for p in pictures)
    item = Item(id="clip", candidate=CANDIDATE, media_kind="video",
                media_root=str(pictures[0].parent), media_path="clip.mp4",
                media_sha256="c" * 64, tile_path=str(pictures[0]), tile_sha256=shas[0],
                frame_policy="first_middle_last", frame_indices=(0, 4, 8),
                frame_paths=tuple(str(p) for p in pictures), frame_sha256=shas)
    [planned] = get_method("gveval").plan(
        item, "ref-free", MethodOptions(decoding=Decoding(max_tokens=4), vision=True,
                                        extra={"visual_input": "frames"}))
    assert isinstance(planned, Planned), planned
    return planned.request


def test_a_videos_frames_attached_one_by_one_each_reach_the_model(
        vision_backend: LlamaCppBackend, pictures: dict[str, Path]) -> None:
    red, stripes = pictures["red"], pictures["stripes"]
    three = _frames_request([red, red, red])
    assert [p.sha256 for p in three.messages[-1].images] == [sha256_file(red)] * 3
    client = JudgeClient(vision_backend, None)
    [same] = client.run([three])
    [middle] = client.run([_frames_request([red, stripes, red])])
    [again] = client.run([three])
    for answer in (same, middle, again):
        assert answer.status in ("ok", "low_mass"), answer.reason
        assert answer.slots[0].probs is not None
    # Only the middle frame differs, and the answer moves: the second picture was seen.
    delta = _max_delta(_first_top(same), _first_top(middle))
    assert delta > 0.05, delta
    assert again.raw == same.raw
    print(f"\nthree frames: max |delta logprob| when only the middle frame changes: {delta:.4f}")


def test_without_an_mmproj_a_picture_is_refused_cleanly(text_gguf: Path,
                                                         pictures: dict[str, Path]) -> None:
    backend = create_backend(f"llamacpp/{text_gguf}", threads=1)
    assert isinstance(backend, LlamaCppBackend)
    assert backend.capabilities.vision is False
    assert backend.describe()["mmproj"] is None and "+mmproj" not in backend.snapshot()
    # A method skips its picture modes on it ...
    [skipped] = get_method("gveval").plan(_item(pictures["red"]), "ref-free",
                                          MethodOptions(vision=backend.capabilities.vision))
    assert isinstance(skipped, Skip) and "no vision input" in skipped.reason
    # ... and a picture sent anyway is refused once, not retried, naming images.
    [answer] = JudgeClient(backend, None).run([_image_request(pictures["red"])])
    assert answer.status == "error" and answer.attempts == 1
    assert answer.reason is not None
    assert "llama.cpp refused the request" in answer.reason
    assert "image input is not supported" in answer.reason and "mmproj" in answer.reason


def test_a_projector_for_another_model_is_refused_naming_it(
        text_gguf: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # One of another width (the engine logs "mismatch between text model (n_embd = 640) and
    # mmproj (n_embd = 704)" and says only "Failed to init server"): the error names the
    # projector, not just the text model.
    from capjudge.cli import main as cli_main
    from capjudge.protocol import BackendError

    wide = build_tiny_mmproj(tmp_path / "wide-mmproj.gguf", text_model_width(text_gguf) + 64,
                             image_size=IMAGE_SIZE, patch_size=PATCH_SIZE)
    with pytest.raises(BackendError) as caught:
        create_backend(f"llamacpp/{text_gguf}", mmproj=str(wide), threads=1)
    assert not caught.value.transient
    assert f"with the multimodal projector {str(wide)!r}" in str(caught.value)
    assert cli_main(["serve", str(text_gguf), "--mmproj", str(wide), "--port",
                     str(_free_port()), "--threads", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "multimodal projector" in err[0] and str(wide) in err[0]


def test_a_picture_that_changed_on_disk_is_not_sent(vision_backend: LlamaCppBackend,
                                                     tmp_path: Path) -> None:
    from PIL import Image

    picture = tmp_path / "p.png"
    Image.new("RGB", (32, 32), (0, 200, 0)).save(picture)
    request = _image_request(picture)
    Image.new("RGB", (32, 32), (200, 0, 200)).save(picture)  # replaced after planning
    [answer] = JudgeClient(vision_backend, None).run([request])
    assert answer.status == "error" and answer.attempts == 1
    assert answer.reason is not None and "changed before it was sent" in answer.reason
    assert "not sent" in answer.reason


# -- capjudge serve --mmproj: raw OpenAI requests ----------------------------------------------


@pytest.fixture(scope="module")
def served_vision(text_gguf: Path, mmproj: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``capjudge serve <text gguf> --mmproj <projector>``: its base URL. Always stopped."""
    log_path = tmp_path_factory.mktemp("serve") / "stderr.log"
    port = _free_port()
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "capjudge.cli", "serve", str(text_gguf), "--mmproj",
             str(mmproj), "--port", str(port), "--parallel", "1", "--threads", "1"],
            stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url:
            proc.kill()
            proc.wait(timeout=30)
            pytest.fail(f"capjudge serve printed no URL: {log_path.read_text()[-4000:]}")
        yield url
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0  # a clean stop on SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def _data_url(picture: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(picture.read_bytes()).decode("ascii")


def _ask(url: str, picture: Path | None, **extra: Any) -> dict[str, Any]:
    """One raw chat completion, the picture (if any) before the question; the body."""
    content: list[dict[str, Any]] = []
    if picture is not None:
        content.append({"type": "image_url", "image_url": {"url": _data_url(picture)}})
    content.append({"type": "text", "text": "Describe the picture in one word:"})
    status, body = _post(url, {
        "model": MODEL, "messages": [{"role": "user", "content": content}],
        "logprobs": True, "top_logprobs": 5, "max_tokens": 1, "temperature": 0, **extra})
    assert status == 200, body
    return body


def _top(body: dict[str, Any]) -> dict[str, float]:
    top = body["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    assert len(top) == 5
    return {t["token"]: t["logprob"] for t in top}


def test_serve_with_an_mmproj_reads_the_picture(served_vision: str, text_gguf: Path,
                                                pictures: dict[str, Path]) -> None:
    with urllib.request.urlopen(served_vision + "/models", timeout=10) as answer:  # noqa: S310
        assert [m["id"] for m in json.loads(answer.read())["data"]] == [text_gguf.stem]
    # Computed whole (no prompt cache): a rerun's numerics do not depend on what the slot held.
    red = _ask(served_vision, pictures["red"], cache_prompt=False)
    # With the prompt cache on, right after the red picture: the server may reuse the text
    # before the picture, never the red picture's tokens for the stripes.
    stripes = _ask(served_vision, pictures["stripes"])
    stripes_whole = _ask(served_vision, pictures["stripes"], cache_prompt=False)
    red_again = _ask(served_vision, pictures["red"], cache_prompt=False)
    text_only = _ask(served_vision, None, cache_prompt=False)
    assert red["usage"]["prompt_tokens"] == stripes["usage"]["prompt_tokens"]
    assert red["usage"]["prompt_tokens"] - text_only["usage"]["prompt_tokens"] == IMAGE_TOKENS
    delta = _max_delta(_top(red), _top(stripes))
    assert delta > 0.05, (delta, _top(red), _top(stripes))
    assert _max_delta(_top(stripes), _top(stripes_whole)) < 1e-3
    assert _top(red_again) == _top(red)
    assert red_again["choices"][0]["logprobs"] == red["choices"][0]["logprobs"]
    assert _max_delta(_top(red), _top(text_only)) > 0.05  # the picture is not ignored
    print(f"\nserve: max |delta logprob| between the pictures at the first token: {delta:.4f}; "
          f"prompt tokens {red['usage']['prompt_tokens']} with the picture, "
          f"{text_only['usage']['prompt_tokens']} without")
