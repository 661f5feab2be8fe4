"""The sliced vocabulary head against torch's own log_softmax and a float64 reference."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from capjudge.backends.vocab_head import (  # noqa: E402
    logsumexp_rows,
    plain_weight,
    target_logprobs,
)


def _head(vocab: int, dim: int, bias: bool = False, seed: int = 0) -> torch.nn.Linear:
    gen = torch.Generator().manual_seed(seed)
    head = torch.nn.Linear(dim, vocab, bias=bias)
    with torch.no_grad():
        head.weight.copy_(torch.randn(vocab, dim, generator=gen) * 0.3)
        if bias:
            head.bias.copy_(torch.randn(vocab, generator=gen))
    return head


def _reference(head: torch.nn.Linear, hidden: torch.Tensor, targets: torch.Tensor,
               softcap: float | None = None) -> torch.Tensor:
    logits = hidden.double() @ head.weight.double().t()
    if head.bias is not None:
        logits = logits + head.bias.double()
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    return torch.log_softmax(logits, -1).gather(-1, targets[:, None])[:, 0]


@pytest.mark.parametrize("rows", [1, 7, 300])
@pytest.mark.parametrize("slice_elements", [1 << 10, 1 << 16])
def test_logsumexp_matches_torch_whatever_the_slicing(rows: int, slice_elements: int) -> None:
    # 5,003 words: not a multiple of any slice width, so the last slice is a short one.
    head = _head(5003, 48, bias=True)
    hidden = torch.randn(rows, 48, generator=torch.Generator().manual_seed(1)) * 4
    with torch.inference_mode():
        got = logsumexp_rows(hidden, head.weight, head.bias, slice_elements=slice_elements)
        want = torch.logsumexp(hidden.double() @ head.weight.double().t()
                               + head.bias.double(), -1)
    assert got.dtype == torch.float32 and got.shape == (rows,)
    assert torch.allclose(got.double(), want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("softcap", [None, 30.0])
def test_target_logprobs_equal_log_softmax(softcap: float | None) -> None:
    head = _head(4099, 32, bias=True)
    gen = torch.Generator().manual_seed(2)
    hidden = torch.randn(50, 32, generator=gen) * 8  # logits up to ~100: the cap matters
    targets = torch.randint(0, 4099, (50,), generator=gen)
    with torch.inference_mode():
        got = target_logprobs(head, hidden, targets, softcap=softcap)
        whole = target_logprobs(head, hidden, targets, softcap=softcap, sliced=False)
    want = _reference(head, hidden, targets, softcap)
    # Logits of up to ~100 in float32 carry ~1e-5 of rounding each.
    assert torch.allclose(got.double(), want, atol=1e-4, rtol=0)
    assert torch.allclose(whole.double(), want, atol=1e-4, rtol=0)


def test_a_hidden_row_shared_by_several_targets() -> None:
    """A context's last position predicts the first token of every text after it."""
    head = _head(3001, 16)
    hidden = torch.randn(3, 16, generator=torch.Generator().manual_seed(3))
    rows = torch.tensor([0, 0, 0, 2, 1, 2])
    targets = torch.tensor([5, 17, 3000, 0, 9, 9])
    with torch.inference_mode():
        got = target_logprobs(head, hidden, targets, rows)
    want = _reference(head, hidden[rows], targets)
    assert torch.allclose(got.double(), want, atol=1e-5, rtol=0)


def test_closer_to_float64_than_the_whole_head_in_float32() -> None:
    """The target logit is an exact dot product; the whole head's float32 product is not."""
    # Gemma 3 270M's scale: 640 wide, logits up to ~30.
    head = _head(20000, 640, seed=4)
    gen = torch.Generator().manual_seed(5)
    hidden = torch.randn(64, 640, generator=gen) * 0.5
    targets = torch.randint(0, 20000, (64,), generator=gen)
    with torch.inference_mode():
        sliced = target_logprobs(head, hidden, targets)
        whole = target_logprobs(head, hidden, targets, sliced=False)
    want = _reference(head, hidden, targets)
    err_sliced = (sliced.double() - want).abs().max().item()
    err_whole = (whole.double() - want).abs().max().item()
    assert err_sliced <= 1e-5
    assert err_sliced <= err_whole


def test_bfloat16_weights_round_the_logit_as_a_bf16_product_does() -> None:
    head = _head(2048, 64).to(torch.bfloat16)
    gen = torch.Generator().manual_seed(6)
    hidden = (torch.randn(20, 64, generator=gen)).to(torch.bfloat16)
    targets = torch.randint(0, 2048, (20,), generator=gen)
    with torch.inference_mode():
        got = target_logprobs(head, hidden, targets)
        whole = torch.log_softmax(head(hidden).float(), -1).gather(-1, targets[:, None])[:, 0]
    assert got.dtype == torch.float32
    # bf16 keeps 8 bits: both read the same rounded logits, up to one rounding step.
    assert torch.allclose(got, whole, atol=0.05, rtol=0)


def test_a_quantised_head_is_applied_whole() -> None:
    from torch.ao.quantization import quantize_dynamic

    model = torch.nn.Sequential(_head(1000, 32))
    quantised = quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)[0]
    assert plain_weight(model[0]) is not None and plain_weight(quantised) is None
    hidden = torch.randn(10, 32, generator=torch.Generator().manual_seed(7))
    targets = torch.arange(10)
    with torch.inference_mode():
        # One block: a dynamically quantised layer scales its input per call.
        got = target_logprobs(quantised, hidden, targets, block=10)
        want = torch.log_softmax(quantised(hidden), -1).gather(-1, targets[:, None])[:, 0]
    assert torch.allclose(got, want, atol=1e-6)


def test_no_targets() -> None:
    head = _head(100, 8)
    with torch.inference_mode():
        got = target_logprobs(head, torch.zeros(0, 8), torch.zeros(0, dtype=torch.long))
    assert got.shape == (0,)
