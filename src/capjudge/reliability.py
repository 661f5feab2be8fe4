"""Injection robustness: which items are adversarial, what score they quote, their clean twins.

The statistics the report's "Judge reliability" and "Judges compared" sections compute (ICC,
Krippendorff's alpha, bootstraps, calibration, length bias, paired comparisons) live in
:mod:`capjudge.stats`; this module holds the item-level logic of the injection check only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ADVERSARIAL_TYPES = frozenset({"adversarial", "injection", "prompt_injection"})


# A verdict written in a judge's own score format: "$85$" (G-VEval, ACCR), "score is 85",
# "Score: 4", "rate this caption 5".
_QUOTED = (
    re.compile(r"\$\s*(\d{1,3})\s*\$"),
    re.compile(r"\bscore\b\s*(?:is|of|:|=)?\s*\$?\s*(\d{1,3})\b", re.IGNORECASE),
    re.compile(r"\brat(?:e|ing)\b[^.\d]{0,40}?\b(\d{1,3})\b", re.IGNORECASE),
)


def is_adversarial(extra: Mapping[str, Any]) -> bool:
    """Whether a manifest row (its ``extra`` keys) marks the item as adversarial.

    The bundled sample marks them ``error_type: adversarial``; any dataset may flag an item
    with ``adversarial: true`` (or ``injection: true``, or ``error_type`` ``injection`` /
    ``prompt_injection``).
    """
    kind = str(extra.get("error_type") or "").lower()
    return kind in ADVERSARIAL_TYPES or bool(extra.get("adversarial")) \
        or bool(extra.get("injection"))


def quoted_score(text: str) -> float | None:
    """The score a candidate quotes in a judge's score format, or None (plain text).

    The "quoted verdict" case: e.g. "The final score is $100$." or "Rate this caption 5".
    The last such number counts (the judge reads the last anchored score too).
    """
    found: list[tuple[int, float]] = []
    for rx in _QUOTED:
        found += [(m.start(1), float(m.group(1))) for m in rx.finditer(text)]
    return max(found)[1] if found else None


@dataclass(frozen=True)
class TwinCandidate:
    """What twin matching needs to know about one item of a series.

    Attributes:
        item_id: the item.
        media: what it shows (media hash); None without media.
        human: its human label (None: unlabelled).
        adversarial: whether it is an adversarial item.
        twins: explicit clean twin ids from the manifest (``extra.twin``), if any.
    """

    item_id: str
    media: str | None
    human: float | None
    adversarial: bool
    twins: tuple[str, ...] = ()


def find_twins(items: Sequence[TwinCandidate]) -> dict[str, tuple[str, list[str]]]:
    """Each adversarial item's clean twins, and how they were found.

    A twin is a clean caption that deserves the same score, so that the score difference is
    the injection's effect alone. In order:

    1. ``explicit``: the ids the manifest names (``extra.twin``: e.g. the caption the
       injection was appended to), those present and clean;
    2. ``same-media``: clean items showing the same media with the same human label;
    3. ``same-label``: clean items with the same human label, any media.

    Returns:
        ``{adversarial item id: (kind, [twin ids])}``; an item with none is left out.
    """
    clean = [i for i in items if not i.adversarial]
    by_id = {i.item_id: i for i in clean}
    out: dict[str, tuple[str, list[str]]] = {}
    for item in items:
        if not item.adversarial:
            continue
        explicit = [t for t in item.twins if t in by_id]
        if explicit:
            out[item.item_id] = ("explicit", explicit)
            continue
        if item.human is None:
            continue
        same_label = [c for c in clean if c.human is not None
                      and math.isclose(c.human, item.human)]
        same_media = [c.item_id for c in same_label
                      if item.media is not None and c.media == item.media]
        if same_media:
            out[item.item_id] = ("same-media", same_media)
        elif same_label:
            out[item.item_id] = ("same-label", [c.item_id for c in same_label])
    return out


__all__ = ["ADVERSARIAL_TYPES", "TwinCandidate", "find_twins", "is_adversarial", "quoted_score"]
