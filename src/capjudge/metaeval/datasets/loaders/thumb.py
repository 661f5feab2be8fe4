"""``thumb``: THumB 1.0 (MSCOCO): P, R, penalties and total per caption.

Its loader, what the registry knows about it and its scoring protocols.
"""

from __future__ import annotations

from pathlib import Path

from capjudge.metaeval.datasets import Candidate, DatasetSpec, MetaDataset, Protocol
from capjudge.metaeval.datasets.reading import field, number, read_jsonl, text, texts


def load_thumb(path: Path) -> MetaDataset:
    """THumB 1.0 (MSCOCO): P, R, penalties and total per caption (one annotation each)."""
    rows = read_jsonl(path)
    ref_path = path.with_name(path.name.replace("THumB-1.0.jsonl", "references.json"))
    refs: dict[str, list[str]] = {}
    if ref_path != path and ref_path.is_file():
        for n, r in read_jsonl(ref_path):
            where = f"line {n}"
            seg = str(field(ref_path, where, r, "seg_id"))
            refs[seg] = texts(ref_path, where, field(ref_path, where, r, "refs"), "refs")
    out = MetaDataset("thumb", notes="" if refs else
                      f"no references file at {ref_path}: reference-free metrics only")
    for n, r in rows:
        where = f"line {n}"
        seg = str(field(path, where, r, "seg_id"))
        system = text(path, where, field(path, where, r, "SYS"), "SYS")
        out.candidates.append(Candidate(
            key=f"{seg}:{system}", candidate=text(path, where, field(path, where, r, "hyp"),
                                                  "hyp"),
            references=refs.get(seg, []),
            ratings={"overall": [number(path, where, field(path, where, r, "human_score"),
                                        "human_score")],
                    "precision": [number(path, where, field(path, where, r, "P"), "P")],
                    "recall": [number(path, where, field(path, where, r, "R"), "R")]},
            image=r.get("image"), system=system, group=seg))
    if refs and not out.has_references:
        missing = sum(not c.references for c in out.candidates)
        out.notes = f"{missing} captions have no references in {ref_path.name}"
    return out


SPEC = DatasetSpec(
    name="thumb",
    loader=load_thumb,
    default_protocol="thumb-with-human",
    file="mscoco_THumB-1.0.jsonl (+ mscoco_references.json beside it)",
    description="THumB 1.0 (MSCOCO): P, R, penalties and total per caption",
    protocols=(
        Protocol("thumb-with-human", "thumb", "ratings", headline="pearson",
                 description="Pearson with the total score, all 5 systems incl. Human (THumB)"),
        Protocol("thumb-without-human", "thumb", "ratings", headline="pearson",
                 exclude_systems=("Human",),
                 description="Pearson with the total score, the Human system left out (THumB)"),
    ),
)
