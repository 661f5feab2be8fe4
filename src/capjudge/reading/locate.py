r"""Where a slot's verdict is written in an answer: structure first, phrases last.

:func:`locate` reads an answer as a careful person does, in this order:

1. **The canonical view** (:mod:`capjudge.reading.view`): NFKC, invisible characters removed,
   reasoning blocks dropped. An answer that ends inside its reasoning has no verdict
   ("reasoning cut off").
2. **What a reader skips** (:mod:`capjudge.reading.masking`): quotations of the candidate and
   references, restated rubrics and scales, hypotheticals, rejected alternatives ("I would
   not rate it 5"), bounds ("at least 80"). A judge that declines has no verdict.
3. **Structure** (:mod:`capjudge.reading.structure`): a JSON key, a table row or column, a
   ``\boxed{}`` that names the slot (its own name, a translation, or for a slot that is the
   answer's only verdict "score", "rating" ...: :mod:`capjudge.reading.vocabulary`).
4. **Labelled lines**: the method's own format ("The final score is $N$", "Accuracy: $N$"), in
   other languages too ("最终得分：$73$", "Puntuación final: $72$"); then a label and its value
   ("**Score:** 58", "Final verdict — 57", "Correctness: 4", "评分：4分"); for a slot asked
   first, the number the answer opens with (the prompts ask for the score first).
5. **Phrases**, only when nothing above names the slot: the method's anchor ("$85$"), a rating
   phrase ("I'd give it a four", "4 out of 5"), and for slots read at the answer's first
   integer (VisCE² §3, HarmonicEval) the first number once the scale's own phrasings are
   blanked.

A number is read whole (digits, English words, CJK numerals, a mixed number "2 1/2"): a
decimal on a whole-number scale, a range ("70-80", "between 60 and 70"), a hedge ("3 or 4"), a
fraction on another scale ("8/10" on 0-100), a value outside the scale are never read as a
score. **Several different values** for the slot at the same level, with nothing to prefer one
(one marked final, or a later one introduced as a revision), are a ``parse_failure`` quoting
them, never a pick. A number that runs to the end of an answer cut at ``max_tokens`` ("$8"), or
that opens its anchor and is never closed, may be unfinished: a ``parse_failure``.

Every reading says how it was found (:attr:`Located.how`). The finders of each kind of place
are in :mod:`capjudge.reading.finders`; this module decides among what they find.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from capjudge.protocol import ScoreSlot
from capjudge.reading.candidates import (
    Candidate,
    Located,
    Unreadable,
    printed_value,
)
from capjudge.reading.contract import (
    LEFT_BETWEEN,
    LOWERED,
    MOVED,
    REVISION,
    UNDECIDED,
    WITHDRAWN,
    bottom_off_contract,
    checklist,
    doubted,
    echoed_number,
    faint_praise,
    final_after_draft,
    foreign_caption,
    foreign_heading,
    has_number,
    judged_reference,
    labelled_target,
    later_rating,
    off_contract,
    opens,
    other_criterion,
    other_target,
    per_source,
    preference,
    rates_another,
    reopened,
    revised_later,
    revised_opening,
    sentence_of,
    sentence_start,
    stated_by_candidate,
    stated_twice,
    under_draft_heading,
)
from capjudge.reading.elsewhere import find_elsewhere
from capjudge.reading.finders import (
    REFUSAL,
    SENTENCE_END,
    first_integer,
    format_candidates,
    label_candidates,
    list_item,
    opening_candidates,
    own_scale_candidates,
    phrase_candidates,
    rating_phrases,
    standalone_candidates,
    star_candidates,
    structured_candidates,
)
from capjudge.reading.levels import (
    glossed_level,
    level_candidates,
    position_candidates,
    qualified_range,
    said_in_prose,
)
from capjudge.reading.masking import find_decline, mask_view
from capjudge.reading.numbers import (
    Number,
    number_at,
    numbers_in,
    split_digits,
)
from capjudge.reading.runaway import rated_again_at
from capjudge.reading.scale import (
    clean_text,
    denominator,
    disagreeing_units,
    foreign_scale,
    foreign_top,
    resolved,
)
from capjudge.reading.settled import (
    alternative_after,
    bare_numbers,
    doubtful,
    inverted_scale,
    not_a_verdict,
    own_answer,
    preferred_after,
)
from capjudge.reading.structure import template_spans
from capjudge.reading.view import (
    AnswerView,
    answer_view,
    as_viewed,
    line_before,
    normalise,
    own_next_turn,
    start_of_line,
    turn_ended,
)
from capjudge.reading.vocabulary import (
    CRITERIA,
    GENERIC,
    criteria_named,
    is_generic,
    matches,
)

# -- the decision ------------------------------------------------------------------------------

_FOREIGN = "the score is given on another scale"


def _pick(cands: Sequence[Candidate], slot: ScoreSlot) -> Candidate:
    """Of candidates that agree, the one whose place the slot reads (first or last)."""
    return cands[0] if slot.position == "first" else cands[-1]


def _quote(cands: Sequence[Candidate]) -> str:
    return "; ".join(f"{c.number.written.strip()!r} ({c.how})" for c in cands[:4])


def decide(cands: Sequence[Candidate], text: str, slot: ScoreSlot
           ) -> Candidate | Unreadable | None:
    """The slot's reading from its candidates, an abstention, or None (no candidate).

    The highest rank with a usable candidate decides. At that rank, one value is the reading;
    several values are one only when exactly one is marked final or the last is introduced
    as a revision; otherwise nobody can tell. A range, hedge or decimal at the deciding rank
    vetoes; a number on another scale ("7/10") yields to the same answer's restatement on the
    slot's own scale ("70 out of 100").
    """
    if not cands:
        return None
    by_start: dict[int, Candidate] = {}
    for c in cands:
        if c.number.start not in by_start or c.rank > by_start[c.number.start].rank:
            by_start[c.number.start] = c
    ordered = resolved(sorted(by_start.values(), key=lambda c: c.number.start), text, slot)
    top = max(c.rank for c in ordered)
    level = [c for c in ordered if c.rank == top]
    valid = [c for c in level if c.problem is None]
    vetoes = [c for c in level if c.problem and not c.problem.startswith(_FOREIGN)]
    if not valid:
        lower = [c for c in ordered if c.rank < top and c.problem is None and c.own_scale]
        if not vetoes and lower and len({c.number.value for c in lower}) == 1:
            return _pick(lower, slot)
        worst = vetoes or level
        return Unreadable("parse_failure", str(_pick(worst, slot).problem),
                          printed_value(_pick(worst, slot)))
    if vetoes:
        return Unreadable("parse_failure", f"competing readings of {slot.name}: "
                          f"{_quote(valid + vetoes)}; {vetoes[0].problem}")
    stated = [c for c in ordered if c.problem is None]
    if len({c.number.value for c in valid}) == 1:
        pick = _pick(valid, slot)
        other = _unmarked_other(stated, pick, text) if pick.final else None
        return pick if other is None else _two_statements(other, pick, slot)
    finals = [c for c in valid if c.final]
    if finals and len(finals) < len(valid) and len({c.number.value for c in finals}) == 1:
        pick = _pick(finals, slot)
        other = _unmarked_other(stated, pick, text)
        return pick if other is None else _two_statements(other, pick, slot)
    last, before = valid[-1], valid[-2]
    between = text[before.number.end: last.number.start]
    if (REVISION.search(between) or final_after_draft(text, before.number.start, between)) \
            and all(c.number.value == last.number.value
                    for c in valid if c.number.start > before.number.start):
        return last
    return Unreadable("parse_failure", f"{len({c.number.value for c in valid})} different "
                      f"values for {slot.name} and nothing says which is the verdict: "
                      f"{_quote(valid)}")


# A verdict stated on a line of its own under a bare verdict label: "Score: 90", "**Rating:**"
# (not a log's "score=70": a key a pipeline step printed; nor a label whose head masking
# blanked, "Sample 1 score: 70", which leaves a run of spaces before it).
_BARE_LABEL = re.compile(r"^[>*_#-]{0,4}[ \t]{0,2}[*_]{0,2}(?:score|rating|verdict|grade)[ \t*_]*"
                         r"(?:[:\-\u2013\u2014]|\.{3,})?[ \t*_$`]*$", re.I)


def _unmarked_other(stated: Sequence[Candidate], final: Candidate, text: str
                    ) -> Candidate | None:
    """A different verdict stated under a bare verdict label, unmarked beside the final one.

    "Score: 90 ... The final score is $91$" (a repetition penalty that steered the model off
    its own digits), "**Rating:** 85 ... $80$", "Verdict: 70 ... $75$": two statements of the
    verdict under bare verdict labels, and "final" in the asked sentence does not say the
    first was a draft. A revision between ("On reflection, ..."), a final block's heading
    between ("Final:") or a draft's heading above the first ("Draft:") settles it; a value
    under any other label (a sample's, a part's, a weighted aspect's) is left to the other
    rules (corpus AJ). A number the answer opens with is such a statement too: "5" then
    "Overall: 4/5", "85" then "The final score is $80$" (HarmonicEval and VisCE² ask for the
    score first, so the opening is their own format). After the final statement, a bare
    "Score: 90" line is a second verdict whatever stands between: the asked sentence ends the
    answer, and nothing says which of the two the judge meant (a revision after it would
    take back the "final" one). Of several, the last is quoted.
    """
    found = None
    for c in stated:
        if c.number.value == final.number.value or not (
                _BARE_LABEL.match(line_before(text, c.number.start)) or _written_first(text, c)):
            continue
        between = text[c.number.end: final.number.start]
        if c.number.start > final.number.start or (
                not REVISION.search(between) and not _FINAL_BLOCK.search(between)
                and not under_draft_heading(text, c.number.start)):
            found = c
    return found


def _written_first(text: str, c: Candidate) -> bool:
    """``c`` is a bare number the answer opens with, alone or before its prose ("85", then)."""
    return c.source in ("opening", "standalone") and not text[:c.number.start].strip(
        " \t\n*_`#>")


# A block headed final between the two: "Final:", "## Final verdict", "**Final answer**".
_FINAL_BLOCK = re.compile(r"^[ \t#>*_-]*final\b[^\n\d$]{0,24}\n", re.I | re.M)


def _two_statements(other: Candidate, final: Candidate, slot: ScoreSlot) -> Unreadable:
    """The abstention for :func:`_unmarked_other`."""
    pair = sorted([other, final], key=lambda c: c.number.start)
    return Unreadable("parse_failure", f"2 different values for {slot.name} and nothing says "
                      f"which is the verdict: {_quote(pair)}",
                      printed_value(final))


def _decide_uncut(cands: Sequence[Candidate], text: str, slot: ScoreSlot, truncated: bool,
                  written: str) -> Candidate | Unreadable | None:
    """:func:`decide`, leaving out a number that ends a cut answer when others stand.

    A model looping "Rating: 60" until ``max_tokens`` ends on "Rating: 6": the cut line is
    no verdict of its own. A cut number that is the only candidate is still unreadable.
    """
    whole = [c for c in cands if _cut(text, c.number, slot, truncated) is None]
    cands = whole if whole and len(whole) < len(cands) else cands
    # A block under a heading for another caption ("A fuller caption ... would score:") is
    # not the candidate's; when every block is, the veto says so. (Headings are read as
    # written: masking blanks "Reference 1 would score:" as hypothetical.)
    own = [c for c in cands if foreign_heading(written, c.number.start) is None]
    cands = own if own and len(own) < len(cands) else cands
    # A value off the scale that the answer quotes from the picture in its prose (the display
    # "FINAL SCORE $12,400") is the picture's text, not a verdict that competes (corpus AG).
    mine = [c for c in cands if c.problem is None or not _quoted_in_prose(text, c.number)]
    return decide(mine if mine and len(mine) < len(cands) else cands, text, slot)


# Quotation marks opened after a word of prose ('the display "FINAL SCORE $12,400"'), not a
# structure's string (after ':', '{', '[' or ',').
_PROSE_QUOTE = re.compile(r"(?<=[^\W\d_] )(?:\"[^\"\n]{1,120}\"|\u201c[^\u201d\n]{1,120}\u201d)")


def _quoted_in_prose(text: str, n: Number) -> bool:
    """Whether ``n`` stands inside a quotation the answer makes in its prose."""
    line = start_of_line(text, n.start)
    end = text.find("\n", n.end)
    return any(q.start() < n.start and n.end < q.end()
               for q in _PROSE_QUOTE.finditer(text, line, end if end >= 0 else len(text)))


def _cut(text: str, n: Number, slot: ScoreSlot, truncated: bool) -> str | None:
    """Why the number may be unfinished (it ends the answer, cut or unclosed), or None."""
    rest = text[n.end:]
    if rest.strip(" \t\n*_`") != "":
        return None
    head = text[:n.start].rstrip(" *_`")
    if slot.anchor and head.endswith(slot.anchor):
        return (f"the answer ends at {slot.anchor}{n.written} with no closing "
                f"{slot.anchor!r}: the number may be unfinished (cut answer)")
    if truncated and "\n" not in rest:  # (a line break after it: the number is finished)
        return (f"the answer was cut at max_tokens right after {n.written!r}: the number may "
                "be unfinished")
    return None


def locate(text: str, slot: ScoreSlot, *, truncated: bool = False) -> Located | Unreadable:
    """Where ``slot``'s verdict is written in ``text`` (the module doc gives the order).

    Args:
        text: the judge's answer (its ``content``; a reasoning field is never passed here).
        slot: the score slot (names, anchor, position, scale, the texts it may quote).
        truncated: the answer was cut at ``max_tokens`` (``finish_reason: length``).

    Returns:
        The located number with offsets in ``text``, or why there is none.
    """
    if (turn := own_next_turn(text)) is not None:
        return _two_turns(text, turn, slot, truncated)
    # (A cut after a chat-template token cut an invented turn: the answer before it is whole.)
    return _locate_turn(text, slot, truncated and not turn_ended(text))


def _locate_turn(text: str, slot: ScoreSlot, truncated: bool) -> Located | Unreadable:
    """:func:`locate` in one turn of the judge's."""
    view = answer_view(text)
    if view.reasoning_cut:
        return Unreadable("parse_failure", "reasoning cut off: the answer ended inside its "
                          "reasoning block, before any verdict")
    if view.blank:
        return Unreadable("parse_failure", "no answer after the reasoning block"
                          if view.had_reasoning else "the answer is empty", unwritten=True)
    masked = mask_view(view.text, slot.quotes)
    declined = find_decline(masked, view.text)
    if declined is not None:
        # Wherever it appears: a judge that says it cannot see the picture has not judged it,
        # whatever number it writes (or quotes) elsewhere.
        return Unreadable("parse_failure", f"no score: the judge declined ({declined!r})")
    if (elsewhere := find_elsewhere(masked, view.text)) is not None:
        return Unreadable("parse_failure", f"no score for this item: the judge says its verdict "
                          f"is another item's ({elsewhere!r})")
    cleaned = clean_text(masked, slot)
    ticked = checklist(view.text, slot)
    if isinstance(ticked, Unreadable):
        return ticked
    if ticked is not None:
        return replace(_located(view, ticked), off_contract=f"read from a ticked checklist "
                       f"line ({ticked.how}), not the method's format")
    formats = format_candidates(cleaned, slot)  # also what the contract counts
    own_scale = own_scale_candidates(masked, slot)  # also a summary line's second verdict
    chosen = _decide_uncut(structured_candidates(view.text, masked, slot) + formats
                    + label_candidates(cleaned, slot) + opening_candidates(cleaned, slot)
                    + standalone_candidates(cleaned, slot) + star_candidates(cleaned, slot)
                    + own_scale, cleaned, slot, truncated, view.text)
    if chosen is None:
        chosen = _decide_uncut(phrase_candidates(cleaned, slot), cleaned, slot, truncated,
                               view.text)
    levels = level_candidates(cleaned, slot)
    if chosen is None:
        # (A level's word said of the text in prose, "The text is concise and to the point.",
        # is no reading of its own: "Concise" is 4, "Optimally concise" 5.)
        named = [c for c in levels if not said_in_prose(cleaned, c.number)]
        chosen = decide(named or position_candidates(cleaned, slot), cleaned, slot)
    if chosen is None:
        return _nothing(masked, cleaned, slot, truncated, view.text)
    if isinstance(chosen, Unreadable):
        return chosen
    if (cut := _cut(masked, chosen.number, slot, truncated) or _split(cleaned, chosen, slot)):
        return Unreadable("parse_failure", cut, printed_value(chosen))
    if (later := revised_later(chosen, phrases := rating_phrases(cleaned, slot), cleaned,
                               slot)) is not None:
        chosen = later  # "$60$ ... On reflection, 68 is the fairer score"
    if (competing := _competing(chosen, cleaned, masked, own_scale, phrases, slot)) is not None:
        return competing
    if slot.position == "first" and (chosen.source in ("opening", "label")
                                     or opens(cleaned, chosen)):
        revised = revised_opening(cleaned, chosen, slot)
        if isinstance(revised, Unreadable):
            return revised
        if revised is not None:
            chosen = revised
        elif (disagree := _level_disagrees(chosen, levels, cleaned, slot)) is not None:
            return disagree
    if (vetoed := _vetoed(chosen, cleaned, slot, view.text)
            or reopened(chosen, cleaned, truncated)):
        return vetoed
    if (not_it := _praised_in_reasoning(view, chosen, slot)
            or _changed_by_code(chosen, cleaned)) is not None:
        return Unreadable("parse_failure", not_it, printed_value(chosen))
    if (open_ := _not_on_the_candidate(chosen, cleaned, view.text, slot)
            or _rated_again(view.text, cleaned, chosen, slot)) is not None:
        return Unreadable("parse_failure", open_, printed_value(chosen))
    after = cleaned[chosen.number.end:]
    why_off = off_contract(chosen, cleaned, slot, after, len({c.number.start for c in formats})
                           ) or doubtful(chosen, cleaned, slot, view.text)
    if why_off is not None and (low := _bottom_outside_format(chosen, cleaned, masked, slot)
                                or _committed_before(chosen, phrases, cleaned, slot)):
        return Unreadable("parse_failure", f"{low} ({why_off})", printed_value(chosen))
    return replace(_located(view, chosen), off_contract=why_off)


def _split(cleaned: str, chosen: Candidate, slot: ScoreSlot) -> str | None:
    """Why the verdict's digits are a pair a space split ("$8 5$"), or None.

    Not where the pair joined is off the slot's scale and each part on it ("5 4" on 1-5): two
    ratings, which the other rules weigh.
    """
    if chosen.number.kind != "digits":
        return None
    split = split_digits(cleaned, chosen.number.start, slot.high if slot.kind == "score" else None)
    return None if split is None else f"the verdict's {split}"


def _two_turns(text: str, turn: tuple[int, int], slot: ScoreSlot, truncated: bool
               ) -> Located | Unreadable:
    """The reading of an answer the judge gave twice, in two turns of its own.

    Each turn is read alone. Where both give a value they must agree ("$80$" then, "looking
    again", "$60$": the judge answered the same request twice, and which answer stands is
    nobody's guess: its first turn ended, its second was written past its end); where one
    gives none, the other's stands.
    """
    first = locate(text[: turn[0]], slot)
    second = locate(text[turn[1]:], slot, truncated=truncated)
    if isinstance(second, Located):
        second = replace(second, start=second.start + turn[1],
                         digits_end=second.digits_end + turn[1])
    # (A second turn read as unsure still wrote its value: "4 ...<|im_end|>\n2\nOn second
    # look ..."; a first turn that is unsure, or another caption's, gives way to the second.)
    values = [first.value if isinstance(first, Located) else None,
              second.value if isinstance(second, Located) else second.printed]
    if None not in values and values[0] != values[1]:
        return Unreadable("parse_failure", f"the judge answered twice, in two turns of its own "
                          f"({values[0]:g}, then {values[1]:g}): nothing says which stands")
    return first if isinstance(first, Located) or not isinstance(second, Located) else second


def _rated_again(written: str, cleaned: str, chosen: Candidate, slot: ScoreSlot) -> str | None:
    """Why a verdict the answer gives the same caption again, differently, leaves it open.

    A base model that restated the prompt after its verdict and answered it again (see
    :func:`~capjudge.reading.runaway.rated_again_at`): the last value on the slot's scale
    after the restated caption is its second verdict.
    """
    again = rated_again_at(written, as_viewed(slot.quotes[0]) if slot.quotes else "")
    if again is None or again <= chosen.number.end:
        return None
    later = [n for n in numbers_in(cleaned, again) if slot.low <= n.value <= slot.high]
    if not later or later[-1].value == chosen.number.value:
        return None
    return (f"after its verdict {chosen.number.written.strip()!r} the answer rates the same "
            f"caption again, {later[-1].written.strip()!r}: nothing says which stands")


def _not_on_the_candidate(chosen: Candidate, cleaned: str, written: str, slot: ScoreSlot
                          ) -> str | None:
    """Why the reading is not the judge's one verdict on the candidate, or None.

    An alternative left open after it, a number that is no verdict, the judge's own answer to
    the question, numbers alone; a verdict on a caption it quotes or on a reference, the score
    the candidate states, the candidate's copy going on; a value it prefers afterwards, a
    scale it turns upside down.
    """
    return (alternative_after(chosen, cleaned, slot) or not_a_verdict(chosen, cleaned)
            or own_answer(chosen, cleaned, slot) or bare_numbers(cleaned)
            or foreign_caption(written, chosen, slot)
            or stated_by_candidate(chosen.number.value, chosen.number.written.strip(), slot)
            or echoed_number(written, chosen, slot)
            or judged_reference(written, chosen, slot)
            or preferred_after(chosen, written, slot)
            or inverted_scale(chosen, written, slot))


def _competing(chosen: Candidate, cleaned: str, masked: str, own_scale: Sequence[Candidate],
               phrases: Sequence[Candidate], slot: ScoreSlot) -> Unreadable | None:
    """Another verdict, or another scale, the answer states beside the reading.

    A bare opening number, a summary or total line, other things rated by name; a scale such
    as "a 5-point scale" that the value fits.
    """
    if (conflict := _conflict(chosen, cleaned, slot) or (
            stated_twice(chosen, own_scale, masked) if is_generic(slot) else None)) is not None:
        return Unreadable("parse_failure", conflict, printed_value(chosen))
    if (later := later_rating(chosen, phrases, cleaned, slot)) is not None:
        return Unreadable("parse_failure", f"2 different values for {slot.name} and nothing "
                          f"says which is the verdict: {_quote([chosen, later])}",
                          printed_value(chosen))
    if (units := disagreeing_units(cleaned, chosen.number, slot)) is not None:
        return Unreadable("parse_failure", units, printed_value(chosen))
    if (gloss := glossed_level(cleaned, chosen.number.end, slot)) is not None and \
            gloss[1] != chosen.number.value:
        return Unreadable("parse_failure", f"the rating {chosen.number.written.strip()!r} is "
                          f"glossed with the level {gloss[0]!r}, which is {gloss[1]}",
                          printed_value(chosen))
    if (open_ := later_rating(chosen, phrases, cleaned, slot, unsettled=True)) is not None:
        return Unreadable("parse_failure", f"after the verdict {chosen.number.written.strip()!r} "
                          f"{open_.how} leaves it open: {open_.problem}", printed_value(chosen))
    if (not slot.label and not slot.anchor and chosen.rank < 2) or (
            not chosen.own_scale and chosen.number.value <= foreign_top(cleaned, slot)):
        # (A labelled verdict only when its value fits the other scale: "Scoring on a
        # 5-point scale: … Accuracy: $4$" is 4 of 5, not 4 of 100.)
        foreign = foreign_scale(cleaned, slot)
        if foreign:
            return Unreadable("parse_failure", foreign)
    return None


def _vetoed(chosen: Candidate, cleaned: str, slot: ScoreSlot, written: str
            ) -> Unreadable | None:
    """Why the whole answer says the reading is not the verdict after all, or None.

    It restates it on the scale, scores something or some criterion else, praises a bottom
    rating, or withdraws it with no other.
    """
    if (other := _restated(chosen, cleaned, slot) or other_target(cleaned, chosen)
            or per_source(cleaned, chosen) or preference(cleaned, chosen)
            or labelled_target(cleaned, chosen, slot) or other_criterion(cleaned, chosen, slot)
            or faint_praise(cleaned, chosen, slot)) is not None:
        return Unreadable("parse_failure", other, printed_value(chosen))
    after = cleaned[chosen.number.end:]
    if (open_ := UNDECIDED.search(cleaned, sentence_start(cleaned, chosen.number.start))
            or LEFT_BETWEEN.search(cleaned, chosen.number.end)):
        return Unreadable("parse_failure", f"the answer leaves the verdict open "
                          f"({open_.group(0).strip()!r})", printed_value(chosen))
    if (gone := WITHDRAWN.search(after) or doubted(after, chosen)
            or _lowered(after, slot)) is not None and not has_number(after[gone.end():]):
        return Unreadable("parse_failure", f"the judge withdrew its verdict "
                          f"{chosen.number.written.strip()!r} ({gone.group(0).strip()!r}) and "
                          "gave no other", printed_value(chosen))
    for moved in MOVED.finditer(written, chosen.number.end):
        if float(moved.group("n")) != chosen.number.value and slot.low <= int(
                moved.group("n")) <= slot.high:
            return Unreadable("parse_failure", f"after its verdict "
                              f"{chosen.number.written.strip()!r} the answer moves it to "
                              f"{moved.group('n')} only as a possibility "
                              f"({' '.join(moved.group(0).split())!r})", printed_value(chosen))
    return None


# A variable the code changes after its value is read: "score = 80" ... "score += 5".
_ASSIGNED = re.compile(r"(?:^|[\s;(])(?P<name>[A-Za-z_]\w*)[ \t]*=[ \t]*$", re.M)


def _changed_by_code(chosen: Candidate, text: str) -> str | None:
    """Why a value assigned in code is not the code's last word on it, or None.

    "fluency = 5" then "fluency -= 1  # missing article": the value the answer ends with is
    worked out, not written; the reader reads what is written, so it does not stand.
    """
    if chosen.source != "label":
        return None
    head = _ASSIGNED.search(text, start_of_line(text, chosen.number.start), chosen.number.start)
    if head is None:
        return None
    name = re.escape(head.group("name"))
    later = re.search(rf"(?<![\w.]){name}[ \t]*(?:[-+*/%]|//|\*\*)=(?!=)[^\n]*", text[
        chosen.number.end:])
    if later is None:
        return None
    return (f"the code changes {head.group('name')!r} after assigning it "
            f"{chosen.number.written.strip()!r} ({later.group(0).strip()[:40]!r}): the value "
            "it ends with is worked out, not written")


# A sentence of the judge's own that commits a rating and ends there: "I'd happily give it a
# four.", "I rate it 70!" (not "as a photograph I'd give it 40 - but ...", "it seems to deserve
# a 90: ...", "Does it deserve 90?", nor a rating under a condition or a first impression).
_COMMITTING = re.compile(r"(?:^|(?<=[.!?\n]))[ \t*_>-]*(?:[Ss]o[, \t]+)?I(?:['\u2019]d|['\u2019]ll|"
                         r"[ \t]+(?:would|will))?(?:[ \t]+[a-z]+ly)?[ \t]+(?:give|rate|score|"
                         r"award|grade)[ \t]+(?:it|this(?:[ \t]+(?:caption|one))?)[ \t]+"
                         r"(?:an?[ \t]+)?$")
_SENTENCE_ENDS = re.compile(r"[ \t*_]*(?:(?:/|out[ \t]+of)[ \t]*\w+[ \t*_]*)?[.!](?:\s|$)")


def _committed_before(chosen: Candidate, phrases: Sequence[Candidate], text: str,
                      slot: ScoreSlot) -> str | None:
    r"""An off-contract reading after a sentence that commits another rating, or None.

    "I'd happily give it a four.\n\nScore: 3": the judge states two ratings, each in a
    sentence of its own, and nothing between says the second revises the first.
    """
    for p in phrases:
        n = p.number
        if n.start >= chosen.number.start or n.value == chosen.number.value \
                or p.problem is not None or not slot.low <= n.value <= slot.high:
            continue
        if _COMMITTING.search(text, start_of_line(text, n.start), n.start) is None \
                or _SENTENCE_ENDS.match(text, n.end) is None \
                or REVISION.search(text, n.end, chosen.number.start):
            continue
        return (f"2 different values for {slot.name} and nothing says which is the verdict: "
                f"{n.written.strip()!r} (a sentence that commits it) and "
                f"{chosen.number.written.strip()!r} ({chosen.how})")
    return None


def _bottom_outside_format(chosen: Candidate, cleaned: str, masked: str, slot: ScoreSlot
                           ) -> str | None:
    """:func:`~capjudge.reading.contract.bottom_off_contract` for a value outside the format.

    Only there: "The final score is $7$." with prose after it is off-contract, but the judge
    used the prompt's own format, and so its scale.
    """
    if chosen.contract or (slot.position == "first" and (
            chosen.source == "opening" or opens(cleaned, chosen))):
        return None
    return bottom_off_contract(chosen, masked, slot)


def _praised_in_reasoning(view: AnswerView, chosen: Candidate, slot: ScoreSlot) -> str | None:
    """Why a bottom rating the answer's own reasoning block praises is no verdict, or None.

    The reasoning is never read for a verdict, but it is what the judge said of the caption:
    "<reasoning>... The text passes the clarity criterion.</reasoning> <score>1</score>" (a
    pass flag, Glider's) is the bottom of 1-5 beside praise alone, as
    :func:`~capjudge.reading.contract.faint_praise` reads it in the answer.
    """
    if not view.had_reasoning:
        return None
    n = chosen.number
    at = replace(n, start=view.origin(n.start), end=view.origin_end(n.end),
                 digits_end=view.origin_end(n.digits_end))
    found = faint_praise(view.original, replace(chosen, number=at), slot)
    return None if found is None else f"{found} (in its reasoning)"


def _lowered(after: str, slot: ScoreSlot) -> re.Match[str] | None:
    """The verdict said to be too high or low with no value, in a sentence about this slot.

    (For one criterion of several, a sentence that names only another criterion lowers that
    one: "the accuracy should be lower" leaves completeness alone.)
    """
    for m in LOWERED.finditer(after):
        sentence = sentence_of(after, m.start()).lower()
        named = [c for c in CRITERIA if re.search(rf"\b{c}\b", sentence)]
        if not named or is_generic(slot) or slot.name.lower() in named:
            return m
    return None


# A level's name said of a part of the text after a verb ("although the rest (fountain,
# park) is clear"): a description, not the level given as the rating ("The text is very
# clear." after a 2 still competes with it).
_PART_OF_IT = re.compile(r"\b(?:although|though|but|while|whereas|rest|otherwise|except|apart\s+"
                         r"from|aside\s+from|other\s+than|mostly|largely|partly|partially|most\s+"
                         r"of|only|first|setting|opening)\b", re.I)


def _level_disagrees(chosen: Candidate, levels: Sequence[Candidate], text: str,
                     slot: ScoreSlot) -> Unreadable | None:
    """The opening rating against a level the answer names later, when they differ.

    "5 ... so I'd put it at High Correctness (4)": they compete, and nothing says which
    stands (several levels named are the scale restated, not a verdict).
    """
    def against(c: Candidate) -> bool:
        if c.problem is None:
            # ("5\n\nThe sentence is fluent and natural.": a level's word said of the text in
            # prose describes it loosely, a level either way; "2 ... The text is very clear"
            # contradicts it, and "not fluent" still has a side.)
            apart = abs(c.number.value - chosen.number.value)
            return apart >= (2 if said_in_prose(text, c.number) else 1)
        # "5 — totally disfluent", "5 — not concise": a qualified level still has a side.
        rng = qualified_range(text, c.number, slot)
        return rng is not None and not rng[0] <= chosen.number.value <= rng[1]

    named = [c for c in levels if c.number.start > chosen.number.end and against(c)
             and not _said_of_a_part(text, c.number)]
    if not named or len({c.number.value for c in levels}) != 1:
        return None
    return Unreadable("parse_failure", f"the opening rating {chosen.number.written.strip()!r} "
                      f"and {named[0].how} ({int(named[0].number.value)}) disagree, and "
                      "nothing says which stands", printed_value(chosen))


def _said_of_a_part(text: str, level: Number) -> bool:
    """Whether the level word ``level`` describes a part of the text.

    In prose (:func:`said_in_prose`), in a sentence that limits it ("although the rest is
    clear", "The setting is clear, but ...", "mostly clear, except ...") and concludes nothing
    ("but on reflection the text is very clear", "..., so the text is fluent overall" say it
    of the whole; "The text is very clear." after a 2 is said of the whole and competes).
    """
    if not said_in_prose(text, level):
        return False
    begin = sentence_start(text, level.start)
    stop = _SENTENCE_STOP.search(text, level.start)
    sentence = _ASIDES.sub(lambda m: " " * len(m.group(0)),
                           text[begin: stop.start() if stop else len(text)])
    return _PART_OF_IT.search(sentence) is not None and _CONCLUDED.search(sentence) is None


_SENTENCE_STOP = re.compile(r"[.!?](?=\s|$)|\n")
# (Brackets and quotations aside: "(fountain, park)", "'a dog or a wolf'".)
_ASIDES = re.compile(r"\([^()\n]*\)|[\"\u201c'\u2018][^\"\u201d'\u2019\n]*[\"\u201d'\u2019]")
_CONCLUDED = re.compile(r"\b(?:so|overall|reflection|all\s+in\s+all|in\s+fact|actually|after\s+"
                        r"all|really|truly)\b", re.I)


def _located(view: AnswerView, chosen: Candidate) -> Located:
    n = chosen.number
    start = n.start + (1 if n.negative else 0)
    begin, end = view.origin(start), view.origin_end(n.digits_end)
    kind = n.kind
    if kind == "digits" and re.sub(r"\D", "", normalise(view.original[begin:end])[0]) != \
            re.sub(r"\D", "", view.text[start: n.digits_end]):
        # "&#55;&#48;", "\u0037\u0034": the digits are escapes in the answer, so its tokens
        # there are not the number's digits; the value stands, with no distribution.
        kind = "escaped"
    return Located(begin, end, n.value, chosen.how, kind)


# ("| Completeness | 2 |": a table's row rates its first cell.)
_RATED_LINE = re.compile(r"^[ \t>*_`#|-]*(?P<label>[^\W\d_][^\n:=|]{0,40}?)[ \t*_`]*[:=|]"
                         r"[ \t*_`$]*(?=[-]?\d)", re.M)


_VERDICT_WORD = re.compile(r"\b(?:score|rating|grade|verdict|overall|total|evaluation|result|"
                           r"answer|scale)\b", re.I)


def _rated_lines(text: str) -> list[tuple[str, Number]]:
    """Lines that rate something by name: "Caption accuracy: 75", "Caption 2: 40"."""
    out = []
    for m in _RATED_LINE.finditer(text):
        n = number_at(text, m.end())
        label = re.sub(r"\s+", " ", m.group("label")).strip().lower()
        if n is not None and (not m.group(0).lstrip(" \t>*_`#-").startswith("|")
                              or _scored_table(text, m.start(), label)):
            out.append((label, n))
    return out


_SCORE_HEADER = re.compile(r"\b(?:score|rating|points?|grade|mark)s?\b", re.I)


def _scored_table(text: str, row: int, label: str) -> bool:
    """Whether the table row at ``row``, named ``label``, rates something.

    "| Criterion | Rating |" heads rows that rate; "| Object | Count |" rates nothing; a
    table without a header rates only the criteria it names ("| Fluency | 4 |", not "| Objects
    | 4 |").
    """
    start = row
    while start > 0:
        above = start_of_line(text, start - 1)
        if not text[above: start].lstrip().startswith("|"):
            break
        start = above
    stop = text.find("\n", start)
    header = text[start: stop if stop >= 0 else len(text)]
    if re.search(r"\|\s*[-$*_`]*\d", header) is not None:  # no header: its first row a value
        return bool(criteria_named(label))
    return _SCORE_HEADER.search(header) is not None


def _alone_on_line(text: str, n: Number) -> bool:
    """Nothing but markup after ``n`` on its line."""
    line_end = text.find("\n", n.end)
    return not text[n.end: line_end if line_end >= 0 else len(text)].strip(" \t*_`$.")


def _conflict(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    """Why a reading that stands alone among its candidates is still not the verdict.

    - The answer opens with a bare number on its own line and ends with the slot's label and
      another value ("2 ... Correctness: 4"): two verdicts, nothing says which stands.
    - The reading is not under the slot's own name, and the answer rates two or more other
      things by name with different values ("Caption 1: 80 / Caption 2: 40", "Completeness:
      3 / Clarity: 4 / Overall: 4" when correctness was asked): it rated something else.
    """
    verdict_slot = slot.name.lower() in {g.lower() for g in GENERIC}
    if chosen.final and (verdict_slot or chosen.rank == 2):
        return None  # ("Overall" is final-sounding, but not a criterion's own verdict)
    if chosen.rank == 2:
        for o in opening_candidates(text, slot):
            if (_alone_on_line(text, o.number) and o.problem is None
                    and o.number.start < chosen.number.start
                    and o.number.value != chosen.number.value
                    and not REVISION.search(text[o.number.end: chosen.number.start])):
                return (f"2 different values for {slot.name} and nothing says which is the "
                        f"verdict: {o.number.written.strip()!r} (the answer opens with it); "
                        f"{chosen.number.written.strip()!r} ({chosen.how})")
        return None
    if verdict_slot and chosen.source == "label":
        return None  # "Objects: 3 / Errors: 1 / Score: 70": the score line is the verdict
    if chosen.source == "opening" and _alone_on_line(text, chosen.number):
        return None  # "4\nObjects: 2\nErrors: 1": the bare opening line is the verdict
    # A generic verdict name ("Overall") names a criterion's slot only when nothing else is
    # rated beside it; for the answer's one verdict it is that verdict.
    # Lines under a verdict word ("My rating: 3", "Rating scale: 1 = ...") are not other
    # things rated.
    # Nor are parts of the caption or the picture ("First sentence: 5"): their values are no
    # other criterion's.
    others = [(label, n) for label, n in _rated_lines(text)
              if matches(label, slot) < (1 if verdict_slot else 2)
              and not _VERDICT_WORD.search(label) and rates_another(text, n) is None]
    if len({label for label, _ in others}) >= 2 and len({n.value for _, n in others}) >= 2:
        named = ", ".join(dict.fromkeys(label for label, _ in others))
        return (f"the answer rates other things by name ({named}) and none of them is "
                f"{slot.name}")
    return None


def _restated(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    """Why a value on the slot's scale does not settle a first-number slot, or None.

    A slot that reads the first number (VisCE² §3) and an answer whose first number, in the
    same sentence, is restated as another value on the slot's own scale ("I'll say 8, that is,
    roughly 85 out of 100"): the paper's reading (8) and the answer's restatement (85) are two
    verdicts, and the scale the first one is on is the judge's own guess. A restatement that
    agrees ("8/10, i.e. 80 out of 100") or a revision ("8. No: 85 out of 100") settles it.
    """
    if slot.position != "first" or slot.anchor or slot.label or chosen.source != "own_scale":
        return None
    first = first_integer(text)
    if first is None or first.start >= chosen.number.start:
        return None
    # "7/10 - equivalently 70 out of 100": the first number on its own stated scale, converted.
    den = denominator(text[first.end:])
    scaled = first.value * slot.high / den.value if den is not None and den.value else None
    if chosen.number.value in (first.value, scaled):
        return None
    between = text[first.end: chosen.number.start]
    if SENTENCE_END.search(between) or "\n" in between or REVISION.search(between):
        return None
    return (f"the first number {first.written.strip()!r} (the method's reading) is restated "
            f"as {chosen.number.written.strip()!r} ({chosen.how}) in the same sentence: two "
            "values, and nothing says which scale the first is on")


def _nothing(masked: str, cleaned: str, slot: ScoreSlot, truncated: bool, written: str
             ) -> Unreadable:
    """Why no candidate was found at all."""
    if template_spans(written):
        return Unreadable("parse_failure", "the answer's JSON is a schema's template echoed "
                          "back (a placeholder such as \"string\" for its text): its numbers are "
                          "the template's examples, and no verdict is given")
    foreign = foreign_scale(cleaned, slot)
    if foreign:
        return Unreadable("parse_failure", foreign)
    if REFUSAL.search(masked):
        snippet = " ".join(masked.split())[:120]
        # A parse failure (no score), not ``refused``: that status is the API's own refusal
        # (its ``refusal`` field or a content filter), not a reading of prose.
        return Unreadable("parse_failure", f"no score: the judge declined ({snippet!r})")
    where = (f"after {slot.label!r}" + (f" and {slot.anchor!r}" if slot.anchor else "")
             if slot.label else f"after {slot.anchor!r}" if slot.anchor else "anywhere")
    cut = " (the answer was cut at max_tokens before its verdict)" if truncated else ""
    if not slot.label and any(list_item(cleaned, n) for n in numbers_in(cleaned)):
        cut += " but the numbers of a list's items"
    return Unreadable("parse_failure", f"no number {where} in the output{cut}", unwritten=True)


def never_written(text: str, slot: ScoreSlot) -> bool:
    """Whether ``text`` wrote no number for the slot (nothing to read, nothing abstained on).

    A backend that can force the slot's anchor reads it there only then: "9 … excellent" (9,
    or 90?) or "$85$ or $90$" is the reader's abstention, which a forced anchor's distribution,
    one channel alone, must not turn into a value.
    """
    found = locate(text, slot)
    return isinstance(found, Unreadable) and found.unwritten


def find_printed(text: str, slot: ScoreSlot) -> Located | None:
    """The slot's located number in ``text``, or None.

    Local backends use it to find the score position in what the model wrote.
    """
    found = locate(text, slot)
    return found if isinstance(found, Located) else None
