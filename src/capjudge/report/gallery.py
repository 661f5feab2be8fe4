"""The "where the judge and the humans disagree most" gallery.

For a series (judge/mode), items are ranked by the judge's score and by the human label; the
items whose two ranks differ most (as a share of the list) are shown with the picture the judge
saw (image, video frame tile, 3D view tile) as a thumbnail, the candidate, the human label,
the score and the judge's reasoning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from scipy.stats import rankdata

from capjudge.methods import get_method
from capjudge.records import ItemRow, ScoredItem
from capjudge.report.context import GalleryEntry

THUMB_PX = 240


class Disagreement(ScoredItem):
    """A scored item with how far apart the judge's and the humans' ranks put it."""

    rank_gap: float
    """The gap between the two normalised ranks, in [0, 1]."""
    direction: str
    """``judge higher`` or ``judge lower``."""


def disagreements(rows: Sequence[ScoredItem], k: int = 6) -> list[Disagreement]:
    """The ``k`` scored, labelled rows whose judge rank and human rank differ most.

    Ranks are normalised to [0, 1] (ties share their mean rank), so the gap reads as "the
    judge put this item X % of the list away from where the humans put it".
    """
    scored = [r for r in rows if r.get("score") is not None and r.get("human") is not None]
    if len(scored) < 3:
        return []
    n = len(scored)
    judge = rankdata([float(s) for r in scored if (s := r["score"]) is not None])
    human = rankdata([float(h) for r in scored if (h := r["human"]) is not None])
    gaps = [(abs(j - h) / max(1, n - 1), i) for i, (j, h) in enumerate(zip(judge, human,
                                                                           strict=True))]
    out: list[Disagreement] = []
    for gap, i in sorted(gaps, key=lambda g: (-g[0], scored[g[1]]["item_id"]))[:k]:
        out.append({**scored[i], "rank_gap": gap,
                    "direction": "judge higher" if judge[i] > human[i] else "judge lower"})
    return out


def thumbnail(source: Path, out_dir: Path, key: str) -> Path | None:
    """A PNG thumbnail (longest side :data:`THUMB_PX`) of ``source``, cached by ``key``.

    None when the picture cannot be read (the gallery then shows the text alone).
    """
    from PIL import Image, ImageOps

    target = out_dir / f"{key}.png"
    if target.is_file():
        return target
    try:
        with Image.open(source) as img:
            picture = ImageOps.exif_transpose(img).convert("RGB")
    except (OSError, ValueError):
        return None
    picture.thumbnail((THUMB_PX * 3, THUMB_PX))  # frame tiles are 3:1
    out_dir.mkdir(parents=True, exist_ok=True)
    picture.save(target, format="PNG")
    return target


def picture_of(item: ItemRow, ingest_dir: Path) -> Path | None:
    """The file the judge was shown for an item (normalised image or tile).

    It is resolved against the ingest folder when stored relative to it.
    """
    for value in (item.judge_path, item.tile_path):
        if value:
            path = Path(value)
            for candidate in (path, ingest_dir / path, ingest_dir.parent / path):
                if candidate.is_file():
                    return candidate
    if item.media_path:
        root = Path(item.media_root or ".")
        for base in (root, ingest_dir / root, ingest_dir.parent / root):
            if (base / item.media_path).is_file():
                return base / item.media_path
    return None


def build_gallery(series: str, rows: Sequence[ScoredItem], items: Mapping[str, ItemRow],
                  reasoning: dict[tuple[str, str, str], str], ingest_dir: Path, out_dir: Path,
                  k: int = 6) -> list[GalleryEntry]:
    """Gallery entries for one series: item, candidate, human, score, reasoning, thumbnail."""
    entries: list[GalleryEntry] = []
    for r in disagreements(rows, k):
        item = items.get(r["item_id"])
        source = picture_of(item, ingest_dir) if item else None
        key = (item.media_sha256 if item else None) or r["item_id"]
        thumb = thumbnail(source, out_dir / "thumbs", f"{key}") if source else None
        entries.append({
            "series": series, "item_id": r["item_id"], "system": r.get("system"),
            "candidate": item.candidate if item else "", "human": r["human"],
            "score": r["score"],
            "rank_gap": r["rank_gap"], "direction": r["direction"],
            # The method says what its recorded reasoning means (numbers -> words).
            "reasoning": get_method(r["method"]).explain(
                reasoning.get((r["judge"], r["mode"], r["item_id"])) or "", r["mode"])[:600],
            "thumb": str(thumb) if thumb else None,
            "thumb_rel": thumb.relative_to(out_dir).as_posix() if thumb else None,
            "media_kind": item.media_kind if item else None})
    return entries
