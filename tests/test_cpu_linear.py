"""oneDNN-packed linear layers (``capjudge.backends.cpu_linear``) equal ``nn.Linear``."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from capjudge.backends import cpu_linear  # noqa: E402

pytestmark = pytest.mark.skipif(not cpu_linear.available(),
                                reason="this PyTorch build cannot pack weights for oneDNN")


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", [(1, 640), (7, 640), (3, 50, 640)])
def test_packed_layer_equals_the_linear_layer_up_to_float32_rounding(
        bias: bool, shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    linear = torch.nn.Linear(640, 300, bias=bias)
    x = torch.randn(shape)
    expected = linear(x).detach().double()
    holder = torch.nn.Sequential(linear)
    assert cpu_linear.pack_linears(holder) == 1
    packed = holder[0]
    assert type(packed).__name__ == "PackedLinear" and not isinstance(packed, torch.nn.Linear)
    with torch.inference_mode():
        got = packed(x)
    assert got.shape == expected.shape and got.dtype == torch.float32
    # Only the order of the sums differs: a few float32 ulps of the largest partial sums.
    scale = (x.abs().double() @ linear.weight.abs().detach().double().T).max().item()
    assert (got.double() - expected).abs().max().item() <= 1e-6 * scale


def test_only_float32_cpu_linear_layers_are_packed_and_the_skipped_one_is_kept() -> None:
    head = torch.nn.Linear(8, 16, bias=False)
    half = torch.nn.Linear(8, 8).to(torch.bfloat16)
    body = torch.nn.Linear(8, 8)
    model = torch.nn.ModuleDict({"body": torch.nn.Sequential(body, torch.nn.ReLU(), half),
                                 "head": head})
    assert cpu_linear.pack_linears(model, skip=head) == 1
    assert type(model["body"][0]).__name__ == "PackedLinear"
    assert model["body"][2] is half and model["head"] is head
    # Packed layers hold no parameters: the weight is not kept twice.
    assert sum(p.numel() for p in model.parameters()) == head.weight.numel() + \
        sum(p.numel() for p in half.parameters())
    # Packing again finds nothing left to pack.
    assert cpu_linear.pack_linears(model, skip=head) == 0
