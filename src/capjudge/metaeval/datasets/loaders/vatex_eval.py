"""``vatex-eval``: VATEX-EVAL: 6 candidates per video x 3 ratings (1-5), 9 refs.

Its loader, what the registry knows about it and its scoring protocols.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from capjudge.metaeval.datasets import Candidate, DatasetSpec, MetaDataset, Protocol
from capjudge.metaeval.datasets.reading import (
    error_at,
    field,
    literal,
    mapping,
    number,
    read_json,
    score_matrix,
    texts,
)

_EMSCORE = ("the EMScore protocol (VATEX-EVAL-demo.py, compute_correlation_uniquehuman): metric "
            "scores rounded to 4 decimals (numpy.around) before ranking; Kendall tau-b (and "
            "Spearman, Pearson, tau-c alike) computed separately against each of the 3 "
            "annotators' ratings over all candidates, then averaged over the 3 annotators")

VATEX_ANNOTATORS = 3  # VATEX-EVAL: every candidate rated by the same 3 annotators


def _vatex_refs(path: Path, where: str, value: Any) -> list[str]:
    """``refs``: [[9 strings]] as published, or a plain list of strings."""
    if isinstance(value, str):
        value = literal(path, where, value, "refs")
    if isinstance(value, list) and value and all(isinstance(r, list) for r in value):
        first = value[0]
        if any(r != first for r in value[1:]):
            raise error_at(path, where, f"refs holds {len(value)} different reference lists, "
                                        "expected one")
        value = first
    return texts(path, where, value, "refs")


def load_vatex_eval(path: Path) -> MetaDataset:
    """VATEX-EVAL's ``vid_cans_score_dict.json`` (the file EMScore-derived code reads).

    Each video maps to ``{vid, cands, refs: [[...]], scores}`` where ``scores`` is a *string*
    holding one ``[a1, a2, a3]`` row per candidate (a list is accepted too). Rating ``k`` of every
    candidate is annotator ``k``'s, which the per-annotator protocol relies on.
    """
    data = mapping(path, read_json(path), "vatex-eval",
                   "an object keyed by video id: {cands, refs, scores}")
    out = MetaDataset("vatex-eval")
    for vid, e in data.items():
        where = f"video {vid!r}"
        cands = texts(path, where, field(path, where, e, "cands"), "cands")
        refs = _vatex_refs(path, where, field(path, where, e, "refs"))
        scores = score_matrix(path, where, field(path, where, e, "scores"), "scores")
        if len(scores) != len(cands):
            raise error_at(path, where, f"scores has {len(scores)} rows for {len(cands)} cands")
        for j, (cand, row) in enumerate(zip(cands, scores, strict=True)):
            row_where = f"{where}, candidate {j}"
            if len(row) != VATEX_ANNOTATORS:
                raise error_at(path, row_where, f"{len(row)} ratings, expected {VATEX_ANNOTATORS} "
                                                "(one per annotator)")
            ratings = [number(path, row_where, v, "rating", lo=1, hi=5) for v in row]
            out.candidates.append(Candidate(key=f"{vid}#{j}", candidate=cand, references=refs,
                                            ratings={"overall": ratings}, image=str(vid),
                                            group=str(vid)))
    return out


SPEC = DatasetSpec(
    name="vatex-eval",
    loader=load_vatex_eval,
    default_protocol="vatex-eval-emscore",
    file="vid_cans_score_dict.json (EMScore)",
    description="VATEX-EVAL: 6 candidates per video x 3 ratings (1-5), 9 refs",
    protocols=(
        Protocol("vatex-eval-emscore", "vatex-eval", "per-annotator", headline="kendall_tau_b",
                 round_to=4, ref_settings=(1, 9),
                 description=f"{_EMSCORE}; reported for both reference settings, the first "
                             "reference only (NAME@1ref) and all 9 references (NAME@9refs); "
                             "no CIs"),
        Protocol("vatex-eval-1ref", "vatex-eval", "per-annotator", headline="kendall_tau_b",
                 refs=1, round_to=4,
                 description="Kendall tau-b per annotator averaged over the 3, with the first "
                             "reference only, metric scores rounded to 4 decimals (EMScore)"),
        Protocol("vatex-eval-9refs", "vatex-eval", "per-annotator", headline="kendall_tau_b",
                 refs=9, round_to=4,
                 description="as vatex-eval-1ref with all 9 references"),
    ),
)
