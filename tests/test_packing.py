"""Texts packed as token tries (``capjudge.backends.packing``): hand-worked cases."""

from __future__ import annotations

import pytest

from capjudge.backends.packing import CONTEXT, Pack, buckets, pack_paths, pack_texts, plan_packs


def _by_pair(pack: Pack) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for node, target, pair in pack.scored:
        out.setdefault(pair, []).append((node, target))
    return out


def test_texts_sharing_first_tokens_share_nodes_and_last_tokens_are_not_fed() -> None:
    pack = Pack((1, 2))
    pack.add(0, [7, 8, 9], 0)   # "A dog runs"
    pack.add(1, [7, 8, 5], 0)   # "A dog sits": shares "A dog"
    pack.add(2, [7, 4], 0)      # "A cat": shares "A"
    pack.add(3, [6], 0)         # one token: read at the context's last position only
    # Nodes: 7 (depth 0), 8 (depth 1, child of 7); 9, 5 and 4 end their texts: never fed.
    assert pack.tokens == [7, 8] and pack.parents == [CONTEXT, 0] and pack.depths == [0, 1]
    scored = _by_pair(pack)
    assert scored[0] == [(CONTEXT, 7), (0, 8), (1, 9)]
    assert scored[1] == [(CONTEXT, 7), (0, 8), (1, 5)]
    assert scored[2] == [(CONTEXT, 7), (0, 4)]
    assert scored[3] == [(CONTEXT, 6)]
    assert pack.path(1) == [0, 1] and pack.path(CONTEXT) == []


def test_tokens_before_first_are_fed_but_not_scored() -> None:
    # The text's first token merged with the context's last: the pair re-reads that token
    # (fed as node 0) and is scored from its second token on.
    pack = Pack((1,))
    pack.add(0, [3, 7, 8], 1)
    assert pack.tokens == [3, 7]
    assert _by_pair(pack)[0] == [(0, 7), (1, 8)]


def test_new_nodes_counts_only_the_unshared_part() -> None:
    pack = Pack(())
    pack.add_path([1, 2, 3])
    assert pack.new_nodes([1, 2, 3]) == 0
    assert pack.new_nodes([1, 2, 4, 5]) == 2
    assert pack.new_nodes([9]) == 1


def test_pack_texts_splits_at_the_width_and_keeps_every_scored_token() -> None:
    texts = [(k, [10 + k, 20, 30, 40], 0) for k in range(5)]  # no sharing: 3 nodes each
    packs = pack_texts((1,), texts, width=7)
    assert [len(p) for p in packs] == [6, 6, 3]
    assert all(len(p) <= 7 for p in packs)
    assert sorted(pair for p in packs for _, _, pair in p.scored) == \
        sorted(k for k in range(5) for _ in range(4))
    with pytest.raises(ValueError, match="does not fit"):
        pack_texts((1,), [(0, [1, 2, 3, 4, 5], 0)], width=3)


def test_pack_paths_feeds_every_token_and_names_each_last_node() -> None:
    paths = [(1, 2, 3, 4), (1, 2, 5), (9,)]
    [(pack, ends)] = pack_paths(paths, width=16)
    assert len(pack) == 6  # 1 2 shared, then 3 4, 5, 9
    assert pack.depths == [0, 1, 2, 3, 2, 0]
    for k, node in ends:
        assert [pack.tokens[i] for i in pack.path(node)] == list(paths[k])
    assert sorted(k for k, _ in ends) == [0, 1, 2]
    split = pack_paths(paths, width=4)
    assert len(split) == 2 and all(len(p) <= 4 for p, _ in split)


def test_plan_packs_feeds_no_more_than_one_text_per_row() -> None:
    groups = [((1, 2), [(k, [5, 6, 7 + k, 8], 0) for k in range(6)]),
              ((3,), [(6 + k, [4 + k, 9], 0) for k in range(3)])]
    packs, passes = plan_packs(groups, budget=10_000)
    one_per_row = sum(len(s) - 1 for _, texts in groups for _, s, _ in texts)
    fed = sum((hi - lo) * len(packs[hi - 1]) for lo, hi in passes)
    assert fed < one_per_row
    # Packs without nodes (one-token texts) come first and no pass holds them.
    assert all(len(packs[i]) for lo, hi in passes for i in range(lo, hi))
    # Every text's every token is scored exactly once.
    scored = sorted((pair, target) for p in packs for _, target, pair in p.scored)
    assert scored == sorted((k, t) for _, texts in groups for k, s, _ in texts for t in s)


def test_buckets_bound_padding_and_memory() -> None:
    widths = [2, 2, 3, 10, 10, 11, 40]
    ranges = buckets(widths, budget=100, held=widths)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(widths)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    for lo, hi in ranges:
        rows = widths[lo:hi]
        assert len(rows) == 1 or len(rows) * max(rows) <= 1.5 * sum(rows)
        assert len(rows) == 1 or len(rows) * max(rows) <= 100
    assert (6, 7) in ranges  # the long row is not padded onto the short ones
