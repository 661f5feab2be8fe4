"""A model's linear layers on the CPU through oneDNN with weights packed once.

PyTorch computes a float32 ``nn.Linear`` on the CPU with MKL's ``sgemm``, which re-packs the
weight matrix into its blocked layout on every call. A decoder pass of a few hundred tokens
spends a noticeable share of its time there, and a pass of a few tokens is dominated by it
(every weight re-read and re-packed). oneDNN (bundled with PyTorch's CPU builds) can pack a
weight once into the layout its kernel reads (``torch.ops.mkldnn._reorder_linear_weight``)
and then apply it to any number of rows (``_linear_pointwise``); the same kernels back
``torch.compile``'s CPU linear layers.

Measured on the 2-core development CPU (AVX-512), float32 (the judge as a whole:
``bench/bench_local.py``, ``shared-mkl`` vs ``shared``):

- one 640 -> 2048 layer: 154-195 GFLOP/s with MKL at 64-1,024 rows, 219-224 with the packed
  weight; 8 rows: 0.27 ms -> 0.12 ms;
- Gemma 3 270M's decoder, 4 x 128 tokens: 664 -> 570 ms per pass;
- the likelihood judge on 40 sample candidates, 3 modes: 0.459 -> 0.387 s per candidate;
- outputs differ from MKL's by float32 rounding only (the sums run in another order): up to
  3e-6 of the hidden states' magnitude, the same size as a change of thread count.

Only the layers' weights change form: each ``nn.Linear`` becomes a :class:`PackedLinear` that
holds the packed weight instead (no second copy is kept), so code that reads a layer's
``weight`` must not run on a packed model. The vocabulary head is left as it is: it is read
by the likelihood path's own sliced head (``vocab_head``) and tied to the input embeddings.
"""

from __future__ import annotations

from typing import Any

# oneDNN picks the packed layout for an expected number of rows: measured on the 2-core CPU,
# layouts for 64-1,024 rows are within 5 % of each other at every row count from 8 to 600.
ROWS_HINT = 256


def available() -> bool:
    """Whether this PyTorch build can pack linear weights for oneDNN (CPU builds with it)."""
    import torch

    if not torch.backends.mkldnn.is_available():
        return False
    try:
        weight = torch.zeros((8, 8))
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, 1)
        out = torch.ops.mkldnn._linear_pointwise(torch.ones((1, 8)), packed, None, "none",
                                                 [], "")
    except (AttributeError, RuntimeError):
        return False
    return bool(out.shape == (1, 8))


def _packed_linear_class() -> type:
    """:class:`PackedLinear`, built on first use (torch is imported lazily)."""
    import torch

    class PackedLinear(torch.nn.Module):
        """An ``nn.Linear`` (float32, CPU) applied by oneDNN with its weight packed once."""

        def __init__(self, linear: torch.nn.Linear) -> None:
            super().__init__()
            self.in_features = linear.in_features
            self.out_features = linear.out_features
            # A plain attribute, not a parameter or buffer: the packed tensor has oneDNN's
            # own layout, which state_dict, .to() and parameter counts cannot handle.
            self.packed = torch.ops.mkldnn._reorder_linear_weight(
                linear.weight.detach(), ROWS_HINT)
            self.bias = None if linear.bias is None else linear.bias.detach()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(
                x, self.packed, self.bias, "none", [], "")
            return out

        def extra_repr(self) -> str:
            return (f"in_features={self.in_features}, out_features={self.out_features}, "
                    f"bias={self.bias is not None}, packed=onednn")

    return PackedLinear


def pack_linears(module: Any, skip: Any = None) -> int:
    """Replace every float32 ``nn.Linear`` under ``module`` (on the CPU) by a packed one.

    Args:
        module: the model part whose layers to pack (e.g. the text decoder).
        skip: a module to leave as it is (e.g. the vocabulary head, when it is reachable).

    Returns:
        How many layers were packed (0 when oneDNN is not available or nothing qualifies).
    """
    import torch

    if not available():
        return 0
    packed_class = _packed_linear_class()
    count = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if child is skip or type(child) is not torch.nn.Linear:
                continue
            weight = child.weight
            if weight.dtype != torch.float32 or weight.device.type != "cpu":
                continue
            setattr(parent, name, packed_class(child))
            count += 1
    return count
