"""log p(target) through a language model's vocabulary head, without a vocabulary-wide table.

Scoring a text costs one vocabulary-sized row of logits per token: for Gemma 3 (262,144 words
x 640) that head is more work than the rest of the model. Computed the plain way
(``log_softmax(head(hidden))``) each row of logits is written to memory, read back for the
softmax and written again, and each block of rows is a fresh, page-faulted allocation of
hundreds of megabytes. Here the head is applied one vocabulary slice at a time into a small
buffer that stays in the CPU's cache, keeping a running log-sum-exp per row (the exact
normaliser, merged across slices); the target's own logit is a dot product accumulated in
float64. Against a float64 head on Gemma 3's hidden states it is off by up to 3.6e-6 nats per
token, where ``log_softmax`` of the float32 head is off by 5.9e-5; measured 1.6-1.8x faster on
the 2-core CPU (``bench/bench_local.py``). Rows are best sent many at a time: with few rows the
head is bound by reading its weights (671 MB in float32), with hundreds by arithmetic.
"""

from __future__ import annotations

from typing import Any

# Elements of the per-slice logits buffer (rows x slice width): 256 KB in float32, inside a
# core's L2 cache. Measured on the 2-core CPU: 64k-1M elements all within 15 % of each other,
# 64k the fastest; a whole-vocabulary block (the plain way) 1.6x slower at 256 rows.
SLICE_ELEMENTS = 1 << 16
# On an accelerator each slice is a handful of kernel launches: few, wide slices (256 MB of
# float32 logits per slice). Not measured here (no GPU on the development machine).
DEVICE_SLICE_ELEMENTS = 1 << 26
# No slice narrower than this: each slice is ~5 small tensor operations of fixed cost.
MIN_SLICE = 512
# Rows per sliced application: below ~500 rows the head is bound by reading its weights
# (4 rows: 26 ms per row, 256: 2.2 ms, 512-4,096: 1.9-2.0 ms on the 2-core CPU, ~170 GFLOP/s).
SLICED_ROWS = 1024


def plain_weight(head: Any) -> tuple[Any, Any] | None:
    """The head's ``(weight, bias)`` when it is a plain linear map, else None.

    A dynamically quantised head (``torch.ao`` int8) packs its weight: it is applied whole.
    """
    import torch

    weight = getattr(head, "weight", None)
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
        return None
    bias = getattr(head, "bias", None)
    return weight, bias if isinstance(bias, torch.Tensor) else None


def logsumexp_rows(hidden: Any, weight: Any, bias: Any = None, softcap: float | None = None,
                   slice_elements: int | None = None) -> Any:
    """``logsumexp(hidden @ weight.T + bias)`` per row (float32), one vocabulary slice at a time.

    Args:
        hidden: ``[rows, dim]`` hidden states, in the weight's dtype.
        weight: ``[vocab, dim]`` head weight.
        bias: optional ``[vocab]`` bias.
        softcap: Gemma 2 style final-logit soft-capping (``tanh(x / cap) * cap``), if the
            model applies it.
        slice_elements: rows x slice width of the reused logits buffer (default: one
            that fits a core's cache on the CPU, ``DEVICE_SLICE_ELEMENTS`` elsewhere).

    Returns:
        ``[rows]`` float32 log-normalisers.
    """
    import torch

    rows, vocab = hidden.shape[0], weight.shape[0]
    if rows == 0:
        return torch.zeros(0, dtype=torch.float32, device=hidden.device)
    if slice_elements is None:
        slice_elements = SLICE_ELEMENTS if hidden.device.type == "cpu" else DEVICE_SLICE_ELEMENTS
    step = min(vocab, max(MIN_SLICE, slice_elements // rows))
    buffer = torch.empty((rows, step), dtype=weight.dtype, device=hidden.device)
    maxes, sums = [], []
    for lo in range(0, vocab, step):
        part = weight[lo:lo + step]
        # The last slice may be narrower than the buffer: it gets its own small tensor.
        logits = torch.mm(hidden, part.t(), out=buffer) if part.shape[0] == step \
            else torch.mm(hidden, part.t())
        if bias is not None:
            logits.add_(bias[lo:lo + step])
        if logits.dtype != torch.float32:
            logits = logits.float()
        if softcap:
            logits.div_(softcap).tanh_().mul_(softcap)
        top = logits.amax(-1, keepdim=True)
        sums.append(logits.sub_(top).exp_().sum(-1))  # in place: the buffer is reused
        maxes.append(top[:, 0])
    m = torch.stack(maxes, 1)
    s = torch.stack(sums, 1)
    overall = m.amax(1, keepdim=True)
    return overall[:, 0] + (s * (m - overall).exp()).sum(1).log()


def target_logits(hidden: Any, weight: Any, targets: Any, bias: Any = None,
                  softcap: float | None = None) -> Any:
    """Each row's logit of its own target token (float32), as the head computes it.

    The dot product is accumulated in float64 and rounded to the weight's dtype, as a
    matrix product rounds its output.
    """
    import torch

    rows = weight[targets]
    # float64: a few hundred products per target cost nothing, and the sum is then the
    # exact one (a float32 sum in another order than the matrix product's would add its own
    # rounding, up to ~1e-4 nats per token on Gemma's logits).
    out = (hidden.double() * rows.double()).sum(-1)
    if bias is not None:
        out = out + bias[targets].double()
    out = out.to(weight.dtype).float() if weight.dtype != torch.float32 else out.float()
    if softcap:
        out = (out / softcap).tanh() * softcap
    return out


def target_logprobs(head: Any, hidden: Any, targets: Any, rows: Any = None,
                    softcap: float | None = None, block: int = 256,
                    sliced: bool = True) -> Any:
    """``log_softmax(head(hidden[row]))[target]`` per target (float32).

    Args:
        head: the model's output embedding (``get_output_embeddings()``).
        hidden: ``[n, dim]`` final hidden states.
        targets: ``[m]`` token ids.
        rows: ``[m]`` the hidden row of each target (default: row i for target i); a row
            shared by several targets has its normaliser computed once.
        softcap: the model's final-logit soft-capping, if any.
        block: targets per application of the head where it is applied whole (each holds a
            vocabulary-sized row of logits: this bounds the memory).
        sliced: False applies the head whole (``log_softmax(head(h))``) even when its weight
            is plain: the way before slicing, kept for benchmarks side by side.

    Returns:
        ``[m]`` float32 log-probabilities.
    """
    import torch

    if rows is None:
        rows = torch.arange(hidden.shape[0], device=hidden.device)
    block = max(1, block)
    plain = plain_weight(head) if sliced else None
    if plain is None:  # the head applied whole, a block of targets at a time
        out = []
        for lo in range(0, targets.shape[0], block):
            logits = head(hidden[rows[lo:lo + block]]).float()
            if softcap:
                logits = torch.tanh(logits / softcap) * softcap
            out.append(torch.log_softmax(logits, dim=-1)
                       .gather(-1, targets[lo:lo + block, None])[:, 0])
        return torch.cat(out) if out else torch.zeros(0, device=hidden.device)
    weight, bias = plain
    hidden = hidden.to(weight.dtype)
    norms = [logsumexp_rows(hidden[lo:lo + SLICED_ROWS], weight, bias, softcap)
             for lo in range(0, hidden.shape[0], SLICED_ROWS)]
    lse = torch.cat(norms) if norms else torch.zeros(0, device=hidden.device)
    return target_logits(hidden[rows], weight, targets, bias, softcap) - lse[rows]
