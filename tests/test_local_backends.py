"""Local backends: a tiny real-architecture VLM, and the embedded Gemma 3 270M judge."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from tiny_vlm import build_tiny_llava

from capjudge.backends import create_backend
from capjudge.backends.hf import HFBackend
from capjudge.item import load_items
from capjudge.judge import JudgeConfig, plan, run_judge


@pytest.fixture(scope="session")
def tiny_vlm(tmp_path_factory: pytest.TempPathFactory) -> HFBackend:
    path = build_tiny_llava(tmp_path_factory.mktemp("tiny-llava"))
    backend = create_backend(f"hf/{path}", dtype="float32")  # float32 tolerances, on a GPU too
    assert isinstance(backend, HFBackend)
    return backend


def test_tiny_vlm_judges_images_and_frame_tiles(tiny_vlm: HFBackend, ingested: Path) -> None:
    items = load_items(ingested / "items.parquet")
    chosen = [items[0], next(i for i in items if i.media_kind == "video")]
    config = JudgeConfig(method="gveval", backend=tiny_vlm.backend_id,
                         modes=["ref-free", "combined", "ref-only"], max_tokens=6)
    planned, skipped = plan(chosen, config, tiny_vlm.capabilities.vision)
    assert not skipped and len(planned) == 6
    assert sum(p.request.needs_vision for p in planned) == 4
    responses = tiny_vlm.generate([p.request for p in planned])
    for response in responses:
        assert not isinstance(response, Exception), response
        slot = response.slots[0]
        assert response.status in ("ok", "low_mass") and slot.source == "teacher_forcing"
        assert slot.probs is not None and math.isclose(sum(slot.probs), 1.0, rel_tol=1e-9)
        assert 0 < (slot.mass or 0) <= 1 and len(slot.values) == 101
        # Random weights never write "The final score is $": the anchor is forced, and said so.
        assert slot.anchor_forced
    # An image request costs more prompt tokens than the same text-only one (the image tokens).
    assert responses[0].usage.prompt_tokens > responses[2].usage.prompt_tokens - 200
    assert tiny_vlm.snapshot().startswith("sha256:")


def test_digit_tree_equals_naive_scoring_on_the_vlm(tiny_vlm: HFBackend) -> None:
    context = tiny_vlm.tokenizer.encode("The final score is $")
    values = list(range(0, 21)) + [55, 99, 100]
    tiny_vlm.prune = 0.0
    tree = tiny_vlm.distribution(context, values)
    naive = tiny_vlm.naive_distribution(context, values)
    for v in values:
        assert tree[v] == pytest.approx(naive[v], rel=1e-4, abs=1e-9)


def test_the_attention_implementation_is_an_option_named_in_the_facts(
        tiny_vlm: HFBackend) -> None:
    """``attention: eager`` loads the model with that kernel and says so; its answers equal
    the default (SDPA) kernel's to float32 rounding; the snapshot stays the same judge."""
    from capjudge.protocol import BackendError

    eager = create_backend(tiny_vlm.backend_id, dtype="float32", attention="eager")
    assert isinstance(eager, HFBackend)
    assert eager.describe()["attention"] == "eager"
    assert tiny_vlm.describe()["attention"] == "sdpa"  # transformers' choice when unset
    assert eager.snapshot() == tiny_vlm.snapshot()
    context = tiny_vlm.tokenizer.encode("The final score is $")
    values = list(range(0, 101))
    mine, theirs = eager.distribution(context, values), tiny_vlm.distribution(context, values)
    assert max(abs(mine[v] - theirs[v]) for v in values) < 1e-5
    with pytest.raises(BackendError, match="attention must be one of"):
        create_backend(tiny_vlm.backend_id, attention="flash_attention_2")


def test_text_only_backend_refuses_images_with_a_reason(ingested: Path) -> None:
    from capjudge.backends.fake import FakeBackend

    backend = FakeBackend("hash")
    items = load_items(ingested / "items.parquet")[:2]
    config = JudgeConfig(method="gveval", backend="fake/hash", modes=["ref-free", "ref-only"])
    planned, skipped = plan(items, config, backend.capabilities.vision)
    assert [s.mode for s in skipped] == ["ref-free", "ref-free"]
    assert all("no vision input" in s.reason for s in skipped)
    assert len(planned) == 2


