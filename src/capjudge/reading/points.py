"""Counts of attribute points: cap3d's correctness (C. Score) and hallucination (H. Score).

The 3D prompt asks for two labelled counts, "Correctness Score (C. Score): N" and
"Hallucination Score (H. Score): N". They are read here, in the reading seam like every other
verdict (issue 40), by :func:`read_points_slot` for a slot of kind ``points``:

- both counts are required (one missing is a ``parse_failure`` with the reason);
- decimals and fractions ("2.5", "1/2", "½") are accepted, a sum is read at its stated total
  ("1 + 1 + 0.5 = 2.5" is 2.5), bracketed values ("[2]") are read, and a negative
  hallucination count ("-2": the prompt's "deduct 2 points") is read as points;
- labels in other languages, labels paraphrased with a count ("Correct attributes: 4",
  "CS=3, HS=1"), headings with the count below, JSON fields and table rows naming the counts;
- "3/4" abstains (three of four attributes, or three quarters of a point?).

The contract is the prompt's two labelled lines, each written once (with ``verdict_format:
json_schema``, one JSON field per count): any other reading is off-contract and needs its
second channel (:mod:`capjudge.reading.confirm`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache

from capjudge.protocol import ScoreSlot, SlotResult
from capjudge.reading.contract import (
    CONDITIONAL,
    REVISION,
    WITHDRAWN,
    foreign_heading,
    other_blocks,
    other_quoted,
    sentence_of,
    stated_by_candidate,
)
from capjudge.reading.counts_said import counts_said
from capjudge.reading.elsewhere import find_elsewhere
from capjudge.reading.masking import find_decline, mask_text, mask_view
from capjudge.reading.numbers import NUMBER_WORDS, split_digits, value_at
from capjudge.reading.scale import uncommitted_after
from capjudge.reading.settled import stand_in
from capjudge.reading.structure import json_fields, table_fields, xml_fields
from capjudge.reading.view import answer_view, blank, line_before, start_of_line
from capjudge.reading.vocabulary import TRANSLATIONS, key

# (A mixed number first: "2 1/2" is two and a half, partial credit the prompt allows.)
_NUMBER = (r"(?:\d+[ \t]+\d+[ \t]*/[ \t]*[1-9]\d*(?![\d.])|"
           r"\d+(?:\.\d+)?\s*/\s*\d+(?:\.\d+)?|\d*\.\d+|\d+\s*[½¼¾]|[½¼¾]|\d+)")
_SCORE_WORDS = (r"(?:[\s_]*(?:score|points?|得分|分数|分數|スコア|点数|점수|puntuación|"
                r"punktzahl))?")


def _label_name(name: str, initial: str) -> str:
    """The names of a points label: "Correctness Score", "C. Score", "正确性得分"."""
    # The English name and other languages' (the English variants, "correct", are too common
    # a word: "- Correct: chair, black" lists attributes).
    names = (name, *(w for w in TRANSLATIONS[name] if not w.isascii()))
    words = "|".join(sorted({re.escape(w) for w in names}, key=len, reverse=True))
    # ("Hallucinations: 3": the plural names the count too, before a number; "There are no
    # hallucinations: all match" is prose. Every pattern built on this is case-blind.)
    plural = r"(?:(?<=n)s(?=[\s*_]*[:=][\s*_`$]*\d))?"
    return (rf"(?:(?<![A-Za-z])(?<!\bno )(?:{words}){plural}{_SCORE_WORDS}|"
            rf"\b{initial}[._-]?\s*score)")


def _label(name: str, initial: str) -> re.Pattern[str]:
    """A points label: "Correctness Score (C. Score):", "C. Score:", "正确性得分（C. Score）：".

    Also the value in brackets right after the label: "C. Score (3) · H. Score (1)", and
    right after "score" with no colon: "C. Score 4, H. Score 1".
    """
    # ("Korrektheitswert (C. Score): 3": the initials in brackets after another language's
    # name are the label; its closing bracket comes before the colon.)
    # ("Puntuación de corrección (C): 5": the bare initial in brackets; "Correctness (C. Score)
    # ..... 5 pts": a report's dot leaders stand for the colon.)
    return re.compile(
        rf"{_label_name(name, initial)}(?:(?<=score)\s*\))?\s*"
        rf"(?:(?:\(\s*{initial}(?:\.?\s*score)?\s*\))?(?:[\s*_]*[:=]|[ \t]*\.{{3,}}[ \t]*(?=\d))|"
        # "C. Score 4, H. Score 1": the value right after "score", no colon
        r"(?<=score[ \t])(?=\d)|"
        r"[ \t]*\((?=[ \t]*\d+(?:\.\d+)?[ \t]*\)))(?P<rest>[^\n]*)", re.I)


# The label, then the rest of its line (what follows is read by _read_points).
_PATTERNS = {"correctness": _label("correctness", "c"),
             "hallucination": _label("hallucination", "h")}
# A count written as a share of the attributes it counts: "4/5 attributes", "3/4 of the details".
_OF_ATTRIBUTES = re.compile(r"(\d+)\s*/\s*\d+\s+(?:of\s+(?:the\s+|its\s+)?)?(?:attributes?|"
                            r"details?|elements?|properties|features|facts|claims|items?)\b", re.I)
_KEYS = {"correctness": ("correctness", "c"), "hallucination": ("hallucination", "h")}
_OTHER = {"correctness": "hallucination", "hallucination": "correctness"}
_SIGNED = rf"[-\u2212]?\s*{_NUMBER}"
_SUM = re.compile(rf"^(?P<expr>{_SIGNED}(?:\s*\+\s*{_NUMBER})*)(?![\d.])")
_TOTAL = re.compile(rf"=\s*\**\s*(?P<total>{_SIGNED})(?![\d.])")
_VULGAR = {"½": Fraction(1, 2), "¼": Fraction(1, 4), "¾": Fraction(3, 4)}
_RANGE = re.compile(rf"^{_NUMBER}\s*(?:-|\u2013|\u2014|to|or|~)\s*{_NUMBER}", re.I)


def parse_points(value: str) -> float:
    """'2' -> 2.0, '2.5' -> 2.5, '1/2' -> 0.5, '1½' -> 1.5, '2 1/2' -> 2.5, '-2' -> -2.0."""
    value = value.strip().replace("\u2212", "-")
    sign = -1.0 if value.startswith("-") else 1.0
    value = value.lstrip("-").strip()
    if (mixed := re.fullmatch(r"(\d+)\s+(\d+)\s*/\s*(\d+)", value)) is not None:
        units, part, parts = (int(x) for x in mixed.groups())
        return sign * float(units + Fraction(part, parts))
    if "/" in value:
        num, den = (float(x) for x in value.split("/"))
        if den == 0:
            raise ValueError(f"division by zero in {value!r}")
        return sign * num / den
    if value and value[-1] in _VULGAR:
        whole = value[:-1].strip()
        return sign * float((Fraction(int(whole)) if whole else Fraction(0)) + _VULGAR[value[-1]])
    return sign * float(value)


_PLACEHOLDER_KEPT = re.compile(r"[\[(<{]\s*numerical\s+value\s*[\])>}][\s*_`:]*(?=[-\u2212]?\d)",
                               re.I)
_LATEX = re.compile(r"\\(?:boxed|text|textbf|mathbf|mathrm)\s*\{([^{}]*)\}")
_BREAKDOWN = re.compile(r"\([^()]*\)|\[[^\[\]]*[a-z][^\[\]]*\]", re.I)
_TOTAL_LINE = re.compile(r"^\s*(?:[-*\u2022>]|\d+\.)?\s*\**\s*(?:total|sum|overall|final)"
                         r"[^:\n=]{0,30}[:=]\s*(?P<rest>[^\n]*)", re.I | re.M)


# A count given as a bound or an approximation: "4+", "≥ 3", "at least 3", "~2".
_BOUNDED = re.compile(rf"^(?:(?:[\u2265\u2264~\u2248]|>=|<=|at\s+(?:least|most)|about|around|"
                      rf"roughly|approximately)\s*{_SIGNED}|{_SIGNED}\s*(?:\+(?!\s*\d)|-?ish\b))",
                      re.I)
# A count with a question mark after it (a revision in between): "1?", "3 → 4?".
_ARROW = r"(?:-+>|=+>|[\u2192\u21d2\u27f6\u279c\u27a1])"
_QUESTIONED = re.compile(rf"^{_SIGNED}(?:\s*{_ARROW}\s*{_SIGNED})?\s*\?")
# "3 → 4": revised on its own line.
_ARROWED = re.compile(rf"^{_SIGNED}\s*{_ARROW}\s*(?P<to>{_SIGNED}(?![\d.]).*)$")
# "1 point each for ...": a rate per attribute.
_RATE = re.compile(rf"^{_SIGNED}\s*(?:points?|pts?\.?)?\s*(?:each|per|apiece|for\s+each)\b",
                   re.I)

# A parenthetical aside that offers another count ("(possibly 2 if ...)", "(or 3)").
# The other count may come first: "(2 if "metal" is counted)", "(3 when the lid counts)".
_ALTERNATIVE_ASIDE = re.compile(r"\([^()]*\b(?:or|possibly|maybe|perhaps|otherwise|arguably|"
                                r"if)\b[^()\d]{0,40}\d[^()]*\)"
                                # "(maybe four)": the aside opens with the hedge and a number
                                # word ("one or two armrests", "even if one zooms out" count
                                # nothing)
                                r"|\(\s*(?:or|possibly|maybe|perhaps|arguably)\s+(?:even\s+)?"
                                r"(?:" + NUMBER_WORDS.pattern + r")[^()]*\)"
                                # "(+1 partial)", "(plus one partial)", unless not counted
                                r"|\(\s*(?:[+\u00b1]|plus\b)\s*(?:\d|" + NUMBER_WORDS.pattern
                                + r")(?![^()]*(?:\bnot\b|n't\b|\bexclud|\bignor|\bleft\s+out|"
                                r"\bomit|\bdisregard|\bdrop|\bdiscount))[^()]*\)"
                                r"|\(\s*(?:or\s+)?\d+(?:\.\d+)?\s+(?:(?:if|unless|assuming|"
                                r"depending|counting)\b|when\b[^()]*\b(?:counts?|counted|included|"
                                r"considered)\b)[^()]*\)", re.I)


# A condition right after the count: "0 if that line is a shadow", "2 — if the lid counts".
_CONDITIONAL = re.compile(r"[ \t]*(?:[,\u2014\u2013-][ \t]*)?(?:if|unless|assuming|provided|"
                          r"depending\s+on)\b", re.I)

# The other kind of attribute named at the start of a breakdown in parentheses.
_OTHER_KIND = {"correctness": re.compile(r"\(\s*(hallucinat\w*|incorrect|wrong|invented)\b",
                                         re.I),
               "hallucination": re.compile(r"\(\s*(correct(?:ly)?|accurate)\b", re.I)}


def _not_one_count(name: str, line: str) -> str | None:
    """Why the value a label's line opens with is not one count of its kind, or None."""
    if (kind := _OTHER_KIND[name].search(line)) is not None:
        # "C. Score: 1 (hallucinated: colour)": the count's own breakdown names the other
        # kind of attribute; the labels may be swapped, and nothing says which it is.
        return (f"the {name} points' own breakdown lists {kind.group(1)!r} attributes: the "
                "labels may be swapped")
    if (first := value_at(line, 0)) is not None and (
            mark := uncommitted_after(line[first.end:])) is not None:
        # "3 or more", "3 (tentative)", "3, pending a closer look": no count committed to.
        return f"the {name} points are a bound or provisional ({mark!r}), not a count"
    if (first := value_at(line, 0)) is not None and _CONDITIONAL.match(line, first.end):
        # "H. Score: 0 if that line is a shadow, 1 if it's a crack": a count under a condition
        # the judge does not settle.
        return f"the {name} points hang on a condition ({line[first.end:].strip()[:60]!r})"
    if (aside := _ALTERNATIVE_ASIDE.search(line)) is not None:
        # "H. Score: 1 (possibly 2 if the handle counts)": the aside offers another count.
        return f"the {name} points are left open ({aside.group(0).strip()!r}): a range or a hedge"
    return None


