"""``pascal50s``: Pascal-50S: 4,000 caption pairs (HC/HI/HM/MM), 5 references.

Its loader, what the registry knows about it and its scoring protocols.
"""

from __future__ import annotations

from pathlib import Path

from capjudge.metaeval.datasets import DatasetSpec, MetaDataset, Pair, Protocol
from capjudge.metaeval.datasets.reading import error_at, field, mapping, number, read_json, texts


def load_pascal50s(path: Path) -> MetaDataset:
    """Pascal-50S as FLEUR/EXPERT publish it (``label``: index of the preferred caption)."""
    data = mapping(path, read_json(path), "pascal50s",
                   "{HC|HI|HM|MM: [{captions: [a, b], label, references}]}")
    out = MetaDataset("pascal50s")
    for category, entries in data.items():
        if not isinstance(entries, list):
            raise error_at(path, f"category {category!r}", "expected a list of pairs")
        for i, e in enumerate(entries):
            where = f"{category} entry {i}"
            captions = texts(path, where, field(path, where, e, "captions"), "captions")
            if len(captions) != 2:
                raise error_at(path, where, f"captions has {len(captions)} entries, expected 2")
            label = number(path, where, field(path, where, e, "label"), "label")
            if label not in (0.0, 1.0):
                raise error_at(path, where, f"label must be 0 or 1, got {label:g}")
            out.pairs.append(Pair(key=f"{category}-{i}", a=captions[0], b=captions[1],
                                  references=texts(path, where,
                                                   field(path, where, e, "references"),
                                                   "references"),
                                  prefers_a=label == 0.0, category=category,
                                  image=e.get("image")))
    return out


SPEC = DatasetSpec(
    name="pascal50s",
    loader=load_pascal50s,
    default_protocol="pascal50s",
    pairwise=True,
    file="pascal_50s.json (FLEUR/EXPERT)",
    description="Pascal-50S: 4,000 caption pairs (HC/HI/HM/MM), 5 references",
    protocols=(
        Protocol("pascal50s", "pascal50s", "pairs", headline="accuracy", pairwise=True,
                 refs=5, description="pairwise accuracy per category (HC, HI, HM, MM) and mean; "
                                     "ties counted wrong, also reported both ways"),
    ),
)
