"""The method contract: what a judging method declares about itself and what it does.

A method owns its metadata: per criterion the scale (low/high), the pass mark, whether it
needs the image; the scale and pass mark of its overall score; how criteria combine into that
overall score; its system-level aggregates (e.g. 3D micro/macro precision); whether it has an
explanation turn; whether it reads a visual-context stage. Validation, aggregation, the report,
``capjudge compare`` and the CLI ask the method (through :func:`capjudge.methods.get_method`)
and never branch on a method's name.

The overall status of an item is decided once, by :func:`verdict`.
"""

from __future__ import annotations

import json
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, TypedDict

from capjudge.item import Item
from capjudge.protocol import (
    Decoding,
    ImagePart,
    JudgeRequest,
    JudgeResponse,
    Message,
    Status,
)
from capjudge.records import ContextSummary, JSONValue


@dataclass(frozen=True)
class Scale:
    """A score range and its pass mark.

    Args:
        low: the lowest valid score.
        high: the highest valid score (None: unbounded above, e.g. 3D correctness points).
        pass_mark: scores at or above it "pass" (``capjudge compare`` counts pass/fail flips);
            default: the midpoint of a bounded scale.
    """

    low: float
    high: float | None
    pass_mark: float | None = None

    @property
    def threshold(self) -> float:
        """The pass mark (the midpoint when none was declared)."""
        if self.pass_mark is not None:
            return self.pass_mark
        if self.high is None:
            return self.low
        return (self.low + self.high) / 2

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies on the scale."""
        return value >= self.low and (self.high is None or value <= self.high)


@dataclass(frozen=True)
class CriterionSpec:
    """One criterion a method scores: its name, scale and whether it needs the picture."""

    name: str
    scale: Scale
    needs_image: bool = False
    description: str = ""


@dataclass(frozen=True)
class Planned:
    """A request to send for (item, mode[, criterion])."""

    item_id: str
    mode: str
    request: JudgeRequest
    criterion: str | None = None  # for methods that ask one question per criterion
    # The method's named options in force (prompt variant, score choice), recorded on every
    # row and read back by :meth:`Method.interpret` (see :meth:`Method.settings`).
    settings: tuple[tuple[str, str], ...] = ()

    def setting(self, key: str, default: str = "") -> str:
        """The value of one named option this request was planned with."""
        return dict(self.settings).get(key, default)


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
    expected: float | None = None  # the expected value over the distribution (when one exists)
    paths_disagree: bool = False  # the distribution's argmax is not the number printed
    read_by: str | None = None  # how the reader found the number (its confidence reason)
    # on-contract | forced-anchor | follow-up | unconfirmed | contradicted (capjudge.reading.
    # confirm); None: nothing was read.
    confirmation: str | None = None
    # The criterion's own "reasoning" where the method writes it (a likelihood judge's score
    # components); None: the answer's text. Never written into the shared response: modes
    # asking the same request share one answer object.
    reasoning: str | None = None


@dataclass(frozen=True)
class MethodOptions:
    """Settings shared by all methods (``params.yaml: judges.<name>``).

    ``extra`` holds the judge's ``method_options`` (each method documents the keys it reads)
    and, for methods that read a context stage, ``context_table``.
    """

    decoding: Decoding = Decoding()
    detail: str = "auto"  # OpenAI image detail
    vision: bool = True  # does the backend accept images
    extra: dict[str, Any] = field(default_factory=dict)


# Worst first: the cause reported for an item that has no score.
FAILURE_ORDER: tuple[str, ...] = ("error", "refused", "parse_failure", "undefined", "low_mass",
                                  "skipped")


@dataclass(frozen=True)
class Verdict:
    """An item's overall result under one judge and mode.

    ``status`` is one of ``ok`` (every criterion scored), ``low_mass`` (scored, some criterion
    flagged low-mass), ``text_only`` (scored, but some criterion's answer came without the
    log-probabilities that were asked for: its printed score stands, without a distribution),
    ``partial`` (scored from fewer criteria than planned: the reason names the missing ones),
    ``failed`` (no score; ``cause`` is the worst criterion status) or ``skipped`` (nothing
    was judged). ``text_only`` counts as scored: the judge did write a score.
    """

    score: float | None
    status: str
    cause: str | None = None
    reason: str | None = None
    scored: int = 0
    total: int = 0

    @property
    def detail(self) -> str:
        """The status, or for a failed item its cause (``parse_failure``, ``undefined``...)."""
        return self.cause if self.status == "failed" and self.cause else self.status


class Profile(TypedDict, total=False):
    """Named judge settings a method offers (``judges.<name>.profile``; see ``Method.profiles``).

    ``method_options`` are merged key by key; the other keys are judge settings.
    """

    temperature: float
    top_logprobs: int
    max_tokens: int
    detail: str
    method_options: dict[str, str]


@dataclass(frozen=True)
class AggregateSetting:
    """A number a method's :meth:`Method.overall` reads, declared by the method.

    Its name is a key of ``params.yaml: aggregate`` (HarmonicEval's ``gamma``): the params
    schema, the aggregate stage and the docs take it from the method, so no shared type names
    one method's settings. A change re-aggregates and never re-runs a judge.

    Attributes:
        default: the paper's value.
        low: the smallest value allowed.
        high: the largest value allowed.
        low_open: ``low`` itself is refused (gamma in (0, 1]).
        doc: one line saying what it does.
    """

    default: float
    low: float
    high: float
    low_open: bool = False
    doc: str = ""

    def check(self, name: str, value: object) -> float:
        """``value`` as a float within the bounds.

        Raises:
            ValueError: not a finite number in range.
        """
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"aggregate.{name} must be a number, got {value!r}")
        number = float(value)
        below = number <= self.low if self.low_open else number < self.low
        if not math.isfinite(number) or below or number > self.high:
            bounds = f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}]"
            raise ValueError(f"aggregate.{name} must be in {bounds}, got {value!r}")
        return number


class AggregateOptions(TypedDict, total=False):
    """The options every method's :meth:`Method.overall` and :func:`verdict` receive."""

    include_low_mass: bool
    """When False a low-mass criterion's score is left out, as if it had failed."""
    settings: Mapping[str, float]
    """Values of methods' :attr:`Method.aggregate_settings` (absent: the method's default;
    :meth:`Method.setting` reads them)."""


def verdict(method: Method, criteria: Sequence[Criterion], options: AggregateOptions) -> Verdict:
    """The one rule turning an item's criteria into its overall score and status.

    Args:
        method: the method whose :meth:`Method.overall` combines the criteria.
        criteria: every criterion planned for the item and mode, skipped ones included.
        options: aggregation options (``include_low_mass``: when False a low-mass
            criterion's score is left out, as if it had failed; ``settings``: the methods'
            own, e.g. HarmonicEval's ``gamma``).
    """
    total = len(criteria)
    judged = [c for c in criteria if c.status != "skipped"]
    if not judged:
        reasons = sorted({c.reason or "skipped" for c in criteria})
        return Verdict(None, "skipped", "skipped", "; ".join(reasons) or None, 0, total)
    if not options.get("include_low_mass", True):
        judged = [c if c.status != "low_mass" else Criterion(
            c.name, c.status, c.reason or "low mass (excluded)", None, sd=c.sd, mass=c.mass)
            for c in judged]
    score, why = method.overall(judged, options)
    if score is not None and isinstance(score, float) and math.isnan(score):
        score = None
    scored = sum(c.score is not None for c in judged)
    failures = sorted({f"{c.name}: {c.status} ({c.reason})" for c in judged if c.score is None})
    if score is None:
        statuses = {c.status for c in judged if c.score is None} or {c.status for c in judged}
        cause = next((s for s in FAILURE_ORDER if s in statuses), "error")
        return Verdict(None, "failed", cause, "; ".join(failures) or why, scored, total)
    if failures or len(judged) < total:
        skipped = sorted({f"{c.name}: skipped ({c.reason})" for c in criteria
                          if c.status == "skipped"})
        return Verdict(score, "partial", None, why or "; ".join(failures + skipped), scored,
                       total)
    if any(c.status == "low_mass" for c in judged):
        return Verdict(score, "low_mass", None, why or "scored from low-mass distributions",
                       scored, total)
    if any(c.status == "text_only" for c in judged):
        names = ", ".join(sorted(c.name for c in judged if c.status == "text_only"))
        return Verdict(score, "text_only", None, why or f"printed score without a distribution "
                       f"({names}): the answer had no log-probabilities", scored, total)
    return Verdict(score, "ok", None, why, scored, total)


VERDICT_FORMATS = ("paper", "json_schema")
"""``verdict_format``: the paper's free-text answer (default), or a JSON answer constrained by
a schema (see :meth:`Method.constrained`)."""


def verdict_schema(fields: Mapping[str, JSONValue], score_first: bool
                   ) -> tuple[dict[str, JSONValue], str]:
    """A strict JSON schema for a verdict, and the sentence that asks for it.

    The schema holds the verdict's fields plus a ``reasoning`` text.

    The reasoning comes before the scores, as the papers' prompts ask, unless the prompt asks
    for the score first (HarmonicEval, VisCE²).
    """
    reasoning: dict[str, JSONValue] = {"type": "string"}
    ordered = ({**fields, "reasoning": reasoning} if score_first
               else {"reasoning": reasoning, **fields})
    schema: dict[str, JSONValue] = {"type": "object", "properties": ordered,
                                    "required": list(ordered), "additionalProperties": False}
    described = []
    for name, spec in ordered.items():
        if name == "reasoning":
            described.append('"reasoning" (your reasons, as text)')
        elif isinstance(spec, dict) and spec.get("type") == "integer":
            described.append(f'"{name}" (an integer from {spec.get("minimum")} to '
                             f'{spec.get("maximum")})')
        else:
            described.append(f'"{name}" (a number of points)')
    return schema, ("Give your answer as a JSON object with the keys "
                    + ", ".join(described) + ".")


_LEVEL_LINE = re.compile(r"^[ \t]*[-*\u2022]?[ \t]*(\d+)[ \t]*[.:)=-]?[ \t]+([^:\n]{3,60}?)[ \t]*:",
                         re.M)


def rubric_levels(messages: Sequence[Message], low: int, high: int
                  ) -> tuple[tuple[str, int], ...]:
    """The rating scale's level names a prompt lists ("- 3 Moderate Correctness: ...").

    Read from the rendered prompt, so the names are what the judge saw; only when the prompt
    names every level from ``low`` to ``high`` exactly once.
    """
    text = "\n".join(m.text() for m in messages)
    found = [(name.strip(), int(value)) for value, name in _LEVEL_LINE.findall(text)
             if low <= int(value) <= high]
    if sorted(v for _, v in found) != list(range(low, high + 1)):
        return ()
    return tuple(found)


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
                      anchor_forced=slot.anchor_forced, read_by=slot.read_by,
                      confirmation=slot.confirmation)
        if slot.probs is not None and slot.status in ("ok", "low_mass"):
            s = summarise(slot.values, slot.probs, slot.mass if slot.mass is not None else 1.0)
            c.score, c.argmax, c.sd, c.entropy = s.expected, s.argmax, s.sd, s.entropy
            c.expected = s.expected
            # The text path (the number printed) and the logprob path (the distribution's
            # most likely value) should agree after greedy decoding; when they do not, the
            # row says so (sampling, or a score read where the model did not write it).
            c.paths_disagree = slot.printed is not None and s.argmax != slot.printed
        elif slot.status == "text_only" and slot.printed is not None:
            # The printed score, and no spread: sd stays None (not 0), so nothing downstream
            # takes it for a perfectly confident judgement.
            c.score = float(slot.printed)
            c.argmax = int(slot.printed) if float(slot.printed).is_integer() else None
        out.append(c)
    return out


