"""The one backend contract: a batch of judge requests in, a batch of judge responses out.

Every backend (OpenAI-compatible API, local transformers model, the embedded default, the fake)
returns the same neutral :class:`JudgeResponse`: the generated text, for each score slot the
probability distribution over its scale at the score position, the mass that distribution
captured, token usage, the model snapshot/fingerprint and a status with a reason. Retries,
caching, rate limiting and concurrency are *not* here: they live once in
:class:`capjudge.client.JudgeClient`, around every backend.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["ok", "parse_failure", "low_mass", "refused", "error", "skipped", "undefined"]
STATUSES: tuple[str, ...] = ("ok", "parse_failure", "low_mass", "refused", "error", "skipped",
                             "undefined")
"""``undefined``: the answer parsed but its score does not exist (3D precision with C = H = 0)."""


def worst_status(statuses: Sequence[str]) -> Status:
    """A response is as bad as its worst slot (error > refused > parse failure > low mass)."""
    order: tuple[Status, ...] = ("error", "refused", "parse_failure", "low_mass")
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
        return [p for p in self.parts if isinstance(p, ImagePart)]


@dataclass(frozen=True)
class ScoreSlot:
    """Where one score is read in the output, and on which scale.

    The score is the integer written right after ``anchor`` (e.g. G-VEval's ``$`` in
    "The final score is $85$"). With ``position="last"`` the *last* anchored integer in the
    output is used, so a model that quotes the format earlier is not misread; with ``"first"``
    the first integer (HarmonicEval asks for the score first; VisCE² takes the first integer).
    ``label`` optionally narrows the anchor (``"Accuracy"`` for ACCR's per-criterion scores).
    ``forced_prefix`` is what a local model is teacher-forced with when its text never reached
    the anchor (for ``"first"`` slots: appended to the prompt alone, i.e. the answer's start).
    """

    name: str
    low: int
    high: int
    anchor: str = "$"
    label: str | None = None
    forced_prefix: str = "\nThe final score is $"
    position: Literal["last", "first"] = "last"

    @property
    def values(self) -> list[int]:
        return list(range(self.low, self.high + 1))


@dataclass(frozen=True)
class Decoding:
    """Decoding settings; part of the cache key."""

    max_tokens: int = 512
    temperature: float = 0.0
    top_logprobs: int = 20
    seed: int | None = 0


@dataclass(frozen=True)
class JudgeRequest:
    """One question to a judge."""

    messages: tuple[Message, ...]
    slots: tuple[ScoreSlot, ...]
    decoding: Decoding = Decoding()
    template: str = ""  # template id@version, recorded and part of the cache key
    tag: str = ""  # free-form (item id, mode); NOT part of the cache key

    @property
    def needs_vision(self) -> bool:
        return any(m.images for m in self.messages)

    def canonical(self) -> dict[str, Any]:
        """Everything that determines the answer, with images by content hash, not path."""
        messages = [
            {"role": m.role,
             "parts": [p if isinstance(p, str) else {"image": p.sha256, "detail": p.detail}
                       for p in m.parts]}
            for m in self.messages
        ]
        return {"messages": messages, "slots": [asdict(s) for s in self.slots],
                "decoding": asdict(self.decoding), "template": self.template}

    def cache_key(self, backend_id: str, snapshot: str) -> str:
        """Content address: backend id, model snapshot, rendered prompt, media hashes, settings."""
        payload = json.dumps({"backend": backend_id, "snapshot": snapshot, **self.canonical()},
                             sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass
class Usage:
    """Token usage of one call (image tokens are included in prompt tokens by the API)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
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
    printed: int | None = None  # the integer the model actually wrote, if any
    anchor_forced: bool = False  # local models: the anchor had to be appended


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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JudgeResponse:
        data = dict(data)
        data["slots"] = [SlotResult(**s) for s in data.get("slots", [])]
        data["usage"] = Usage(**data.get("usage", {}))
        return cls(**data)


class BackendError(Exception):
    """A call failed. ``transient`` errors are retried by the client (429, 5xx, timeouts)."""

    def __init__(self, message: str, *, transient: bool, retry_after: float | None = None,
                 status: Status = "error") -> None:
        super().__init__(message)
        self.transient = transient
        self.retry_after = retry_after
        self.status: Status = status


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do; the judge stage skips what it cannot (and says so)."""

    vision: bool
    distribution: Literal["logprobs", "exact", "none"]
    max_batch: int = 1  # requests per generate() call
    concurrency: int = 1  # parallel generate() calls the client may make


class Backend(ABC):
    """Abstract judge backend. Implementations are chosen by string id, imported lazily."""

    backend_id: str
    capabilities: Capabilities

    @abstractmethod
    def snapshot(self) -> str:
        """A string that changes when the model changes (snapshot name, weights hash)."""

    @abstractmethod
    def generate(self, requests: Sequence[JudgeRequest]) -> list[JudgeResponse | BackendError]:
        """Answer a batch; per request either a response or the error it raised."""

    def describe(self) -> dict[str, Any]:
        """Lineage facts about the backend (model id, snapshot, fingerprint where known)."""
        return {"backend": self.backend_id, "snapshot": self.snapshot()}