def _read_points(name: str, rest: str) -> tuple[float | None, str | None]:
    r"""The points stated after a label.

    That is the stated total of a sum ("1 + 1 + 0.5 = 2.5" is 2.5, whatever comes before the
    "="), else the sum at the start of the line, brackets ("[2]", the template's own notation)
    removed, LaTeX unwrapped ("$2$", "\\boxed{2}") and a breakdown in parentheses after the
    value left out ("2 (tire = 1, black = 1)" is 2). Negative hallucination points ("-2", the
    prompt's "deduct 2 points") are read as points; negative correctness points, a template
    placeholder echoed back or "N/A" are a parse failure, with the reason.
    """
    if (other := _PATTERNS[_OTHER[name]].search(rest)) is not None:
        rest = rest[: other.start()]  # "C. Score = 8, H. Score = 2": the next label ends it
    line = rest.strip().strip("*_` ").strip()
    if (kept := _PLACEHOLDER_KEPT.match(line)) is not None:
        line = line[kept.end():]  # "[Numerical Value] 3": the template's words, then the value
    if line.startswith("[") and "]" in line:
        line = line[1:line.index("]")].strip()
    if re.match(r"\(?\s*numerical value", line, re.I):
        return None, f"the {name} score is the template's placeholder {rest.strip()!r}"
    line = _LATEX.sub(r"\1", line).replace("$", " ")
    if (why := _not_one_count(name, line)) is not None:
        return None, why
    line = _BREAKDOWN.sub(" ", line).strip().strip("*_` ").strip()
    line = _NEXT_FIELD.split(line)[0]  # "2, Precision = 50%": the next field ends the value
    if (split := split_digits(line, 0)) is not None:
        return None, f"the {name} points are {split}"
    if (bound := _BOUNDED.match(line)) is not None:
        return None, (f"the {name} points are a bound or an approximation "
                      f"({bound.group(0).strip()!r}), not a count")
    if (open_ := _QUESTIONED.match(line)) is not None:
        # "3 → 4?", "1?": the count is asked, not stated.
        return None, f"the {name} points are left open ({open_.group(0).strip()!r})"
    if (arrow := _ARROWED.match(line)) is not None:
        line = arrow.group("to")  # "3 → 4": the count as revised on its own line
    total = list(_TOTAL.finditer(line))  # (before "points" ends the line: "1 point each ... = 2")
    if not total and (rate := _RATE.match(line)) is not None:
        # "1 point each for colour and door count": a rate per attribute, not a count.
        return None, (f"the {name} points state a rate ({rate.group(0).strip()!r}), not a "
                      "count")
    line = re.sub(r"\s*(?:points?|pts?\.?)\b.*$", "", line, flags=re.I)
    line = re.sub(r"(?<=\d)\.$", "", line)  # "so H. Score: 0.": the sentence's full stop
    if re.match(rf"{_SIGNED}\s*(?:%|percent\b)", line, re.I):
        return None, (f"the {name} score is a percentage ({rest.strip()[:40]!r}), not a count "
                      "of points")
    if (counted := _OF_ATTRIBUTES.match(line)) is not None:
        line = counted.group(1)  # "4/5 attributes": four of the five attributes
    if not total and (frac := re.match(r"(\d+)\s*/\s*(\d+)(?![\d.])", line)) is not None \
            and int(frac.group(1)) >= 2:
        # "C. Score: 3/4": three points of four attributes, or three quarters of a point.
        return None, (f"the {name} points {frac.group(0)!r} read as {frac.group(1)} (of "
                      f"{frac.group(2)}) or as {int(frac.group(1)) / int(frac.group(2)):g}; "
                      "nothing says which")
    if not total and (rng := _RANGE.match(line)) is not None:
        return None, f"the {name} points are a range or a hedge ({rng.group(0).strip()!r})"
    try:
        if total:
            value = parse_points(total[-1].group("total"))
        elif (m := _SUM.match(line)) is not None:
            value = sum(parse_points(term) for term in
                        re.split(r"\s*\+\s*", m.group("expr")))
        elif _NONE.match(line):
            value = 0.0  # "None", "zero", "无": no attribute of that kind
        elif (n := value_at(line, 0)) is not None and n.kind != "digits" and re.match(
                r"\s*(?:$|[.,;(\-\u2014])", line[n.end:]):
            value = n.value  # "three (chair, wooden, rocking)": a count in words
        else:
            return None, f"no number after the {name} score label ({rest.strip()[:40]!r})"
    except ValueError as exc:
        return None, f"unreadable {name} points ({exc})"
    if value < 0:
        if name == "hallucination":
            return -value, None  # "-2": two points deducted, i.e. two hallucination points
        return None, f"negative {name} points ({rest.strip()[:40]!r})"
    return value, None


