"""The request and response types every layer shares: what is asked of a judge and what it answers.

A :class:`JudgeRequest` (messages of text and :class:`ImagePart` s, the :class:`ScoreSlot` s to
read, the :class:`Decoding` settings) goes in; a :class:`JudgeResponse` (text, one
:class:`SlotResult` per slot, :class:`Usage`, a status with a reason) comes out. Prompts and
methods build requests, backends answer them (:mod:`capjudge.backends.base` holds the
:class:`~capjudge.backends.base.Backend` contract), the client caches and retries them, the
judge stage reads the responses.

This module sits below all of them and imports nothing from capjudge but the credential
redaction (tests/test_architecture.py checks the layering): that is what lets ``prompts/``
and ``methods/`` use these types without importing a backend.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Required, TypedDict

from capjudge.records import JSONValue, ServerTimings
from capjudge.util.credentials import redact

Status = Literal["ok", "parse_failure", "low_mass", "refused", "error", "skipped", "undefined",
                 "text_only"]
STATUSES: tuple[str, ...] = ("ok", "parse_failure", "low_mass", "refused", "error", "skipped",
                             "undefined", "text_only")
"""``undefined``: the answer parsed but its score does not exist (3D precision with C = H = 0).
``text_only``: log-probabilities were requested but the answer came without them; the printed
score is kept (it counts as scored) but there is no distribution, so no sd or entropy."""


def worst_status(statuses: Sequence[str]) -> Status:
    """A response is as bad as its worst slot.

    The order, worst first: error > refused > parse failure > undefined > low mass > text only.
    """
    order: tuple[Status, ...] = ("error", "refused", "parse_failure", "undefined", "low_mass",
                                 "text_only")
    for status in order:
        if status in statuses:
            return status
    return "ok"


@dataclass(frozen=True)
class ImagePart:
    """An image in a message, referenced by path and identified by its content hash."""

    path: str
    sha256: str
    detail: str = "auto"  # OpenAI image detail: low | high | auto


@dataclass(frozen=True)
class Message:
    """A chat message: role and an ordered list of text and image parts."""

    role: Literal["system", "user", "assistant"]
    parts: tuple[str | ImagePart, ...]

    def text(self) -> str:
        """The message's text parts joined (images dropped)."""
        return "".join(p for p in self.parts if isinstance(p, str))

    @property
    def images(self) -> list[ImagePart]:
        """The message's image parts, in order."""
        return [p for p in self.parts if isinstance(p, ImagePart)]


