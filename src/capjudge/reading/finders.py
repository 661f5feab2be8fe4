"""Where a verdict may be written: each kind of place's candidates, before any decision.

:func:`capjudge.reading.locate.locate` gathers candidates from every finder here, in the
order its module doc gives (structure, the method's own format, labelled lines, the opening
number, a line holding only a number, stars, a value on the judge's own scale; then phrases),
and decides among them. A finder only says where a number *could* be the slot's verdict and
how it was found (:attr:`~capjudge.reading.candidates.Candidate.how`); whether it is one (a
competing value, a withdrawn verdict, an off-contract shape) is the decision's business.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from capjudge.protocol import ScoreSlot
from capjudge.reading.candidates import Candidate, stands_alone
from capjudge.reading.contract import (
    ANY_VERDICT,
    CHANGED_TO,
    has_number,
    names_part,
    rates_another,
    sentence_of,
)
from capjudge.reading.numbers import (
    DIGITS,
    NUMBER_WORDS,
    Number,
    first_number,
    number_at,
    value_at,
)
from capjudge.reading.pictured import owned_elsewhere, picture_value
from capjudge.reading.scale import make_candidate
from capjudge.reading.structure import (
    Field,
    boxed_fields,
    json_fields,
    table_fields,
    xml_fields,
)
from capjudge.reading.view import start_of_line
from capjudge.reading.vocabulary import (
    FINAL_WORDS,
    GENERIC,
    abbreviations,
    is_generic,
    label_pattern,
    matches,
    slot_names,
)

_MARKUP = r"[\s*_`]*"
_LATEX_OPEN = r"(?:\\(?:boxed|text|textbf|mathbf)\s*\{\s*)?"
# What may stand right before a verdict's digits: a plus sign, "about" ("$+69$", "$≈74$", "~75").
_DECORATION = r"(?:[+~\u2248\u223c][ \t]*|\\(?:approx|sim)[ \t]*)?"
SENTENCE_END = re.compile(r"[.!?](?:\s|$)")
REFUSAL = re.compile(
    # ("I can't find anything to fault" is praise, not a refusal.)
    r"\b(?:I(?:'|\u2019)?m sorry|I am sorry|I (?:cannot|can(?:'|\u2019)?t|am unable to|'m "
    r"unable to|won(?:'|\u2019)?t)(?!\s+(?:find|see|spot|think\s+of)\s+(?:anything|much|(?:a\s+"
    r"single|any|one)\s+(?:thing|fault|error|flaw|issue|mistake|problem)s?)\b)|(?:cannot|"
    r"unable to) (?:assist|help|evaluate|rate|comply))",
    re.I)
_RATING_PHRASE = re.compile(
    r"\b(?:I(?:'d|\s+would|\s+will|'ll)?\s+)?(?:give|rate|rating|score|assign|award|grade|"
    r"deserves?|merits?|earns?)"
    r"(?:\s+(?:it|this|the\s+caption|this\s+caption|the\s+text|this\s+text|a|an|at|as|with|of"
    r"|is|was|would\s+be|:|solid|strong|good|decent|fair|firm|high|low|modest|generous|weak"
    r"|clear|respectable|middling|reasonable))*\s+\$?(?=\d|" + NUMBER_WORDS.pattern + r")"
    # "roughly 80 — call it 78 given the yacht": the judge settling on a value
    r"|\bcall\s+it\s+(?:an?\s+)?\$?(?=\d+\$?(?:\s*/\s*\d+)?(?:\s*[.!,;)\n\u2014\u2013]|\s+(?:given|"
    r"because|since|as|for|overall|then|and)\b|$))"
    # "More like 65.": the judge moving its verdict
    # (opening its clause: "the flock is more like 30" corrects a count)
    r"|(?:^|(?<=[.!?:;\n\u2014\u2013])|(?<=[.!?:;,\u2014\u2013]\s))more\s+like\s+(?:an?\s+)?\$?"
    r"(?=\d+\$?(?:\s*[-\u2013]\s*\d+)?\s*(?:[.!,;)\n]|$))"
    # "an 80% accurate caption, which on this scale is a 4": a value converted to the scale
    r"|\b(?:which|that|this)\s+on\s+(?:this|the|that|our|a)\s+(?:[\w-]+\s+)?scale\s+(?:is|means|"
    r"makes\s+it|comes\s+to|corresponds\s+to|translates\s+to|equals)\s+(?:an?\s+)?\$?"
    r"(?=\d+\$?\s*(?:[.!,;)\n]|$))"
    # "I'd put it closer to 65" ("That would put it closer to 60" weighs another weighting)
    r"|(?<!would\s)(?<!could\s)(?<!might\s)\bput\s+it\s+(?:closer\s+to|nearer\s+to|at|"
    r"around|about)\s+(?:an?\s+)?\$?(?=\d)"
    # "Overall, I'd say 3.": a number that ends its clause ("I'd say 3 of the 4 objects" counts)
    r"|(?<!\?\s)(?<!\?)\bI(?:'d|\u2019d|\s+would)\s+say\s+(?:it(?:'s|\s+is)\s+|it\s+deserves\s+)?"
    r"(?:an?\s+|about\s+|around\s+|roughly\s+)?\$?(?=(?:\d+|" + NUMBER_WORDS.pattern + r")\$?"
    r"(?:\s*(?:/|out\s+of)\s*\d+)?\s*(?:[.!)\n]|$))",
    re.I)
_SCORE_LABEL = re.compile(r"\b(?:score|rating|rate|rated)\b[^\n\d]{0,24}?(?=[-]?\d)", re.I)


# -- 3. structure ------------------------------------------------------------------------------

_VALUE_WORDS = frozenset({"score", "value", "rating", "points", "point", "grade", "result",
                          "ratingvalue", "scorevalue"})


def _field_rank(f: Field, slot: ScoreSlot) -> int:
    """How well a structure's field names the slot (its name, or a parent's for 'score')."""
    rank = matches(f.name, slot)
    parents = [p for p in f.path[:-1] if not p.startswith("[")]
    if f.kind == "table" and len(f.path) == 2:
        # A table cell: named by its row; a column of reasons or comments is never a score.
        return 0 if _looks_text(f.path[1].lower()) else matches(f.path[0], slot)
    if f.name.lower() in _VALUE_WORDS and parents:
        rank = max(rank if is_generic(slot) else 0, max(matches(p, slot) for p in parents))
    return rank


def _looks_text(column: str) -> bool:
    """A column of words, or of numbers that are no score, never the criterion's value.

    Words: reasons, comments. Numbers: a weight, a weighted share, the scale's maximum
    ("Max"; a "Score (max 100)" column is the score).
    """
    return any(w in column for w in ("reason", "explanation", "comment", "note", "justif",
                                     "assessment", "evidence", "why", "理由", "说明", "weight",
                                     "contribution", "权重")) or re.match(
        r"\W*(?:max(?:imum)?|possible|out\s+of)\b", column) is not None


_NAME_KEYS = frozenset({"name", "criterion", "criteria", "aspect", "dimension", "metric",
                        "category", "label", "key", "title"})


def _sibling_names(fields: Sequence[Field]) -> dict[tuple[int, tuple[str, ...]], list[str]]:
    """Per JSON object (its group and path), the values of its naming keys ({"criterion": ...})."""
    out: dict[tuple[int, tuple[str, ...]], list[str]] = {}
    for f in fields:
        if f.kind == "json" and f.name.lower() in _NAME_KEYS:
            out.setdefault((f.group, f.path[:-1]), []).append(f.value)
    return out


# A JSON object named for another thing rated: {"reference_1": {"accuracy": 95}},
# "improved_caption", "image_quality" (only ever another thing), or a part: "frames", "views"
# (a wrapper that may also hold the verdict).
_OTHER_KEY = re.compile(r"(?:(?:ref(?:erence)?s?|gt|ground[_ -]?truth)(?:[_ -]?captions?)?|"
                        r"human[_ -]?(?:caption|reference)s?)(?:[_ -]?\d+)?|"
                        r"(?:previous|prior|next)(?:[_ -]?(?:caption|item))?|"
                        r"(?:improved|rewritten|revised|corrected|suggested|alternative|my)[_ -]?"
                        r"(?:caption|description|version)|rewrite|image[_ -]?quality", re.I)
_PART_KEY = re.compile(r"(?:frames?|segments?|clips?|shots?|scenes?|views?|sentences?|regions?)"
                       r"(?:[_ -]?\d+)?", re.I)


def _own_objects(cands: list[Candidate]) -> list[Candidate]:
    """The candidates of JSON objects not named for another thing, while some are.

    When every one is, a reference's or a rewrite's ("reference_1" alone) say so and the
    reading abstains; parts alone ("frames" wrapping everything) are left to the other rules.
    """
    def named(c: Candidate, rx: re.Pattern[str]) -> str | None:
        if not c.how.startswith("JSON key"):
            return None
        return next((p for p in c.how.split("'")[1].split("/")[:-1] if rx.fullmatch(p)), None)

    other = {k: part for k, c in enumerate(cands)
             if (part := named(c, _OTHER_KEY) or named(c, _PART_KEY)) is not None}
    if not other:
        return cands
    if len(other) < len(cands):
        return [c for k, c in enumerate(cands) if k not in other]
    return [replace(c, problem=f"the value is under {other[k]!r}, not the candidate's")
            if named(c, _OTHER_KEY) else c for k, c in enumerate(cands)]


def structured_candidates(text: str, masked: str, slot: ScoreSlot) -> list[Candidate]:
    r"""Candidates from JSON fields, table cells and ``\boxed{}`` that name the slot.

    The structure is parsed on the unmasked ``text`` (a quotation masked inside a JSON string
    must not break the JSON); a value whose number ``masked`` blanks (it quotes the caption)
    is not a verdict. A JSON object may name what it rates in a sibling key:
    ``[{"criterion": "accuracy", "score": 80}, ...]``.
    """
    out: list[Candidate] = []
    fields = json_fields(text) + table_fields(text) + xml_fields(text)
    siblings = _sibling_names(fields)
    if is_generic(slot):
        fields += boxed_fields(text)
    keyed: dict[tuple[int, tuple[str, ...]], list[tuple[str, int]]] = {}
    for f in fields:
        rank = 2 if f.kind in ("boxed", "marker") else _field_rank(f, slot)
        named = []
        if f.kind == "json" and f.name.lower() in _VALUE_WORDS:
            named = [matches(v, slot) for v in siblings.get((f.group, f.path[:-1]), [])]
            if named:
                # The object names what it rates: its score is that thing's, or nobody's.
                rank = max(named)
        if not rank:
            continue
        n = first_number(text, f.start, f.end)
        if n is None or not masked[n.start:n.end].strip():
            continue
        what = {"json": "JSON key", "table": "table row", "xml": "tag",
                "boxed": "\\boxed{}", "marker": "a verdict marker ([[N]], [RESULT] N)"}[f.kind]
        boxed = f.kind in ("boxed", "marker")
        how = f"{what} {'/'.join(p for p in f.path if p)!r}" if not boxed else what
        final = boxed or any(FINAL_WORDS.search(p) for p in f.path)
        out.append(make_candidate(text, n, how, rank, slot, final, source="structure"))
        if f.kind == "json" and f.name.lower() in _VALUE_WORDS and not named:
            keyed.setdefault((f.group, f.path[:-1]), []).append((f.name, len(out) - 1))
    for keys in keyed.values():
        values = [(name, out[k].number.value) for name, k in keys]
        if len({v for _, v in values}) > 1:
            # {"rating": 70, "score": 65}: one object, two verdict keys that disagree; or one
            # key written twice, {"score": 70, ..., "score": 75} (a loose grammar let the
            # model go on: a parser's last-wins is not the judge's choice).
            problem = ("the JSON object has several score keys that disagree ("
                       + ", ".join(f"{name}: {v:g}" for name, v in values)
                       + ") and nothing says which is the verdict")
            for _, k in keys:
                out[k] = replace(out[k], problem=problem)
    return _own_objects(out)


# -- 4. labelled lines -------------------------------------------------------------------------


_NEXT_LABEL = re.compile(r"\n[^\n]*?[^\W\d_][^\n]*[:=]")


def format_candidates(text: str, slot: ScoreSlot) -> list[Candidate]:
    r"""The method's own format: a label, a short filler on the same sentence, the anchor.

    "The final score is $85$", "Accuracy: $80$", "最终得分：$73$", "The final score is:\n\n
    $\boxed{85}$": the filler has no digits, does not end a sentence and spans at most two
    line breaks (a label alone on its line, its value on the next).
    """
    if not (slot.label and slot.anchor):
        return []
    anchor = re.escape(slot.anchor)
    label = re.compile(label_pattern(slot_names(slot)), re.I)
    value = re.compile(rf"[^\d]{{0,80}}?{anchor}{_MARKUP}{_LATEX_OPEN}{_MARKUP}{_DECORATION}"
                       r"(?=[-]?\d)")
    out = []
    spelled = re.compile(rf"[^\d]{{0,80}}?{anchor}{_MARKUP}(?=[^\W\d_])")
    for m in label.finditer(text):
        v = value.match(text, m.end())
        w = spelled.match(text, m.end()) if v is None else None
        if w is not None and not SENTENCE_END.search(w.group(0)) and "\n" not in w.group(0) \
                and (n := _spelled_in_anchor(text, w.end(), anchor)) is not None \
                and not _measures_other(text, m.start()):
            # "最终得分为 $八十五$ 分", "$quatre-vingt-cinq$": the format's place, its value in
            # words or numerals of another script; read, but not as the format writes it.
            out.append(make_candidate(text, n, f"label {m.group(0).strip()!r} and "
                                      f"{slot.anchor!r}, in words", 2, slot,
                                      _is_final(text, m.start()), source="label"))
            continue
        if v is None or _measures_other(text, m.start()):
            continue
        filler = text[m.end(): v.end()]
        if filler.count("\n") > 2 or SENTENCE_END.search(filler) or _NEXT_LABEL.search(
                filler) or "|" in filler:
            # (A table's "Score" header over rows that score other things is no verdict.)
            continue  # "Conciseness: ${score}$\nRelevance: $90$": 90 is Relevance's
        n = number_at(text, v.end())
        if n is not None:
            how = f"label {m.group(0).strip()!r} and {slot.anchor!r}"
            line_end = text.find("\n", n.end)
            rest = text[n.end: line_end if line_end >= 0 else len(text)]
            fix = _LINE_FIX.search(rest)
            later = number_at(text, n.end + fix.end()) if fix is not None else None
            if later is not None:
                # "Completeness: $70$ — actually, make that $60$": corrected on its own line.
                out.append(make_candidate(text, later, f"{how}, corrected on its line", 2, slot,
                                      _is_final(text, m.start()), source="label"))
                continue
            out.append(replace(make_candidate(text, n, how, 2, slot, _is_final(text, m.start()),
                                          source="label"), contract=True))
    return out


def _spelled_in_anchor(text: str, pos: int, anchor: str) -> Number | None:
    """A number in words (any language) or CJK numerals at ``pos``, closed by the anchor."""
    n = value_at(text, pos)
    if n is None or n.kind == "digits" or not re.match(rf"{_MARKUP}{anchor}", text[n.end:]):
        return None
    return n


# "Confidence in this score:", "Probability of this rating:": the label names another measure
# of the verdict, and its value is that measure's.
_OTHER_MEASURE = re.compile(r"\b(?:confidence|certainty|uncertainty|probability|likelihood|"
                            r"agreement|consensus|reliability)\b[^\n\d:=]{0,24}$", re.I)


def _measures_other(text: str, start: int) -> bool:
    """Whether the label at ``start`` is the object of another measure on its line."""
    return _OTHER_MEASURE.search(text, start_of_line(text, start), start) is not None


# "— actually, make that $60$", "(correction: $60$)", "... no, $60$": a value's own line
# corrects it.
_LINE_FIX = re.compile(r"\b(?:actually|correction|make\s+(?:that|it)|change\s+(?:that|it)\s+to|"
                       r"I\s+mean|rather|scratch\s+that|no\s*,)\b[^\n$\d]{0,40}?\$[\s*_`]*(?=\d)",
                       re.I)


# "Score ⇒ 70", "Score -> 70", "Score → 70": an arrow from the label to its value.
_ARROW = r"(?:-+>|=+>|[\u2192\u21d2\u21e8\u27f6\u27f9\u2794\u279c\u27a1\u2b95])"
# "my final score's sixty-eight, thus": "'s" joins a label to a value that ends its clause
# (not "the score's 0-100 range").
_CLAUSE_VALUE = (r"[ \t*_$]*(?:\d+|" + NUMBER_WORDS.pattern + r")[ \t*_$]*(?:[.!,;)]|\n|$)")
_SEPARATOR = (r"(?:\s*\([^()\n]{0,40}\))?" + _MARKUP
              # ("最终得分为72分", "最終スコアは72点", "최종 점수는 72점": the copula, or the
              # topic particle, joined to the label: CJK scripts have no word boundary.)
              + r"(?:" + _ARROW + r"|[:=]|\b(?:is|ist|es|est|era|war|è|é)\b|"
              r"['\u2019]s\b(?=" + _CLAUSE_VALUE + r")|\bof\b|\bwould\s+be\b|"
              r"[ \t]*(?:[为為是]|は|[는은])|"
              r"\u2014|\u2013|-(?!\d)|[ \t]*\.{3,}[ \t]*(?=\d))?"
              + _MARKUP + _LATEX_OPEN + r"\$?" + _MARKUP + _DECORATION)


# "a total of 17.00", "in total 4": a quantity, not a verdict's total.
_A_TOTAL = re.compile(r"\b(?:a|in)[ \t]+total\b", re.I)
# "最終スコアは60点ではなく、72点です": the value denied right after it ("not 60").
_NOT_THIS = re.compile(r"[ \t]*[点分점]?[ \t]*(?:ではなく|じゃなく|でなく|ではない|じゃない|"
                       r"이[ \t]*아니|가[ \t]*아니)")


def label_candidates(text: str, slot: ScoreSlot) -> list[Candidate]:
    """A label and its value: "**Score:** 58", "Final verdict — 57", "Correctness: 4".

    The slot's own names (rank 2) and, for a slot that is the answer's only verdict, the
    generic ones (rank 1); only a separator, markdown, LaTeX or ``$`` and at most two line
    breaks between the label and the number.
    """
    out = []
    for names, rank in ((slot_names(slot) + abbreviations(slot), 2),
                        (GENERIC if is_generic(slot) else (), 1)):
        if not names:
            continue
        rx = re.compile(label_pattern(names) + _SEPARATOR, re.I)
        for m in rx.finditer(text):
            if m.group(0).count("\n") > 2:
                continue
            n = value_at(text, m.end())
            if n is None or (n.kind != "digits" and not stands_alone(text, n)) \
                    or _measures_other(text, m.start()) or (
                        "\n" in text[m.start(): n.start] and rubric_entry(text, n)):
                continue  # "Conciseness: One clear sentence": a word, not the value
            if owned_elsewhere(text, m.start()) or (rank == 1 and _A_TOTAL.search(
                    text, max(0, m.start() - 12), m.start() + 6)) or _NOT_THIS.match(
                    text, n.end) or picture_value(text, n):
                continue  # "The screenshot's rating is 4/5", "a total of 17.00", "60点ではなく"
            if rank == 1 and not re.search(r"[:=\u2014\u2013$*-]|\b(?:is|ist|es|est|of|be)\b|"
                                           r"[为為是]|は|[는은]|[ \t]{3,}|\t|\.{3,}|" + _ARROW,
                                           m.group(0)):
                # ("RATING        77", "Score ...... 85": a column's gap or dot leaders stand
                # for the colon.)
                continue  # "Overall 3 objects ...": a generic word without a separator
            label = re.sub(r"[\s*_`:$\\{.]+$", "", m.group(0)).strip()
            out.append(make_candidate(text, n, f"label {label!r}", rank, slot,
                                  _is_final(text, m.start()), source="label"))
    return out


# An article before a number that is the whole rating: "A four.", "A solid 5 out of 5 —" (not
# "A four-legged chair", "A two-dog scene": the word goes on).
_ARTICLE_RATING = re.compile(r"an?[ \t]+(?:(?:solid|firm|clear|strong|weak|low|high|generous|"
                             r"modest|fair|good|decent)[ \t]+)?(?=(?:\d+|"
                             + NUMBER_WORDS.pattern + r")[ \t*_]*(?:[.!,;:)\u2014\u2013]|"
                             r"[ \t]-[ \t]|out[ \t]+of\b|/|$))",
                             re.I)


def opening_candidates(text: str, slot: ScoreSlot) -> list[Candidate]:
    """For a slot asked first: the number the answer opens with (after markup)."""
    if slot.position != "first":
        return []
    m = re.match(r"[\s*_`#>:\[(]*", text)
    start = m.end() if m else 0
    n = value_at(text, start)
    article = _ARTICLE_RATING.match(text, start) if n is None else None
    if article is not None:
        n = value_at(text, article.end())  # "A four. The sentence is easy to follow."
    if n is None or (n.kind in ("digits", "roman") and article is None
                     and re.match(r"[.)][*_]*\s+\D", text[n.end:])) \
            or _summed(text, n) or _counted_opening(text, n) or rubric_entry(text, n) \
            or picture_value(text, n):
        # A list marker ("1. The caption ..."), not a rating ("Seventy-five. ..."); the first
        # term of a sum worked out ("100 minus 15 for the colour = 85"); a count of things
        # ("3 people are visible; the caption says two."); the rubric restated ("1 = Very Low
        # Correctness, 2 = Low, ..."); the picture's own value ("87/100 is what the app shows").
        return []
    return [make_candidate(text, n, "the number the answer opens with", 1, slot,
                       source="opening")]


# A rubric's entry: the value, its sign right after it, a word ("1 = Very Low", "5 -> High").
# (A scale's phrasing blanked ("75/100: the market") leaves a run of spaces: no entry.)
_ENTRY = re.compile(r"(?<![\d.])(?P<n>\d+)[*_`]*[ \t]?[*_`]*(?P<sign>=|:|\u2192|->)[ \t*_`]*"
                    r"[^\W\d_]")


def rubric_entry(text: str, n: Number) -> bool:
    """Whether ``n`` opens an entry of the rubric restated: "1 = Very Low Correctness, 2 = ...".

    Two other values at least stand with the same sign and a word ("2 = Low", "3 = ..."), or
    the two ends of a scale ("0 = completely wrong, 100 = perfect"): the scale, entry by
    entry. ("3: Moderate ...; 4: High Correctness would need both" is a verdict and a level.)
    """
    m = _ENTRY.match(text, n.start)
    if m is None:
        return False
    entries = [(float(e.group("n")), e.start("n")) for e in _ENTRY.finditer(text)
               if e.group("sign") == m.group("sign")]
    # The run of entries in one direction that holds n ("1 = ..., 2 = ..., 3 = ..."; not "4 ->
    # High (2 -> Low and 3 -> Moderate do not fit)", nor "My rating: 4 = High" after a scale).
    for k, (_, at) in enumerate(entries):
        if at != n.start:
            continue
        for lo, hi in ((k, k + 1), (k - 1, k)):
            run = _monotone_run(entries, lo, hi)
            ends = {run[0], run[-1]} if run else set()
            if len(run) >= 3 or (len(run) == 2 and min(ends) in (0, 1)
                                 and max(ends) in (5, 10, 100)):
                return True
    return False


def _monotone_run(entries: list[tuple[float, int]], a: int, b: int) -> list[float]:
    """The values of the monotone run of ``entries`` through the pair ``a``, ``b`` (or none)."""
    if a < 0 or b >= len(entries) or entries[a][0] == entries[b][0]:
        return []
    up = entries[b][0] > entries[a][0]
    while a > 0 and (entries[a][0] > entries[a - 1][0]) == up \
            and entries[a][0] != entries[a - 1][0]:
        a -= 1
    while b + 1 < len(entries) and (entries[b + 1][0] > entries[b][0]) == up \
            and entries[b + 1][0] != entries[b][0]:
        b += 1
    return [v for v, _ in entries[a: b + 1]]


# What a count of things goes on with: "3 people are visible", "2 dogs; the caption ...".
_COUNT_GOES_ON = re.compile(r"[ \t]+(?:are|were|is|appear\w*|visible|in|on|at|sit\w*|stand\w*|"
                            r"can|could|and|but)\b|[ \t]*[,;(]", re.I)


def _counted_opening(text: str, n: Number) -> bool:
    """Whether the answer opens by counting things ("3 people are visible; ..."), not rating."""
    if _share(text, n):
        return True
    m = _counted(text, n)
    return m is not None and (m.group("noun") in _IRREGULAR
                              or _COUNT_GOES_ON.match(text, m.end()) is not None)


_ALONE = re.compile(r"^[ \t>#*_`\[(]*\$?(?=\d|[^\W\d_])", re.M)


def standalone_candidates(text: str, slot: ScoreSlot) -> list[Candidate]:
    """Lines holding nothing but a number ("85", "**4**", "Seventy-four."), for a verdict slot.

    A bare answer is its number; several such lines that disagree ("70", "75", "70" from a
    model in a loop) are competing verdicts.
    """
    if not is_generic(slot):
        return []
    out = []
    for m in _ALONE.finditer(text):
        n = number_at(text, m.end())
        if n is None:
            continue
        line_end = text.find("\n", n.end)
        rest = text[n.end: line_end if line_end >= 0 else len(text)]
        if re.fullmatch(r"[\s$*_`)\].!]*(?:/\s*\d+|%|\s*(?:points?|pts))?[\s$*_`).!]*", rest,
                        re.I):
            out.append(make_candidate(text, n, "a line holding only a number", 1, slot,
                                  source="standalone"))
    return out


_STARS = re.compile(r"(?P<full>[\u2605\u2b50\U0001f31f]+)(?P<empty>[\u2606\u2729]*)")


def star_candidates(text: str, slot: ScoreSlot) -> list[Candidate]:
    """A star rating on a line of its own or after a label: "★★★★☆" is 4 on a 1-5 scale.

    Stars map one to one onto a scale only when they count its top ("★★★★☆": five places on
    1-5), or, without empty ones, on a scale of at most ten; a row of stars on 0-100 is a
    rating on another scale, never read.
    """
    out = []
    for m in _STARS.finditer(text):
        full, places = len(m.group("full")), len(m.group("full") + m.group("empty"))
        on_scale = places == slot.high if m.group("empty") else slot.high <= 10
        line_start = start_of_line(text, m.start())
        line_end = text.find("\n", m.end())
        before = text[line_start:m.start()]
        after = text[m.end(): line_end if line_end >= 0 else len(text)]
        alone = not re.sub(r"[\s*_`#>:\-\u2014]", "", before) or re.search(
            r"[:=\u2014-][\s*_`]*$", before)
        # A star that opens a line of text is a bullet ("★ The dog is right"), not a rating.
        rating = re.match(r"[\s*_`]*(?:$|[(\[\-\u2014\u2013|:.,;!])", after) is not None
        if on_scale and alone and rating and slot.low <= full <= slot.high and not re.match(
                r"[\s*_`]*(?:/|out\s+of)", after):
            number = Number(m.start(), m.end(), m.end(), float(full), m.group(0), "stars")
            out.append(Candidate(number, f"a row of stars ({m.group(0)})", 1,
                                 source="stars"))
    return out


def own_scale_candidates(text: str, slot: ScoreSlot) -> list[Candidate]:
    """"70 out of 100", "4/5", "four out of five": a value stated on the slot's own scale."""
    out = []
    for rx in (DIGITS, NUMBER_WORDS):
        for m in rx.finditer(text):
            n = number_at(text, m.start())
            if n is None:
                continue
            c = make_candidate(text, n, f"a value on the {slot.low}-{slot.high} scale", 0, slot,
                           source="own_scale")
            if c.own_scale and not picture_value(text, n) and not _share(text, n):
                # (Not "the app shows 4/5", nor "4 of 5 items on the receipt are named".)
                out.append(c)
    # "My description: '...' (5/5). The candidate: 3/5": another thing's value.
    return [c for c in out if rates_another(text, c.number) is None]


