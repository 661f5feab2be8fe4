"""``demo-ratings``: a JSON list of {id, candidate, references, ratings: [...]}."""

from __future__ import annotations

from pathlib import Path

from capjudge.metaeval.datasets import Candidate, DatasetSpec, MetaDataset, Protocol
from capjudge.metaeval.datasets.reading import field, number, read_json, text, texts


def load(path: Path) -> MetaDataset:
    out = MetaDataset("demo-ratings")
    for i, row in enumerate(read_json(path)):
        where = f"entry {i}"
        ratings = [number(path, where, r, "rating") for r in field(path, where, row, "ratings")]
        out.candidates.append(Candidate(
            key=str(field(path, where, row, "id")),
            candidate=text(path, where, field(path, where, row, "candidate"), "candidate"),
            references=texts(path, where, field(path, where, row, "references"), "references"),
            ratings={"overall": ratings}))
    return out


SPEC = DatasetSpec(
    name="demo-ratings", loader=load, default_protocol="demo-ratings-rows",
    file="demo.json", description="a toy dataset from a plugin",
    protocols=(Protocol("demo-ratings-rows", "demo-ratings", "ratings", headline="pearson",
                        description="every rating a row"),))

# Registered on its own through the capjudge.protocols entry-point group.
MEAN = Protocol("demo-ratings-mean", "demo-ratings", "mean", headline="pearson",
                description="the annotators' mean per candidate")