@dataclass(frozen=True)
class ScoreSlot:
    """Where one score is read in the output, and on which scale.

    The score is the integer written right after ``anchor``, itself right after ``label``
    when one is given (G-VEval: "final score" then ``$``, so "The final score is $85$" is read
    and a later "$0$ to $100$" is not; ACCR: ``"Accuracy"`` ...). With ``position="last"`` the
    *last* such integer is used, so a model that quotes the format earlier is not misread;
    with ``"first"`` the first integer once the canonical scale phrasings are removed
    (HarmonicEval asks for the score first; VisCE² takes the first integer). ``"next"`` marks
    a continuation follow-up: the distribution of the first generated token over "the number
    ends" (-1) and the next digit (see :mod:`capjudge.reading.tokens`). The reading rules
    are in :func:`capjudge.reading.locate.locate`.
    ``forced_prefix`` is what a local model is teacher-forced with when its text never reached
    the anchor (for ``"first"`` slots: appended to the prompt alone, i.e. the answer's start).
    """

    name: str
    low: int
    high: int
    anchor: str = "$"
    label: str | None = None
    forced_prefix: str = "\nThe final score is $"
    position: Literal["last", "first", "next"] = "last"
    # What the judge may quote (the candidate, the references): masked before the score is
    # located, so a number inside a quotation is never read as the verdict. Not part of the
    # cache key (the prompt already holds these texts): see :meth:`JudgeRequest.canonical`.
    quotes: tuple[str, ...] = field(default=(), compare=False)
    # The rubric's level names with their values ("Moderate Correctness" -> 3), as the prompt
    # lists them: an answer that names a level instead of writing its number is read at that
    # level. Reading context like ``quotes``: not part of the cache key.
    levels: tuple[tuple[str, int], ...] = field(default=(), compare=False)
    # The verdict format the request asks for (issue 40): ``format`` (the paper's: the label and
    # anchor, or the score first) or ``json`` (``verdict_format: json_schema``). Reading
    # context: not part of the cache key (the schema itself is).
    contract: Literal["format", "json"] = field(default="format", compare=False)
    # Where an off-contract reading of a slot asked first is confirmed: after the whole answer
    # ("\n\nScore: "). Its forced anchor is the answer's start, i.e. the answer's own first
    # token, which confirms nothing it did not already say. Reading context: not in the key.
    confirm_prefix: str = field(default="", compare=False)
    # What the slot holds: a ``score`` on ``low``-``high`` (its digits' distribution read
    # where the backend gives one), or ``points``, a count the judge states in words or
    # digits (cap3d's C. and H. scores, halves allowed), read from the text by
    # :func:`capjudge.reading.read_points_slot`; ``low``-``high`` then bound only the
    # distribution at its forced anchor (the confirmation of an off-contract count).
    kind: Literal["score", "points"] = "score"

    @property
    def values(self) -> list[int]:
        """Every integer on the scale, ``low`` to ``high`` inclusive."""
        return list(range(self.low, self.high + 1))

    def anchor_at(self, *, confirming: bool = False) -> tuple[bool, str]:
        """Where the slot is read when forced: after the whole answer or not, and the prefix.

        ``forced_prefix`` after the answer, or for a slot asked first at the answer's start;
        ``confirming`` an off-contract reading of a slot asked first, ``confirm_prefix`` after
        the whole answer when it has one.
        """
        if confirming and self.position == "first" and self.confirm_prefix:
            return True, self.confirm_prefix
        return self.position != "first", self.forced_prefix


@dataclass(frozen=True)
class Decoding:
    """Decoding settings; part of the cache key.

    ``sample`` is the repeat index of a test-retest run (``JudgeConfig.repeats``): repeat
    ``r`` of a request is a distinct request (its own cache key), and backends that take a
    seed are sent ``seed + sample``, so a sampling API draws a new answer instead of replaying
    the first one.
    """

    max_tokens: int = 512
    temperature: float = 0.0
    top_logprobs: int = 20
    seed: int | None = 0
    sample: int = 0

    def sampling_seed(self) -> int | None:
        """The seed a backend sends: ``seed + sample`` (None when no seed is set)."""
        return None if self.seed is None else self.seed + self.sample


