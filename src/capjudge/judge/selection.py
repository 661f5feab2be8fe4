"""Which ingested items a judge judges: every one, a seeded sample, or the first N.

``item_fraction`` judges a share of the items chosen by a seeded hash of each item's id (issue
42: a paper method whose signal on the embedded model is nil should not cost most of the main
job). Each item is in or out on its own, so adding items to a manifest never moves an item that
was already in the sample out of it (or in), and a chunk of the table decides for its own rows
without seeing the others. ``limit`` then keeps the first N of those (smoke runs). The items
left out are not judged and have no rows; the judge's summary counts them
(:class:`capjudge.records.ItemCounts`) and the report says how many of how many were judged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, TypeVar, cast

from capjudge.records import ItemCounts

T = TypeVar("T")

# A salt of its own, so that the sample is not correlated with other hashes of the ids.
_SALT = b"capjudge.item_fraction"


def in_sample(item_id: str, fraction: float | None, seed: int = 0) -> bool:
    """Whether the item with this id is in a ``fraction`` sample under ``seed``.

    The id's salted SHA-256, read as a number in [0, 1), is below ``fraction``: about that
    share of any set of ids is in, the same ids whatever else is in the set.
    """
    if fraction is None or fraction >= 1:
        return True
    digest = hashlib.sha256(_SALT + b"\0" + str(seed).encode() + b"\0"
                            + item_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64 < fraction


def selected(items: Sequence[T], config: Any) -> list[T]:
    """The items ``config`` judges, in their order: the sample, then its first ``limit``.

    Args:
        items: the items (anything with an ``id``).
        config: a :class:`capjudge.judge.JudgeConfig` (``item_fraction``, ``item_seed``,
            ``limit``).
    """
    chosen = [item for item in items
              if in_sample(cast(Any, item).id, config.item_fraction, config.item_seed)]
    return chosen[: config.limit] if config.limit else chosen


def selection_span(ids: Sequence[str], config: Any) -> tuple[int, int]:
    """How many leading rows of the table hold the judged items, and how many are judged.

    A flow that cuts the table into chunks of rows reads only the first ``rows`` (every chunk
    then keeps the rows :func:`selected` keeps) and judges ``judged`` items.
    """
    judged = 0
    for row, key in enumerate(ids):
        if in_sample(key, config.item_fraction, config.item_seed):
            judged += 1
            if config.limit and judged == config.limit:
                return row + 1, judged
    return len(ids), judged


def item_counts(judged: int, total: int, config: Any) -> ItemCounts:
    """The summary's item counts, with how the judged items were chosen."""
    counts: ItemCounts = {"judged": judged, "total": total}
    if config.item_fraction is not None and config.item_fraction < 1:
        counts["fraction"] = float(config.item_fraction)
        counts["seed"] = int(config.item_seed)
    if config.limit:
        counts["limit"] = int(config.limit)
    return counts
