"""``msvd-eval``: MSVD-Eval: ACCR ratings (1-5) from 2 annotators per video.

Its loader, what the registry knows about it and its scoring protocols.
"""

from __future__ import annotations

from pathlib import Path

from capjudge.metaeval.datasets import Candidate, DatasetSpec, MetaDataset, Protocol
from capjudge.metaeval.datasets.reading import (
    error_at,
    field,
    mapping,
    number,
    read_json,
    score_matrix,
    text,
    texts,
)

MSVD_CRITERIA = ("accuracy", "completeness", "conciseness", "relevance", "overall")


def load_msvd_eval(path: Path) -> MetaDataset:
    """G-VEval's ``MSVD-Eval.json``.

    Per annotator: [accuracy, completeness, conciseness, relevance, average].
    """
    data = mapping(path, read_json(path), "msvd-eval",
                   "an object keyed by video id: {ref, candidate, human_score}")
    out = MetaDataset("msvd-eval")
    for vid, e in data.items():
        where = f"video {vid!r}"
        human = score_matrix(path, where, field(path, where, e, "human_score"), "human_score")
        if not human:
            raise error_at(path, where, "human_score is empty")
        ratings: dict[str, list[float]] = {n: [] for n in MSVD_CRITERIA}
        for k, annotator in enumerate(human):
            if len(annotator) != len(MSVD_CRITERIA):
                raise error_at(path, f"{where}, annotator {k}",
                               f"{len(annotator)} values, expected {len(MSVD_CRITERIA)} "
                               "(accuracy, completeness, conciseness, relevance, average)")
            for n, v in zip(MSVD_CRITERIA, annotator, strict=True):
                ratings[n].append(number(path, f"{where}, annotator {k}", v, n, lo=1, hi=5))
        out.candidates.append(Candidate(
            key=str(vid), candidate=text(path, where, field(path, where, e, "candidate"),
                                         "candidate"),
            references=texts(path, where, field(path, where, e, "ref"), "ref"),
            ratings=ratings, image=e.get("vname"), group=str(vid)))
    return out


SPEC = DatasetSpec(
    name="msvd-eval",
    loader=load_msvd_eval,
    default_protocol="msvd-eval",
    file="MSVD-Eval.json (G-VEval)",
    description="MSVD-Eval: ACCR ratings (1-5) from 2 annotators per video",
    protocols=(
        Protocol("msvd-eval", "msvd-eval", "ratings", headline="kendall_tau_b",
                 description="the metric score repeated once per annotator (394 rows) vs the "
                             "annotators' average of ACCR (G-VEval correlation.py)"),
    ),
)
