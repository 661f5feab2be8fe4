"""``polaris``: Polaris: 0-1 ratings of single annotators, 1-22 per caption.

Its loader, what the registry knows about it and its scoring protocols.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from capjudge.metaeval.datasets import Candidate, DatasetSpec, MetaDataset, Protocol
from capjudge.metaeval.datasets.reading import caption_rows, error_at, field, number, text, texts


def load_polaris(path: Path) -> MetaDataset:
    """Polaris as Polos publishes it: ``polaris_{train,val,test}.csv``.

    Columns ``imgid, mt, refs, score`` (``refs`` a Python list literal). Every row is one
    annotator's rating in [0, 1]; rows of the same (image, caption) become one candidate with
    several ratings. JSONL or a JSON list with the same fields (``img`` for ``imgid``, ``cand``
    for ``mt``, ``human_score`` for ``score``) is read too.
    """
    rows = caption_rows(path, "polaris")
    out = MetaDataset("polaris")
    by_key: dict[tuple[Any, str], Candidate] = {}
    for i, (where, r) in enumerate(rows):
        refs_value = field(path, where, r, "refs", required=False)
        if refs_value is None:
            if isinstance(r, dict) and "count" in r:
                raise error_at(path, where, "no 'refs': this is the Polaris JSON form (EXPERT's "
                                            "polaris_test.json); load it as --dataset polaris-json")
            field(path, where, r, "refs")  # raises: missing key 'refs'
        refs = texts(path, where, refs_value, "refs")
        mt = text(path, where, field(path, where, r, "mt", "cand"), "mt")
        score = number(path, where, field(path, where, r, "score", "human_score"), "score",
                       lo=0, hi=1)
        image = field(path, where, r, "imgid", "img", required=False)
        image = str(image) if image not in (None, "") else None
        # Without an image id, the references identify the image.
        key = (image if image is not None else tuple(refs), mt)
        current = by_key.get(key)
        if current is None:
            current = Candidate(key=str(i), candidate=mt, references=refs,
                                ratings={"overall": []}, image=image, group=image)
            by_key[key] = current
            out.candidates.append(current)
        current.ratings["overall"].append(score)
    return out


SPEC = DatasetSpec(
    name="polaris",
    loader=load_polaris,
    default_protocol="polaris",
    file="polaris_test.csv (Polos; one row per annotator)",
    description="Polaris: 0-1 ratings of single annotators, 1-22 per caption",
    protocols=(
        Protocol("polaris", "polaris", "ratings", headline="kendall_tau_c",
                 description="every annotator's rating a row (Polos: one CSV row per judgment), "
                             "Kendall tau-c"),
    ),
)
