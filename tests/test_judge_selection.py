"""Which items a judge judges (capjudge.judge.selection): a seeded sample, then the first N."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from capjudge.judge import JudgeConfig
from capjudge.judge.selection import in_sample, item_counts, selected, selection_span


@dataclass
class _Item:
    id: str


def _config(fraction: float | None = None, seed: int = 0,
            limit: int | None = None) -> SimpleNamespace:
    return SimpleNamespace(item_fraction=fraction, item_seed=seed, limit=limit)


IDS = [f"img{k:03d}#cand{j}" for k in range(200) for j in range(5)]  # 1,000 ids


def test_an_item_is_in_when_its_salted_hash_is_below_the_fraction() -> None:
    # The rule, written out by hand for one id: SHA-256 of salt \0 seed \0 id, 8 bytes.
    digest = hashlib.sha256(b"capjudge.item_fraction\x000\x00img007#cand3").digest()
    u = int.from_bytes(digest[:8], "big") / 2.0 ** 64
    assert in_sample("img007#cand3", u + 1e-9) and not in_sample("img007#cand3", u - 1e-9)


def test_the_sample_is_about_the_fraction_and_changes_with_the_seed() -> None:
    ones = [i for i in IDS if in_sample(i, 0.3, 0)]
    others = [i for i in IDS if in_sample(i, 0.3, 1)]
    # Binomial(1000, 0.3): sd 14.5; 5 sd either side.
    assert 228 <= len(ones) <= 372 and 228 <= len(others) <= 372
    assert ones != others
    assert all(in_sample(i, None) and in_sample(i, 1.0) for i in IDS[:50])


def test_adding_items_never_moves_an_item_in_or_out() -> None:
    before = {x.id for x in selected([_Item(i) for i in IDS[:400]], _config(0.25))}
    after = {x.id for x in selected([_Item(i) for i in IDS], _config(0.25))}
    assert before and before == after & set(IDS[:400])


def test_limit_keeps_the_first_n_of_the_sample_in_table_order() -> None:
    items = [_Item(i) for i in IDS]
    sample = selected(items, _config(0.2))
    assert selected(items, _config(0.2, limit=7)) == sample[:7]
    assert selected(items, _config(limit=3)) == items[:3]


def test_chunks_of_the_span_keep_exactly_the_selection() -> None:
    """The flow reads the span's rows in chunks, each keeping its own rows of the sample."""
    items = [_Item(i) for i in IDS]
    for config in (_config(0.1), _config(0.1, limit=13), _config(limit=40), _config()):
        rows, judged = selection_span(IDS, config)
        chunks = [selected(items[lo:min(rows, lo + 37)], config) for lo in range(0, rows, 37)]
        flat = [x for chunk in chunks for x in chunk]
        assert flat == selected(items, config) and len(flat) == judged
        if config.limit:
            assert judged == config.limit and in_sample(IDS[rows - 1], config.item_fraction)


def test_item_counts_say_how_the_items_were_chosen() -> None:
    assert item_counts(138, 138, _config()) == {"judged": 138, "total": 138}
    assert item_counts(40, 138, _config(0.3, 2)) == {"judged": 40, "total": 138,
                                                      "fraction": 0.3, "seed": 2}
    assert item_counts(5, 138, _config(limit=5)) == {"judged": 5, "total": 138, "limit": 5}


@pytest.mark.parametrize("value", [0, -0.1, 1.5, float("nan"), "half", True])
def test_an_item_fraction_out_of_range_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match="item_fraction must be a number in"):
        JudgeConfig(method="gveval", backend="openai/x", item_fraction=value)  # type: ignore[arg-type]


def test_the_report_names_the_sample_and_the_limit() -> None:
    from capjudge.report.run import _limited

    assert _limited({"items": {"judged": 138, "total": 138}}) == ""  # type: ignore[typeddict-item]
    note = _limited({"items": {"judged": 45, "total": 138, "fraction": 0.33,  # type: ignore[typeddict-item]
                               "seed": 0}})
    assert note == " (45 of 138 items: a seeded sample, `item_fraction` 0.33, `item_seed` 0)"
    note = _limited({"items": {"judged": 5, "total": 138}})  # type: ignore[typeddict-item]
    assert note == " (5 of 138 items: the first ones, `limit`)"
