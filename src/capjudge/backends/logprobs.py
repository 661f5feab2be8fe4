"""Reading a judge's score: where it is in the text, and its distribution from token logprobs.

Two steps, kept apart so every backend and every method reads the same way.

**Where the score is** (:func:`locate`, text only). Each slot is read where its prompt says it
is, never "the last number anywhere":

- labelled slots (``ScoreSlot.label``): the label, a short filler on the same line without
  digits, the slot's anchor, then the number. G-VEval reads the last "final score ... $N$"
  (so "Note the scale runs from $0$ to $100$" after it is not read), ACCR each ``Name: $N$``.
  Only when no anchored one exists, a number right after the label ("Final score: 85").
- unlabelled anchored slots (``anchor="$"``): the last ``$N$``.
- first-integer slots (``position="first"``, no anchor; VisCE² and HarmonicEval): VisCE² §3
  removes the canonical phrasings a judge wraps its score in and takes the first integer. Here
  the phrasings that name the slot's own scale ("on a scale of 0 to 100", "(1-5)", "out of 5",
  "/100", "between 0 and 100") are blanked first (offsets kept), then the first number after
  a "Score:"/"Rating:" label, else the first number.

A number is read whole: "85.5" is a decimal (a parse failure on a whole-number scale, never 8
or 5), "80-85" a range, "4/5" and "4 out of 5" the numerator only when the denominator is the
scale's top, a number on another scale ("8/10" on 0-100, "on a scale of 1 to 10") a parse
failure with the reason. No number at all is a ``parse_failure`` (its reason says when the
answer declines: "I'm sorry, I can't ...").

**The distribution** (:func:`read_tree`, :func:`finish`). The number's tokens are mapped to a
*digit tree*: for each digit prefix the next-token probabilities (a digit, or "the number
ends"). Tokenizers differ:

- whole-number tokens (o200k, Llama 3: every integer 0-999 is one token): the alternatives at
  the number's first token are whole numbers; nothing is missing.
- digit-split tokens (Qwen, Llama 2 / LLaVA: "85" is "8", "5"): the answer shows the next-digit
  probabilities only along the chosen path. Every other leading digit ("9" when "8" was
  written) is an unobserved subtree. Servers that can continue an assistant message (vLLM:
  ``continue_final_message``) complete each such prefix whose probability is at least
  :data:`FOLLOW_UP_MIN_P` with a one-token follow-up request (see :func:`follow_up_prefixes`
  and :func:`add_continuation`), so the distribution is exact over the whole scale, "100"
  included. Where that is impossible the unobserved probability is reported as **lost** and
  the slot is ``low_mass`` whenever it exceeds :data:`LOST_TOLERANCE`: the conditional
  distribution of the observed digits is never passed off as the whole one.

A prefix with no in-scale continuation (e.g. "85" on 0-100, "4" on 1-5) whose next token was
not observed is taken to end there: a further digit would leave the scale, so at most the
(out-of-scale) probability of such a digit can be misattributed to it.

The distribution is renormalised over the scale and the captured mass (before renormalising)
is reported; below ``min_mass`` the slot is ``low_mass``, and zero mass is a ``parse_failure``,
never a score of 0. An answer without log-probabilities although they were requested is
``text_only``: the printed score is kept, there is no distribution.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from capjudge.backends.masking import find_decline, mask_text
from capjudge.protocol import ScoreSlot, SlotResult, Status
from capjudge.scoring import normalise

END = "<end>"
"""Key of "the number ends here" in a digit-tree node."""

FOLLOW_UP_MIN_P = 1e-3
"""An unobserved digit prefix at least this likely is completed by a follow-up request."""

LOST_TOLERANCE = 0.01
"""Unobserved probability above this makes a slot ``low_mass`` whatever its captured mass."""

READING_RULES_VERSION = 2
"""Bumped whenever the rules that read a score from an answer change (cached raw answers are
re-read, never re-asked). 2: quotations of the candidate/references, restated rubrics and
hypothetical clauses are masked before the verdict is located; declines are found anywhere;
a label may stand on its own line; ``\\boxed{N}``."""

NEXT_SLOT_LOW = -1
"""A continuation slot's values are ``-1`` ("the number ends") and the digits 0-9."""


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with its log-probability and the top alternatives at its position."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = field(default=())