@pytest.mark.heavy(seconds=13)
@pytest.mark.slow
def test_embedded_gemma_exact_distribution(tmp_path: Path) -> None:
    backend = create_backend("embedded/gemma-3-270m")
    assert isinstance(backend, HFBackend) and not backend.is_vlm
    assert backend._digit_ids is not None  # Gemma splits numbers into digits
    # The backend is built once per process: another test may have asked its first
    # distribution (and run the one-time check) already.
    backend._tree_checked = False
    context = backend.tokenizer.encode("Rate the caption from 0 to 100.\nThe final score is $")
    values = [0, 1, 7, 10, 42, 99, 100]
    backend.prune = 0.0
    tree = backend.distribution(context, list(range(0, 101)))
    # The first distribution is checked once against the level walk (positions are indices
    # here: they agree); from then on a distribution is the context + one tree pass.
    assert backend.stats.tree_check_gap is not None and backend.stats.tree_check_gap < 1e-4
    assert backend.tree_mask
    passes = backend.stats.forward_passes
    assert backend.distribution(context, list(range(0, 101))) == pytest.approx(tree, rel=1e-6)
    assert backend.stats.forward_passes - passes <= 4  # context + one pass per digit level
    naive = backend.naive_distribution(context, values)
    for v in values:
        assert tree[v] == pytest.approx(naive[v], rel=1e-3, abs=1e-8)
    assert 0 < sum(tree.values()) <= 1 + 1e-6


@pytest.mark.heavy(seconds=18)
@pytest.mark.slow
def test_embedded_judge_runs_ref_only_and_skips_vision_modes(ingested: Path,
                                                             tmp_path: Path) -> None:
    config = JudgeConfig(method="gveval", backend="embedded/gemma-3-270m",
                         modes=["ref-only", "ref-free", "combined"], max_tokens=8, limit=3,
                         cache_dir=str(tmp_path / "cache"), backend_options={"batch_size": 3})
    summary = run_judge(ingested / "items.parquet", tmp_path / "out", config)
    assert summary["modes_ran"] == ["ref-only"]
    assert set(summary["modes_skipped"]) == {"ref-free", "combined"}
    assert summary["model_calls"] == 3
    rows = pq.read_table(tmp_path / "out" / "judgements.parquet").to_pylist()
    judged = [r for r in rows if r["status"] != "skipped"]
    assert len(judged) == 3
    for r in judged:
        assert r["status"] in ("ok", "low_mass")
        assert r["source"] == "teacher_forcing" and len(r["probs"]) == 101
        assert 0 <= r["score"] <= 100 and r["mass"] > 0
        assert r["template"] == "gveval/image/ref-only@2"
        assert r["snapshot"].startswith("sha256:") and r["reasoning"] is not None
    again = run_judge(ingested / "items.parquet", tmp_path / "out2", config)
    assert again["model_calls"] == 0 and again["cache_hits"] == 3


def test_embedded_likelihoods_batched_equal_one_pair_at_a_time() -> None:
    """Left-padded batches with logits_to_keep give each pair's own log-likelihood."""
    import torch

    backend = create_backend("embedded/gemma-3-270m", batch_size=3)
    assert isinstance(backend, HFBackend)
    pairs = [("Captions of the same image:\n- A dog runs on grass.\n-", " A dog runs."),
             ("A caption written for an image:\n-", " A dog runs."),
             ("A caption written for an image:\n-", " Two children play with a red ball"
              " in a park on a sunny afternoon."),
             ("Captions of the same image:\n- A cat.\n-", " A cat sleeps."),
             ("x", " y")]
    got = backend.loglikelihoods(pairs)
    bos = [backend.tokenizer.bos_token_id]
    for (context, text), (value, n) in zip(pairs, got, strict=True):
        ctx = bos + backend.tokenizer.encode(context, add_special_tokens=False)
        full = bos + backend.tokenizer.encode(context + text, add_special_tokens=False)
        assert full[:len(ctx)] == ctx  # these texts start at a token boundary
        with torch.inference_mode():
            logits = backend.model(input_ids=torch.tensor([full])).logits.float()[0]
        logp = torch.log_softmax(logits[:-1], dim=-1)
        expected = sum(float(logp[k - 1, full[k]]) for k in range(len(ctx), len(full)))
        assert n == len(full) - len(ctx)
        assert value == pytest.approx(expected, rel=1e-3, abs=1e-3)
    assert backend.loglikelihoods(pairs[::-1]) == got[::-1]  # memoised, order kept


