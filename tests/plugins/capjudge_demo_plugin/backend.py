"""``demo/<N>``: every score slot answers N (clamped to the slot's scale), with certainty.

A scripted backend: it reads neither the text nor the picture, so what it returns is known
exactly and a test can check the whole pipeline's arithmetic against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from capjudge.backends.base import Backend, Capabilities
from capjudge.protocol import BackendError, JudgeRequest, JudgeResponse, SlotResult, Usage


class DemoBackend(Backend):
    """Every slot peaks at the id's number (``demo/4``), probability 1."""

    options = frozenset({"min_mass"})
    # What the contract test builds when it runs this plugin's kind.
    example_id: ClassVar[str] = "demo/4"

    def __init__(self, name: str, min_mass: float = 0.5) -> None:
        if not name.isdigit():
            raise BackendError(f"demo backend: the name must be a number, got {name!r}",
                               transient=False)
        self.backend_id = f"demo/{name}"
        self.peak = int(name)
        self.min_mass = min_mass
        self.capabilities = Capabilities(vision=True, distribution="exact", max_batch=8)

    def snapshot(self) -> str:
        return f"demo-{self.peak}-v1"

    def generate(self, requests: Sequence[JudgeRequest]) -> list[JudgeResponse | BackendError]:
        out: list[JudgeResponse | BackendError] = []
        for request in requests:
            slots, lines = [], ["A scripted answer."]
            for slot in request.slots:
                centre = min(slot.high, max(slot.low, self.peak))
                probs = [1.0 if v == centre else 0.0 for v in slot.values]
                slots.append(SlotResult(slot.name, slot.values, probs, 1.0, "teacher_forcing",
                                        "ok", None, centre))
                lines.append(f"{slot.label + ': ' if slot.label else 'The final score is '}"
                             f"{slot.anchor}{centre}{slot.anchor}")
            out.append(JudgeResponse("ok", text="\n".join(lines), slots=slots,
                                     usage=Usage(10, 2), model="demo"))
        return out