def item_image(item: Item, detail: str) -> ImagePart:
    """The picture a judge sees for an item, by absolute path (see :meth:`Item.resolve`).

    That is the image itself (its normalised copy when ingest made one), or the frame/view
    tile.
    """
    if item.media_kind == "image":
        if item.judge_path and item.judge_sha256:
            return ImagePart(str(item.resolve(item.judge_path)), item.judge_sha256, detail)
        path = item.media_file()
        if path is None or item.media_sha256 is None:
            raise ValueError(f"item {item.id!r} has no image")
        return ImagePart(str(path), item.media_sha256, detail)
    if not item.tile_path or not item.tile_sha256:
        raise ValueError(f"item {item.id!r} ({item.media_kind}) has no picture to show")
    return ImagePart(str(item.resolve(item.tile_path)), item.tile_sha256, detail)


def item_frames(item: Item, detail: str) -> list[ImagePart]:
    """A video item's sampled frames, each on its own, in temporal order (absolute paths).

    What a judge sees under ``visual_input: frames`` instead of the tile.

    Raises:
        ValueError: not a video item, or one ingested before frames were kept.
    """
    if item.media_kind != "video":
        raise ValueError(f"item {item.id!r} ({item.media_kind}) has no video frames")
    if not item.frame_paths or len(item.frame_paths) != len(item.frame_sha256):
        raise ValueError(f"item {item.id!r} has no sampled frames kept on their own (ingested "
                         "before frames were kept: run ingest again)")
    return [ImagePart(str(item.resolve(p)), h, detail)
            for p, h in zip(item.frame_paths, item.frame_sha256, strict=True)]


