"""Judging methods: each turns an ingested item into judge requests for a mode, or says why it
cannot (a recorded skip), reads its answers into per-criterion results, and combines them into
the method's overall score.

======================  ======================================================================
method                  what it is
======================  ======================================================================
``gveval``              G-VEval overall score 0-100 (ref-free / ref-only / combined)
``gveval-accr``         G-VEval ACCR: accuracy, completeness, conciseness, relevance + mean
``visce2``              VisCE²: 0-100 rating with the extracted visual context (and variants)
``harmoniceval``        HarmonicEval: 5 criteria on 1-5, harmonic weighting (gamma)
``cap3d``               3D-caption correctness / hallucination points and precision
======================  ======================================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capjudge.backends.base import Decoding, ImagePart, JudgeRequest, JudgeResponse, Status


@dataclass(frozen=True)
class Planned:
    """A request to send for (item, mode[, criterion])."""

    item_id: str
    mode: str
    request: JudgeRequest
    criterion: str | None = None  # for methods that ask one question per criterion


@dataclass(frozen=True)
class Skip:
    """Why (item, mode) is not judged: recorded and reported, never silently dropped."""

    item_id: str
    mode: str
    reason: str
    template: str = ""
    criterion: str = "*"


@dataclass
class Criterion:
    """One criterion's result for an item (what a judgement row carries besides lineage)."""

    name: str
    status: Status
    reason: str | None = None
    score: float | None = None
    values: list[int] | None = None
    probs: list[float] | None = None
    mass: float | None = None
    printed: float | None = None
    source: str = "none"
    anchor_forced: bool = False
    argmax: int | None = None
    sd: float | None = None
    entropy: float | None = None


@dataclass(frozen=True)
class MethodOptions:
    """Settings shared by all methods (``params.yaml: judges.<name>``)."""

    decoding: Decoding = Decoding()
    detail: str = "auto"  # OpenAI image detail
    vision: bool = True  # does the backend accept images
    extra: dict[str, Any] = field(default_factory=dict)


def slot_criteria(planned: Planned, response: JudgeResponse) -> list[Criterion]:
    """Criterion results read from a response's score slots (the common case)."""
    from capjudge.scoring import summarise

    if not response.slots:
        return [Criterion(name=slot.name, status=response.status, reason=response.reason,
                          values=slot.values) for slot in planned.request.slots]
    out = []
    for slot in response.slots:
        c = Criterion(name=slot.name, status=slot.status,
                      reason=slot.reason or (response.reason if slot.status != "ok" else None),
                      values=slot.values, probs=slot.probs, mass=slot.mass,
                      printed=slot.printed, source=slot.source,
                      anchor_forced=slot.anchor_forced)
        if slot.probs is not None and slot.status in ("ok", "low_mass"):
            s = summarise(slot.values, slot.probs, slot.mass if slot.mass is not None else 1.0)
            c.score, c.argmax, c.sd, c.entropy = s.expected, s.argmax, s.sd, s.entropy
        out.append(c)
    return out


class BaseMethod:
    """Defaults shared by the methods; subclasses define ``plan`` and ``overall``."""

    name = ""
    modes: tuple[str, ...] = ()
    default_modes: tuple[str, ...] = ()
    needs_context = False

    def plan(self, item: dict[str, Any], mode: str, options: MethodOptions
             ) -> list[Planned | Skip]:
        raise NotImplementedError

    def interpret(self, planned: Planned, response: JudgeResponse) -> list[Criterion]:
        """Per-criterion results of one answered request."""
        return slot_criteria(planned, response)

    def overall(self, criteria: Sequence[Criterion], options: dict[str, Any]
                ) -> tuple[float | None, str | None]:
        """The method's overall score from one item-and-mode's criteria, or (None, why)."""
        scored = [c for c in criteria if c.score is not None]
        if len(scored) != 1:
            return None, "no score"
        return scored[0].score, None

    def check_mode(self, mode: str) -> None:
        if mode not in self.modes:
            raise ValueError(f"unknown {self.name} mode {mode!r}; choose from {self.modes}")


def item_image(item: dict[str, Any], detail: str) -> ImagePart:
    """The picture a judge sees for an item: the image itself, or the frame/view tile."""
    if item["media_kind"] == "image":
        path = Path(item["media_root"]) / item["media_path"]
        return ImagePart(str(path), item["media_sha256"], detail)
    return ImagePart(str(item["tile_path"]), item["tile_sha256"], detail)


def get_method(name: str) -> BaseMethod:
    """A method by name (imported lazily)."""
    if name == "gveval":
        from capjudge.methods.gveval import GVEval

        return GVEval()
    if name == "gveval-accr":
        from capjudge.methods.gveval import GVEvalACCR

        return GVEvalACCR()
    if name == "harmoniceval":
        from capjudge.methods.harmoniceval import HarmonicEval

        return HarmonicEval()
    if name == "visce2":
        from capjudge.methods.visce2 import VisCE2

        return VisCE2()
    if name == "cap3d":
        from capjudge.methods.cap3d import Cap3D

        return Cap3D()
    raise KeyError(f"unknown method {name!r}; known: {', '.join(METHODS)}")


METHODS = ("gveval", "gveval-accr", "visce2", "harmoniceval", "cap3d")
