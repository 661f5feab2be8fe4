"""``polaris-json``: Polaris, EXPERT's JSON: mean rating of `count` annotators, no refs.

Its loader, what the registry knows about it and its scoring protocols.
"""

from __future__ import annotations

from pathlib import Path

from capjudge.metaeval.datasets import Candidate, DatasetSpec, MetaDataset, Protocol
from capjudge.metaeval.datasets.reading import (
    error_at,
    field,
    number,
    read_json,
    shape_error,
    text,
    texts,
)


def load_polaris_json(path: Path) -> MetaDataset:
    """Polaris in EXPERT's JSON form: ``[{id, imgid, mt, score, count, ...}]``.

    ``score`` is the mean of ``count`` annotators' ratings (0-1). The form carries no
    references, so reference-based metrics cannot be computed on it (references are kept if an
    entry happens to have them).
    """
    data = read_json(path)
    if not isinstance(data, list):
        raise shape_error(path, "polaris-json", "a JSON list of {id, imgid, mt, score, count}")
    out = MetaDataset("polaris-json", notes="the Polaris JSON form (EXPERT) carries no "
                                            "references: reference-free metrics only")
    for i, r in enumerate(data):
        where = f"entry {i}"
        key = field(path, where, r, "id", required=False)
        where = f"entry {i} (id {key!r})" if key is not None else where
        count = field(path, where, r, "count", required=False)
        if count is not None:
            n = number(path, where, count, "count", lo=1)
            if n != int(n):
                raise error_at(path, where, f"count must be a whole number, got {count!r}")
        refs_value = field(path, where, r, "refs", required=False)
        image = field(path, where, r, "imgid", required=False)
        out.candidates.append(Candidate(
            key=str(key if key is not None else i),
            candidate=text(path, where, field(path, where, r, "mt"), "mt"),
            references=[] if refs_value is None else texts(path, where, refs_value, "refs"),
            ratings={"overall": [number(path, where, field(path, where, r, "score"), "score",
                                        lo=0, hi=1)]},
            image=None if image is None else str(image),
            group=None if image is None else str(image)))
    if out.has_references:
        out.notes = ""
    return out


SPEC = DatasetSpec(
    name="polaris-json",
    loader=load_polaris_json,
    default_protocol="polaris-json",
    has_references=False,
    file="polaris_test.json (EXPERT; no references)",
    description="Polaris, EXPERT's JSON: mean rating of `count` annotators, no refs",
    protocols=(
        Protocol("polaris-json", "polaris-json", "mean", headline="kendall_tau_c",
                 description="one row per caption, the mean of its `count` ratings (EXPERT's "
                             "polaris_test.json), Kendall tau-c (EXPERT); numbers differ from the "
                             "polaris protocol. No references: reference-free metrics only"),
    ),
)
