"""How each dataset is scored. The papers differ, so every reported number names its protocol.

A protocol says how human ratings become rows (every annotator's rating its own row, or the
annotators' mean, or one annotator at a time averaged afterwards), which statistics are the
headline, how many references the reference-based metrics see, and whether metric scores are
rounded first.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Protocol:
    """One way of scoring a dataset."""

    name: str
    dataset: str
    rows: str  # "ratings": every rating a row | "mean": annotators averaged | "per-annotator"
    criterion: str = "overall"
    headline: str = "kendall_tau_c"
    refs: int | None = None  # how many references reference-based metrics see (None: all)
    round_to: int | None = None  # metric scores rounded before correlating (EMScore protocol)
    pairwise: bool = False
    exclude_systems: tuple[str, ...] = ()
    description: str = ""


PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (
    Protocol("flickr8k-expert-rows", "flickr8k-expert", "ratings", headline="kendall_tau_c",
             description="every expert rating is a row (16,992 rows), Kendall tau-c: the "
                         "CLIPScore / PAC-S protocol"),
    Protocol("flickr8k-expert-mean", "flickr8k-expert", "mean", headline="kendall_tau_b",
             description="the 3 expert ratings averaged per caption (5,664 rows): G-VEval's "
                         "loader; numbers differ from the rows protocol"),
    Protocol("flickr8k-cf-rows", "flickr8k-cf", "ratings", headline="kendall_tau_b",
             description="every CrowdFlower judgment a row, Kendall tau-b (CLIPScore)"),
    Protocol("composite-rows", "composite", "ratings", headline="kendall_tau_c",
             description="every rating a row, Kendall tau-c (CLIPScore)"),
    Protocol("thumb-with-human", "thumb", "ratings", headline="pearson",
             description="Pearson with the total score, all 5 systems incl. Human (THumB)"),
    Protocol("thumb-without-human", "thumb", "ratings", headline="pearson",
             exclude_systems=("Human",),
             description="Pearson with the total score, the Human system left out (THumB)"),
    Protocol("pascal50s", "pascal50s", "pairs", headline="accuracy", pairwise=True,
             refs=5, description="pairwise accuracy per category (HC, HI, HM, MM) and mean; "
                                 "ties counted wrong, also reported both ways"),
    Protocol("foil", "foil", "pairs", headline="accuracy", pairwise=True,
             description="accuracy of preferring the correct caption over its foil"),
    Protocol("vatex-eval-1ref", "vatex-eval", "per-annotator", headline="kendall_tau_b",
             refs=1, round_to=4,
             description="Kendall tau-b per annotator averaged over the 3, with the first "
                         "reference only, metric scores rounded to 4 decimals (EMScore)"),
    Protocol("vatex-eval-9refs", "vatex-eval", "per-annotator", headline="kendall_tau_b",
             refs=9, round_to=4,
             description="as vatex-eval-1ref with all 9 references"),
    Protocol("msvd-eval", "msvd-eval", "ratings", headline="kendall_tau_b",
             description="the metric score repeated once per annotator (394 rows) vs the "
                         "annotators' average of ACCR (G-VEval correlation.py)"),
    Protocol("polaris", "polaris", "ratings", headline="kendall_tau_c",
             description="every rating a row, Kendall tau-c"),
    Protocol("mmhe", "mmhe", "mean", headline="kendall_tau_b",
             description="per criterion, the annotators averaged; best-of-N accuracy per group"),
)}

DEFAULT_PROTOCOL = {
    "flickr8k-expert": "flickr8k-expert-rows", "flickr8k-cf": "flickr8k-cf-rows",
    "composite": "composite-rows", "thumb": "thumb-with-human", "pascal50s": "pascal50s",
    "foil": "foil", "vatex-eval": "vatex-eval-9refs", "msvd-eval": "msvd-eval",
    "polaris": "polaris", "mmhe": "mmhe",
}


def get_protocol(dataset: str, name: str | None = None) -> Protocol:
    """The named protocol (or the dataset's default); it must belong to the dataset."""
    key = name or DEFAULT_PROTOCOL.get(dataset)
    if key is None or key not in PROTOCOLS:
        known = [p for p, v in PROTOCOLS.items() if v.dataset == dataset]
        raise KeyError(f"unknown protocol {name!r} for {dataset}; known: {', '.join(known)}")
    protocol = PROTOCOLS[key]
    if protocol.dataset != dataset:
        raise KeyError(f"protocol {key!r} is for {protocol.dataset}, not {dataset}")
    return protocol