class Method(ABC):
    """A judging method. Subclasses set the class attributes and implement :meth:`plan`.

    Class attributes:
        name: the registry name (also written in every judgement row).
        modes: every mode the method has; ``default_modes`` the ones a judge runs by default;
            ``score_mode`` the one ``capjudge score`` uses when none is given.
        criteria: the criteria it scores, with scales (see :class:`CriterionSpec`).
        overall_scale: the scale of the combined, per-item score.
        combination: one line saying how criteria combine (shown in the report).
        aggregates: names of system-level aggregates :meth:`system_aggregates` computes.
        needs_context: reads a visual-context stage (``contexts.<name>`` in params.yaml).
        explains: has an optional explanation turn (:meth:`explanation_request`).
        cut_reasoning: for methods that reason before the score, what an answer cut at
            ``max_tokens`` before its score is instead (the run summary and the report say so).
        profiles: named judge settings (``judges.<name>.profile``) that reproduce a reference
            implementation; explicit settings win (see :func:`capjudge.judge.apply_profile`).
        choices: the method's named options (``method_options`` keys) and their values, the
            first being the paper's default: ``prompt_variant`` (``paper`` | ``guarded``), and
            per method e.g. ``score``. Every row records the ones in force (``settings``).
        verdict_contract: the verdict format the method's prompt asks for, in words (issue
            40). An answer that states its verdict exactly once in it is read as the paper
            reads it; any other reading needs a second channel (:mod:`capjudge.reading.confirm`).
            The reader applies it through the request's slots (label and anchor, or the score
            first; ``verdict_format: json_schema`` makes it the schema's JSON).
        aggregate_settings: the numbers :meth:`overall` reads (:class:`AggregateSetting`),
            set under ``params.yaml: aggregate`` by name (HarmonicEval's ``gamma``).
    """

    name: ClassVar[str] = ""
    modes: ClassVar[tuple[str, ...]] = ("default",)
    default_modes: ClassVar[tuple[str, ...]] = ("default",)
    score_mode: ClassVar[str | None] = None
    criteria: ClassVar[tuple[CriterionSpec, ...]] = ()
    overall_scale: ClassVar[Scale] = Scale(0, 100)
    combination: ClassVar[str] = "the single criterion's score"
    aggregates: ClassVar[tuple[str, ...]] = ()
    needs_context: ClassVar[bool] = False
    explains: ClassVar[bool] = False
    cut_reasoning: ClassVar[str | None] = None
    profiles: ClassVar[dict[str, Profile]] = {}
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"prompt_variant": ("paper", "guarded")}
    reads_verdict: ClassVar[bool] = True
    verdict_contract: ClassVar[str] = ""
    aggregate_settings: ClassVar[Mapping[str, AggregateSetting]] = {}

    def settings(self, options: MethodOptions) -> tuple[tuple[str, str], ...]:
        """The named options in force, validated (the first choice when not set).

        Raises:
            ValueError: a value that is not one of the option's choices.
        """
        out = []
        choices = {**self.choices, **({"verdict_format": VERDICT_FORMATS}
                                      if self.reads_verdict else {})}
        for key, values in choices.items():
            value = str(options.extra.get(key) or values[0])
            if value not in values:
                raise ValueError(f"{self.name}: unknown {key} {value!r}; choose from "
                                 f"{', '.join(values)}")
            out.append((key, value))
        return tuple(out)

    def verdict_fields(self, request: JudgeRequest) -> dict[str, JSONValue]:
        """The JSON fields of a constrained verdict (``verdict_format: json_schema``).

        One integer on its scale per score slot; a method whose verdict is not a slot
        (cap3d's points) names its own fields.
        """
        return {s.name: {"type": "integer", "minimum": s.low, "maximum": s.high}
                for s in request.slots if s.position != "next"}

    def constrained(self, planned: Planned) -> Planned:
        """``planned`` as ``verdict_format`` says: unchanged for ``paper`` (the default).

        For ``json_schema`` the request carries a JSON schema of the verdict (sent as the
        OpenAI ``response_format``, which vLLM and llama.cpp's server enforce by grammar) and
        its last message says which keys to fill; the reader then reads the JSON.
        """
        if planned.setting("verdict_format", "paper") != "json_schema":
            return planned
        fields = self.verdict_fields(planned.request)
        if not fields:
            return planned
        first = any(s.position == "first" for s in planned.request.slots)
        schema, instruction = verdict_schema(fields, score_first=first)
        messages = list(planned.request.messages)
        last = max(i for i, m in enumerate(messages) if m.role == "user")
        messages[last] = Message(messages[last].role,
                                 (*messages[last].parts, f"\n\n{instruction}"))
        # The verdict's contract is now the schema's JSON, not the paper's format.
        request = replace(planned.request, messages=tuple(messages),
                          slots=tuple(replace(s, contract="json") for s in planned.request.slots),
                          verdict_schema=json.dumps(schema, sort_keys=True))
        return replace(planned, request=request)

    def prompt_variant(self, options: MethodOptions) -> str:
        """The prompt variant in force (``paper`` unless ``prompt_variant`` says otherwise)."""
        return dict(self.settings(options)).get("prompt_variant", "paper")

    @abstractmethod
    def plan(self, item: Item, mode: str, options: MethodOptions) -> list[Planned | Skip]:
        """Requests to send for one item and mode, or the recorded reasons they are not."""

    def interpret(self, planned: Planned, response: JudgeResponse) -> list[Criterion]:
        """Per-criterion results of one answered request."""
        return slot_criteria(planned, response)

    def setting(self, options: AggregateOptions, name: str) -> float:
        """The value of the method's aggregate setting ``name`` under ``options``."""
        value = (options.get("settings") or {}).get(name)
        return self.aggregate_settings[name].default if value is None else float(value)

    def overall(self, criteria: Sequence[Criterion], options: AggregateOptions
                ) -> tuple[float | None, str | None]:
        """The method's overall score from one item-and-mode's criteria, or (None, why)."""
        scored = [c for c in criteria if c.score is not None]
        if len(scored) != 1:
            return None, "no score"
        return scored[0].score, None

    def system_aggregates(self, criteria: Sequence[Sequence[Criterion]]
                          ) -> dict[str, float | None]:
        """System-level aggregates (named in :attr:`aggregates`) over the system's items.

        Each item is given as its list of criteria. The default has none.
        """
        return {}

    def explanation_request(self, planned: Planned, response: JudgeResponse
                            ) -> JudgeRequest | None:
        """The optional explanation turn after an answer (None: the method has none)."""
        return None

    def explain(self, reasoning: str, mode: str) -> str:
        """The judge's recorded reasoning for one answer, in words for a reader.

        A generative judge's reasoning is already text (the default returns it as it is); a
        method whose "reasoning" is data (numbers it computed) says here what they mean.
        """
        return reasoning

    def criterion(self, name: str) -> CriterionSpec | None:
        """The declared criterion ``name`` (None when the method does not declare it)."""
        return next((c for c in self.criteria if c.name == name), None)

    def scale_of(self, criterion: str) -> Scale | None:
        """The scale a judgement row of ``criterion`` must lie on."""
        spec = self.criterion(criterion)
        return spec.scale if spec is not None else None

    def check_mode(self, mode: str) -> None:
        """Raise a ValueError naming the valid modes when ``mode`` is not one."""
        if mode not in self.modes:
            raise ValueError(f"unknown {self.name} mode {mode!r}; choose from {self.modes}")

    def context_settings(self) -> type | None:
        """The dataclass ``params.yaml: contexts.<name>`` is built into.

        Its fields are the section's keys, checked by :mod:`capjudge.params`. None: no context
        stage.
        """
        return None

    def run_context(self, items: Sequence[Item], out_dir: str | Path,
                    section: Mapping[str, object]) -> ContextSummary:
        """Run the method's context stage over ``items`` and write its outputs.

        ``section`` is ``params.yaml: contexts.<name>``. Returns the stage's summary. Methods
        with ``needs_context`` override this.
        """
        raise NotImplementedError(f"method {self.name!r} has no context stage")

    def load_context(self, path: str | Path) -> Mapping[str, object]:
        """The context stage's output as the ``context_table`` :meth:`plan` reads."""
        raise NotImplementedError(f"method {self.name!r} has no context stage")


# Kept for code written against the first API.
BaseMethod = Method