_CLAUSE_END = re.compile(r"[.!?;,](?:\s|$)")


def _is_final(text: str, pos: int) -> bool:
    """Whether the label at ``pos`` is marked final (on its line, or a heading above it)."""
    line_start = start_of_line(text, pos)
    line = text[line_start: text.find("\n", pos) if "\n" in text[pos:] else len(text)]
    # Its clause: "Base score 85, ... so the final score is 80" marks only the second final.
    at = pos - line_start
    head = max((m.end() for m in _CLAUSE_END.finditer(line, 0, at)), default=0)
    tail = _CLAUSE_END.search(line, at)
    if FINAL_WORDS.search(line[head: tail.start() if tail else len(line)]):
        return True
    above = text[max(0, line_start - 80): line_start]
    heading = [h for h in above.split("\n") if h.strip()][-1:] if above.strip() else []
    if heading and len(heading[0]) < 40 and FINAL_WORDS.search(heading[0]):
        return True
    # A block's heading over its lines ("Final (both considered):\nAccuracy: $80$\n
    # Completeness: $65$"): the first line after a blank one, a verdict's heading and nothing
    # else ("Final frame:", "Overall notes:", "Overall, against the references:" are not),
    # with only value lines between it and the label.
    block = text.rfind("\n\n", 0, line_start)
    lines = text[block + 2 if block >= 0 else 0: line_start].lstrip("\n").split("\n")[:-1]
    return len(lines) > 0 and bool(_VERDICT_HEADING.fullmatch(lines[0])) and all(
        _VALUE_LINE.match(line) for line in lines[1:])


