"""``fake/...``: deterministic scripted judges for tests and dry runs (no model, no network).

- ``fake/hash``: a peaked distribution whose centre is derived from the request's content hash
  (the same request always gets the same answer; different ones differ).
- ``fake/const:N``: every slot peaks at N (clamped to the scale).
- ``fake/fail``: every request fails with a non-transient error.
- ``fake/refuse``: every request is refused.
- ``fake/lowmass``: a distribution carrying only 20 % mass on the scale.

Add ``+vision`` (``fake/hash+vision``) to accept images.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence

from capjudge.backends.base import Backend, Capabilities, RerunIdentity
from capjudge.cost import request_tokens
from capjudge.protocol import (
    BackendError,
    BackendFacts,
    JudgeRequest,
    JudgeResponse,
    SlotResult,
    Status,
    Usage,
    below_min_mass,
    worst_status,
)
from capjudge.scoring import normalise

SCRIPTS = ("hash", "fail", "refuse", "lowmass")


def _known_script(spec: str) -> bool:
    if spec in SCRIPTS:
        return True
    kind, _, number = spec.partition(":")
    try:
        return kind == "const" and bool(number) and int(number) == int(number)
    except ValueError:
        return False


class FakeBackend(Backend):
    """Deterministic scripted distributions (see module doc)."""

    options = frozenset({"min_mass"})

    @classmethod
    def rerun_identity(cls, options: Mapping[str, object]) -> RerunIdentity:
        """``request``: a scripted answer depends on its request alone."""
        return "request"

    @classmethod
    def capabilities_for(cls, name: str, options: Mapping[str, object]) -> Capabilities:
        """``+vision`` accepts images; scripted distributions, 16 requests a batch.

        Raises:
            BackendError: an unknown script (a typo must not produce scores from some default
                script).
        """
        spec = name.removesuffix("+vision")
        if not _known_script(spec):
            raise BackendError(f"unknown fake script {name!r}; scripts: {', '.join(SCRIPTS)}, "
                               "const:N (+vision accepts images)", transient=False)
        return Capabilities(vision=name.endswith("+vision"), distribution="logprobs",
                            max_batch=16, concurrency=1)

    @classmethod
    def describe_unloaded(cls, name: str, options: Mapping[str, object]) -> BackendFacts:
        """Id and snapshot (a script has nothing to load)."""
        cls.capabilities_for(name, options)
        return {"backend": f"fake/{name}", "snapshot": cls._snapshot_of(name),
                "loaded": False}

    @staticmethod
    def _snapshot_of(name: str) -> str:
        return f"fake-{name.removesuffix('+vision')}-v1"

    def __init__(self, spec: str, min_mass: float = 0.5) -> None:
        self.backend_id = f"fake/{spec}"
        self.capabilities = self.capabilities_for(spec, {})
        self.spec = spec.removesuffix("+vision")
        self.min_mass = min_mass
        self.calls = 0

    def snapshot(self) -> str:
        """A fixed snapshot per spec, ``fake-<spec>-v1``."""
        return self._snapshot_of(self.spec)

    def generate(self, requests: Sequence[JudgeRequest]) -> list[JudgeResponse | BackendError]:
        """Scripted answers, per request a response or an error, counting calls.

        Image requests fail on a text-only fake; the ``fail`` and ``refuse`` specs fail or
        refuse every request; otherwise each slot gets a deterministic distribution.
        """
        out: list[JudgeResponse | BackendError] = []
        for request in requests:
            self.calls += 1
            if request.needs_vision and not self.capabilities.vision:
                out.append(BackendError(f"{self.backend_id} is text-only", transient=False))
            elif self.spec == "fail":
                out.append(BackendError("scripted failure", transient=False))
            elif self.spec == "refuse":
                out.append(JudgeResponse(status="refused", reason="scripted refusal",
                                         model=self.spec))
            else:
                out.append(self._answer(request))
        return out

    def _centre(self, request: JudgeRequest, low: int, high: int, salt: str) -> int:
        if self.spec.startswith("const:"):
            return min(high, max(low, int(self.spec.split(":", 1)[1])))
        digest = hashlib.sha256((request.cache_key(self.backend_id, "") + salt).encode())
        return low + int(digest.hexdigest(), 16) % (high - low + 1)

    def _answer(self, request: JudgeRequest) -> JudgeResponse:
        slots = []
        lines = ["Scripted reasoning."]
        for slot in request.slots:
            if slot.kind == "points":
                # A count stated on the prompt's own labelled line (cap3d), read from the text.
                count = self._centre(request, 0, 4, slot.name)
                slots.append(SlotResult(slot.name, slot.values, None, None, "text", "ok", None,
                                        float(count), read_by="scripted count",
                                        confirmation="on-contract"))
                lines.append(f"{slot.label}: {count}")
                continue
            centre = self._centre(request, slot.low, slot.high, slot.name)
            width = max(1.0, (slot.high - slot.low) / 20)
            raw = {v: math.exp(-0.5 * ((v - centre) / width) ** 2) for v in slot.values}
            total = sum(raw.values())
            scale = 0.2 if self.spec == "lowmass" else 0.97
            raw = {v: scale * p / total for v, p in raw.items()}
            probs, mass = normalise(raw, slot.values)
            status: Status = "low_mass" if below_min_mass(mass, self.min_mass) else "ok"
            slots.append(SlotResult(slot.name, slot.values, probs, mass, "logprobs", status,
                                    f"captured mass {mass:.3f} < {self.min_mass}"
                                    if status != "ok" else None,
                                    centre))
            label = f"{slot.label}: " if slot.label else "The final score is "
            lines.append(f"{label}{slot.anchor}{centre}{slot.anchor}")
        prompt, _ = request_tokens(request)
        return JudgeResponse(status=worst_status([s.status for s in slots]),
                             text="\n".join(lines), slots=slots,
                             usage=Usage(prompt, 12 * len(slots)), model=f"fake-{self.spec}",
                             system_fingerprint="fp_fake")