_NONE = re.compile(r"(?:none|zero|nil|no\s+(?:hallucinat\w*|errors?|incorrect\w*|correct\w*)|"
                   r"ning[uú]n[oa]?|nada|aucune?|rien|kein(?:e[rsn]?)?|nessun[oa]?|nenhum[a]?|"
                   r"无|没有|なし|없음)\s*(?:$|[.,;(\-\u2014])", re.I)


def _value_after(text: str, end: int) -> str:
    """What stands for a label's value.

    The rest of its line, or, for a label alone on its line, the next non-empty line; bullets
    under a bold label are read at their total line ("- Total: 2").
    """
    line_end = text.find("\n", end)
    rest = text[end: line_end if line_end >= 0 else len(text)]
    if rest.strip(" *_`:$"):
        return rest
    block: list[str] = []
    for line in text[line_end + 1:].split("\n") if line_end >= 0 else []:
        if not line.strip():
            if block:
                break
            continue
        if _PATTERNS["correctness"].search(line) or _PATTERNS["hallucination"].search(line) \
                or re.match(r"\s*\**\s*(?:precision|explanation)", line, re.I):
            break
        block.append(line)
        if not re.match(r"\s*(?:[-*\u2022]|\d+\.)\s", line):
            break  # the value on its own line
    if len(block) > 1 or (block and re.match(r"\s*(?:[-*\u2022]|\d+\.)\s", block[0])):
        totals = [m.group("rest") for m in _TOTAL_LINE.finditer("\n".join(block))]
        items = [re.sub(r"^\s*(?:[-*\u2022]|\d+\.)\s+", "", b) for b in block]
        return totals[-1] if totals else " + ".join(
            re.sub(r"^[^:=]*[:=]\s*", "", b).strip() for b in items)
    return block[0] if block else rest


# Keys that count attributes of a kind ({"correct": 3, "hallucinated": 1}).
_FIELD_WORDS = {"correctness": ("correct", "accurate"),
                "hallucination": ("hallucinated", "incorrect")}


def _field_names(name: str) -> set[str]:
    """The keys a JSON field or table row naming ``name``'s points may have."""
    word, initial = _KEYS[name]
    roots = [key(w) for w in (word, *TRANSLATIONS[word], *_FIELD_WORDS[name])] + [initial]
    tails = ("", "score", "points", "point", "得分", "分数", "分數", "スコア", "点数", "점수")
    return {r + t for r in roots for t in tails} | {f"{word}score{initial}score"}


def _structured_points(text: str, masked: str, name: str
                       ) -> list[tuple[float | None, str | None]]:
    """Points stated in JSON fields or table rows named after ``name``.

    The structure is parsed on the unmasked ``text`` (a list of the caption's own words
    masked inside it must not break the JSON); a value that ``masked`` blanks is a quotation.
    """
    names = _field_names(name)
    out = []
    for f in json_fields(text) + table_fields(text) + xml_fields(text):
        label = f.path[0] if f.kind == "table" and len(f.path) == 2 else f.name
        if key(label) in names and masked[f.start:f.end].strip():
            out.append(_read_points(name, f.value))
    return out


