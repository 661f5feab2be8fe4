"""Reading a score distribution out of an API's token log-probabilities.

Public implementations usually take the first token that looks like a number, or the token right
after the dollar sign; both break on ordinary outputs. Here the score is located *from the end*
of the output, anchored on its delimiter (G-VEval: ``$`` ... ``$``):

- whitespace tokens between the anchor and the digits are tolerated ("$ 85$", "$" + " 85");
- a number may be one token (o200k writes every integer 0-999 as one token) or several
  (digit-split tokenizers such as Qwen's); for the latter the chosen path is expanded exactly
  with the following positions' alternatives, and alternatives whose continuation was never
  observed count as *lost* mass rather than being guessed;
- the distribution is renormalised over the scale's valid values and the captured mass is
  reported, so a judge that put most of its probability elsewhere is flagged (``low_mass``),
  never silently rescaled; a zero mass is a ``parse_failure``, never a score of 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from capjudge.backends.base import ScoreSlot, SlotResult
from capjudge.scoring import normalise


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with its log-probability and the top alternatives at its position."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = field(default=())


def slot_pattern(slot: ScoreSlot) -> re.Pattern[str]:
    """Regex for one slot: optional label, the anchor, optional spaces, an integer."""
    anchor = re.escape(slot.anchor)
    # An integer, not the tail of a longer number or a decimal ("3.5" is not a 5).
    number = r"(?<![\d.])(\d+)(?!\.\d)"
    if slot.label:
        # "Accuracy: $4$", "**Accuracy** score: $ 4 $" — the label, then the anchor soon after.
        return re.compile(rf"{re.escape(slot.label)}[^\n$\d]{{0,60}}?{anchor}\s*{number}", re.I)
    return re.compile(rf"{anchor}\s*{number}" if anchor else number)


def find_printed(text: str, slot: ScoreSlot) -> re.Match[str] | None:
    """The slot's integer in the text (last or first anchored one, per the slot), or None."""
    matches = list(slot_pattern(slot).finditer(text))
    if not matches:
        return None
    return matches[0] if slot.position == "first" else matches[-1]


def _is_digits(token: str) -> bool:
    return token.strip() != "" and token.strip().isdigit()


def read_slot(tokens: Sequence[TokenLogprob] | None, text: str, slot: ScoreSlot,
              min_mass: float) -> SlotResult:
    """Distribution of one score slot from an API response.

    Args:
        tokens: ``choices[0].logprobs.content`` as :class:`TokenLogprob`; None when the API
            returned no log-probabilities.
        text: the generated text.
        slot: where the score is and its scale.
        min_mass: below this captured mass the result is flagged ``low_mass``.
    """
    values = slot.values
    if tokens:
        joined = "".join(t.token for t in tokens)
        if joined != text:
            text = joined  # offsets must refer to the tokens; they are the ground truth here
    match = find_printed(text, slot)
    if match is None:
        return SlotResult(slot.name, values, None, None, "none", "parse_failure",
                          f"no integer after {slot.anchor!r}"
                          + (f" for {slot.label!r}" if slot.label else "") + " in the output")
    printed = int(match.group(1))
    if not tokens:
        if slot.low <= printed <= slot.high:
            probs = [1.0 if v == printed else 0.0 for v in values]
            return SlotResult(slot.name, values, probs, None, "text", "ok",
                              "no log-probabilities returned: distribution is the printed value",
                              printed)
        return SlotResult(slot.name, values, None, None, "text", "parse_failure",
                          f"printed score {printed} is outside {slot.low}-{slot.high}", printed)

    start, end = match.span(1)
    # Map character offsets to token indices.
    offsets = []
    pos = 0
    for t in tokens:
        offsets.append(pos)
        pos += len(t.token)
    first = max(i for i, off in enumerate(offsets) if off <= start)
    last = max(i for i, off in enumerate(offsets) if off < end)
    raw: dict[int, float] = {}
    lost = _expand(tokens, first, last, "", 1.0, raw)
    probs, mass = normalise(raw, values)
    result = SlotResult(slot.name, values, probs, mass, "logprobs", "ok", None, printed)
    if mass <= 0.0:
        result.probs = None
        result.status = "parse_failure"
        result.reason = (f"no probability on {slot.low}-{slot.high} at the score position "
                         f"(printed {printed})")
    elif mass < min_mass:
        result.status = "low_mass"
        result.reason = f"captured mass {mass:.3f} < {min_mass}" + (
            f" ({lost:.3f} on digit paths that were not observed)" if lost > 1e-6 else "")
    return result


def _alternatives(tok: TokenLogprob) -> list[tuple[str, float]]:
    alts = dict(tok.top)
    alts.setdefault(tok.token, tok.logprob)  # the chosen token is always a candidate
    return [(t, math.exp(lp)) for t, lp in alts.items()]


def _expand(tokens: Sequence[TokenLogprob], pos: int, last: int, prefix: str, prob: float,
            out: dict[int, float]) -> float:
    """Walk the chosen number's tokens, spreading probability over values; returns lost mass.

    At each position, an alternative that is digits either continues the chosen path (the
    chosen token: recurse), or starts a number we never see the rest of (lost, unless the
    number obviously ends there because we are on the last digit of the chosen number and the
    following position tells us how likely a number ends). Non-digit alternatives end the
    number at ``prefix``.
    """
    lost = 0.0
    chosen = tokens[pos].token
    for alt, p in _alternatives(tokens[pos]):
        stripped = alt.strip()
        if not _is_digits(alt) or (prefix and alt != alt.lstrip()):
            # Not a digit continuation: the number is `prefix` (if any) and ends here.
            if prefix:
                out[int(prefix)] = out.get(int(prefix), 0.0) + prob * p
            continue
        number = prefix + stripped
        if alt == chosen and pos < last:
            lost += _expand(tokens, pos + 1, last, number, prob * p, out)
        elif alt == chosen or pos >= last:
            # Last digit position of the printed number. Whether this alternative number ends
            # here is read from the next position when it is on the chosen path; otherwise we
            # take the single-token view (o200k: the number is this one token).
            end_p = _end_probability(tokens, pos + 1) if alt == chosen else 1.0
            out[int(number)] = out.get(int(number), 0.0) + prob * p * end_p
            if alt == chosen and end_p < 1.0:
                lost += prob * p * (1.0 - end_p)
        else:
            lost += prob * p  # a different leading digit: its continuation is unobserved
    return lost


def _end_probability(tokens: Sequence[TokenLogprob], pos: int) -> float:
    """Probability that the number ends before position ``pos`` (no further digit token)."""
    if pos >= len(tokens):
        return 1.0
    tok = tokens[pos]
    if _is_digits(tok.token) and tok.token == tok.token.lstrip():
        # The output itself continued the number; cannot happen for the last digit position.
        return 0.0
    digit_mass = sum(p for t, p in _alternatives(tok) if _is_digits(t) and t == t.lstrip())
    return max(0.0, 1.0 - digit_mass)
