"""``composite``: Composite (Flickr8k/30k, COCO): one rating per row.

Its loader, what the registry knows about it and its scoring protocols.
"""

from __future__ import annotations

from pathlib import Path

from capjudge.metaeval.datasets import Candidate, DatasetSpec, MetaDataset, Protocol
from capjudge.metaeval.datasets.reading import (
    field,
    load_clipscore_json,
    mapping,
    number,
    read_json,
    text,
)


def load_composite(path: Path) -> MetaDataset:
    """Composite: FLEUR/EXPERT's ``composite.json`` or a CLIPScore-format conversion.

    The FLEUR/EXPERT file is ``{"flickr8k"|"flickr30k"|"coco": [{image, caption, human}]}`` and
    carries no references, so only reference-free metrics apply to it. Consecutive rows of the
    same (image, caption) become one candidate with several ratings.
    """
    data = mapping(path, read_json(path), "composite",
                   '{"flickr8k"|"flickr30k"|"coco": [{image, caption, human}]} or the '
                   "CLIPScore format")
    if not data or not all(isinstance(v, list) for v in data.values()):
        return load_clipscore_json(path, "composite")
    out = MetaDataset("composite", notes="FLEUR/EXPERT composite.json carries no references: "
                                         "reference-free metrics only")
    for source, rows in data.items():
        current: Candidate | None = None
        for n, row in enumerate(rows):
            where = f"{source!r} row {n}"
            image = text(path, where, field(path, where, row, "image"), "image")
            caption = text(path, where, field(path, where, row, "caption"), "caption")
            rating = number(path, where, field(path, where, row, "human"), "human")
            if current is None or (current.image, current.candidate) != (image, caption):
                current = Candidate(key=f"{source}:{n}", candidate=caption, references=[],
                                    ratings={"overall": []}, image=image, system=source,
                                    group=f"{source}:{image}")
                out.candidates.append(current)
            current.ratings["overall"].append(rating)
    return out


SPEC = DatasetSpec(
    name="composite",
    loader=load_composite,
    default_protocol="composite-rows",
    has_references=False,
    file="composite.json (FLEUR/EXPERT)",
    description="Composite (Flickr8k/30k, COCO): one rating per row",
    protocols=(
        Protocol("composite-rows", "composite", "ratings", headline="kendall_tau_c",
                 description="every rating a row, Kendall tau-c (CLIPScore, FLEUR); FLEUR/EXPERT's "
                             "composite.json carries no references: reference-free metrics only"),
    ),
)