def read_ch(text: str, quotes: Sequence[str] = (), *, truncated: bool = False
            ) -> dict[str, tuple[float | None, str | None]]:
    """Correctness and hallucination points, each with the reason when it could not be read.

    Read as a person does, in the reader's canonical view (NFKC, reasoning dropped:
    :mod:`capjudge.reading.view`): quotations of the candidate (``quotes``), restated rules
    ("one point for each ...") and hypotheticals are masked first; of the labels left (in
    English or another language), the last one with a value is the verdict (a judge that
    restates the criteria before its output block is read at the block); without labels, a
    JSON field or table row that names the points. A value the answer ends on when it was cut
    at ``max_tokens`` (``truncated``) may be unfinished: unreadable.
    """
    view = answer_view(text)
    if view.reasoning_cut:
        why = "reasoning cut off: the answer ended inside its reasoning block"
        return {name: (None, why) for name in _PATTERNS}
    masked = mask_view(view.text, quotes)
    out: dict[str, tuple[float | None, str | None]] = {}
    last_end = 0  # where the last labelled count ends
    first_start = len(masked)  # where the first one starts
    for name in _PATTERNS:
        # The labels with their value; else a label alone on its line ("## Correctness Score
        # (C. Score)"), the count below it.
        for rx in (_PATTERNS[name], _HEADINGS[name]):
            places = _occurrences(rx, masked)
            values = [_read_points(name, _value_after(masked, start)) for start, _ in places]
            places, values = _without_explanations(masked, places, values)
            if values:
                break
        if not values:
            # "Correct attributes: 4", "CS=3": the counts under other words; only those that
            # hold a count ("Correct attributes: chair, black" lists them).
            read = [(_read_points(name, _NEXT_FIELD.split(_value_after(masked, start))[0]),
                     (start, end)) for start, end in _occurrences(_PARAPHRASES[name], masked)]
            values = [v for v, _ in read if v[0] is not None]
            places = [p for v, p in read if v[0] is not None]
        # (A line break after it: the judge went on past the number, which is finished.)
        if truncated and places and not (rest := masked[places[-1][1]:]).strip() \
                and "\n" not in rest:
            values[-1] = (None, f"the answer was cut at max_tokens right after the {name} "
                                "points: the number may be unfinished")
        if places:
            last_end = max(last_end, places[-1][1])
            first_start = min(first_start, places[0][0])
        if not values:
            values = _structured_points(view.text, masked, name)
            places = [(0, 0)] * len(values)
        if not values and name == "hallucination" and (
                none := _NO_HALLUCINATION.search(masked)) is not None:
            # "There are no hallucinations: every attribute ... matches": a count of zero.
            values, places = [(0.0, None)], [(none.start(), none.end())]
        places, values, over = _own_blocks(masked, places, values)
        out[name] = (None, over) if over else _decide(name, masked, values, places)
        if (said := _count_in_words(name, masked, out[name][0])) is not None:
            out[name] = (None, said)
    if not last_end and all(value is None for value, _ in out.values()) and (
            tallied := _tally_only(masked)) is not None:
        out = {name: (tallied[name], None) for name in _PATTERNS}
    elif not last_end and out["correctness"][0] is None:
        counted, how = counts_said(masked, out["hallucination"][0])
        if counted is not None:
            out = {name: (counted[name], how) for name in _PATTERNS}
        elif how is not None:
            out = {name: (None, how) for name in _PATTERNS}
    tail = masked[last_end:] if last_end else ""
    if (gone := WITHDRAWN.search(tail) or _ADJUSTED.search(tail)) is not None \
            and not re.search(r"\d", tail[gone.end():]):
        # "Final review: its scores should be adjusted upward." and no new counts: the counts
        # above no longer stand, and nothing replaces them.
        why = (f"the judge took its counts back ({gone.group(0).strip()!r}) and gave no "
               "others")
        return {name: (None, why) for name in _PATTERNS}
    # (The hedge is looked for in the answer as written: masking blanks "might be" clauses.)
    written = view.text[last_end:] if last_end else ""
    out = _tallied_before(out, masked[:first_start] if last_end else "")
    return _left_open(_tallied_after(_withdrawn_one(_revised_after(out, written), tail), tail),
                      masked, written)


# One count taken back by name with no new value: "I'd adjust the C. Score downward".
_ADJUSTED_ONE = {name: re.compile(
    rf"\b(?:I(?:['\u2019]d|\s+would|\s+will|['\u2019]ll|\s+(?:need|have)\s+to|\s+should)|let\s+me)"
    rf"\s+(?:\w+\s+)?(?:adjust|revise|raise|lower|increase|decrease|reduce|bump|change|"
    rf"reconsider)\s+(?:the|my|its|this)\s+{_label_name(name, initial)}\b(?![^.\n]*?\d)"
    rf"|{_label_name(name, initial)}[^.\n\d]{{0,20}}\b(?:should|must|ought\s+to|needs?\s+to)\s+"
    rf"(?:probably\s+)?(?:be\s+)?(?:adjusted|revised|raised|lowered|increased|decreased|"
    rf"reduced|changed|reconsidered|go\s+(?:up|down))\b(?![^.\n]*?\d)", re.I)
    for name, (_, initial) in _KEYS.items()}
# A tally after the lines in both counts' initials on one line: "Total: C = 2, H = 3" (not an
# attribute's "'red': C = 1", a sum "C = 1 + 1 + 1 = 3", nor "C + H = 4").
_TALLY = {name: re.compile(rf"(?<![\w+])(?<!\+\s)(?-i:{initial.upper()})[ \t]*[=:][ \t]*"
                           r"(?P<n>\d+(?:\.\d+)?)(?![\d/%]|\.\d|[ \t]*[-+*/\u00d7])")
          for name, (_, initial) in _KEYS.items()}
_OTHER_CAPTION = re.compile(r"\b(?:previous|prior|earlier|reference|other|another|rewrit\w*|"
                            r"improved|suggested|example|ideal)\b", re.I)
# What makes a count's adjustment no adjustment: "There is no need to adjust the C. Score",
# "I considered whether to lower the H. Score", "If the leg were hidden, I'd lower ...".
_NOT_DONE = re.compile(r"\b(?:no|not|never|nor|if|whether|unless|consider\w*|might|may|could|"
                       r"tempted|already|unnecessary|wrong)\b|n['\u2019]t\b|\?$", re.I)


_SENTENCE_CLOSE = re.compile(r"[.!?](?=\s|$)|\n")


def _whole_sentence(text: str, m: re.Match[str]) -> str:
    """The sentence around a match, with its closing mark ("C." and "H." end none)."""
    end = _SENTENCE_CLOSE.search(text, m.end())
    return text[_sentence_at(text, m.start()): end.end() if end else len(text)]


def _withdrawn_one(out: dict[str, tuple[float | None, str | None]], tail: str
                   ) -> dict[str, tuple[float | None, str | None]]:
    """The counts, less one the judge says after the lines it will change, giving no value."""
    for name in _PATTERNS:
        if out[name][0] is None:
            continue
        m = next((m for m in _ADJUSTED_ONE[name].finditer(tail)
                  if not _NOT_DONE.search(_whole_sentence(tail, m))), None)
        if m is not None:
            out[name] = (None, f"after its lines the judge takes the {name} points back "
                               f"({' '.join(m.group(0).split())!r}) and gives no other")
    return out


def _tally_only(masked: str) -> dict[str, float] | None:
    """Both counts from the answer's one tally line ("Totals: C = 5, H = 2").

    For an answer without the prompt's labelled lines; None when no line holds both counts
    once, when such lines disagree, or when a line gives one count again ("I missed the
    armrests, so H = 2").
    """
    said: set[tuple[float, ...]] = set()
    for line in masked.splitlines():
        found = _tallied(line)
        if _is_tally(line, found):
            said.add(tuple(v[0] for v in found.values()))
        elif any(found.values()):
            return None  # "..., so H = 2": one count given again on its own
    return dict(zip(_PATTERNS, said.pop(), strict=True)) if len(said) == 1 else None


def _tallied(line: str) -> dict[str, list[float]]:
    """Each count's values in ``line`` under its initial (:data:`_TALLY`)."""
    return {name: [float(m.group("n")) for m in _TALLY[name].finditer(line)]
            for name in _PATTERNS}