@dataclass(frozen=True)
class Located:
    """Where a slot's number was written.

    Attributes:
        start: offset of its first digit (a minus sign excluded).
        digits_end: offset just after its integer digits (what the token path covers).
        value: the number as written (a float when it had a decimal part).
    """

    start: int
    digits_end: int
    value: float

    @property
    def integral(self) -> bool:
        """Whether the value is a whole number."""
        return float(self.value).is_integer()

    @property
    def printed(self) -> int | float:
        """The value as an int when it is whole."""
        return int(self.value) if self.integral else self.value


@dataclass(frozen=True)
class Unreadable:
    """Why no score could be read from a text (``status`` is ``parse_failure``)."""

    status: Status
    reason: str
    printed: int | float | None = None


# --- where the score is ------------------------------------------------------------------

# A number standing alone: not the tail of a word, a longer number or a decimal. ASCII word
# characters only: a score wrapped in Greek letters ("α80α", the official ACCR format) stands
# alone.
_NUMBER = re.compile(r"(?<![\w.])([-\u2212]?)(\d+)(\.\d+)?(?![\w])", re.ASCII)
_RANGE_AFTER = re.compile(r"\s*(?:-|\u2013|\u2014|to)\s*[-\u2212]?\d")
_FRACTION_AFTER = re.compile(r"\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?)", re.I)
_SCORE_LABEL = re.compile(r"\b(?:score|rating|rate|rated)\b[^\n\d]{0,24}?(?=[-\u2212]?\d)", re.I)
_FOREIGN_SCALE = re.compile(
    r"\bscale\s+(?:of|from)\s+\$?(\d+)\$?\s*(?:to|-|\u2013)\s*\$?(\d+)\$?"
    r"|\bon\s+an?\s+(\d+)\s*(?:-|\u2013|to)\s*(\d+)\s+scale", re.I)
_REFUSAL = re.compile(
    r"\b(?:I(?:'|\u2019)?m sorry|I am sorry|I (?:cannot|can(?:'|\u2019)?t|am unable to|'m "
    r"unable to|won(?:'|\u2019)?t)|(?:cannot|unable to) (?:assist|help|evaluate|rate|comply))",
    re.I)
_MARKUP = r"[\s*_`]*"


def _blank(text: str, pattern: re.Pattern[str]) -> str:
    """Replace every match of ``pattern`` by spaces (offsets stay valid)."""
    return pattern.sub(lambda m: " " * len(m.group(0)), text)


def scale_phrases(low: int, high: int) -> list[re.Pattern[str]]:
    """The canonical phrasings that name the scale ``low``-``high``.

    VisCE² §3 removes them before taking the first integer: "on a scale of 0 to 100", "(1-5)",
    "between 0 and 100", "out of 5", "/100". Only the slot's own scale: "8/10" on 0-100 is a
    number on another scale, not a phrasing to drop.
    """
    lo, hi = re.escape(str(low)), re.escape(str(high))
    num_lo, num_hi = rf"\$?{lo}\$?", rf"\$?{hi}\$?"
    between = r"\s*(?:-|\u2013|\u2014|to|and)\s*"
    return [
        re.compile(rf"\b(?:on\s+)?(?:a\s+)?(?:precise\s+)?scale\s+(?:of|from)\s+{num_lo}"
                   rf"{between}{num_hi}", re.I),
        re.compile(rf"\bon\s+a\s+{num_lo}{between}{num_hi}\s+scale\b", re.I),
        re.compile(rf"\b(?:from|between)\s+{num_lo}{between}{num_hi}(?!\d)", re.I),
        re.compile(rf"[(\[]\s*{num_lo}{between}{num_hi}\s*[)\]]"),
        re.compile(rf"(?<![\d.]){num_lo}{between}{num_hi}\s+scale\b", re.I),
        re.compile(rf"\bout\s+of\s+{num_hi}(?![\d.])", re.I),
        re.compile(rf"/\s*{num_hi}(?![\d.])"),
    ]


