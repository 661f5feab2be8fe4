"""The keys and values generation already computed, reused for a row's score distributions.

A local judge first generates its answer (a left-padded batch), then reads each score slot's
distribution at a position inside that answer: the context is the row's prompt (with its
image) and part of what the model wrote. Encoding that context again repeats the prompt's
whole forward, the image's vision tower included, once per slot (measured on an H200 with a
LLaVA-7B-shaped model: 38 % of the evaluation time). Generation's own cache already holds
every one of those keys and values: a row's slice of it, without its left padding, is what
encoding the row alone gives, so a slot's distribution is read on top of it with only the
tokens the cache lacks fed (at least the last one, whose logits give the first digit).

Where the cache cannot give that (a sliding-window layer that dropped early tokens, a cache
type without per-layer tensors, a row whose padding is not on the left), :func:`row_prefixes`
returns None and the caller re-encodes, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class RowPrefix:
    """One generated row's keys and values, unpadded.

    Attributes:
        tokens: the token ids whose keys and values ``layers`` holds (the row's prompt, then
            what it generated except the last token, which was never fed).
        layers: per layer ``(keys, values)`` of shape ``(1, heads, len(tokens), dim)``: views
            into generation's cache, never written to.
        rope_delta: multimodal RoPE families (Qwen-VL): how far the row's text positions are
            from its token indices (an image takes fewer positions than tokens); None for the
            others.
    """

    tokens: list[int]
    layers: list[tuple[Any, Any]]
    rope_delta: int | None = None

    def shared_length(self, context: list[int]) -> int:
        """How many of ``context``'s first tokens are held, leaving at least one to feed.

        The last context token is always fed: its logits are the first digit's distribution.
        """
        n = 0
        limit = min(len(self.tokens), len(context) - 1)
        while n < limit and self.tokens[n] == context[n]:
            n += 1
        return n

    def cache(self, length: int, config: Any) -> Any:
        """A fresh cache holding the first ``length`` tokens (appending never touches the views).

        A layer's ``update`` concatenates into new tensors, so generation's cache and every
        other slot's copy stay as they were.
        """
        from transformers import DynamicCache

        return DynamicCache(ddp_cache_data=[(k[:, :, :length], v[:, :, :length])
                                            for k, v in self.layers], config=config)


def cache_layers(cache: Any) -> list[tuple[Any, Any]] | None:
    """Per layer (keys, values) of a transformers cache, or None when it has no such tensors."""
    try:
        layers = [(entry[0], entry[1]) for entry in cache]
    except (TypeError, IndexError, AttributeError):
        return None
    if not layers or any(k is None or v is None or getattr(k, "dim", lambda: 0)() != 4
                         for k, v in layers):
        return None
    return layers


def row_prefixes(cache: Any, sequences: Any, attention_mask: Any,
                 rope_deltas: Any = None) -> list[RowPrefix | None] | None:
    """Each row's unpadded slice of generation's cache; None where it cannot be had.

    Args:
        cache: ``generate(..., return_dict_in_generate=True).past_key_values``.
        sequences: the generated sequences (batch, prompt width + new tokens).
        attention_mask: the prompt batch's mask (batch, prompt width), left-padded.
        rope_deltas: the model's ``rope_deltas`` after generation (batch, 1), if it has them.

    Returns:
        One entry per row (None for a row whose padding is not a left run of zeros), or None
        for the whole batch when the cache does not hold every fed position in every layer
        (a sliding window dropped some; a static or quantised cache).
    """
    layers = cache_layers(cache)
    if layers is None:
        return None
    fed = int(sequences.shape[1]) - 1  # the last generated token was never fed
    if any(int(k.shape[2]) != fed or int(v.shape[2]) != fed for k, v in layers):
        return None
    width = int(attention_mask.shape[1])
    out: list[RowPrefix | None] = []
    for r in range(int(sequences.shape[0])):
        mask = attention_mask[r].tolist()
        pad = mask.index(1) if 1 in mask else width
        if pad == width or any(m != 1 for m in mask[pad:]) or any(m != 0 for m in mask[:pad]):
            out.append(None)
            continue
        delta = None
        if rope_deltas is not None:
            # Counted from the row's first real token (transformers places a left-padded
            # row's tokens at their index among its real tokens plus this delta), so the same
            # unpadded.
            delta = int(rope_deltas.reshape(-1)[r if rope_deltas.numel() > 1 else 0])
        out.append(RowPrefix(tokens=sequences[r, pad:fed].tolist(),
                             layers=[(k[r:r + 1, :, pad:fed], v[r:r + 1, :, pad:fed])
                                     for k, v in layers],
                             rope_delta=delta))
    return out