_VERDICT_HEADING = re.compile(r"[\s#*_>]*(?:final|overall|combined)(?:\s+(?:scores?|ratings?|"
                              r"verdicts?|results?|evaluation))?[\s*_]*(?:\([^()\n]{0,40}\))?"
                              r"[\s*_]*:?[\s*_]*", re.I)
_VALUE_LINE = re.compile(r"[\s*_#>-]*[^\W\d_][^:\n]{0,40}:[\s*_$]*\d")


# -- 5. phrases --------------------------------------------------------------------------------


# A rating changed in words: "I'm lowering the rating to 65", "bumping it up to 4" (not a
# count changed: "change it to 3 cats").
_CHANGED_TO = re.compile(CHANGED_TO + r"(?=\d+(?:\.\d+)?[$*_`]*(?:\s*(?:/|out\s+of\b|points?\b|"
                         r"pts\b)|\s*[.,;:!)\n]|\s*$|\s+(?:and|because|since|as|for|given|"
                         r"overall)\b))", re.I)
# The value named as the verdict after it: "68 is the fairer score", "4 is my final rating",
# "so 70 it is"
# (not a point of the scale: "5 is the highest rating").
_NAMED_AFTER = re.compile(r"(?<![\w.$/])(?=\d+[$*_`]*\s+is\s+(?:the|my)\s+(?!(?:highest|lowest|"
                          r"maximum|minimum|max|min|top|bottom|perfect|best|worst|possible)\b)"
                          r"(?:\w+\s+)?(?:score|rating|verdict|grade)\b"
                          # "so 70 it is": the judge settling on it
                          r"|\d+[$*_`]*\s+it\s+is\b(?!\s+not\b)[\s*_`]*(?:[.!;\n]|$))")


