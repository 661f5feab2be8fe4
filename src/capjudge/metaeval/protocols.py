"""How each dataset is scored. The papers differ, so every reported number names its protocol.

A protocol says how human ratings become rows (every annotator's rating its own row, or the
annotators' mean, or one annotator at a time averaged afterwards), which statistics are the
headline, how many references the reference-based metrics see (or several reference settings,
each reported), and whether metric scores are rounded first.

Each dataset's default protocol is declared where the dataset is registered
(:func:`capjudge.metaeval.datasets.register_dataset`); protocols for new datasets are added
with :func:`register_protocol`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from capjudge.metaeval.datasets import DatasetError, dataset_names, get_dataset


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
    # Several reference counts, each scored and reported (EMScore: the first reference, and all
    # 9); empty: the single setting ``refs``.
    ref_settings: tuple[int, ...] = ()


_EMSCORE = ("the EMScore protocol (VATEX-EVAL-demo.py, compute_correlation_uniquehuman): metric "
            "scores rounded to 4 decimals (numpy.around) before ranking; Kendall tau-b (and "
            "Spearman, Pearson, tau-c alike) computed separately against each of the 3 "
            "annotators' ratings over all candidates, then averaged over the 3 annotators")

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
             description="every rating a row, Kendall tau-c (CLIPScore, FLEUR); FLEUR/EXPERT's "
                         "composite.json carries no references: reference-free metrics only"),
    Protocol("thumb-with-human", "thumb", "ratings", headline="pearson",
             description="Pearson with the total score, all 5 systems incl. Human (THumB)"),
    Protocol("thumb-without-human", "thumb", "ratings", headline="pearson",
             exclude_systems=("Human",),
             description="Pearson with the total score, the Human system left out (THumB)"),
    Protocol("pascal50s", "pascal50s", "pairs", headline="accuracy", pairwise=True,
             refs=5, description="pairwise accuracy per category (HC, HI, HM, MM) and mean; "
                                 "ties counted wrong, also reported both ways"),
    Protocol("foil", "foil", "pairs", headline="accuracy", pairwise=True,
             description="accuracy of preferring the correct caption over its foil (ties "
                         "wrong), all references (COCO captions without the original)"),
    Protocol("foil-1ref", "foil", "pairs", headline="accuracy", pairwise=True, refs=1,
             description="as foil with the first reference only (PAC-S, DENEB one-ref)"),
    Protocol("foil-4refs", "foil", "pairs", headline="accuracy", pairwise=True, refs=4,
             description="as foil with 4 references (PAC-S, DENEB four-ref)"),
    Protocol("vatex-eval-emscore", "vatex-eval", "per-annotator", headline="kendall_tau_b",
             round_to=4, ref_settings=(1, 9),
             description=f"{_EMSCORE}; reported for both reference settings, the first "
                         "reference only (NAME@1ref) and all 9 references (NAME@9refs); no CIs"),
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
             description="every annotator's rating a row (Polos: one CSV row per judgment), "
                         "Kendall tau-c"),
    Protocol("polaris-json", "polaris-json", "mean", headline="kendall_tau_c",
             description="one row per caption, the mean of its `count` ratings (EXPERT's "
                         "polaris_test.json), Kendall tau-c (EXPERT); numbers differ from the "
                         "polaris protocol. No references: reference-free metrics only"),
    Protocol("nebula", "nebula", "ratings", headline="kendall_tau_c",
             description="one row per caption, its mean human rating (0-1), Kendall tau-c "
                         "(EXPERT)"),
    Protocol("mmhe", "mmhe", "mean", headline="kendall_tau_b",
             description="per criterion, the annotators averaged; best-of-N accuracy per group"),
)}
_LOCK = threading.Lock()


def register_protocol(protocol: Protocol, *, replace: bool = False) -> Protocol:
    """Add a protocol (e.g. for a dataset registered from outside).

    Raises:
        ValueError: the name is taken and ``replace`` is false.
    """
    with _LOCK:
        if protocol.name in PROTOCOLS and not replace:
            raise ValueError(f"protocol {protocol.name!r} is already registered")
        PROTOCOLS[protocol.name] = protocol
    return protocol


def protocol_names(dataset: str | None = None) -> list[str]:
    """The registered protocol names (of one dataset when ``dataset`` is given)."""
    return [name for name, p in PROTOCOLS.items() if dataset is None or p.dataset == dataset]


def default_protocol(dataset: str) -> str:
    """The name of the dataset's default protocol (declared in its registration).

    Raises:
        KeyError: unknown dataset.
    """
    try:
        return get_dataset(dataset).default_protocol
    except DatasetError as exc:
        raise KeyError(str(exc)) from exc


class _DefaultView(Mapping[str, str]):
    """``DEFAULT_PROTOCOL[dataset]``, read from the dataset registry."""

    def __getitem__(self, dataset: str) -> str:
        return default_protocol(dataset)

    def __iter__(self) -> Iterator[str]:
        return iter(dataset_names())

    def __len__(self) -> int:
        return len(dataset_names())


DEFAULT_PROTOCOL: Mapping[str, str] = _DefaultView()


def get_protocol(dataset: str, name: str | None = None) -> Protocol:
    """The named protocol (or the dataset's default); it must belong to the dataset.

    Raises:
        KeyError: unknown dataset or protocol, or a protocol of another dataset.
    """
    key = name or default_protocol(dataset)
    if key not in PROTOCOLS:
        raise KeyError(f"unknown protocol {key!r} for {dataset}; known: "
                       f"{', '.join(protocol_names(dataset))}")
    protocol = PROTOCOLS[key]
    if protocol.dataset != dataset:
        raise KeyError(f"protocol {key!r} is for {protocol.dataset}, not {dataset}")
    return protocol