def clean_text(text: str, slot: ScoreSlot) -> str:
    """The text with the slot's own scale phrasings blanked (same length, same offsets)."""
    for pattern in scale_phrases(slot.low, slot.high):
        text = _blank(text, pattern)
    return text


_LATEX_OPEN = r"(?:\\(?:boxed|text|textbf|mathbf)\s*\{\s*)?"
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")


def _labelled_candidates(cleaned: str, slot: ScoreSlot) -> list[re.Match[str]]:
    r"""The numbers written after ``slot.label`` and its anchor (the verdict region).

    "Accuracy: $4$", "**Accuracy** score: $ 4 $", "The final score is **$85$**",
    "The final score is:\n\n$\\boxed{85}$": the label, a filler without digits that does not
    end a sentence and spans at most two line breaks (a label alone on its line, its value on
    the next), the anchor, markdown or LaTeX, the number.
    """
    anchor = re.escape(slot.anchor)
    label = re.compile(rf"\b{re.escape(slot.label or '')}", re.I)
    value = re.compile(rf"[^\d]{{0,80}}?{anchor}{_MARKUP}{_LATEX_OPEN}{_MARKUP}(?=[-\u2212]?\d)")
    out = []
    for m in label.finditer(cleaned):
        v = value.match(cleaned, m.end())
        if v is None:
            continue
        filler = cleaned[m.end(): v.end()]
        if filler.count("\n") > 2 or _SENTENCE_END.search(filler):
            continue
        number = _NUMBER.match(cleaned, v.end())
        if number is not None:
            out.append(number)
    return out


def _bare_candidates(cleaned: str, slot: ScoreSlot) -> list[re.Match[str]]:
    r""""Final score: 85", "**Final Score:**\n\n**85**" (no anchor): right after the label.

    Only a colon, "is", "=", "of", markdown or LaTeX and at most two line breaks between:
    "Accuracy: the caption names 3 objects" is not a score.
    """
    bare = re.compile(rf"\b{re.escape(slot.label or '')}{_MARKUP}:?{_MARKUP}"
                      rf"(?:(?:is|=|of)\b)?{_MARKUP}{_LATEX_OPEN}\$?{_MARKUP}"
                      rf"(?=[-\u2212]?\d)", re.I)
    return [n for m in bare.finditer(cleaned)
            if m.group(0).count("\n") <= 2 and (n := _NUMBER.match(cleaned, m.end()))
            is not None]


def _check_number(text: str, match: re.Match[str], slot: ScoreSlot) -> Located | Unreadable:
    """The number at ``match`` as a reading of ``slot``, or why it is not one."""
    sign, digits, decimals = match.group(1), match.group(2), match.group(3) or ""
    value = float(("-" if sign else "") + digits + decimals)
    written = match.group(0)
    after = text[match.end():]
    if (rng := _RANGE_AFTER.match(after)) is not None:
        return Unreadable("parse_failure", "the score is a range "
                          f"({(written + after[:rng.end() + 4]).strip()!r}), not a number",
                          None)
    if (frac := _FRACTION_AFTER.match(after)) is not None:
        denominator = float(frac.group(1))
        if denominator != slot.high:
            return Unreadable("parse_failure", f"the score is given on another scale "
                              f"({written}{after[:frac.end()]!s}), not {slot.low}-{slot.high}",
                              None)
    located = Located(match.start(2), match.end(2), value)
    if not located.integral:
        return Unreadable("parse_failure", f"the score is written as a decimal ({written}); "
                          f"the scale is whole numbers {slot.low}-{slot.high}", located.printed)
    if not slot.low <= value <= slot.high:
        return Unreadable("parse_failure", f"printed score {located.printed} is outside "
                          f"{slot.low}-{slot.high}", located.printed)
    return located


