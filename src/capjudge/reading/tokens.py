r"""Reading a judge's score: where it is in the text, and its distribution from token logprobs.

Two steps, kept apart so every backend and every method reads the same way.

**Where the score is** (:func:`capjudge.reading.locate.locate`, text only): the answer in
canonical form, reasoning dropped, a careful reader's skips masked, then structure (JSON,
tables, ``\boxed{}``), the method's labelled format, labels, and phrases last; several
competing values, a range, a cut number are a ``parse_failure``, never a pick. The rules are
in :mod:`capjudge.reading`.

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

from capjudge.protocol import ScoreSlot, SlotResult, below_min_mass
from capjudge.reading.confirm import contract_fields
from capjudge.reading.locate import Located, Unreadable, locate
from capjudge.reading.points import read_points_slot
from capjudge.reading.view import normalise as normalise_text
from capjudge.scoring import normalise

END = "<end>"
"""Key of "the number ends here" in a digit-tree node."""

FOLLOW_UP_MIN_P = 1e-3
"""An unobserved digit prefix at least this likely is completed by a follow-up request."""

LOST_TOLERANCE = 0.01
"""Unobserved probability above this makes a slot ``low_mass`` whatever its captured mass."""

READING_RULES_VERSION = 38
"""Bumped whenever the rules that read a score from an answer change (cached raw answers are
re-read, never re-asked). 2: quotations of the candidate/references, restated rubrics and
hypothetical clauses are masked before the verdict is located; declines are found anywhere;
a label may stand on its own line; ``\\boxed{N}``. 3: the reader of :mod:`capjudge.reading`
(NFKC, reasoning dropped, structure first, competing values and cut numbers abstain). 7:
tool-call arguments as a JSON string, CSV tables, worked arithmetic and arrows, abbreviated
criterion labels, a pointed-at rubric level, star rows; a trailing "+", another criterion's
label and a bottom-tenth rating beside praise alone abstain; numbers spelled out in five
other languages where a value is due (corpora E-G). 8: cap3d's counts are read in the seam
(slots of kind ``points``), so an off-contract count gets its second channel; corpora H and
I: unsettled conditions, alternatives, differences, corrections by an amount, summary lines,
values the answer resolves onto the scale, quoted fragments, HTML references, draft/final
blocks, harmony channels, ``[[N]]`` and ``[RESULT] N``. 9: what follows a verdict
(:mod:`capjudge.reading.settled`: an alternative in its sentence abstains, a later value or
prose after a verdict the prompt asks to end with is off-contract), a choice left to the
reader, "Overall" for a criterion, small faults beside a bottom rating, the caption's own
counts, "4,0", "I would score it 91", a hypothetical aside. 10: two values side by side or a
later one in the method's delimiters for the one verdict, another scale the answer names, a
total line, examples of the format, spans of rubric levels. 11 (from the llama.cpp server's
channel): a later rating phrase with another value, a later verdict on a scale of 5 or 10, a
verdict reopened and cut, "out of 100." at a sentence's end, CJK scale notation. 12 (corpus L):
a value asked as a question, a rank, indifference between values ("equally comfortable with
3"), "scale 1-5", "eighty-ish"; a later rating phrase abstains even after a revision cue. 13
(corpus M): a computation whose steps do not give its stated result, a verdict put in a band of
ten that leaves it out ("$80$ ... in the high 70s"), a bottom-tenth rating beside praise and
small faults only, a bare number when the candidate is itself a number, a cap3d count the prose
states otherwise abstain; LaTeX spacing, ``\\text{}`` and display blocks, cap3d's "C. Score
(3)". 14 (corpus N): media the judge could not load is a decline, a value the judge calls a
placeholder is no rating, and VisCE²'s first number is never a count of things ("2 dogs"). 15
(corpus O): a value labelled preliminary or tentative with no final one abstains, and "a
length-adjusted score" names another measure, not a revision. 16 (corpus P): an answer of
numbers alone, several of them, abstains; a verdict after the judge quotes as "the caption" a
text that is neither the candidate nor a reference abstains; a caption the judge proposes
before its verdict makes the reading off-contract (a second channel must agree). 17-24
(corpora Q-X): each version's classes are in docs/guides/reading-scores.md; 24 (corpus X): a
verdict revised after it is given, what another caption would get, the previous caption's
score, breakdowns and weighted tables, cap3d counts restated after "Edit:". 25-27 (corpora Y,
Z). 28 (corpus AA): a value carried by a label naming another thing (a frame, a sentence, half
of the picture, the picture's sharpness, the visual context, the judge's own description, a
reference, the previous caption) is not the caption's, nor are blocks and JSON objects under
such names or under a counterfactual heading; a value the judge says stands in "so the
pipeline can continue" abstains. 29 (corpus AB): the asked-for format and what it says. 30
(corpus AC): a bound ("at least $70$", "≥ 4", "4 or more"), a decade ("the high $70$s") and a
value marked provisional ("$72$, pending the image") abstain; runs of HTML entities and
``\\uXXXX`` escapes are their characters, a superscript glued to a number is a footnote
marker; words or another script's numerals in the format's place are read off-contract; cap3d
counts given as bounds or with an open aside abstain, counts in other languages' words are
read. 31 (corpus AD, the other prompts): a measure of another thing ("Accuracy of the visual
context: 90") or a value scoped to one frame ("for that frame the score is $90$") is not the
candidate's; a block headed final over blocks per source is the verdict; a level name said of
a part of the text does not compete with the rating; a hypothetical after the rating's own
clause leaves the rating; a decline worked around with the references is none; cap3d's one
tally line stands in for missing labels; Roman numerals where a value is due; "so far" and
"at the most generous" leave a value open. 32 (corpus AF, judges trained to judge): off the
method's format a rating of 1-10 on 0-100 ("[RESULT] 3", "<score>4</score>") abstains unless
the answer puts the whole caption at the bottom; a number naming one of the responses
compared is a preference; another evaluation aspect's value ("Coherence: 4") rates that
aspect; a label's own range ("Fluency (1-3):") is its scale; penalties, field indices and
singular counts are no first number; a bottom rating its reasoning block praises abstains;
"C. Score: 2 1/2" is 2.5; cap3d's counts said in prose or in the precision formula are read
when settled (:mod:`capjudge.reading.counts_said`; off-contract). 33 (corpus AG, number-dense
pictures): the picture's numbers are no rating (a clock time "4:50", an identifier "jersey
number 23", a value the answer says the picture shows, a share "3 of the 4 prices", "a total
of 17.00", a label the picture owns: "the app's rating is 4/5"); "12,400" is one number; an
off-scale value the answer quotes in its prose does not compete; a CJK copula or topic
particle joins a label to its value ("最终得分为72分", "최종 점수는 72점"). 34 (corpus AH, how
people talk around a number): a value said around in other words is rejected or a bound ("anything
but $100$", "hardly a 90", "better than a 3", "tempted by a 4"); numbers in fixed phrases ("a
high five", "Ocean's 11", "one in a hundred") and in sentences marked as irony ("🙄", "/s",
"Oh, sure", ", obviously") are blanked (:mod:`capjudge.reading.figurative`); "so 70 it is"
settles a value; a cap3d count under a condition ("0 if that is a shadow") abstains. 35 (corpus
AI, many voices in one answer): what samples, reviewers, personas, agents, rounds before the
last, other judges and the user say is not the judge's verdict, the deciding voice's is ("Chair:
3", "majority: 70", "Reconciled:") (:mod:`capjudge.reading.voices`); a criterion's line with a
second value in the method's delimiters that nothing sets aside abstains ("my head says $60$, my
heart says $70$"); a condition right after a criterion's label is blanked ("Completeness: had it
named the stick, $90$; as written, $65$"); a later sentence that turns to another value ("On
the other hand, 65 if ...") leaves the verdict open; "C. Score 4" with no colon is a points
label, and a whole object's "Overall" count settles per-part ones. 36 (corpus AJ, what decoders
do to an answer): a judge that runs on past its verdict into another caption or the prompt's own
text is read up to there, and one that brings the candidate back to rate it again, or answers in
a second turn of its own, with another value abstains (:mod:`capjudge.reading.runaway`); digits
split by a space ("$8 5$", "C. Score: 5 6") abstain; a JSON key written twice with two values, or
a schema's template echoed ({"reasoning": "string", ...}), is no verdict, and a JSON object cut
at max_tokens keeps the fields a comma closed; a bare "Score: 90" line before "The final score
is $91$" with nothing revising it abstains; a cap3d tally before the lines that says otherwise
abstains, and a stated precision the counts do not give makes them off-contract (a count it
does give with its digits written once, "11" for 1, abstains); a degree word before a level's
name moves it ("perfectly fluent" is 4-5, "not concise" 1-3); "\u2581" is a space. 37 (corpus
AK, a deployment's own style or genre): a summary or TL;DR line that states another value on the
scale anywhere on it ("Summary: strong caption, 85/100.") abstains beside any reading; a sentence
that commits a rating ("I'd happily give it a four.") before an off-contract one that says
otherwise abstains; "my final score's sixty-eight" is a label; a bare "Verdict: 70" before, or
"Score: 90" after, the asked sentence abstains; a code variable changed after it is read
("score += 5") abstains; a code mapping from scale points to words is a restated rubric; a line
holding only a number word ("Seventy-four.") and an article before an opening one ("A four.")
read; schema.org's "ratingValue" is a verdict key; a column gap or dot leaders stand for a
label's colon; cap3d labels with the bare initial ("corrección (C)"), "C-SCORE", dot leaders,
the plural "Hallucinations: 3" and fields a full stop separates read. 38 (corpus AL, a context
that holds other items): an answer that says its verdict is another item's (this item's picture
never arrived and the judge went by the previous one, a score carried over, an object "already
evaluated", a pick among several numbered candidates) has no reading; a verdict on a text the
answer names as what it rates that is not the candidate ("Rating for 'A man holding a
surfboard': 5", "Generated caption: ..." echoed from another item) abstains; a few-shot
example the answer copies ("Example 1:", "Example B") is no verdict; a bare opening number with
another final one ("5" ... "Overall: 4/5") abstains; an end-of-turn token before a bare number
is a second turn; a batch's blocks headed by other quoted captions are other items'; another
item's score in brackets ("the last one (70)", "(previous: 64)"), a block headed as another
item's, progress counters ("[7/50]", "Item 7/50") and indexes ("#41") are blanked; "ignore my
last score" revises."""

NEXT_SLOT_LOW = -1
"""A continuation slot's values are ``-1`` ("the number ends") and the digits 0-9."""


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with its log-probability and the top alternatives at its position."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = field(default=())


# --- the digit tree -------------------------------------------------------------------------


def _alternatives(tok: TokenLogprob) -> dict[str, float]:
    """Token -> probability at one position (the chosen token is always a candidate).

    Alternatives that read the same once in plain form ("4" and the full-width "４",
    :func:`plain_tokens`) are one value: their probabilities add up (a dict of them kept the
    last one only, and lost the rest of the mass).
    """
    alts: dict[str, float] = {}
    for t, lp in tok.top:
        alts[t] = alts.get(t, 0.0) + math.exp(lp)
    if tok.token not in alts:
        alts[tok.token] = math.exp(tok.logprob)
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
        min_p: an unobserved prefix at least this likely is worth a follow-up (the backend's
            ``follow_up_min_p``; what is below it is lost mass, bounded by it per prefix).
    """

    slot: ScoreSlot
    located: Located | None
    failure: SlotResult | None = None
    after: dict[str, dict[str, float]] = field(default_factory=dict)
    whole: bool = True
    notes: list[str] = field(default_factory=list)
    min_p: float = FOLLOW_UP_MIN_P


def _failed(slot: ScoreSlot, why: Unreadable, source: str) -> SlotResult:
    return SlotResult(slot.name, slot.values, None, None, source, why.status, why.reason,
                      why.printed)


def plain_tokens(tokens: Sequence[TokenLogprob]) -> list[TokenLogprob]:
    """The tokens with full-width digits and look-alikes in plain form (NFKC, per token).

    A judge that writes "８５" has written 85: its alternatives ("９０") are read as numbers.
    """
    def plain(text: str, before: str = "") -> str:
        if text.isascii():
            return text
        # Normalised after what precedes it, so a character read by its context (a
        # superscript glued to a number is a footnote marker, not a digit) reads as in the text.
        normal, index = normalise_text(before + text)
        return "".join(c for c, i in zip(normal, index, strict=False) if i >= len(before))

    out, written = [], ""  # (the tokens as the judge wrote them: the context of the next)
    for t in tokens:
        if t.token.isascii() and all(a.isascii() for a, _ in t.top):
            out.append(t)
        else:
            before = written[-8:]
            out.append(TokenLogprob(plain(t.token, before), t.logprob,
                                    tuple((plain(a, before), lp) for a, lp in t.top)))
        written += t.token
    return out


def read_tree(tokens: Sequence[TokenLogprob], slot: ScoreSlot, *, truncated: bool = False
              ) -> TreeReading:
    """Locate the slot's number in the tokens' text and record the observed digit tree.

    Args:
        tokens: ``choices[0].logprobs.content`` as :class:`TokenLogprob` (non-empty).
        slot: where the score is and its scale.
        truncated: the answer was cut at ``max_tokens`` (a number that ends the answer may
            be unfinished).
    """
    tokens = plain_tokens(tokens)
    text = "".join(t.token for t in tokens)  # offsets must refer to the tokens
    found = locate(text, slot, truncated=truncated)
    if isinstance(found, Unreadable):
        return TreeReading(slot, None, _failed(slot, found, "logprobs"))
    if found.kind != "digits":
        # "seventy-five", "&#55;&#48;", "IV": no digit token carries the scale's distribution; the
        # value stands.
        written = {"escaped": "as escapes", "roman": "as a Roman numeral"}.get(found.kind,
                                                                            "in words")
        return TreeReading(slot, found, SlotResult(
            slot.name, slot.values, None, None, "text", "text_only",
            f"the verdict is written {written} ({found.printed}, {found.how}): no "
            "distribution over the scale; the value is kept", found.printed,
            **contract_fields(found)))
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


def follow_up_prefixes(reading: TreeReading, min_p: float | None = None) -> dict[str, float]:
    """The unobserved digit prefixes worth a follow-up.

    Those with probability at least ``min_p`` (default: the reading's own
    :attr:`TreeReading.min_p`).
    """
    if reading.failure is not None or reading.whole:
        return {}
    _, missing = walk(reading)
    threshold = reading.min_p if min_p is None else min_p
    return {k: v for k, v in sorted(missing.items()) if v >= threshold}


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
    result = SlotResult(slot.name, slot.values, probs, mass, "logprobs", "ok", None, printed,
                        **contract_fields(reading.located))
    lost_note = ""
    if lost > 1e-6:
        skipped = reading.min_p > FOLLOW_UP_MIN_P and all(
            v < reading.min_p for v in missing.values())
        lost_note = (f"{lost:.3f} of the probability is on digit paths whose continuation was "
                     f"not observed ({', '.join(repr(k + '…') for k in sorted(missing))})"
                     + (f": {'; '.join(reading.notes)}" if reading.notes else "")
                     + (f" (each below follow_up_min_p {reading.min_p:g}, not asked)"
                        if skipped else ""))
    if mass <= 0.0:
        result.probs, result.status = None, "parse_failure"
        result.reason = (f"no probability on {slot.low}-{slot.high} at the score position "
                         f"(printed {printed})" + (f"; {lost_note}" if lost_note else ""))
    elif lost > LOST_TOLERANCE:
        # Never pass the conditional distribution of the observed digits off as the whole.
        result.status = "low_mass"
        result.reason = f"captured mass {mass:.3f}; {lost_note}"
    elif below_min_mass(mass, min_mass):
        result.status = "low_mass"
        result.reason = f"captured mass {mass:.3f} < {min_mass}" + (
            f"; {lost_note}" if lost_note else "")
    return result


def read_text(text: str, slot: ScoreSlot, *, truncated: bool = False) -> SlotResult:
    """A slot read from text alone (the API returned no log-probabilities).

    ``text_only`` with the printed score, or the reason nothing could be read
    (``truncated``: the answer was cut at ``max_tokens``).
    """
    if slot.kind == "points":
        return read_points_slot(text, slot, truncated=truncated)
    found = locate(text, slot, truncated=truncated)
    if isinstance(found, Unreadable):
        return _failed(slot, found, "text")
    return SlotResult(slot.name, slot.values, None, None, "text", "text_only",
                      "no log-probabilities returned although they were requested: the printed "
                      "score is kept, without a distribution", found.printed,
                      **contract_fields(found))


def abstention(text: str, slot: ScoreSlot) -> SlotResult | None:
    """The reader's abstention on ``text`` for a reason, as the slot's result, or None.

    None when a value was read or when the answer wrote no number (a forced anchor may read
    that one). A backend that teacher-forces the slot's anchor keeps an abstention as it is:
    one channel alone never turns "9 … excellent" (9, or 90?) into a value.
    """
    found = locate(text, slot)
    if isinstance(found, Unreadable) and not found.unwritten:
        return _failed(slot, found, "text")
    return None


def reasoning_only(slot: ScoreSlot, truncated: bool) -> SlotResult:
    """A slot of an answer whose content is empty and whose reasoning field is not.

    The reasoning (``reasoning_content``) is never the answer: the verdict was never written.
    """
    why = ("reasoning cut off: the answer holds only its reasoning (reasoning_content)"
           + (", cut at max_tokens before any verdict" if truncated else
              ", and no verdict after it"))
    return SlotResult(slot.name, slot.values, None, None, "text", "parse_failure", why)


def read_slot(tokens: Sequence[TokenLogprob] | None, text: str, slot: ScoreSlot,
              min_mass: float,
              continuations: Mapping[str, Mapping[str, float]] | None = None, *,
              truncated: bool = False) -> SlotResult:
    """Distribution of one score slot from an API response.

    Args:
        tokens: ``choices[0].logprobs.content`` as :class:`TokenLogprob`; None (or empty) when
            the API returned no log-probabilities: the result is then ``text_only``.
        text: the generated text (used only without tokens; the tokens are the ground truth).
        slot: where the score is and its scale.
        min_mass: below this captured mass the result is flagged ``low_mass``.
        continuations: next-token distributions after digit prefixes that follow-up requests
            observed (prefix -> {digit: p, :data:`END`: p}).
        truncated: the answer was cut at ``max_tokens`` (``finish_reason: length``).
    """
    if not tokens:
        return read_text(text, slot, truncated=truncated)
    reading = read_tree(tokens, slot, truncated=truncated)
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