def _is_tally(line: str, found: dict[str, list[float]]) -> bool:
    """Whether ``line`` is a tally: each count once.

    Not attributes' marks ("red C = 1, wooden C = 1 ... H = 1"), nor another caption's ("The
    previous caption had C = 2, H = 2").
    """
    return all(len(v) == 1 for v in found.values()) and not _OTHER_CAPTION.search(line)


def _tallied_after(out: dict[str, tuple[float | None, str | None]], tail: str
                   ) -> dict[str, tuple[float | None, str | None]]:
    """The counts, less one a tally after the lines gives another value for, unmarked.

    "C. Score: 4 ... Total: C = 2, H = 3": the lines and the explanation's own tally compete,
    and nothing says which stands. After "Edit:" or "Final review:" one tally is the
    correction ("Final review: C = 2"), off-contract like :func:`_revised_after`'s.
    """
    mark = _REVISION_MARK.search(tail)
    start = mark.end() if mark else 0
    tallies: dict[str, list[float]] = {name: [] for name in _PATTERNS}
    for line in tail[start_of_line(tail, start):].splitlines():
        if _is_tally(line, found := _tallied(line)):
            for name in _PATTERNS:
                tallies[name] += found[name]
    for name in _PATTERNS:
        value = out[name][0]
        said = tallies[name]
        if value is None or not set(said) - {value}:
            continue
        if mark is not None and len(set(said)) == 1:
            out[name] = (said[0], f"the {name} points are corrected after the lines to "
                                  f"{said[0]:g}")
        else:
            out[name] = (None, f"after its lines the answer tallies the {name} points as "
                               f"{' and '.join(f'{v:g}' for v in sorted(set(said)))}, the lines "
                               f"{value:g}: nothing says which stands")
    return out


# A tally that opens its line ("C: 4, H: 1"), not one of a part ("View 1: C=2, H=0").
_TALLY_OPENS = re.compile(r"[ \t>*_#-]*[CH][ \t]*[=:]")


def _tallied_before(out: dict[str, tuple[float | None, str | None]], head: str
                    ) -> dict[str, tuple[float | None, str | None]]:
    """The counts, less one a tally before the lines gives another value for.

    "C: 4, H: 1" and then the prompt's block with "C. Score: 5" (an adapter that writes its
    own short format first): two statements of the count, and nothing says which stands (a
    part's tally, "View 1: C=2, H=0", counts only that part). A revision mark after the
    tally ("Edit:", "Updated counts:") makes the lines its correction.
    """
    tallies: dict[str, list[float]] = {name: [] for name in _PATTERNS}
    lines = head.splitlines()
    for i, line in enumerate(lines):
        if _TALLY_OPENS.match(line) and _is_tally(line, found := _tallied(line)) and \
                not _REVISION_MARK.search("\n".join(lines[i + 1:])):
            for name in _PATTERNS:
                tallies[name] += found[name]
    for name in _PATTERNS:
        value = out[name][0]
        if value is not None and set(tallies[name]) - {value}:
            out[name] = (None, f"before its lines the answer gives the {name} points as "
                               f"{' and '.join(f'{v:g}' for v in sorted(set(tallies[name])))}, "
                               f"the lines {value:g}: nothing says which stands")
    return out


_Counts = list[tuple[float | None, str | None]]


def _own_blocks(masked: str, places: list[tuple[int, int]], values: _Counts
                ) -> tuple[list[tuple[int, int]], _Counts, str | None]:
    """The labelled counts less those under a heading for another caption.

    "Scores for the corrected caption:", "An ideal caption would score:" above a block: its
    counts are not the candidate's. When every block is another caption's, why (the third
    item) and no counts.
    """
    foreign = [foreign_heading(masked, start) if end else None for start, end in places]
    if not any(foreign):
        return places, values, None
    kept = [i for i, why in enumerate(foreign) if why is None]
    if not kept:
        return [], [], next(why for why in reversed(foreign) if why)
    return [places[i] for i in kept], [values[i] for i in kept], None


# What opens a revision after the lines: "Edit:", "Update:", "Final review:", "Updated counts:"
# (not "Revised caption:", which brings another caption).
_REVISION_MARK = re.compile(r"(?:^|\n)[ \t>*_#-]*(?:edit(?:ed)?|update[d]?|correction|revised?|"
                            r"recount(?:ed|ing)?|"
                            r"final\s+(?:review|check))\b(?!\s+(?:caption|description|version|"
                            r"text))|\b(?:updated|revised|corrected|adjusted|new)\s+(?:counts?|"
                            r"scores?|points)\b", re.I)
# A count restated after such a mark: "C. Score 4, H. Score 1", "I adjust C to 1" (or "from 3
# to 4"), "H stays at 1", "H should be 0", "H goes down to 0" (the bare initial only with its
# verb: "Model C 200" is a name); the count ends its clause, or a reason follows ("C. Score 4
# needs the seat too" says what 4 would take).
_END = r"(?=[\s*_`]*(?:[.,;:)\n\u2014\u2013]|\(|$|\s-\s|\s+(?:and|because|since|as|given)\b))"
_RESTATED = {name: re.compile(
    rf"(?:{_label_name(name, initial)}(?:\s*\(\s*\w\.?\s*score\s*\))?[\s*_`$:=]*(?:(?:is|at|to|"
    rf"now|becomes)\s+)*|(?:(?:adjust|set|lower|rais|chang|put|mov|bring|mak|reduc|"
    rf"increas)\w*\s+(?:the\s+)?(?-i:{initial.upper()})\s+(?:score\s+|count\s+)?(?:down\s+|"
    rf"up\s+)?(?:from\s+\d+\s+)?to\s+|(?-i:\b{initial.upper()})\s+(?:(?:stays|remains)\s+"
    rf"(?:at\s+)?|(?:should\s+(?:really\s+)?be|is(?:\s+now)?|goes\s+(?:down|up)\s+to|"
    rf"(?:drops|falls|rises)\s+to)\s+)))"
    rf"(?P<n>\d+(?:\.\d+)?)(?![\d/%]|\.\d){_END}", re.I)
    for name, (_, initial) in _KEYS.items()}
# The review keeps its counts: "so I keep the scores as they are", "the counts above stand".
_KEPT = re.compile(r"\b(?:keep|kept|leave|retain)\s+(?:the|my|both|these|all)\s+(?:scores?|counts?|"
                   r"points)|\b(?:scores?|counts?|points)\s+(?:above\s+)?(?:stand|remain\s+(?:as|"
                   r"unchanged)|are\s+unchanged)\b", re.I)
# A revision said of another caption than the candidate: "For that version, H goes down to 0",
# "for the rewritten caption, C should be 4", "For "A wooden chair", C is 3", "for the second
# caption in the batch".
_FOR_ANOTHER_CAPTION = re.compile(
    r"\b(?:for|of|in|with)\s+(?:that|this|the|my|a|an|your)\s+(?:[\w-]+\s+){0,2}?(?:version|"
    r"rewrite|alternative|(?:rewritten|revised|corrected|improved|proposed|suggested|second|other|"
    r"next|previous|new|fuller|better|ideal)\s+(?:caption|description|one))\b|\bfor\s+[\"\u201c]",
    re.I)