def locate(text: str, slot: ScoreSlot) -> Located | Unreadable:
    """Where ``slot``'s score is written in ``text`` (see the module doc for the rules).

    Args:
        text: the judge's answer.
        slot: the score slot (anchor, label, position, scale).

    Returns:
        The located number, or why there is none (a ``parse_failure``; a declining answer
        says so in the reason).
    """
    masked = mask_text(text, slot.quotes)
    declined = find_decline(masked, text)
    if declined is not None:
        # Wherever it appears: a judge that says it cannot see the picture has not judged it,
        # whatever number it writes (or quotes) elsewhere.
        return Unreadable("parse_failure", f"no score: the judge declined ({declined!r})")
    cleaned = clean_text(masked, slot)
    candidates: list[re.Match[str]] = []
    if slot.label:
        candidates = _labelled_candidates(cleaned, slot)
        if not candidates and slot.anchor:
            candidates = _bare_candidates(cleaned, slot)
        where = f"after {slot.label!r}" + (f" and {slot.anchor!r}" if slot.anchor else "")
    elif slot.anchor:
        anchor = re.compile(re.escape(slot.anchor) + _MARKUP + _LATEX_OPEN + _MARKUP
                            + r"(?=[-\u2212]?\d)")
        for m in anchor.finditer(cleaned):
            number = _NUMBER.match(cleaned, m.end())
            if number is not None:
                candidates.append(number)
        where = f"after {slot.anchor!r}"
    else:
        candidates = _first_integer_candidates(cleaned)
        where = "anywhere"
    if not candidates:
        foreign = _foreign_scale(cleaned, slot)
        if foreign:
            return Unreadable("parse_failure", foreign)
        if _REFUSAL.search(masked):
            snippet = " ".join(text.split())[:120]
            # A parse failure (no score), not ``refused``: that status is the API's own
            # refusal (its ``refusal`` field or a content filter), not a reading of prose.
            return Unreadable("parse_failure", f"no score: the judge declined ({snippet!r})")
        return Unreadable("parse_failure", f"no number {where} in the output")
    chosen = candidates[0] if slot.position == "first" else candidates[-1]
    if not slot.label and not slot.anchor:
        foreign = _foreign_scale(cleaned, slot)
        if foreign:
            return Unreadable("parse_failure", foreign)
    return _check_number(cleaned, chosen, slot)


def _first_integer_candidates(cleaned: str) -> list[re.Match[str]]:
    """First-integer reading: the numbers whose first is taken as the score.

    The score is the answer's first number when the answer opens with it (the prompts ask for
    the score first) or when no "Score:"/"Rating:" label introduces one; otherwise the first
    labelled number ("The caption has 2 errors. Rating: 3" is 3; "1. Score: 4", whose opening
    number is a list marker, is 4).
    """
    numbers = list(_NUMBER.finditer(cleaned))
    labelled = [n for m in _SCORE_LABEL.finditer(cleaned)
                if (n := _NUMBER.match(cleaned, m.end())) is not None]
    if not numbers or not labelled:
        return numbers
    opening = numbers[0]
    at_start = cleaned[:opening.start()].strip(" \t\n*_`#>:") == ""
    list_marker = re.match(r"[.)]\s+\D", cleaned[opening.end():]) is not None
    if at_start and not list_marker:
        return numbers
    return labelled


def _foreign_scale(cleaned: str, slot: ScoreSlot) -> str | None:
    """A "scale of 1 to 10" phrase naming another scale than the slot's (after blanking)."""
    m = _FOREIGN_SCALE.search(cleaned)
    if m is None:
        return None
    low, high = (int(x) for x in (m.group(1, 2) if m.group(1) else m.group(3, 4)))
    if (low, high) != (slot.low, slot.high) and high > low:
        return (f"the judge answered on another scale ({m.group(0).strip()!r}), not "
                f"{slot.low}-{slot.high}")
    return None


def find_printed(text: str, slot: ScoreSlot) -> Located | None:
    """The slot's located number in ``text``, or None.

    Local backends use it to find the score position in what the model wrote.
    """
    found = locate(text, slot)
    return found if isinstance(found, Located) else None


# --- the digit tree -------------------------------------------------------------------------


