"""``mmhe``: MMHE: 5 criteria x 3 expert ratings over 4 tasks.

Its loader, what the registry knows about it and its scoring protocols.
"""

from __future__ import annotations

from pathlib import Path

from capjudge.metaeval.datasets import Candidate, DatasetSpec, MetaDataset, Protocol
from capjudge.metaeval.datasets.reading import (
    error_at,
    field,
    number,
    preview,
    read_jsonl,
    text,
    texts,
)


def load_mmhe(path: Path) -> MetaDataset:
    """MMHE (HarmonicEval) as JSONL: {id, task, image, question, candidate, group, scores}."""
    out = MetaDataset("mmhe")
    for n, r in read_jsonl(path):
        where = f"line {n}"
        scores = field(path, where, r, "scores")
        if not isinstance(scores, dict) or not scores:
            raise error_at(path, where, f"scores must be an object {{criterion: [ratings]}}, got "
                                        f"{preview(scores)}")
        ratings = {}
        for crit, values in scores.items():
            if not isinstance(values, list) or not values:
                raise error_at(path, where, f"scores[{crit!r}] must be a non-empty list")
            ratings[str(crit)] = [number(path, where, v, f"scores[{crit!r}]") for v in values]
        refs = field(path, where, r, "references", required=False)
        out.candidates.append(Candidate(
            key=str(field(path, where, r, "id")),
            candidate=text(path, where, field(path, where, r, "candidate"), "candidate"),
            references=[] if refs is None else texts(path, where, refs, "references",
                                                     min_len=0),
            ratings=ratings, image=r.get("image"), system=r.get("system"), group=r.get("group"),
            question=r.get("question")))
    return out


SPEC = DatasetSpec(
    name="mmhe",
    loader=load_mmhe,
    default_protocol="mmhe",
    has_references=False,
    file="MMHE JSONL (capjudge's layout; HarmonicEval's release format unknown)",
    description="MMHE: 5 criteria x 3 expert ratings over 4 tasks",
    protocols=(
        Protocol("mmhe", "mmhe", "mean", headline="kendall_tau_b",
                 description="per criterion, the annotators averaged; best-of-N accuracy per "
                             "group"),
    ),
)