def rating_phrases(text: str, slot: ScoreSlot) -> list[Candidate]:
    """Rating phrases: "I'd give it a four", "rate it 85", "deserves a 2".

    Also a rating changed in words ("lowering the rating to 65") and a value named as the
    verdict after it ("68 is the fairer score").
    """
    found = [*_RATING_PHRASE.finditer(text), *_CHANGED_TO.finditer(text),
             *_NAMED_AFTER.finditer(text)]
    # ("87:12 is the score on the board", "the app's score is 87": the picture's.)
    return [make_candidate(text, n, "a rating phrase", 0, slot, source="phrase")
            for m in sorted(found, key=lambda m: m.end())
            if (n := number_at(text, m.end())) is not None and not picture_value(text, n)
            and not owned_elsewhere(text, m.start())]


# A rating phrase negated or under a condition: "I wouldn't give it 5", "would earn 95 if ...".
_UNSETTLED = re.compile(r"\b(?:not|never|if|unless|only|without|otherwise)\b|n't", re.I)


_LINE_LABEL = re.compile(r"[ \t>*_#-]*(?:\d+[.)][ \t]*)?(?P<label>[^\W\d_][^\n:=\d]{0,40}?)"
                         r"[\s*_`]*[:=]")


def labelled_else(text: str, pos: int, slot: ScoreSlot) -> bool:
    """Whether the line holding ``pos`` opens with a label of something other than this criterion.

    "Overall quality: $74$" gives no value of ACCR's accuracy, though it is the one ``$N$``;
    "- Completeness: Does the caption cover ...? $60$" is completeness's (a request's only
    verdict, G-VEval's, may be labelled any way).
    """
    if is_generic(slot):
        return False
    label = _LINE_LABEL.match(text, start_of_line(text, pos))
    # ("Overall: $78$", a generic verdict's name, is contract.other_criterion's to say.)
    return label is not None and label.end() <= pos and matches(label.group("label"), slot) == 0 \
        and not matches(label.group("label"), ANY_VERDICT)