def _alternatives(tok: TokenLogprob) -> dict[str, float]:
    """Token -> probability at one position (the chosen token is always a candidate)."""
    alts = {t: math.exp(lp) for t, lp in tok.top}
    alts.setdefault(tok.token, math.exp(tok.logprob))
    return alts


def _digit_token(token: str) -> tuple[str, bool] | None:
    """A token that writes digits: (its leading digits, whether the number ends inside it).

    The number ends inside a token such as "5$". None for a token that writes no digits.
    """
    m = re.match(r"(\d+)(.*)$", token, re.S)
    if m is None or not m.group(1).isascii():
        return None
    return m.group(1), m.group(2) != ""


def _continuation(tok: TokenLogprob | None) -> dict[str, float]:
    """Next-token distribution inside a number.

    Tokens that start with a digit continue it ("5", or "5$" which also ends it: key
    ``"5" + END``); everything else (the closing anchor, a space, text, the unobserved tail)
    ends it.
    """
    if tok is None:
        return {END: 1.0}
    node: dict[str, float] = {}
    for t, p in _alternatives(tok).items():
        split = _digit_token(t)
        if split is not None:
            key = split[0] + (END if split[1] else "")
            node[key] = node.get(key, 0.0) + p
    node[END] = max(0.0, 1.0 - sum(node.values()))
    return node


@dataclass
class TreeReading:
    """A slot read from one answer's tokens: where the number is and the observed digit tree.

    Attributes:
        slot: the slot.
        located: where the number is (None when ``failure`` is set).
        failure: the finished result when nothing can be read (no number, out of scale, ...).
        after: digit prefix -> next-token distribution (digit tokens and :data:`END`); the
            root ``""`` holds the number's first token's alternatives.
        whole: the tokenizer writes whole numbers as single tokens (o200k): alternatives at
            the root are complete numbers and nothing is missing.
        notes: why some prefixes could not be completed (shown in the reason).
    """

    slot: ScoreSlot
    located: Located | None
    failure: SlotResult | None = None
    after: dict[str, dict[str, float]] = field(default_factory=dict)
    whole: bool = True
    notes: list[str] = field(default_factory=list)


def _failed(slot: ScoreSlot, why: Unreadable, source: str) -> SlotResult:
    return SlotResult(slot.name, slot.values, None, None, source, why.status, why.reason,
                      why.printed)


def read_tree(tokens: Sequence[TokenLogprob], slot: ScoreSlot) -> TreeReading:
    """Locate the slot's number in the tokens' text and record the observed digit tree.

    Args:
        tokens: ``choices[0].logprobs.content`` as :class:`TokenLogprob` (non-empty).
        slot: where the score is and its scale.
    """
    text = "".join(t.token for t in tokens)  # offsets must refer to the tokens
    found = locate(text, slot)
    if isinstance(found, Unreadable):
        return TreeReading(slot, None, _failed(slot, found, "logprobs"))
    offsets: list[int] = []
    pos = 0
    for t in tokens:
        offsets.append(pos)
        pos += len(t.token)
    first = max(i for i, off in enumerate(offsets) if off <= found.start)
    last = max(i for i, off in enumerate(offsets) if off < found.digits_end)
    head = tokens[first].token[: found.start - offsets[first]]
    reading = TreeReading(slot, found)
    # The root: the first token's alternatives. Its text before the digits (a space, "$")
    # is shared by the alternatives that also write a number ("$85" / "$90", " 85" / "85").
    root: dict[str, float] = {}
    for alt, p in _alternatives(tokens[first]).items():
        rest = (alt[len(head):] if alt.startswith(head) else alt).lstrip()
        split = _digit_token(rest)
        if split is not None:
            key = split[0] + (END if split[1] else "")
            root[key] = root.get(key, 0.0) + p
    reading.after[""] = root
    chosen_path = text[found.start: found.digits_end]
    # Whole-number tokens unless the number's first token is a single digit and no
    # alternative there writes several (o200k offers "85", "90" as alternatives).
    first_digits = _digit_token(tokens[first].token[len(head):].lstrip())
    reading.whole = any(len(k.removesuffix(END)) > 1 for k in root) or (
        first_digits is not None and len(first_digits[0]) > 1)
    # Along the chosen path: the alternatives after each of its tokens.
    prefix = first_digits[0] if first_digits is not None else ""
    for k in range(first + 1, last + 1):
        reading.after[prefix] = _continuation(tokens[k])
        step = _digit_token(tokens[k].token)
        prefix += step[0] if step is not None else ""
    last_split = _digit_token(tokens[last].token) if last > first else first_digits
    if prefix != chosen_path or (last_split is not None and last_split[1]):
        # The last digit token runs past the digits ("85$"): the number ends inside it.
        reading.after.setdefault(chosen_path, {END: 1.0})
    else:
        reading.after[prefix] = _continuation(tokens[last + 1] if last + 1 < len(tokens)
                                              else None)
    return reading