def test_packed_texts_equal_each_sequence_scored_alone() -> None:
    """The trie packing (texts sharing first tokens, a text that is another's start, a
    one-token text, a text whose first token merges with its context's last) gives each
    pair the log-likelihood the whole sequence alone gives."""
    import torch

    backend = create_backend("embedded/gemma-3-270m", batch_size=8)
    assert isinstance(backend, HFBackend) and backend.prefix_sharing
    backend.clear_memo()
    header = "Captions written by different people for the same image:\n-"
    pairs = [(header, " A dog runs on the grass."), (header, " A dog runs."),
             (header, " A dog"), (header, " A"), (header, " Two cats sleep."),
             (header + " A dog runs.\n-", " A dog runs on the grass."),
             (header + " A dog runs.\n-", " A cat."),
             ("A caption written for an ima", "ge of two dogs."),
             ("A caption written for an ima", "ges of a cat.")]
    tokens = backend.stats.tokens
    got = backend.loglikelihoods(pairs)
    # Shared first tokens fed once: fewer than the contexts once plus every text whole.
    contexts = {c for c, _ in pairs}
    alone = sum(len(backend._pair_ids(c, "")[0]) for c in contexts) + \
        sum(len(f) - b for f, b in (backend._pair_ids(c, t) for c, t in pairs))
    assert 0 < backend.stats.tokens - tokens < alone
    for (context, text), (value, n) in zip(pairs, got, strict=True):
        full, begin = backend._pair_ids(context, text)
        with torch.inference_mode():
            logits = backend.model(input_ids=torch.tensor([full])).logits.float()[0]
        logp = torch.log_softmax(logits[:-1], dim=-1)
        expected = sum(float(logp[k - 1, full[k]]) for k in range(begin, len(full)))
        assert n == len(full) - begin
        assert value == pytest.approx(expected, abs=1e-3), (context, text)


@pytest.mark.slow
def test_embedded_likelihood_judge_scores_the_sample(ingested: Path, tmp_path: Path) -> None:
    config = JudgeConfig(method="likelihood", backend="embedded/gemma-3-270m",
                         modes=["npmi", "pmi", "conditional"], limit=3,
                         cache_dir=str(tmp_path / "cache"), backend_options={"batch_size": 8})
    summary = run_judge(ingested / "items.parquet", tmp_path / "out", config)
    rows = pq.read_table(tmp_path / "out" / "judgements.parquet").to_pylist()
    assert len(rows) == 9 and {r["status"] for r in rows} == {"ok"}
    for r in rows:
        assert 0 <= r["score"] <= 100 and r["source"] == "likelihood"
        assert r["template"] == "likelihood/conditional@1+likelihood/unconditional@1"
        assert r["snapshot"].startswith("sha256:")
    shares = [r for r in rows if r["mode"] == "npmi"]
    assert all("forward_share" in r["reasoning"] for r in shares)
    again = run_judge(ingested / "items.parquet", tmp_path / "out2", config)
    assert again["model_calls"] == 0 and again["cache_hits"] == summary["requests"]


def test_one_gguf_parse_reads_each_file_once_and_restores_the_reader(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The embedded model's conversion opens its GGUF three times (tokenizer, config, weights);
    # within one_gguf_parse each distinct file is parsed once and the same reader is reused.
    import gguf

    from capjudge.backends.embedded import one_gguf_parse

    opened: list[str] = []

    class CountingReader:
        def __init__(self, path: str, mode: str = "r") -> None:
            opened.append(f"{path}:{mode}")
            self.path = path

    monkeypatch.setattr(gguf, "GGUFReader", CountingReader)
    with one_gguf_parse():
        first = gguf.GGUFReader("a.gguf")
        again = gguf.GGUFReader("a.gguf")
        other = gguf.GGUFReader(Path("b.gguf"))
    assert first is again and other is not first
    assert opened == ["a.gguf:r", "b.gguf:r"]
    assert gguf.GGUFReader is CountingReader  # restored: later loads parse afresh