# A fenced block in a programming language (not ```json or a bare fence, which may hold the
# verdict itself).
_CODE_FENCE = re.compile(r"^[ \t]*```[ \t]*(?P<lang>python|py|javascript|js|typescript|ts|sql|"
                         r"bash|sh|shell|zsh|r|julia|java|c|cpp|c\+\+|go|rust|ruby|php|"
                         r"matlab|scala|kotlin|swift)[ \t]*$", re.I | re.M)


# Inside a call's brackets, up to the number: "range(0, ", "np.clip(x, ".
_CALL_OPEN = re.compile(r"[A-Za-z_][\w.]*\([^()\n]*$")


def _in_code(text: str, pos: int) -> str | None:
    """The language of the fenced code block that holds ``pos``, or None."""
    fences = list(_CODE_FENCE.finditer(text, 0, pos))
    if not fences:
        return None
    last = fences[-1]
    return None if "```" in text[last.end(): pos] else last.group("lang")


def phrase_candidates(text: str, slot: ScoreSlot) -> list[Candidate]:
    """Rating phrases, the anchor, or (first-integer slots) the first number."""
    out = rating_phrases(text, slot)
    if slot.anchor:
        anchor = re.compile(re.escape(slot.anchor) + _MARKUP + _LATEX_OPEN + _MARKUP
                            + r"(?=[-]?\d)")
        out += [make_candidate(text, n, f"after {slot.anchor!r}", 0, slot, source="phrase")
                for m in anchor.finditer(text) if (n := number_at(text, m.end())) is not None
                and not labelled_else(text, m.start(), slot)]
    if slot.position == "first" and not slot.anchor:
        first = first_integer(text)
        # A rating the answer states in words ("I'd rate it a four") is its verdict over the
        # first number of its explanation ("names 4 objects; 3 are correct"); a number the
        # answer opens with is the prompt's format, and competes.
        settled = [c for c in out if not _UNSETTLED.search(sentence_of(text, c.number.start))]
        if first is not None and not (settled and re.search(r"[^\W\d_]", text[:first.start])):
            c = make_candidate(text, first, "the first number (VisCE² §3 reading)", 0, slot,
                               source="phrase")
            if c.problem is None and (lang := _in_code(text, first.start)) is not None \
                    and _CALL_OPEN.search(text, start_of_line(text, first.start), first.start):
                # ("for r in range(0, 101, 10):" is a loop's bound, not a rating.)
                c = replace(c, problem=f"the first number is an argument of a call in the "
                            f"answer's {lang} code ({first.written.strip()!r}), not a rating")
            out.append(c)
        elif not has_number(text):
            # No digit anywhere: a verdict's generic label with its value spelled out in
            # another language ("Note : quatre sur cinq", "Puntuación: cuatro de cinco").
            rx = re.compile(label_pattern(GENERIC) + _SEPARATOR, re.I)
            out += [make_candidate(text, n, "a generic label's value in words", 0, slot,
                                   source="phrase")
                    for m in rx.finditer(text)
                    if (n := value_at(text, m.end())) is not None and n.kind == "words"]
    return out