def _value_strings(slot: ScoreSlot) -> set[str]:
    return {str(v) for v in slot.values}


def _extends(prefix: str, strings: set[str]) -> bool:
    """Whether some scale value is longer than ``prefix`` and starts with it."""
    return any(len(s) > len(prefix) and s.startswith(prefix) for s in strings)


def walk(reading: TreeReading) -> tuple[dict[int, float], dict[str, float]]:
    """Probability of each value the tree reaches, and the unobserved prefixes.

    Returns:
        (value -> probability, not renormalised; prefix -> probability of the digit paths
        whose continuation was not observed).
    """
    strings = _value_strings(reading.slot)
    raw: dict[int, float] = {}
    missing: dict[str, float] = {}
    stack: list[tuple[str, float]] = [("", 1.0)]
    while stack:
        prefix, p = stack.pop()
        node = reading.after.get(prefix)
        if node is None:
            if reading.whole or not _extends(prefix, strings):
                # A whole-number token, or nothing on the scale continues it: it ends here.
                if prefix in strings:
                    raw[int(prefix)] = raw.get(int(prefix), 0.0) + p
            else:
                missing[prefix] = missing.get(prefix, 0.0) + p
            continue
        for token, q in node.items():
            if token.endswith(END):
                # The number ends here, or right after this token's digits ("5$").
                value = prefix + token.removesuffix(END)
                if value in strings:
                    raw[int(value)] = raw.get(int(value), 0.0) + p * q
            elif p * q > 1e-12 and (prefix + token in strings
                                    or _extends(prefix + token, strings)):
                stack.append((prefix + token, p * q))
            # else: a path that leaves the scale (out-of-scale mass, not captured)
    return raw, missing


def follow_up_prefixes(reading: TreeReading, min_p: float = FOLLOW_UP_MIN_P
                       ) -> dict[str, float]:
    """The unobserved digit prefixes worth a follow-up (probability at least ``min_p``)."""
    if reading.failure is not None or reading.whole:
        return {}
    _, missing = walk(reading)
    return {k: v for k, v in sorted(missing.items()) if v >= min_p}


def add_continuation(reading: TreeReading, prefix: str, node: Mapping[str, float]) -> None:
    """Record a follow-up's next-token distribution after ``prefix``.

    See :func:`continuation_from_result`.
    """
    reading.after[prefix] = dict(node)


def finish(reading: TreeReading, min_mass: float) -> SlotResult:
    """The slot's result: the renormalised distribution, its captured mass and the status."""
    if reading.failure is not None:
        return reading.failure
    assert reading.located is not None
    slot = reading.slot
    raw, missing = walk(reading)
    lost = sum(missing.values())
    probs, mass = normalise(raw, slot.values)
    printed = reading.located.printed
    result = SlotResult(slot.name, slot.values, probs, mass, "logprobs", "ok", None, printed)
    lost_note = ""
    if lost > 1e-6:
        lost_note = (f"{lost:.3f} of the probability is on digit paths whose continuation was "
                     f"not observed ({', '.join(repr(k + '…') for k in sorted(missing))})"
                     + (f": {'; '.join(reading.notes)}" if reading.notes else ""))
    if mass <= 0.0:
        result.probs, result.status = None, "parse_failure"
        result.reason = (f"no probability on {slot.low}-{slot.high} at the score position "
                         f"(printed {printed})" + (f"; {lost_note}" if lost_note else ""))
    elif lost > LOST_TOLERANCE:
        # Never pass the conditional distribution of the observed digits off as the whole.
        result.status = "low_mass"
        result.reason = f"captured mass {mass:.3f}; {lost_note}"
    elif mass < min_mass:
        result.status = "low_mass"
        result.reason = f"captured mass {mass:.3f} < {min_mass}" + (
            f"; {lost_note}" if lost_note else "")
    return result


