"""Rows of generation's cache, unpadded (capjudge.backends.generated_prefix).

The families' end-to-end equality with re-encoding is in tests/test_vlm_families.py; these are
the slicing rules on hand-made caches.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from transformers import DynamicCache  # noqa: E402

from capjudge.backends.generated_prefix import RowPrefix, cache_layers, row_prefixes  # noqa: E402

LAYERS, HEADS, DIM = 2, 1, 4


def _cache(batch: int, length: int) -> DynamicCache:
    """A cache whose key at (row, position) is row * 100 + position (values negated)."""
    layers = []
    for layer in range(LAYERS):
        keys = torch.zeros(batch, HEADS, length, DIM)
        for r in range(batch):
            keys[r, :, :, :] = (r * 100 + torch.arange(length, dtype=torch.float32)
                                + layer * 1000)[None, :, None]
        layers.append((keys, -keys))
    return DynamicCache(ddp_cache_data=layers)


def test_rows_are_unpadded_slices_of_what_generation_fed() -> None:
    # Row 0 has two left pads, row 1 none; prompts of width 4, then 3 generated tokens (the
    # last never fed: the cache holds 4 + 3 - 1 = 6 positions).
    sequences = torch.tensor([[0, 0, 11, 12, 51, 52, 53], [21, 22, 23, 24, 61, 62, 63]])
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    rows = row_prefixes(_cache(2, 6), sequences, mask)
    assert rows is not None and all(r is not None for r in rows)
    first, second = rows
    assert first is not None and second is not None
    assert first.tokens == [11, 12, 51, 52] and second.tokens == [21, 22, 23, 24, 61, 62]
    keys, values = first.layers[0]
    assert keys.shape == (1, HEADS, 4, DIM)
    assert keys[0, 0, :, 0].tolist() == [2.0, 3.0, 4.0, 5.0]  # positions 2-5 of row 0
    assert torch.equal(values, -keys)
    assert second.layers[1][0][0, 0, :, 0].tolist() == [1100.0 + p for p in range(6)]
    assert first.rope_delta is None


def test_rope_deltas_are_kept_per_row() -> None:
    sequences = torch.tensor([[0, 11, 51, 52], [21, 22, 61, 62]])
    mask = torch.tensor([[0, 1], [1, 1]])
    rows = row_prefixes(_cache(2, 3), sequences, mask, rope_deltas=torch.tensor([[-8], [-2]]))
    assert rows is not None
    assert [r.rope_delta for r in rows if r is not None] == [-8, -2]


def test_a_cache_that_does_not_hold_every_fed_position_is_not_used() -> None:
    sequences = torch.tensor([[11, 12, 51, 52]])
    mask = torch.tensor([[1, 1]])
    # A sliding-window layer kept only the last 2 of 3 fed positions.
    short = DynamicCache(ddp_cache_data=[(torch.zeros(1, 1, 3, DIM), torch.zeros(1, 1, 3, DIM)),
                                         (torch.zeros(1, 1, 2, DIM), torch.zeros(1, 1, 2, DIM))])
    assert row_prefixes(short, sequences, mask) is None
    assert row_prefixes(None, sequences, mask) is None
    assert cache_layers(None) is None


def test_a_row_not_left_padded_is_not_used() -> None:
    sequences = torch.tensor([[11, 0, 51, 52], [21, 22, 61, 62]])
    mask = torch.tensor([[1, 0], [1, 1]])  # a gap inside the prompt: not left padding
    rows = row_prefixes(_cache(2, 3), sequences, mask)
    assert rows is not None and rows[0] is None and rows[1] is not None


def test_the_shared_length_leaves_the_last_context_token_to_feed() -> None:
    prefix = RowPrefix(tokens=[1, 2, 3, 4], layers=[])
    assert prefix.shared_length([1, 2, 3, 4]) == 3  # its logits are the first digit's
    assert prefix.shared_length([1, 2, 3, 4, 9, 9]) == 4  # forced tokens after the answer
    assert prefix.shared_length([1, 2, 7, 8]) == 2  # diverges inside
    assert prefix.shared_length([5]) == 0


def test_a_slot_cache_never_writes_into_generations_cache() -> None:
    sequences = torch.tensor([[11, 12, 13, 51, 52]])
    mask = torch.tensor([[1, 1, 1]])
    generated = _cache(1, 4)
    before = [k.clone() for k, *_ in generated]
    rows = row_prefixes(generated, sequences, mask)
    assert rows is not None and rows[0] is not None
    past = rows[0].cache(2, None)
    assert past.get_seq_length() == 2
    for layer in range(LAYERS):
        past.update(torch.full((1, HEADS, 1, DIM), 7.0), torch.full((1, HEADS, 1, DIM), 7.0),
                    layer)
    assert past.get_seq_length() == 3
    assert all(torch.equal(entry[0], b) for entry, b in zip(generated, before, strict=True))