# A number that counts things ("2 dogs", "3 people"): the next word is a plural noun, not a
# scale's unit ("85 points", "4 stars" are ratings).
_IRREGULAR = ("people", "men", "women", "children", "sheep", "deer", "fish", "geese", "mice",
              "feet", "teeth")
# (And one of a fault or a thing, in the singular: "contains 1 error", "1 hallucination".)
_SINGULAR = ("error", "mistake", "issue", "problem", "omission", "hallucination", "inaccuracy",
             "typo", "flaw", "fault", "object", "person", "attribute", "detail", "word",
             "sentence")
_COUNTED = re.compile(r"[ \t]+(?:(?:more|other|large|small|big|little|separate|distinct|"
                      r"different|visible|minor|major|critical|severe|grammatical|factual)"
                      r"[ \t]+)?(?P<noun>[a-z]{3,}s|" + "|".join(_IRREGULAR + _SINGULAR)
                      + r")\b")
# Words ending in "s" after a number that count nothing: a scale's units and function words.
_UNITS = frozenset({"points", "stars", "marks", "ratings", "scores", "tens", "hundreds",
                    "this", "thus", "plus", "minus", "less", "unless", "across", "always",
                    "perhaps", "whereas", "besides", "does", "goes", "seems", "looks"})


def _counted(text: str, n: Number) -> re.Match[str] | None:
    """The plural noun ``n`` counts ("2 dogs"), or None (a scale's unit counts nothing)."""
    m = _COUNTED.match(text, n.end)
    return m if m is not None and m.group("noun") not in _UNITS else None