# "I keep the scores for C, but H should be 0": what is kept is one count.
_KEPT_ONE = re.compile(r"\s+(?:for|of)\s+(?:the\s+)?(?:(?-i:(?P<initial>[CH]))\b|(?P<name>correct|"
                       r"halluc)\w*)", re.I)


def _kept(tail: str, start: int, name: str) -> bool:
    """Whether the review after ``start`` says it keeps this count as it was."""
    kept = _KEPT.search(tail, start)
    if kept is None:
        return False
    one = _KEPT_ONE.match(tail, kept.end())
    return one is None or (one.group("initial") or one.group("name")[0]).upper() == \
        _KEYS[name][1].upper()


_WEIGHED = re.compile(r"\b(?:consider\w*|thought\s+(?:about|of)|whether|tempted|would|could|might|"
                      r"may|needs?|requires?|max(?:imum)?|perfect|ideal|rewrite|references?|"
                      r"for\s+my)\b", re.I)


def _sentence_at(text: str, pos: int) -> int:
    """Where the sentence holding ``pos`` starts.

    "C. Score 5 and H. Score 0": an initial's period ends no sentence.
    """
    ends = [m.end() for m in re.finditer(r"(?<!\b[A-Z])[.!?](?=\s)|\n", text[:pos])]
    return ends[-1] if ends else 0


def _revised_after(out: dict[str, tuple[float | None, str | None]], tail: str
                   ) -> dict[str, tuple[float | None, str | None]]:
    """The counts, each revised in prose after the lines ("The H. Score should be 2").

    A count the answer corrects after its lines ("The H. Score should be 2"; after "Edit:" or
    "Final review:", "C. Score 4", "I adjust C to 1") is the corrected value, with a note (so
    the reading is off-contract and needs its second channel); two different corrections, or
    one under a condition ("if the handle counts"), leave the count open.
    """
    mark = _REVISION_MARK.search(tail)
    for name in _PATTERNS:
        if out[name][0] is None:
            continue
        found = list(_REVISED[name].finditer(tail))
        if mark is not None and not _kept(tail, mark.end(), name):
            # (Not one only weighed: "I considered lowering C to 3", "C would be 3".)
            found += [m for m in _RESTATED[name].finditer(tail, mark.end())
                      if not _WEIGHED.search(tail, _sentence_at(tail, m.start()), m.start())]
        # Not a count said of another caption ("for the rewritten caption, C should be 4").
        found = sorted((m for m in found if not _FOR_ANOTHER_CAPTION.search(
            tail, _sentence_at(tail, m.start()), m.start())), key=lambda m: m.start())
        said = {float(m.group("n")) for m in found}
        if found and float(found[-1].group("n")) == out[name][0]:
            said = set()  # "H should be 2; ..., so H stays at 1": the last word keeps it
        said.discard(out[name][0])
        if said and any(CONDITIONAL.search(sentence_of(tail, m.start())) for m in found):
            out[name] = (None, f"after its lines the answer corrects the {name} points under a "
                               "condition it does not settle")
        elif len(said) == 1:
            value = said.pop()
            out[name] = (value, f"the {name} points are corrected after the lines to {value:g}")
        elif said:
            out[name] = (None, f"after its lines the answer corrects the {name} points to "
                               f"{len(said)} different values")
    return out


_BULLET = re.compile(r"[ \t>]*(?:[-*\u2022]|\d+[.)])[ \t]")


def _without_explanations(text: str, places: list[tuple[int, int]],
                          values: list[tuple[float | None, str | None]]
                          ) -> tuple[list[tuple[int, int]], list[tuple[float | None, str | None]]]:
    """The label's occurrences less the explanation's bullets that name it with no count.

    "- Hallucination: the caption says ... (1)" itemises the explanation after the counts were
    given; it is no second, unreadable count. Kept when no occurrence holds a count.
    """
    if not any(v is not None for v, _ in values):
        return places, values
    kept = [(p, v) for p, v in zip(places, values, strict=True)
            if v[0] is not None or not _BULLET.match(text, start_of_line(text, p[0]))
            or not re.match(r"[ \t*_]*[^\W\d_]{2}", text[p[0]:])]
    return [p for p, _ in kept], [v for _, v in kept]


def _left_open(out: dict[str, tuple[float | None, str | None]], masked: str, after: str
               ) -> dict[str, tuple[float | None, str | None]]:
    """The counts, less those the rest of the answer leaves open.

    A review that hedges a count after the lines ("Final review: C. Score might be 3 or 4")
    reopens it; points counted under another label beside H ("Irrelevant-content penalty:
    1", where the prompt penalises irrelevant content) may or may not be hallucination points.
    """
    for name in _PATTERNS:
        if out[name][0] is not None and (hedge := _REOPENED[name].search(after)) is not None:
            out[name] = (None, f"after its counts the answer leaves the {name} points open "
                               f"again ({' '.join(hedge.group(0).split())!r})")
    if out["hallucination"][0] is not None:
        for m in _PENALTY_LINE.finditer(masked):
            if float(m.group("n")) > 0 and not _PATTERNS["hallucination"].search(m.group(0)):
                out["hallucination"] = (None, (
                    f"the answer counts points beside the hallucination points "
                    f"({' '.join(m.group(0).split())!r}): whether they are hallucination "
                    "points (the prompt penalises irrelevant content) is not settled"))
                break
    return out


# A count named again after the lines, with a hedge: "C. Score might be 3 or 4".
_REOPENED = {name: re.compile(
    rf"{_label_name(name, initial)}[^\n.;]{{0,30}}?(?:\b(?:might|may|could|would)\s+(?:also\s+|"
    rf"well\s+|rather\s+|instead\s+)?be\b|\b(?:either|possibly|perhaps|arguably|between)\b)"
    rf"[^\n.;]{{0,30}}?\d", re.I) for name, (_, initial) in _KEYS.items()}
# A count corrected after the lines: "The H. Score should be 2", "C. Score is actually 4".
_REVISED = {name: re.compile(
    rf"{_label_name(name, initial)}[^\n.;\d]{{0,20}}?\b(?:(?:should|must|ought\s+to|needs?\s+to)"
    rf"\s+(?:really\s+|instead\s+|actually\s+)?be|(?:is|becomes|goes)\s+(?:actually|really|now)"
    rf"|(?:is|was|are)\s+(?:corrected|revised|raised|lowered|changed|updated|increased|"
    rf"decreased)\s+to|becomes|goes\s+(?:up|down)\s+to|rises\s+to|drops\s+to)\b"
    rf"[\s*_`$:]*(?P<n>\d+(?:\.\d+)?)(?![\d/%]|\.\d)", re.I)
    for name, (_, initial) in _KEYS.items()}
# A labelled count of penalised content beside C and H: "Irrelevant-content penalty: 1".
_PENALTY_LINE = re.compile(
    r"^[ \t>*_#|-]*[^\n:=]{0,40}?\b(?:penalt(?:y|ies)|deduct(?:ion|ions|ed)?|irrelevan(?:t|ce)|"
    r"unsupported|unverifi(?:able|ed)|extraneous|speculative)\b[^\n:=\d]{0,40}[ \t*_]*[:=]"
    r"[ \t*_`$]*[-\u2212]?(?P<n>\d+(?:\.\d+)?)", re.I | re.M)


