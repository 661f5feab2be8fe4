"""Local judges at the speed of the hardware (issue 20): the faster paths give today's numbers.

- prefix sharing (contexts encoded once, texts scored over their cached context) gives the same
  likelihood scores as encoding every pair whole, and feeds fewer tokens to the model;
- the judge sends one picture's candidates together;
- the decoder's linear layers packed for oneDNN give PyTorch's own kernel's scores.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from capjudge.backends import create_backend
from capjudge.backends.hf import HFBackend
from capjudge.client import JudgeClient
from capjudge.item import Item, load_items
from capjudge.judge import JudgeConfig, judge_items, shared_context_order
from capjudge.methods import get_method
from capjudge.methods.base import Planned
from capjudge.protocol import BackendError, JudgeRequest


def _likelihood_request(context: str, tag: str) -> Planned:
    request = JudgeRequest(messages=(), slots=(), tag=tag,
                           continuations=((context, " a text"), ("neutral", " a text")))
    return Planned(tag, "npmi", request)


def test_requests_sharing_a_context_are_sent_together_in_first_seen_order() -> None:
    planned = [_likelihood_request("refs of picture A", "a1"),
               _likelihood_request("refs of picture B", "b1"),
               _likelihood_request("refs of picture A", "a2"),
               Planned("g", "x", JudgeRequest(messages=(), slots=())),
               _likelihood_request("refs of picture B", "b2")]
    order = shared_context_order(range(len(planned)), planned)
    assert [planned[k].item_id for k in order] == ["a1", "a2", "b1", "b2", "g"]
    assert shared_context_order([4, 0], planned) == [4, 0]  # only the given indices


@pytest.mark.heavy(seconds=25)
@pytest.mark.slow
def test_prefix_sharing_gives_the_same_scores_on_the_sample(ingested: Path) -> None:
    """Both likelihood paths on a slice of the sample (two pictures, every mode): |delta| <= 1e-3
    on the 0-100 scale, identical token counts per pair, fewer tokens fed to the model."""
    rows = pq.read_table(ingested / "items.parquet").to_pylist()
    pictures = list(dict.fromkeys(r["media_sha256"] for r in rows))[:2]
    # Three candidates of each of two pictures: shared references, and the prefix cache
    # carried from one picture to the next.
    chosen = [Item.from_row(r) for p in pictures
              for r in [r for r in rows if r["media_sha256"] == p][:3]]
    scores, tokens, lengths = {}, {}, {}
    for share in (False, True):
        config = JudgeConfig(method="likelihood", backend="embedded/gemma-3-270m",
                             modes=["npmi", "pmi", "conditional"],
                             backend_options={"batch_size": 8, "prefix_sharing": share})
        backend = create_backend(config.backend, **config.backend_options)
        assert isinstance(backend, HFBackend) and backend.prefix_sharing is share
        backend.clear_memo()
        before = backend.stats.tokens
        # No request cache: both paths must reach the model (the second would otherwise be
        # answered with the first one's cached answers).
        result = judge_items(chosen, config, backend=backend, client=JudgeClient(backend, None))
        tokens[share] = backend.stats.tokens - before
        verdicts = result.verdicts(get_method("likelihood"), {})
        scores[share] = {key: v.score for key, v in verdicts.items()}
        lengths[share] = [r.lengths for r in result.responses]
        assert {r.status for r in result.rows} == {"ok"}
    assert scores[True].keys() == scores[False].keys() and len(scores[True]) == 18
    for key, old in scores[False].items():
        assert old is not None and scores[True][key] == pytest.approx(old, abs=1e-3), key
    assert lengths[True] == lengths[False]
    assert 0 < tokens[True] < 0.6 * tokens[False]


@pytest.mark.heavy(seconds=15)
@pytest.mark.slow
def test_packed_linear_layers_give_the_same_scores_on_the_sample(ingested: Path) -> None:
    """The decoder's layers packed for oneDNN (the CPU default) against PyTorch's own kernel:
    the same likelihood scores within |delta| <= 1e-3 on the 0-100 scale, every mode."""
    rows = pq.read_table(ingested / "items.parquet").to_pylist()
    picture = rows[0]["media_sha256"]
    chosen = [Item.from_row(r) for r in rows if r["media_sha256"] == picture][:3]
    scores = {}
    for kernel in ("default", "onednn"):
        config = JudgeConfig(method="likelihood", backend="embedded/gemma-3-270m",
                             modes=["npmi", "pmi", "conditional"],
                             backend_options={"batch_size": 8, "linear_kernel": kernel})
        backend = create_backend(config.backend, **config.backend_options)
        assert isinstance(backend, HFBackend)
        assert backend.describe()["linear_kernel"] == \
            ("default" if kernel == "default" else "onednn-packed")
        backend.clear_memo()
        result = judge_items(chosen, config, backend=backend, client=JudgeClient(backend, None))
        assert {r.status for r in result.rows} == {"ok"}
        verdicts = result.verdicts(get_method("likelihood"), {})
        scores[kernel] = {key: v.score for key, v in verdicts.items()}
    assert len(scores["default"]) == 9 and scores["default"].keys() == scores["onednn"].keys()
    for key, old in scores["default"].items():
        assert old is not None and scores["onednn"][key] == pytest.approx(old, abs=1e-3), key


@pytest.mark.heavy(seconds=14)
def test_linear_kernel_option_is_checked() -> None:
    with pytest.raises(BackendError, match="linear_kernel must be"):
        create_backend("embedded/gemma-3-270m", linear_kernel="fast")
    with pytest.raises(BackendError, match="float32 weights on the CPU"):
        create_backend("embedded/gemma-3-270m", linear_kernel="onednn", dtype="bfloat16")
    bf16 = create_backend("embedded/gemma-3-270m", dtype="bfloat16")
    assert bf16.describe()["linear_kernel"] == "default"  # auto: float32 only


class _ForwardCounter:
    """Counts top-level forward calls of a model (a pre-hook: the calls themselves)."""

    def __init__(self, model: object) -> None:
        self.calls = 0
        self._handle = model.register_forward_pre_hook(self._count)  # type: ignore[attr-defined]

    def _count(self, *_: object) -> None:
        self.calls += 1

    def close(self) -> None:
        self._handle.remove()


def _both_trees(backend: HFBackend, run):  # noqa: ANN001, ANN202 - test helper
    """``run()`` with the masked tree, then with the level-by-level walk: results and passes."""
    results, passes = {}, {}
    # The one-time checks (the masked tree against the level walk, a score read on
    # generation's cache against re-encoding: tests/test_vlm_families.py) are not part of
    # what is counted here.
    backend._tree_checked = backend._sharing_checked = True
    for masked in (True, False):
        backend.tree_mask = masked
        # The transformer body: every pass runs it once, whether through the model's forward
        # or (hidden states, head applied to chosen positions) directly.
        counter = _ForwardCounter(backend._decoder() or backend.model)
        counted = backend.stats.forward_passes
        try:
            results[masked] = run()
        finally:
            counter.close()
            backend.tree_mask = True
        passes[masked] = counter.calls
        # The backend's own count of distribution passes never exceeds the hook's.
        assert backend.stats.forward_passes - counted <= counter.calls
    return results, passes


@pytest.mark.slow
@pytest.mark.parametrize("prune", [0.0, 1e-6])
def test_tree_mask_gives_the_level_walk_distribution_in_two_passes(prune: float) -> None:
    backend = create_backend("embedded/gemma-3-270m")
    assert isinstance(backend, HFBackend)
    backend.prune = prune
    context = backend.tokenizer.encode("Rate the caption from 0 to 100.\nThe final score is $")
    try:
        results, passes = _both_trees(backend,
                                      lambda: backend.distribution(context, list(range(101))))
    finally:
        backend.prune = 1e-6
    assert passes == {True: 2, False: 4}
    assert max(abs(results[True][v] - results[False][v]) for v in range(101)) <= 1e-5
    assert sum(results[True].values()) > 0
    # 1-5 scales (HarmonicEval) take 2 passes too.
    small, small_passes = _both_trees(backend,
                                      lambda: backend.distribution(context, [1, 2, 3, 4, 5]))
    assert small_passes == {True: 2, False: 2}
    assert max(abs(small[True][v] - small[False][v]) for v in range(1, 6)) <= 1e-5


def test_tree_mask_on_the_vlm_path_with_an_image(tmp_path_factory: pytest.TempPathFactory,
                                                 ingested: Path) -> None:
    from tiny_vlm import build_tiny_llava

    from capjudge.judge import plan

    path = build_tiny_llava(tmp_path_factory.mktemp("tiny-llava-tree"))
    backend = create_backend(f"hf/{path}", tree_mask=True, dtype="float32")
    assert isinstance(backend, HFBackend) and backend.is_vlm
    backend.prune = 0.0
    items = load_items(ingested / "items.parquet")[:1]
    config = JudgeConfig(method="gveval", backend=backend.backend_id, modes=["ref-free"],
                         max_tokens=4)
    planned, _ = plan(items, config, True)
    request = planned[0].request
    assert request.needs_vision
    results, passes = _both_trees(backend, lambda: backend.generate([request])[0])
    masked, walked = results[True], results[False]
    assert not isinstance(masked, Exception) and not isinstance(walked, Exception)
    assert masked.text == walked.text
    # The same greedy generation (one forward call per new token), then the distribution:
    # 2 passes instead of 4.
    assert passes[False] - passes[True] == 2 and passes[True] <= request.decoding.max_tokens + 2
    for a, b in zip(masked.slots, walked.slots, strict=True):
        assert a.probs is not None and b.probs is not None and len(a.probs) == 101
        assert max(abs(x - y) for x, y in zip(a.probs, b.probs, strict=True)) <= 1e-5
        assert a.mass == pytest.approx(b.mass, abs=1e-5)