# A share of counted things: "3 of the 4 prices", "two of its five labels" (not "4 of 5", a
# rating's scale, nor "3 of the 5 points").
_SHARE = re.compile(r"[ \t]+(?:out[ \t]+)?of[ \t]+(?P<article>(?:the|its|all)[ \t]+)?(?:\d+|"
                    + NUMBER_WORDS.pattern
                    + r")(?P<counted>[ \t]+(?:[a-z]+[ \t]+)?[a-z]{3,}s)\b", re.I)
# Without an article, the things must go on to be said of ("4 of 5 items on the receipt are
# named correctly"), not the scale's words ("4 out of 5 makes sense").
_SAID_OF = re.compile(r"[ \t]+(?:are|were|is|was|on|in|from|named|listed|shown|visible|read|"
                      r"correct\w*|match\w*|appear\w*|check\w*|get|got)\b", re.I)


def _share(text: str, n: Number) -> bool:
    """Whether ``n`` is a share of things ("3 of the 4 prices are correct")."""
    m = _SHARE.match(text, n.end)
    return m is not None and m.group("counted").split()[-1].lower() not in _UNITS and (
        m.group("article") is not None or _SAID_OF.match(text, m.end()) is not None)


def counts_things(text: str, n: Number) -> bool:
    """Whether ``n`` counts things in the picture or the caption ("There are 2 dogs")."""
    return _counted(text, n) is not None or _share(text, n)


# A sum worked out to its result: "100 minus 15 for the colour = 85", "100 - 20 - 10 = 70".
_WORKED = re.compile(r"(?<![\d.])\d+(?:[^\S\n]*(?:minus|less|plus|times|[-\u2212+\u00d7*])[^\S\n]*"
                     r"\d+[^=\n\d]{0,40}?)+=[\s$*_`]*(?=\d)", re.I)


def _summed(text: str, n: Number) -> bool:
    """Whether ``n`` is a term of a sum the answer works out ("100 minus 15 ... = 85")."""
    return any(m.start() <= n.start < m.end() for m in _WORKED.finditer(text))


# An amount taken off, right before a number: "score reduction of 3.0", "Penalty: 2",
# "Score reduction 1: 1.0" (the penalty's index, then its amount).
_PENALTY_BEFORE = re.compile(r"\b(?:reductions?|deductions?|penalt(?:y|ies)|deducted|minus)"
                             r"(?:[ \t]+(?:of|\d+))?[ \t]*[:=]?[ \t]*$", re.I)


def _penalised(text: str, n: Number) -> bool:
    """Whether a penalty ("score reduction of", "Penalty:") stands right before ``n``."""
    # (Searched from the line's start: the pattern never crosses a line, and from the text's
    # start it would scan the whole answer again for every number.)
    return _PENALTY_BEFORE.search(text, start_of_line(text, n.start), n.start) is not None