@dataclass(frozen=True)
class JudgeRequest:
    """One question to a judge."""

    messages: tuple[Message, ...]
    slots: tuple[ScoreSlot, ...]
    decoding: Decoding = Decoding()
    template: str = ""  # template id@version, recorded and part of the cache key
    tag: str = ""  # free-form (item id, mode); NOT part of the cache key
    # Likelihood requests: score these (context, text) pairs instead of generating. The
    # response carries one log-likelihood and token count per pair (``logliks``/``lengths``).
    continuations: tuple[tuple[str, str], ...] = ()
    # Texts the judge may quote (candidate, references): a reading context for methods that
    # read the text themselves (cap3d); NOT part of the cache key.
    quotes: tuple[str, ...] = ()
    # ``verdict_format: json_schema``: the JSON schema (as JSON text) the answer must follow,
    # sent as the OpenAI ``response_format`` (servers enforce it by grammar). Empty: the
    # paper's free-text answer. Part of the cache key when set.
    verdict_schema: str = ""

    @property
    def needs_vision(self) -> bool:
        """Whether any message carries an image."""
        return any(m.images for m in self.messages)

    def canonical(self) -> dict[str, JSONValue]:
        """Everything that determines the answer, with images by content hash, not path."""
        messages: list[JSONValue] = [
            {"role": m.role,
             "parts": [p if isinstance(p, str) else {"image": p.sha256, "detail": p.detail}
                       for p in m.parts]}
            for m in self.messages
        ]
        decoding = asdict(self.decoding)
        if not decoding["sample"]:
            # Repeat 0 keeps the key it had before repeats existed: caches stay valid.
            del decoding["sample"]
        # ``quotes`` and ``levels`` are reading context, not what is asked: keys stay as they
        # were.
        # A ``points`` slot only says where the method reads its counts (the prompt asks for
        # them): reading context too, so cap3d's keys stay as they were before it had slots.
        slots: list[JSONValue] = [{k: v for k, v in asdict(s).items()
                                   if k not in ("quotes", "levels", "contract", "kind",
                                                "confirm_prefix")}
                                  for s in self.slots if s.kind != "points"]
        out: dict[str, JSONValue] = {"messages": messages, "slots": slots,
                                     "decoding": decoding, "template": self.template}
        if self.continuations:  # only when present: generation requests keep their keys
            out["continuations"] = [list(pair) for pair in self.continuations]
        if self.verdict_schema:  # only when present: free-text requests keep their keys
            out["verdict_schema"] = self.verdict_schema
        return out

    def cache_key(self, backend_id: str, snapshot: str) -> str:
        """Content address: backend id, model snapshot, rendered prompt, media hashes, settings."""
        payload = json.dumps({"backend": backend_id, "snapshot": snapshot, **self.canonical()},
                             sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ImageURL(TypedDict):
    """A picture in a chat message: its data URL and the detail level."""

    url: str
    detail: str


class ContentPart(TypedDict, total=False):
    """One part of a multimodal chat message: ``{"type": "text", "text": ...}`` or an image."""

    type: Required[str]
    text: str
    image_url: ImageURL


class ChatMessage(TypedDict):
    """A chat-completions message: plain text, or parts when it carries pictures."""

    role: str
    content: str | list[ContentPart]


class BackendFacts(TypedDict, total=False):
    """What :meth:`~capjudge.backends.base.Backend.describe` says about a backend.

    ``backend`` and ``snapshot`` are always there; the rest is each kind's own (OpenAI: model,
    base URL, continuation, server; HF: path, architecture, vision, device, numerics, threads,
    linear kernel, the CPU's kernel path; llama.cpp: model, GGUF, mmproj, parallel, threads,
    poll, engine). Never credentials.
    """

    backend: Required[str]
    snapshot: Required[str]
    model: str
    base_url: str | None
    continuation: str
    server: str | None
    path: str
    architecture: str
    vision: bool
    device: str
    numerics: str
    dtype_option: str
    device_map: str | None
    threads: int | None
    linear_kernel: str
    # PyTorch's CPU kernel path (AVX2, AVX512, ...): a score's last digits differ between them
    # (bench/bench_kernels.py), so two runs on different CPUs may differ with every other fact
    # the same.
    cpu_capability: str | None
    share_generated: bool
    attention: str
    gguf: str
    mmproj: str | None
    parallel: int
    poll: int | None
    engine: str
    determinism: str
    engines: int
    # Remote servers (capjudge.backends.served_identity): whether the snapshot identifies the
    # weights (and how, or why not), the weights' identity, the server recognised, its facts.
    pinned: bool
    pinning: str
    weights: str | None
    served_by: str | None
    server_facts: dict[str, JSONValue]
    cpu_features: str
    engine_build: dict[str, str]
    engine_version: str | None
    # False when the stage never built the backend (every row a recorded skip): the facts
    # above that only a loaded model gives (architecture, numerics, kernels) are absent.
    loaded: bool


@dataclass
class Usage:
    """Token usage of one call (image tokens are included in prompt tokens by the API)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


@dataclass
class SlotResult:
    """The distribution read for one score slot."""

    name: str
    values: list[int]
    probs: list[float] | None  # renormalised over the scale; None when nothing was read
    mass: float | None  # probability the scale captured before renormalisation
    source: str  # logprobs | teacher_forcing | text | none
    status: Status = "ok"
    reason: str | None = None
    printed: int | float | None = None  # the number the model wrote (float: a decimal)
    anchor_forced: bool = False  # local models: the anchor had to be appended
    # How the reader found the number ("label 'final score' and '$'", "JSON key 'rating'",
    # "the number the answer opens with"): the reading's confidence reason.
    read_by: str | None = None
    # Whether the reading is on the method's contract or was confirmed by a second channel:
    # on-contract | forced-anchor | follow-up | unconfirmed | contradicted (None: nothing was
    # read). See :mod:`capjudge.reading.confirm`.
    confirmation: str | None = None


@dataclass
class JudgeResponse:
    """What a backend returns for one request (statuses: see :data:`STATUSES`)."""

    status: Status
    text: str = ""
    slots: list[SlotResult] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    model: str = ""  # model name the backend reported
    system_fingerprint: str | None = None
    reason: str | None = None
    latency_s: float = 0.0
    attempts: int = 1
    cached: bool = False
    cache_key: str = ""  # set by the client (computed once per request); not stored
    logliks: list[float] = field(default_factory=list)  # likelihood requests: per pair
    lengths: list[int] = field(default_factory=list)  # tokens of each scored text
    # The backend's raw answer where it can be read again (OpenAI: the tokens with their top
    # log-probabilities and the follow-ups' continuations), so a change of reading rules
    # re-reads a cached answer instead of asking again. None: nothing to re-read.
    raw: dict[str, Any] | None = None
    # The settings the statuses were derived with ({"min_mass": .., "reading_rules": ..});
    # set by the client when it stores the answer, compared when it reads it back.
    read_with: dict[str, JSONValue] = field(default_factory=dict)
    # What the server says it spent (llama.cpp's timings, summed over the follow-ups); None
    # for servers that send none.
    timings: ServerTimings | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: the shape (and key order) of ``asdict`` less ``cache_key``.

        The shape is that of ``dataclasses.asdict``. The key a response is stored under is not
        part of the stored answer, so entries keep the shape they had before that field existed.

        Written out field by field: ``asdict`` recurses through ``copy.deepcopy`` and was the
        top hotspot of a warm rerun. Lists are copied so the dict never aliases this object.
        When a field is added to this class, :class:`SlotResult` or :class:`Usage`, add it here
        and in :meth:`from_json` (tests/test_cache.py checks both against ``asdict``).

        Returns:
            The response as plain dicts, lists and scalars.
        """
        usage = self.usage
        return {
            "status": self.status,
            "text": self.text,
            "slots": [{"name": s.name,
                       "values": list(s.values),
                       "probs": None if s.probs is None else list(s.probs),
                       "mass": s.mass,
                       "source": s.source,
                       "status": s.status,
                       "reason": s.reason,
                       "printed": s.printed,
                       "anchor_forced": s.anchor_forced,
                       "read_by": s.read_by,
                       "confirmation": s.confirmation}
                      for s in self.slots],
            "usage": {"prompt_tokens": usage.prompt_tokens,
                      "completion_tokens": usage.completion_tokens},
            "model": self.model,
            "system_fingerprint": self.system_fingerprint,
            "reason": self.reason,
            "latency_s": self.latency_s,
            "attempts": self.attempts,
            "cached": self.cached,
            "logliks": list(self.logliks),
            "lengths": list(self.lengths),
            "raw": self.raw,
            "read_with": dict(self.read_with),
            "timings": None if self.timings is None else self.timings.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JudgeResponse:
        """The inverse of :meth:`to_json` (also reads entries written with ``asdict``).

        Fields without a default (``status``; a slot's name, values, probs, mass and source)
        are required; absent optional fields take their defaults and unknown keys are ignored.

        Args:
            data: A dict as produced by :meth:`to_json`.

        Returns:
            A new response (lists are taken over, not copied).

        Raises:
            KeyError: A required field is missing.
            TypeError, AttributeError: ``data`` or a part of it has the wrong shape.
        """
        get = data.get
        slots: list[SlotResult] = []
        for s in get("slots") or ():
            try:
                slots.append(SlotResult(**s))  # the keyword splat is the fastest way in
            except TypeError:
                # A key this version does not know (written by a newer one): field by field.
                slots.append(SlotResult(name=s["name"], values=s["values"], probs=s["probs"],
                                        mass=s["mass"], source=s["source"],
                                        status=s.get("status", "ok"), reason=s.get("reason"),
                                        printed=s.get("printed"),
                                        anchor_forced=s.get("anchor_forced", False),
                                        read_by=s.get("read_by"),
                                        confirmation=s.get("confirmation")))
        u = get("usage") or {}
        try:
            usage = Usage(**u)
        except TypeError:
            usage = Usage(prompt_tokens=u.get("prompt_tokens", 0),
                          completion_tokens=u.get("completion_tokens", 0))
        return cls(
            status=data["status"],
            text=get("text", ""),
            slots=slots,
            usage=usage,
            model=get("model", ""),
            system_fingerprint=get("system_fingerprint"),
            reason=get("reason"),
            latency_s=get("latency_s", 0.0),
            attempts=get("attempts", 1),
            cached=get("cached", False),
            cache_key=get("cache_key", ""),
            logliks=list(get("logliks") or []),
            lengths=list(get("lengths") or []),
            raw=get("raw"),
            read_with=dict(get("read_with") or {}),
            timings=ServerTimings.from_server(get("timings")),
        )


class BackendError(Exception):
    """A call failed. ``transient`` errors are retried by the client (429, 5xx, timeouts).

    ``auth`` marks an authentication failure (a rejected or missing key): the client stops
    sending at once. ``fatal`` marks an answer that shows the whole run is pointed at the wrong
    thing (a base URL that is not an OpenAI-compatible API: an HTML page, another JSON shape):
    the client stops too. ``not_sent`` marks a request that never left (held back because the
    server asked everyone to wait, or refused the key): the client asks the guard again and
    counts no attempt. The message is redacted of credentials
    (:func:`capjudge.util.credentials.redact`) when the error is made, since a server may repeat
    the key it was sent.
    """

    def __init__(self, message: str, *, transient: bool, retry_after: float | None = None,
                 status: Status = "error", auth: bool = False, fatal: bool = False,
                 not_sent: bool = False) -> None:
        super().__init__(redact(message))
        self.transient = transient and not auth and not fatal
        self.retry_after = retry_after
        self.status: Status = status
        self.auth = auth
        self.fatal = fatal
        self.not_sent = not_sent


_MASS_REASON = re.compile(r"^captured mass (?P<mass>[0-9.]+) < (?P<min>[0-9.eE+-]+)(?P<rest>.*)$",
                          re.DOTALL)


MASS_TOLERANCE = 1e-6
"""Servers round log-probabilities (to about six digits): a mass that equals ``min_mass`` up
to that rounding (0.3 + 0.2 summed from rounded log-probabilities is 0.4999999...) is not
below it."""


def below_min_mass(mass: float, min_mass: float) -> bool:
    """Whether a captured ``mass`` is below ``min_mass`` (beyond the rounding of log-probs)."""
    return mass < min_mass - MASS_TOLERANCE


def apply_min_mass(response: JudgeResponse, min_mass: float) -> JudgeResponse:
    """``response`` with every slot's ``low_mass`` flag set from its mass and ``min_mass``.

    Only what ``min_mass`` decides changes: a slot whose mass is below it becomes
    ``low_mass`` (reason ``captured mass M < min_mass``); a slot that was ``low_mass`` only
    for an earlier, higher ``min_mass`` (its reason says so) becomes ``ok``. Slots flagged for
    another reason (unobserved digit paths), failed, skipped and text-only slots are kept.
    The response status is the worst slot's again. Returns ``response`` (changed in place).
    """
    if response.status not in ("ok", "low_mass") or not response.slots:
        return response
    changed = False
    for s in response.slots:
        if s.mass is None or s.probs is None or s.status not in ("ok", "low_mass"):
            continue
        by_threshold = s.status == "low_mass" and s.reason is not None \
            and (m := _MASS_REASON.match(s.reason)) is not None
        if s.status == "ok" and below_min_mass(s.mass, min_mass):
            s.status, s.reason = "low_mass", f"captured mass {s.mass:.3f} < {min_mass}"
            changed = True
        elif by_threshold:
            assert m is not None
            rest = m.group("rest").removeprefix("; ")
            if not below_min_mass(s.mass, min_mass):
                s.status, s.reason = "ok", rest or None
            else:
                s.reason = f"captured mass {s.mass:.3f} < {min_mass}" + (
                    f"; {rest}" if rest else "")
            changed = True
    if changed:
        response.status = worst_status([s.status for s in response.slots])
        reason = "; ".join(f"{s.name}: {s.reason}" for s in response.slots
                           if s.status != "ok" and s.reason)
        if response.status == "ok":
            response.reason = None
        elif reason:
            response.reason = reason
    return response