_ADJUSTED = re.compile(
    r"\b(?:scores?|points|counts?|they|these|it)\s+(?:should|must|ought\s+to|needs?\s+to|"
    r"will\s+need\s+to)\s+(?:probably\s+)?be\s+(?:adjusted|revised|raised|lowered|increased|"
    r"decreased|changed|updated|corrected|reconsidered)\b|\b(?:I\s+(?:would|will|should)\s+)?"
    r"(?:adjust|revise|raise|lower|increase|decrease|update)\s+(?:the|these|my|its|both)\s+"
    r"(?:scores?|points|counts?)\b", re.I)


def _heading(name: str, initial: str) -> re.Pattern[str]:
    """A points label alone on its line (a heading, a bold line): its value is on the next."""
    label = _label_name(name, initial)
    return re.compile(rf"^[ \t#>*_-]*{label}\s*(?:\(\s*{initial}\.?\s*score\s*\))?[ \t*_]*"
                      r"(?P<rest>)$", re.I | re.M)


_HEADINGS = {"correctness": _heading("correctness", "c"),
             "hallucination": _heading("hallucination", "h")}
# "CS=3, HS=1, P=75%", "C-SCORE: 6. H-SCORE: 0. PRECISION: 100 PCT.": the next field on the
# line ends a value.
_NEXT_FIELD = re.compile(r"(?:[,;|]|\.(?=[ \t]))\s*[A-Za-z][\w. -]{0,20}[:=]")
_THINGS = r"(?:attributes?|details?|elements?|features?|items?|facts?|properties|objects?)"
# The counts under other words: "Correct attributes: 4", "Hallucinated details: None", and
# the initials with S for score ("CS=3, HS=1"; upper case only: "cs" is no label).
_PARAPHRASES = {
    "correctness": re.compile(
        rf"(?:(?<![A-Za-z])(?:correct(?:ly\s+(?:described|identified|stated))?|accurate)\s+"
        rf"{_THINGS}(?:\s+(?:count|points?|score))?|(?-i:\bCS\b))[\s*_]*[:=](?P<rest>[^\n]*)",
        re.I),
    "hallucination": re.compile(
        rf"(?:(?<![A-Za-z])(?:hallucinated|incorrect|wrong|inaccurate|invented|fabricated)\s+"
        rf"{_THINGS}(?:\s+(?:count|points?|score))?|(?-i:\bHS\b))[\s*_]*[:=](?P<rest>[^\n]*)",
        re.I),
}
# The answer says in words that nothing is hallucinated (with no count stated anywhere).
_NO_HALLUCINATION = re.compile(
    rf"\b(?:there\s+(?:are|were|is)\s+no|(?<![\w-])no|zero)\s+(?:hallucinat\w*|(?:incorrect|"
    rf"hallucinated|wrong|invented|fabricated)\s+{_THINGS})(?!\s+(?:count|score|points?)\s*[:=])",
    re.I)


# A count the prose states: "in total 4 correct attributes", "2 hallucinated details".
_STATED = {
    "correctness": re.compile(rf"(?<![\d.])(?P<n>\d+)[ \t]+(?:correct(?:ly[ \t]+\w+)?|accurate|"
                              rf"right)[ \t]+{_THINGS}\b", re.I),
    "hallucination": re.compile(rf"(?<![\d.])(?P<n>\d+)[ \t]+(?:hallucinated|incorrect|wrong|"
                                rf"inaccurate|invented|fabricated)[ \t]+{_THINGS}\b", re.I),
}


def _count_in_words(name: str, text: str, value: float | None) -> str | None:
    """Why the prose's own count of ``name`` leaves the labelled one in doubt, or None.

    "C. Score: 3 ... in total 4 correct attributes": the score line and the count the judge
    worked out disagree, and nothing says which it meant.
    """
    if value is None:
        return None
    for m in _STATED[name].finditer(text):
        if float(m.group("n")) != value:
            return (f"the {name} points ({value:g}) and the count the answer states "
                    f"({m.group(0).strip()!r}) disagree, and nothing says which stands")
    return None


# What introduces a later block of points as the revision of an earlier one ("Final scores
# after review:"); never "Corrected caption:" (that scores another caption).
_REVISED_BLOCK = re.compile(r"\b(?:re-?check\w*|after\s+all|final\s+(?:scores?|review|"
                            r"assessment|answer|points|counts?)|after\s+(?:review|re-?check\w*)|"
                            r"updated\s+(?:scores?|points|counts?))\b", re.I)