_INDEXED_FIELD = re.compile(r"^[ \t*_#>-]*(?P<word>[^\W\d_]+(?:[ \t/][^\W\d_]+){0,3})[ \t]+$",
                            re.M)


def _field_index(text: str, n: Number) -> bool:
    """Whether ``n`` numbers a field ("Error location 1: ...", not "Score 4: ...")."""
    if not re.match(r"[ \t]*:", text[n.end:]):
        return False
    m = _INDEXED_FIELD.search(text, start_of_line(text, n.start), n.start)
    return m is not None and not matches(m.group("word").split()[-1], ANY_VERDICT)


# How sure the judge is: "85% confident", "90 percent sure".
_SURE_AFTER = re.compile(r"\s*(?:%|percent\b)\s*(?:confiden\w*|sure|certain\w*|likel\w*)\b", re.I)


def _named_aside(text: str, n: Number) -> bool:
    """Whether ``n`` is a part's value named inside brackets: "(object 90, attributes 75)"."""
    opening, closing = text.rfind("(", 0, n.start), text.find(")", n.end)
    return (opening >= 0 and closing >= 0 and ")" not in text[opening: n.start]
            and "(" not in text[n.end: closing]
            and re.search(r"[^\W\d_]{2,}[\s*_`]*[:=]?[\s*_`]*$", text[opening: n.start])
            is not None)


# A value labelled as the caption's or as a verdict: "Caption: 50", "Correctness of the caption:
# 4", "The caption is appropriate for the image: 88", "Rating: 75".
_CAPTION_VALUE = re.compile(r"(?:^|[.!?]\s+)[\s*_#>-]*(?:(?:the\s+)?(?:caption|candidate)"
                            r"(?:['\u2019]s)?(?:\s+(?:appropriateness|correctness|accuracy|score|rating|quality))?|"
                            r"(?:the\s+)?(?:caption|candidate)\s+(?:is|seems|looks)\s+(?:\w+\s*){1,5}|"
                            r"(?:appropriateness|correctness|accuracy)(?:\s+of\s+the\s+caption)?|"
                            r"(?:(?:final|overall)\s+)?(?:score|rating|verdict|grade)|overall)"
                            r"[\s*_`]*[:=][\s*_`$]*$", re.I | re.M)


_ITEM = re.compile(r"^[ \t>*_#-]*(\d{1,2})[.)][ \t]+(?=[^\W\d_]|[*_\"'(])", re.M)


def list_item(text: str, n: Number) -> bool:
    """Whether ``n`` numbers an item of a list ("1. ...", "2) ...": two items in a row at least)."""
    # (An item's neighbours in order: the next number after it, or the one before before it;
    # "3. Moderate Correctness\n\nIssues:\n1. ...\n2. ..." heads a list, it is no item of it.)
    items = [(int(m.group(1)), m.start(1)) for m in _ITEM.finditer(text)]
    if n.value != int(n.value) or (int(n.value), n.start) not in items:
        return False
    value = int(n.value)
    return any((v == value + 1 and at > n.start) or (v == value - 1 and at < n.start)
               for v, at in items)


def first_integer(text: str) -> Number | None:
    """The first number, or the first labelled one; never a count of things.

    A "Score:"/"Rating:" labelled one when a label introduces one and the answer does not
    open with its number ("The caption has 2 errors. Rating: 3" is 3). "There are 2 dogs ...
    quite appropriate." has no rating: 2 counts the dogs.
    """
    numbers = [n for m in DIGITS.finditer(text)
               if (n := number_at(text, m.start())) and not counts_things(text, n)]
    # "1. The caption names ...\n2. It says ...": the items of a numbered list count the
    # judge's points; none is a rating (nor is there one when nothing else is written).
    numbers = [n for n in numbers if not list_item(text, n) and not picture_value(text, n)]
    # "1 -> Very Low ... 5 -> Extremely High\n\nThis caption: 4": the rubric restated.
    numbers = [n for n in numbers if not rubric_entry(text, n)]
    # "Mean of my sub-scores (object 90, attributes 75): 82.5": a part named in an aside is
    # no rating while a number stands outside one.
    numbers = [n for n in numbers if not _named_aside(text, n)] or numbers
    # "100 minus 15 for the colour = 85": the terms of a sum worked out; its result stands.
    numbers = [n for n in numbers if not _summed(text, n)] or numbers
    # "I'm about 85% confident it's a 4": how sure the judge is, not its rating.
    numbers = [n for n in numbers if not _SURE_AFTER.match(text, n.end)] or numbers
    # "with a total score reduction of 3.0" (TIGERScore): a penalty, not the rating; "Error
    # location 1:", "Error type 1:": the index of a field in a list of errors.
    numbers = [n for n in numbers if not _penalised(text, n) and not _field_index(text, n)]
    # "Image quality: 2 (blurry). Correctness of the caption: 4": another thing's value, when
    # a value labelled as the caption's or as a verdict follows (else the first number's veto
    # decides: "Visual context 90\nThe caption lists 3 of the 4 objects" is no 3).
    mine = [n for n in numbers if rates_another(text, n) is None]
    if len(mine) < len(numbers) and any(_CAPTION_VALUE.search(
            text, start_of_line(text, n.start), n.start) for n in mine):
        numbers = mine
    # "The caption matches frame 2 well: 80": a part's number names it.
    numbers = [n for n in numbers if not names_part(text, n)] or numbers
    labelled = [n for m in _SCORE_LABEL.finditer(text) if (n := number_at(text, m.end()))
                and not _penalised(text, n)]
    if not numbers:
        return None
    if not labelled:
        return numbers[0]
    opening = numbers[0]
    at_start = text[:opening.start].strip(" \t\n*_`#>:") == ""
    list_marker = re.match(r"[.)]\s+\D", text[opening.end:]) is not None
    return opening if at_start and not list_marker else labelled[0]