def read_text(text: str, slot: ScoreSlot) -> SlotResult:
    """A slot read from text alone (the API returned no log-probabilities).

    ``text_only`` with the printed score, or the reason nothing could be read.
    """
    found = locate(text, slot)
    if isinstance(found, Unreadable):
        return _failed(slot, found, "text")
    return SlotResult(slot.name, slot.values, None, None, "text", "text_only",
                      "no log-probabilities returned although they were requested: the printed "
                      "score is kept, without a distribution", found.printed)


def read_slot(tokens: Sequence[TokenLogprob] | None, text: str, slot: ScoreSlot,
              min_mass: float,
              continuations: Mapping[str, Mapping[str, float]] | None = None) -> SlotResult:
    """Distribution of one score slot from an API response.

    Args:
        tokens: ``choices[0].logprobs.content`` as :class:`TokenLogprob`; None (or empty) when
            the API returned no log-probabilities: the result is then ``text_only``.
        text: the generated text (used only without tokens; the tokens are the ground truth).
        slot: where the score is and its scale.
        min_mass: below this captured mass the result is flagged ``low_mass``.
        continuations: next-token distributions after digit prefixes that follow-up requests
            observed (prefix -> {digit: p, :data:`END`: p}).
    """
    if not tokens:
        return read_text(text, slot)
    reading = read_tree(tokens, slot)
    for prefix, node in (continuations or {}).items():
        add_continuation(reading, prefix, node)
    return finish(reading, min_mass)


# --- continuation follow-ups ------------------------------------------------------------


def next_slot(name: str) -> ScoreSlot:
    """The slot of a continuation follow-up.

    It reads the first generated token, as "ends" (-1) or a digit 0-9.
    """
    return ScoreSlot(name=name, low=NEXT_SLOT_LOW, high=9, anchor="", forced_prefix="",
                     position="next")


def read_next(tokens: Sequence[TokenLogprob] | None, slot: ScoreSlot) -> SlotResult:
    """A continuation follow-up's answer: its first token's distribution.

    The distribution is over "the number ends" and the next digit (a multi-digit token's
    probability is reported as not captured).
    """
    if not tokens:
        return SlotResult(slot.name, slot.values, None, None, "none", "parse_failure",
                          "the continuation came back without log-probabilities")
    node = _continuation(tokens[0])
    raw: dict[int, float] = {}
    for k, p in node.items():
        digits = k.removesuffix(END)
        if k == END:
            raw[-1] = raw.get(-1, 0.0) + p
        elif len(digits) == 1:  # "0", or "0$": the digit (what follows it is asked again)
            raw[int(digits)] = raw.get(int(digits), 0.0) + p
    probs, mass = normalise(raw, slot.values)
    if mass <= 0:
        return SlotResult(slot.name, slot.values, None, None, "logprobs", "parse_failure",
                          "no probability at the continuation's first token")
    return SlotResult(slot.name, slot.values, probs, mass, "logprobs", "ok")


def continuation_from_result(result: SlotResult) -> dict[str, float] | None:
    """A follow-up's :func:`read_next` result back as a digit-tree node (None when it failed)."""
    if result.probs is None or result.mass is None or result.status != "ok":
        return None
    node: dict[str, float] = {}
    for v, p in zip(result.values, result.probs, strict=True):
        if p > 0:
            node[END if v == NEXT_SLOT_LOW else str(v)] = p * result.mass
    return node