def _occurrences(rx: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    """Where each label's value starts and where its stretch ends.

    A second label on the same line ("H. Score: 1 — actually ... so H. Score: 0") is an
    occurrence of its own.
    """
    out = []
    pos = 0
    while (m := rx.search(text, pos)) is not None:
        inner = rx.search(text, m.start("rest"), m.end("rest"))
        if not _in_example(text, m.start()):
            out.append((m.start("rest"), inner.start() if inner else m.end("rest")))
        pos = inner.start() if inner else m.end()
    return out


_EXAMPLE_OPEN = re.compile(r"\(\s*(?:e\.\s?g\.|(?:for\s+(?:example|instance)|such\s+as|like)\b)",
                           re.I)


def _in_example(text: str, pos: int) -> bool:
    """Whether ``pos`` is inside a bracketed example: '(e.g. "a black tire" gets C. Score: 2)'."""
    opening = text.rfind("(", 0, pos)
    return opening >= 0 and ")" not in text[opening: pos] and "\n" not in text[opening: pos] \
        and _EXAMPLE_OPEN.match(text, opening) is not None


# A line that gives the whole object's count after per-part ones: "Overall — C. Score: 5".
_OVERALL_LINE = re.compile(r"[ \t>*_#-]*(?:overall|total|in\s+total|combined|whole\s+object|"
                           r"all\s+objects|summed?|aggregate)\b", re.I)


def _decide(name: str, text: str, values: list[tuple[float | None, str | None]],
            places: list[tuple[int, int]]) -> tuple[float | None, str | None]:
    """One count from its labelled values: all alike, or a later one settling them.

    The later one is introduced as a revision, or is the one line for the whole object after
    per-part lines ("Overall - C. Score: 5").

    Different values with nothing preferring the last (a judge that also scores its own
    rewrite, or a second caption) abstain, quoting them.
    """
    if not values:
        return None, f"no {name} score in the output"
    if values[-1][0] is None:
        return values[-1]
    readable = [(v, p) for v, p in zip(values, places, strict=True) if v[0] is not None]
    last, (last_start, _) = readable[-1]
    differing = [(v, p) for v, p in readable if v[0] != last[0]]
    if not differing:
        return last
    between = text[differing[-1][1][0]: last_start]
    if REVISION.search(between) or _REVISED_BLOCK.search(between):
        return last
    line = line_before(text, last_start)
    if _OVERALL_LINE.match(line) and not any(
            _OVERALL_LINE.match(line_before(text, p[0])) for _, p in differing):
        return last  # "Table: C. Score 3 / Chairs: C. Score 2 / Overall — C. Score: 5"
    shown = ", ".join(f"{v[0]:g}" for v, _ in readable[:4])
    return None, (f"{len({v[0] for v, _ in readable})} different {name} points ({shown}) and "
                  "nothing says which is the verdict")


def parse_ch(text: str) -> tuple[float | None, float | None]:
    """Correctness and hallucination points from a judge's answer (None where absent)."""
    found = read_ch(text)
    return found["correctness"][0], found["hallucination"][0]


# The prompt's format: "Correctness Score (C. Score): N", "Hallucination Score (H. Score): N".
_CONTRACT_LABEL = r"\b{}\.\s*Score\s*\)?\s*:"
# Each label written once with a value, and that value plain: a number, then at most the
# breakdown in brackets ("2 (bus, red)"); a line that works the count out, revises or
# questions it ("1 point each ... = 2", "3 → 4") is not.
_CONTRACT_LINES = tuple(
    (re.compile(_CONTRACT_LABEL.format(x) + r"[\s*_`$]*[-\u2212]?\d", re.I),
     re.compile(_CONTRACT_LABEL.format(x) + r"[ \t*_`$]*[-\u2212]?\d+(?:\.\d+)?[ \t*_`$]*"
                r"(?:\([^()\n]*\))?[ \t*_`$.]*$", re.I | re.M))
    for x in ("C", "H"))


@lru_cache(maxsize=256)
def _read_both(text: str, quotes: tuple[str, ...], truncated: bool
               ) -> dict[str, tuple[float | None, str | None]]:
    # The two slots of one answer are read together; each slot asks for its own count.
    masked = mask_text(text, quotes)
    declined = find_decline(masked, text)
    if declined is not None:
        why = f"no score: the judge declined ({declined!r})"
        return {name: (None, why) for name in _PATTERNS}
    if (elsewhere := find_elsewhere(masked, text)) is not None:
        why = f"no counts for this item: the judge says they are another item's ({elsewhere!r})"
        return {name: (None, why) for name in _PATTERNS}
    # (Before the first count: a block for another caption after the counts is the judge
    # running on, which the count rules weigh.)
    view = answer_view(text).text
    for start, end in other_blocks(view, quotes):
        view = blank(view, start, end)  # (a batch's blocks for other captions)
    first = re.search(r"\bcorrectness\b|\bC\.\s*score\b", view, re.I)
    if (other := other_quoted(view, quotes, first.start() if first else len(view))) is not None:
        why = (f"the answer counts for a text it quotes ({other[:60]!r}) that is not the "
               "candidate")
        return {name: (None, why) for name in _PATTERNS}
    if (words := stand_in(masked, counts=True)) is not None:
        # "Placeholder values so the format is complete: C. Score: 0 ...": no counts at all.
        why = f"no counts: the judge calls its values stand-ins ({words!r})"
        return {name: (None, why) for name in _PATTERNS}
    return read_ch(text, quotes, truncated=truncated)


def _on_contract(text: str, slot: ScoreSlot) -> bool:
    """Each of the prompt's two labels written once (JSON: one field naming the count)."""
    if slot.contract == "json":
        names = _field_names(slot.name)
        return sum(key(f.name) in names for f in json_fields(answer_view(text).text)) == 1
    return all(len(written.findall(text)) == 1 and len(plain.findall(text)) == 1
               for written, plain in _CONTRACT_LINES)


# The precision the answer states, on its own line: the last percentage there ("Precision
# Score: 4/(4+1) = 80%").
_PRECISION_LINE = re.compile(r"^[\s*_#>-]*precision\b[^\n]*", re.I | re.M)
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%")


def _precision_disagrees(text: str, both: dict[str, tuple[float | None, str | None]]
                         ) -> tuple[str, bool] | None:
    """Why the answer's own precision says its counts may be misread, and whether they are.

    "Precision Score: 75%" beside C 4 and H 1 (80 %): the judge's arithmetic, or its counts,
    are off; the counts still decide the score (the paper computes the precision from them),
    but they are no longer stated once and consistently: a second channel has to agree (the
    second item False). "H. Score: 11 ... Precision Score: 80%" beside C 4: 80 % follows from
    the count with its digit written once (4 and 1), a stream that doubled a chunk: the count
    is damaged, and a continuation of the answer would only copy it (True).
    """
    line = _PRECISION_LINE.search(answer_view(text).text)
    stated = _PERCENT.findall(line.group(0)) if line else []
    c, h = both["correctness"][0], both["hallucination"][0]
    if not stated or c is None or h is None or c + h <= 0:
        return None
    p = float(stated[-1])

    def fits(c: float, h: float) -> bool:  # (a precision rounded to a whole per cent)
        return c + h > 0 and abs(100 * c / (c + h) - p) <= 1.5

    if fits(c, h):
        return None
    why = (f"its stated precision ({stated[-1]}%) does not follow from its counts ({c:g}, "
           f"{h:g}: {100 * c / (c + h):.1f}%)")
    once = [(float(w[: len(w) // 2]) if len(w := f"{v:g}") % 2 == 0 and w.isdigit()
             and w[: len(w) // 2] == w[len(w) // 2:] else v) for v in (c, h)]
    if once != [c, h] and fits(*once):
        return why + f"; it does from {once[0]:g} and {once[1]:g}: a digit written twice", True
    return why, False


def read_points_slot(text: str, slot: ScoreSlot, *, truncated: bool = False) -> SlotResult:
    """A ``points`` slot (cap3d's C. or H. count) read from the answer's text.

    ``ok`` with the count as ``printed`` (no distribution: counts are read from the text),
    ``confirmation`` saying whether the answer kept to the prompt's labelled lines; or a
    ``parse_failure`` with the reason (a refusal, the count missing, unreadable or ambiguous).
    """
    both = _read_both(text, tuple(slot.quotes), truncated)
    value, why = both[slot.name]
    if value is not None and (stated := stated_by_candidate(value, f"{value:g}", slot)):
        value, why = None, stated
    if value is None:
        return SlotResult(slot.name, slot.values, None, None, "text", "parse_failure", why)
    how = "the C./H. points labels (or fields naming them)"
    if why is not None:  # read, with a note: a count corrected after the lines
        return SlotResult(slot.name, slot.values, None, None, "text", "ok", None, value,
                          confirmation="unconfirmed", read_by=f"{how} (off-contract: {why})")
    if _on_contract(text, slot):
        if (off := _precision_disagrees(text, both)) is not None:
            if off[1]:
                return SlotResult(slot.name, slot.values, None, None, "text", "parse_failure",
                                  off[0])
            return SlotResult(slot.name, slot.values, None, None, "text", "ok", None, value,
                              confirmation="unconfirmed",
                              read_by=f"{how} (off-contract: {off[0]})")
        return SlotResult(slot.name, slot.values, None, None, "text", "ok", None, value,
                          confirmation="on-contract", read_by=how)
    return SlotResult(slot.name, slot.values, None, None, "text", "ok", None, value,
                      confirmation="unconfirmed",
                      read_by=how + " (off-contract: not the prompt's two labelled lines, "
                                    "once each)")


__all__ = ["parse_ch", "parse_points", "read_ch", "read_points_slot"]
