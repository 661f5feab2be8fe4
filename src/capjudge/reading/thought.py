"""What a judge's thought says against its answer's verdict (issue 40, corpus V).

A reasoning model's thought (the API's ``reasoning_content``, or a ``<think>`` block) is never
the answer: its verdict is read from the answer alone. But a thought can show that the number
the answer writes is not the rating on the asked scale: VisCE²'s prompt asks for "a single
digit between 0 and 100", and a reasoning judge that settles on 75 may write 7 after
"compressing" it ("75 → 7"). The answer "7" is on contract, so no second channel is asked; the
thought is the only place that says 7 stands for 75. :func:`settled_by_thought` abstains on
such a reading: a value of the scale mapped, in the thought, to the printed value that is its
own leading digits.

The thought is kept with the answer (``raw["thought"]``, its last :data:`KEPT` characters), so a
stored answer read again under new rules is checked the same way.
"""

from __future__ import annotations

import re
from dataclasses import replace

from capjudge.protocol import JudgeRequest, JudgeResponse, SlotResult, worst_status
from capjudge.reading.view import reasoning_spans

# How much of a thought is kept with the answer: its end, where a thought settles.
KEPT = 4000

# "75 → 7", "75 becomes 7", "compress 75 to 7", "75, as a single digit: 7".
_MAPPED = re.compile(r"(?<![\d.])(?P<v>\d{2,3})(?!\d|\.\d)[\s,;:.]*(?:\u2192|->|=>|\u21d2|becomes|"
                     r"maps?\s+(?:on)?to|compress(?:es|ed)?\s+to|(?:as|to|into)\s+(?:a\s+)?"
                     r"(?:single|one)[ -]digit[:,]?|rounded\s+down\s+to\s+(?:a\s+)?(?:single|one)"
                     r"[ -]digit[:,]?)\s*(?P<p>\d)(?!\d|\.\d)", re.I)
_VALID = ("ok", "low_mass", "text_only", "partial")


def thought_of(text: str, thinking: str | None) -> str:
    """The thought an answer carries: its reasoning field and its thought blocks."""
    text = text or ""
    blocks = [text[start:end] for _, _, start, end in reasoning_spans(text)[0]]
    return "\n".join([thinking or "", *blocks]).strip()


def settled_by_thought(result: SlotResult, low: float, high: float, thought: str
                       ) -> str | None:
    """Why the thought says the printed value is not the rating on the scale, or None."""
    if result.status not in _VALID or result.printed is None or not thought:
        return None
    printed = result.printed
    for m in _MAPPED.finditer(thought):
        v, p = m.group("v"), m.group("p")
        if int(p) == printed and low <= int(v) <= high and v.startswith(p):
            return (f"the judge's thought rates {v} and writes it as {p} "
                    f"({' '.join(m.group(0).split())!r}): the printed {p} is not the rating "
                    f"on the {low:g}-{high:g} scale")
    return None


def checked(request: JudgeRequest, response: JudgeResponse, thought: str) -> JudgeResponse:
    """``response`` with each slot the thought contradicts as ``parse_failure``."""
    if not thought or not response.slots:
        return response
    slots: list[SlotResult] = []
    changed = False
    for slot, result in zip(request.slots, response.slots, strict=False):
        why = settled_by_thought(result, slot.low, slot.high, thought)
        if why is not None:
            result = replace(result, status="parse_failure", reason=why, probs=None,
                             confirmation=None)
            changed = True
        slots.append(result)
    slots += list(response.slots[len(slots):])
    if not changed:
        return response
    reason = "; ".join(f"{s.name}: {s.reason}" for s in slots if s.status != "ok") or None
    return replace(response, slots=slots, status=worst_status([s.status for s in slots]),
                   reason=reason)


def kept(thought: str) -> str:
    """What of a thought is stored with the answer (its end)."""
    return thought[-KEPT:]


__all__ = ["KEPT", "checked", "kept", "settled_by_thought", "thought_of"]
