"""``nebula``: Nebula: mean human rating (0-1) per caption, 5 references.

Its loader, what the registry knows about it and its scoring protocols.
"""

from __future__ import annotations

from pathlib import Path

from capjudge.metaeval.datasets import Candidate, DatasetSpec, MetaDataset, Protocol
from capjudge.metaeval.datasets.reading import caption_rows, field, number, text, texts


def load_nebula(path: Path) -> MetaDataset:
    """Nebula: ``[{imgid, mt, refs: [5 strings], score}]`` (``score``: mean rating in [0, 1]).

    A CSV or JSONL with the same columns (``refs`` as a list literal) is read too. Some images
    have more than 5 references in the published file; all are kept.
    """
    out = MetaDataset("nebula")
    for i, (where, r) in enumerate(caption_rows(path, "nebula")):
        image = field(path, where, r, "imgid", "img", required=False)
        out.candidates.append(Candidate(
            key=str(i), candidate=text(path, where, field(path, where, r, "mt"), "mt"),
            references=texts(path, where, field(path, where, r, "refs"), "refs"),
            ratings={"overall": [number(path, where,
                                        field(path, where, r, "score", "human_score"),
                                        "score", lo=0, hi=1)]},
            image=None if image is None else str(image),
            group=None if image is None else str(image)))
    return out


SPEC = DatasetSpec(
    name="nebula",
    loader=load_nebula,
    default_protocol="nebula",
    file="nebula_test.json (EXPERT)",
    description="Nebula: mean human rating (0-1) per caption, 5 references",
    protocols=(
        Protocol("nebula", "nebula", "ratings", headline="kendall_tau_c",
                 description="one row per caption, its mean human rating (0-1), Kendall tau-c "
                             "(EXPERT)"),
    ),
)
