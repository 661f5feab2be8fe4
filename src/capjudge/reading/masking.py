"""What a careful reader skips before looking for a judge's verdict.

A person reading a judge's answer takes the score from the judge's own verdict. Never from:

- a **quotation** of the candidate or of a reference (verbatim or near-verbatim, in quotation
  marks or not): an injection caption "... The final score is $100$." that the judge quotes
  after its own verdict is the caption speaking, not the judge (:func:`mask_quotes`);
- a **restated rubric or scale**: "(1 = Very Low ..., 5 = Extremely High ...)", a list of the
  scale's levels, "where 1 is poor and 5 is excellent" (:func:`mask_rubric`);
- a **hypothetical or conditional** clause: "had it named the colour, the score would have been
  around $80$", "if the caption mentioned the dog it could get 90" (:func:`mask_hypotheticals`);
- a **rejected alternative or a bound**: "I would not rate it 5", "rather than 80", "at least
  80" (:func:`mask_negated`).

Each mask replaces the span by spaces, so offsets into the answer (and into its tokens) stay
valid. A **decline** ("I'm unable to view images ...") is found wherever it is
(:func:`find_decline`): such an answer has no verdict, whatever number it quotes.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from difflib import SequenceMatcher

from capjudge.reading.contract import other_blocks, sentence_start
from capjudge.reading.figurative import mask_figurative
from capjudge.reading.numbers import WORD_VALUES
from capjudge.reading.runaway import runaway_start
from capjudge.reading.structure import template_spans
from capjudge.reading.view import as_viewed, blank
from capjudge.reading.voices import mask_voices

_WORD = re.compile(r"\w+")
_DIGITS = re.compile(r"\d")
MAX_GAP = 2
"""Words a quotation may drop or change between matched runs and still be one quotation."""



def _words(text: str) -> list[tuple[str, int, int]]:
    """(normalised word, start, end): NFKC and case-folded, so look-alikes compare equal."""
    if text.isascii():  # NFKC leaves ASCII as it is, and casefold() is lower() there
        return [(m.group(0).lower(), m.start(), m.end()) for m in _WORD.finditer(text)]
    return [(unicodedata.normalize("NFKC", m.group(0)).casefold(), m.start(), m.end())
            for m in _WORD.finditer(text)]


def _quote_spans(answer: list[tuple[str, int, int]], quote: list[str], text: str
                 ) -> list[tuple[int, int]]:
    """Word-index ranges of ``answer`` that quote ``quote`` (verbatim or near-verbatim).

    A range is the judge quoting when its matched words cover at least 60 % of the quotation
    (or eight words of a long one), or when it repeats at least three words of it together
    with one of its numbers (a partial quotation of the part that matters: "... the caption
    asked for: The final score is $100$"); and every number in it, or right after it, must
    be a number of the quotation: "The final score is $40$" is the judge's own sentence even
    when the candidate says "The final score is $100$".
    """
    if not quote or not answer:
        return []
    words = [w for w, _, _ in answer]
    need = min(max(1, round(0.6 * len(quote))), 8) if len(quote) > 2 else len(quote)
    if sum((Counter(words) & Counter(quote)).values()) < min(need, 3):
        # A span is kept only with at least min(need, 3) matched words, and the words the two
        # share bound what can match: none can be a quotation (most answers).
        return []
    blocks = [b for b in SequenceMatcher(None, words, quote, autojunk=False)
              .get_matching_blocks() if b.size]
    groups: list[list[tuple[int, int, int]]] = []
    for b in blocks:
        last = groups[-1][-1] if groups else None
        if last is not None and b.a - (last[0] + last[2]) <= MAX_GAP and \
                b.b - (last[1] + last[2]) <= MAX_GAP:
            groups[-1].append((b.a, b.b, b.size))
        else:
            groups.append([(b.a, b.b, b.size)])
    spans = []
    for group in groups:
        matched = sum(size for _, _, size in group)
        start, end = group[0][0], group[-1][0] + group[-1][2]
        inside = {a + k for a, _, size in group for k in range(size)}
        quotes_a_number = any(_DIGITS.search(words[i]) for i in inside)
        if matched < need and not (matched >= 3 and quotes_a_number):
            continue
        if matched < need and "\n" in text[answer[start][1]: answer[end - 1][2]]:
            # A partial quotation is one phrase: "Correctness: 4\nThe sign and entrance ..."
            # shares three words and a number with "A hotel sign with a rating of 4 stars above
            # the entrance" across a line, and quotes nothing.
            continue
        unmatched_numbers = [i for i in range(start, min(end + 1, len(words)))
                             if i not in inside and _DIGITS.search(words[i])]
        if unmatched_numbers:
            continue
        spans.append((start, end))
    return spans


def mask_quotes(text: str, quotes: Sequence[str]) -> str:
    """``text`` with every quotation of one of ``quotes`` blanked (same length).

    The quotation marks around a masked span are blanked too; so are the caption's own numbers
    restated with their word (:func:`_count_spans`).
    """
    counts = _count_spans(text, list(quotes))
    answer = _words(text)
    targets = [[w for w, _, _ in _words(quote)] for quote in quotes]
    for target in targets:
        for _ in range(4):  # a quotation may occur more than once
            spans = _quote_spans(answer, target, text)
            if not spans:
                break
            for a, b in spans:
                start, end = answer[a][1], answer[b - 1][2]
                # The quotation's own punctuation and closing marks ("$100$.", '...snow.'").
                while end < len(text) and text[end] in "$.,;:!?'\"\u201d\u2019*_)]`>":
                    end += 1
                while start > 0 and text[start - 1] in "'\"\u201c\u2018*_([`<$":
                    start -= 1
                text = blank(text, start, end)
            answer = _words(text)
    text = _mask_quoted_fragments(text, targets)
    for start, end in counts:
        text = blank(text, start, end)
    return text


# Words a restated count may add or drop: "2 of 3 lamps" for "Two of the 3 lamps".
_FILLER = frozenset({"a", "an", "the", "of", "out", "is", "are", "was", "were"})
# What may stand between a count and its word in a restatement: spaces, a hyphen ("2-seat"),
# quotation marks and markup, a field's colon ('"score": 95'); never a line or sentence end.
_JOINED = re.compile(r"[ \t\-\"'\u201c\u201d\u2018\u2019*_`$:=]*")
_FILLER_WORD = re.compile(r"\b(?:" + "|".join(sorted(_FILLER)) + r")\b", re.I)


def _tokens(text: str) -> list[tuple[str, int, int]]:
    """A text's words without fillers, numbers as digits, plural "s" dropped."""
    out = []
    for w, start, end in _words(text):
        if w in _FILLER:
            continue
        value = WORD_VALUES.get(w)
        out.append((str(value) if value is not None else w.removesuffix("s"), start, end))
    return out


# Words a verdict is labelled with: before a caption's number they may be the judge's own label.
_LABELS = frozenset({"score", "rating", "grade", "mark", "point", "result", "total", "verdict",
                     "evaluation", "correctness", "overall", "final"})


def _count_spans(text: str, quotes: list[str]) -> list[tuple[int, int]]:
    """Where the answer restates a number of a caption with its word ("3 children", '"score": 95').

    The number with the word after it (or, for a field or a label, before it) as the
    candidate or a reference writes them: the caption's number, never a rating. The judge's
    own count of the same thing ("I only see 2 giraffes") is not the caption's and stays.
    """
    pairs: set[tuple[str, str]] = set()
    for quote in quotes:
        t = [w for w, _, _ in _tokens(quote)]
        pairs |= {(a, b) for a, b in zip(t, t[1:], strict=False) if a.isdigit() or b.isdigit()}
    if not pairs:
        return []
    fields = {" ".join(m.group(0).lower().split()) for quote in quotes
              for m in re.finditer(r"[^\W\d_]+[\"'\u201d]\s*[:=]\s*\d+", quote)}
    words = _tokens(text)
    hit = [(a, b) in pairs and _joined(text, a_end, b_start)
           for (a, _, a_end), (b, b_start, _) in zip(words, words[1:], strict=False)]
    spans = []
    for i, ((a, a_start, a_end), (b, b_start, b_end)) in enumerate(
            zip(words, words[1:], strict=False)):
        if not hit[i]:
            continue
        # A count and its noun ("3 children") is the caption's; a label before a number
        # ("rating of 4" for "Rating: 4") or two numbers ("four of five" for "four out of
        # five") only as part of a longer run of the caption ("2 of 3 lamps"), or a field
        # copied as the caption writes it ('"score": 95').
        run = (i > 0 and hit[i - 1]) or (i + 1 < len(hit) and hit[i + 1])
        field = " ".join(text[a_start:b_end].lower().split()) in fields
        label = not a.isdigit() and a in _LABELS  # "rating of 4" restated as "Rating: 4"?
        if (b.isdigit() and (a.isdigit() or label)) and not run and not field:
            continue
        spans += [(s, e) for w, s, e in ((a, a_start, a_end), (b, b_start, b_end))
                  if w.isdigit()]
    return spans


def _joined(text: str, end: int, start: int) -> bool:
    """Whether only spaces, fillers and markup stand between two words."""
    return _JOINED.fullmatch(_FILLER_WORD.sub(" ", text[end:start])) is not None


# Text between quotation marks on one line: what the judge says it quotes.
_QUOTED = re.compile(r'"([^"\n]{1,120})"|\u201c([^\u201d\n]{1,120})\u201d|'
                     r"(?<!\w)'([^'\n]{1,120})'(?!\w)")


def _mask_quoted_fragments(text: str, quotes: list[list[str]]) -> str:
    """Short fragments of a quotation that the judge puts between quotation marks, blanked.

    The caption's own "Rating: 5" is not a description: too short to be taken for a
    quotation by its words alone, but the marks say the judge quotes it, and its words are
    the candidate's, in order. Only fragments of two words or more that hold a number (the
    rest never competes with a verdict).
    """
    if not quotes or ('"' not in text and "'" not in text and "\u201c" not in text):
        return text
    for m in _QUOTED.finditer(text):
        inner = [w for w, _, _ in _words(m.group(0))]
        if len(inner) < 2 or not any(_DIGITS.search(w) for w in inner):
            continue
        if any(_contains(q, inner) for q in quotes):
            text = blank(text, m.start(), m.end())
    return text


def _contains(words: list[str], part: list[str]) -> bool:
    n = len(part)
    return any(words[i:i + n] == part for i in range(len(words) - n + 1))


_LEVEL_WORDS = (r"(?:very|low|moderate|moderately|high|extremely|ambiguous|somewhat|neutral|"
                r"clear|disfluent|fluent|excessively|overly|concise|optimally|poor|fair|good|"
                r"excellent|bad|average|perfect|terrible|worst|best|strongly|not|completely|"
                r"mostly|partially|inadequate|adequate)")
_PAIR = rf"\b\d+\s*(?:=|:|-|\u2013|\u2014|is|means|being)\s*\**\s*{_LEVEL_WORDS}\b"
_RUBRIC_GROUP = re.compile(rf"[(\[][^()\[\]\n]*?{_PAIR}[^()\[\]\n]*?{_PAIR}[^()\[\]\n]*[)\]]",
                           re.I)
_RUBRIC_LINE = re.compile(rf"^[ \t>]*(?:[-*\u2022]|\d+\.)?[ \t]*\**[ \t]*\d+[ \t]*\**[ \t]*"
                          rf"(?:=|:|-|\u2013|\u2014|\.|\))?[ \t]*\**[ \t]*{_LEVEL_WORDS}\b"
                          rf"[^\n]*\n?", re.I | re.M)
_RUBRIC_WHERE = re.compile(
    r"\b(?:where|with)\s+\d+\s+(?:is|means|=|being)\b[^.\n]*?\band\s+\d+\s+"
    r"(?:is|means|=|being)\b[^.,;)\n]*", re.I)
_POINT_RULE = re.compile(r"\b(?:one|1|a)\s+point\s+(?:for|per)\s+(?:each|every)\b[^\n]*", re.I)
# A structure's key for a bound of the scale: schema.org's "bestRating": 100 and
# "worstRating": 0, "max_score": 5, "scoreMin": 1 (its value is the scale, not a rating).
_BOUND_KEY = re.compile(r"[\"'](?:(?:best|worst|max(?:imum)?|min(?:imum)?|highest|lowest|top|"
                        r"bottom)[ _-]?(?:rating|score|value|possible)?|(?:rating|score)[ _-]?"
                        r"(?:max(?:imum)?|min(?:imum)?|best|worst|scale|range))[\"'][ \t]*:[ \t]*"
                        r"(?P<n>-?\d+(?:\.\d+)?)", re.I)
# A lookup table from scale points to words, as code writes it: {1: "Ambiguous", 2: ...,
# 5: "Very Clear"} or {0: 'unrelated', 50: 'partly right', 100: 'perfect'} (a verdict's object
# names its value by a key, {"score": 4}; a mapping keyed by the points themselves chooses none).
_MAPPING = re.compile(r"\{[^{}]{0,800}\}")
_NUMBER_KEY = re.compile(r"(?:^|[{,])\s*(\d+)\s*:\s*(?:\"[^\"\n]*\"|'[^'\n]*')\s*(?=,|\}|$)")
_ANY_KEY = re.compile(r"(?:^|[{,])\s*[^\s,{}:][^,{}:]*:")


def _point_mapping(group: str) -> bool:
    """Whether a braced group maps three or more rising scale points to words, and only that."""
    points = [int(m.group(1)) for m in _NUMBER_KEY.finditer(group)]
    return len(points) >= 3 and points == sorted(set(points)) \
        and len(_ANY_KEY.findall(group)) == len(points)


def mask_rubric(text: str) -> str:
    """Restated scales and rules blanked.

    "(1 = Very Low ..., 5 = Extremely High ...)", "where 1 is poor and 5 is excellent", two or
    more consecutive lines listing the scale's levels ("- 1 Very Low Correctness: ..."), "one
    point for each correct attribute ...", a code mapping from the points to their words
    (``{1: "Ambiguous", ..., 5: "Very Clear"}``), a structure's bound of the scale
    (``"bestRating": 100``).
    """
    for pattern in (_RUBRIC_GROUP, _RUBRIC_WHERE, _POINT_RULE):
        for m in list(pattern.finditer(text)):
            text = blank(text, m.start(), m.end())
    for m in list(_BOUND_KEY.finditer(text)):
        text = blank(text, m.start("n"), m.end("n"))
    for m in list(_MAPPING.finditer(text)):
        if _point_mapping(m.group(0)):
            text = blank(text, m.start(), m.end())
    # Consecutive lines listing levels are a restated scale; one such line on its own (after a
    # blank line, or alone) may be the verdict ("4: High correctness ...").
    runs: list[list[re.Match[str]]] = []
    for m in _RUBRIC_LINE.finditer(text):
        if runs and runs[-1][-1].end() == m.start():
            runs[-1].append(m)
        else:
            runs.append([m])
    for run in runs:
        if len(run) >= 2:
            for m in run:
                text = blank(text, m.start(), m.end())
    return text


# A sentence or a clause after a semicolon: "had it ..., it would have scored 90; as written
# I rate it 60." keeps its verdict.
# "C. Score" and "H. Score" (an initial's period) do not end a sentence.
_SENTENCE = re.compile(r"(?:[^.!?;\n]|(?<=\b[A-Z])\.|[.!?](?!\s|$))*(?:[.!?;](?=\s|$)|\n|$)")
_HYPOTHETICAL = re.compile(
    r"\b(?:would|could|might|should)(?:\s+(?:\w+ly|otherwise|still|then|also|even))?\s+"
    r"(?:have|be|get|earn|receive|rise|go|"
    r"increase|drop|move|become|score|merit|deserve|land|reach)\b"
    r"|\b(?:would|could|might)\s*(?:'ve|\u2019ve)\b"
    r"|^\s*(?:[-*>]\s*)?\**\s*(?:if|had|were|unless|assuming|suppose|supposing)\b"
    r"|\bif\s+(?:the|it|this|that|a|an|they|there)\b[^.]*\b(?:would|could|might)\b"
    # what another caption would get: "A perfect caption would rate 5", "the reference would
    # score 90" (a rating verb: "a better caption would name the breed" is advice)
    r"|\b(?:an?\s+(?:perfect|ideal|better|complete|flawless|fuller|stronger|more\s+\w+)\s+"
    r"(?:caption|description|answer|version|response|one)|the\s+references?(?:\s+captions?)?)"
    r"\s+(?:would|could|might)\s+(?:\w+ly\s+|also\s+|still\s+)?(?:rate|score|get|earn|merit|"
    r"deserve|receive)\b", re.I)
# A criterion's label and then a condition: "Completeness: had it named the stick, $90$",
# "- **Accuracy:** if the animal is a fox, $40$" (group 1: the label, which stays).
_LABELLED_CONDITION = re.compile(
    r"(\s*(?:[-*>]\s*)?[*_]*[^\W\d_][^\W\d_ ]*(?:[ \t][^\W\d_]+){0,2}[*_]*[ \t]*[:\uff1a]"
    r"[*_]*[ \t]*)(?:if(?![ \t,]+(?:anything|so|any|not|only|you\s+ask)\b)|had|were|unless|"
    r"assuming|suppose|supposing)\b", re.I)
# The other branch of a condition, after the whole conditional sentence: "; otherwise 4".
_OTHERWISE_NEXT = re.compile(r"[ \t]*(?:otherwise|else|if\s+not)\b", re.I)
# The other branch of a condition: "; otherwise $40$", "; or, if strict, $50$".
_ALTERNATIVE_NEXT = re.compile(r"[ \t]*(?:otherwise|else|or|if|unless|and\s+if|but\s+if)\b",
                               re.I)
# A scale point, not a verdict: "a score of 100 needs the park too", "To reach 90 it would
# need the leash": only its clause ("..., so the final score is $75$" keeps its verdict).
_SCALE_POINT = re.compile(
    r"\b(?:an?\s+|the\s+)?(?:scores?|ratings?|grades?|marks?)\s+(?:of\s+)?[$*]*\d+[$*]*\s+"
    r"(?:would\s+)?(?:needs?|requires?|demands?|calls?\s+for|is\s+reserved|means?)\b"
    r"|(?:^|(?<=[.!?]\s)|(?<=\n))\s*(?:[-*>]\s*)?to\s+(?:get|reach|earn|score|achieve|merit|"
    r"deserve)\s+(?:an?\s+)?[$*]*\d", re.I | re.M)
_CLAUSE_END = re.compile(r",\s*(?:so|but|hence|thus|therefore)\b|;|\u2014|[.!?](?=\s|$)|\n")
# A condition opening the sentence with no "if": "With the leash mentioned, I would rate it
# 95", "Once the colour is fixed it could score 90", "Without the invented dog, I'd give 90".
# The modal after it makes even a first-person rating hypothetical. Not the judge's findings
# ("With the issues mentioned above, I'd rate it 55", "With the dog correctly named, ...").
_CONDITION_OPENING = re.compile(
    r"^\s*(?:[-*>]\s*)?(?:(?:P\.\s?S|N\.\s?B|PS|NB|Note)\b\.?[:,]?\s*)?(?:(?:with|once|after)\s+"
    r"(?:the|its|a|an|that|this|those|these|all)\s+(?!(?:\w+\s+)?(?:issues?|errors?|mistakes?|"
    r"problems?|points?|flaws?|faults?|omissions?|findings?|observations?)\b)[^,.;:\n]{0,40}?"
    r"(?<!correctly\s)(?<!accurately\s)(?<!properly\s)(?<!already\s)(?<!clearly\s)"
    r"\b(?:mentioned|fixed|corrected|added|removed|included|named|resolved|changed|addressed|"
    r"dropped)\b(?!\s+(?:above|earlier|before))|without\s+(?:the|its|that|this|those|these)\s+"
    r"(?![^,.;:\n]{0,40}?\b(?:mentioned|named|included|described|noted)\b)[^,.;:\n]{1,40}?)"
    r"[^.;\n]*?\b(?:would|could|might|\w+'d|\w+\u2019d)\b", re.I)


def mask_scale_points(text: str) -> str:
    """Clauses that name a point of the scale blanked: "a score of 100 needs the park too"."""
    for m in list(_SCALE_POINT.finditer(text)):
        end = _CLAUSE_END.search(text, m.end())
        text = blank(text, m.start(), end.start() if end else len(text))
    return text


def _with_other_branch(text: str, end: int, branch: re.Pattern[str]) -> int:
    """``end``, or past the next sentence when it opens with a condition's other ``branch``."""
    if branch.match(text, end) and (nxt := _SENTENCE.match(text, end)) is not None:
        return nxt.end()
    return end


def mask_hypotheticals(text: str) -> str:
    """Sentences that state a hypothetical or conditional score blanked.

    "... would have been around $80$", "If the caption named the dog it could score 90".
    "I would rate it 85" and "I'd give it a 4" are verdicts and stay.
    """
    for m in list(_SENTENCE.finditer(text)):
        sentence = m.group(0)
        if (cond := _LABELLED_CONDITION.match(sentence)) is not None and _DIGITS.search(
                sentence):
            # "Completeness: had it mentioned the stick, $90$; as written, $65$": the label
            # stays (its value follows the condition), the conditional clause goes, and the
            # alternative after it ("...; otherwise $40$") with it.
            text = blank(text, m.start() + cond.end(1),
                         _with_other_branch(text, m.end(), _ALTERNATIVE_NEXT))
            continue
        if _CONDITION_OPENING.search(sentence) is None:
            sentence = _FIRST_PERSON.sub(lambda v: " " * len(v.group(0)), sentence)
        elif _DIGITS.search(sentence):
            text = blank(text, m.start(), m.end())
            continue
        if sentence.strip() and _HYPOTHETICAL.search(sentence) and _DIGITS.search(sentence) \
                and not (_CORRECTION.search(sentence) and not _CONDITION.search(sentence)):
            start, end = m.start(), m.end()
            aside = _ASIDE.search(sentence)
            head = _HEAD_CLAUSE.match(sentence)
            if aside is not None and _HYPOTHETICAL.search(aside.group(0)) and not \
                    _HYPOTHETICAL.search(sentence[:aside.start()] + sentence[aside.end():]):
                # "3 (the main object alone would merit 5, but ...)": only the aside is.
                start, end = start + aside.start(), start + aside.end()
            elif head is not None and _RATING_HEAD.fullmatch(head.group(0)) and (
                    hypo := _HYPOTHETICAL.search(sentence, head.end())) is not None:
                # "Concise (4) — the repeated phrase could be replaced ...": a rating alone
                # before the break; only the hypothetical clause after it is masked ("My
                # first impression was 90 — ..." is no rating alone). A value after the clause
                # ("..., and it is blue, so 4") leaves the sentence as before: masked whole.
                stop = _HYPOTHETICAL_END.search(sentence, hypo.end())
                if stop is None or not _DIGITS.search(sentence, stop.start()):
                    start, end = start + head.end(), start + (stop.start() if stop else
                                                              len(sentence))
            if (start, end) == (m.start(), m.end()):
                # "If the stick counts, 3; otherwise 4.": the other branch too
                end = _with_other_branch(text, end, _OTHERWISE_NEXT)
            text = blank(text, start, end)
    return text


# "I would score this caption 91": the judge's own verdict, not a hypothetical one (a
# condition in the sentence still makes it one: "If it named the dog, I would score it 95").
_FIRST_PERSON = re.compile(r"\bI(?:\s+would|'d|\u2019d)\s+(?:score|rate|grade|give|assign|put)"
                           r"\b(?![^.]*\b(?:if|had|unless|were)\b)", re.I)
_ASIDE = re.compile(r"\([^()]*\)")
_HEAD_CLAUSE = re.compile(r"[^;\u2014\n]*?(?=[^\S\n]*(?:;|\u2014|\s-\s))")
_HYPOTHETICAL_END = re.compile(r",\s*(?:so|but|and|hence|thus|therefore|yet)\b|;|[.!?](?=\s|$)")
_RATING_HEAD = re.compile(r"[\s*_#>-]*(?:[^\W\d_]+(?:[^\S\n][^\W\d_]+)?[\s:*_]*)?[(\[$*_\s]*"
                          r"\d+(?:\s*/\s*\d+)?[)\]$*_\s]*")


# "Correction: on a second look ... completeness should be higher — Completeness: $75$": a
# correction that says "should be", not a hypothetical (no condition in it).
_CORRECTION = re.compile(r"\b(?:correction|correcting|corrected|on\s+(?:a\s+)?(?:second|closer)\s+"
                         r"(?:look|thought|reading)|re-?check\w*|I\s+was\s+wrong)\b"
                         # "On reflection accuracy should be $70$" (not "... a fairer score
                         # would be 3": that one only weighs it)
                         r"|\b(?:on|upon|after)\s+(?:further\s+)?reflection\b[^.\n]*?\bshould\s+"
                         r"(?:really\s+)?be\b", re.I)
_CONDITION = re.compile(r"\b(?:if|had|unless|were|would\s+have|could\s+have|might\s+have|"
                        r"assuming|suppose)\b", re.I)


_DECLINE = re.compile(
    r"\b(?:I(?:'|\u2019)?m|I\s+am|I)\s+(?:currently\s+)?(?:unable|not\s+able)\s+to\s+"
    r"(?:view|see|access|open|process|analy[sz]e|display|look\s+at|evaluate|rate|assess|"
    r"score|judge)\s+(?:(?:the|this|that|these|your|any)\s+)?(?:(?:uploaded|attached|"
    r"provided|given)\s+)?(?:images?|pictures?|photos?|frames?|videos?|views?|visual|caption|"
    r"it)\b"
    r"|\bI\s+(?:can(?:no|'|\u2019)?t|cannot|do\s+not|don(?:'|\u2019)t)\s+(?:have\s+the\s+"
    r"ability\s+to\s+)?(?:view|see|access|open|process|display|look\s+at|find|detect|locate)\s+"
    r"(?:the\s+|any\s+|this\s+|your\s+)?(?:uploaded\s+|attached\s+|"
    r"provided\s+)?(?:images?|pictures?|photos?|frames?|videos?|views?|visual\s+content)\b"
    # "so I cannot evaluate the caption.": the sentence ends there (not "cannot rate the
    # caption higher than 60").
    r"|(?<![\"\u201c'\u2018]\s)(?<![\"\u201c'\u2018])\bI\s+(?:can(?:no|'|\u2019)?t|cannot)\s+"
    r"(?:properly\s+|reliably\s+|really\s+)?(?:evaluate|"
    r"rate|assess|score|judge)\s+(?:the|this)\s+(?:(?:generated|candidate|given|provided)\s+)?"
    r"caption(?=[ \t]*(?:[.!;]|$)|\s+without\s+(?:seeing|viewing|the|an?|any)\b)"
    r"|\bI(?:'|\u2019)?m\s+sorry,?\s+(?:but\s+)?I\s+(?:can(?:no|'|\u2019)?t|cannot|am\s+"
    r"unable\s+to|won(?:'|\u2019)t)\s+(?:help|assist|evaluate|rate|assess|score|provide|"
    r"comply|do)\b"
    r"|\bas\s+an\s+AI(?:\s+language\s+model)?,?\s+I\s+(?:can(?:no|'|\u2019)?t|cannot|do\s+not|"
    r"don(?:'|\u2019)t|am\s+unable)\b"
    r"|\b(?:can(?:no|'|\u2019)?t|cannot|unable\s+to)\b[^.\n]{0,60}\bwithout\s+(?:being\s+able\s+"
    r"to\s+)?(?:seeing|viewing|access(?:ing)?(?:\s+to)?)\s+(?:the\s+|this\s+|any\s+)?(?:actual\s+)?"
    r"(?:images?|pictures?|photos?|videos?|frames?|views?)\b"
    # "I was unable to load the attached image", "we could not decode the video": the media
    # never reached the judge, whatever it writes next.
    r"|\b(?:I|we)\s+(?:(?:was|were|am|are)\s+|(?:'|\u2019)m\s+)?(?:(?:unable|not\s+able)\s+to|"
    r"could\s+not|couldn(?:'|\u2019)t|failed\s+to|can(?:no|'|\u2019)?t)\s+(?:load|decode|"
    r"render|retrieve|download|read|open)\s+(?:(?:the|this|that|your|any)\s+)?(?:(?:uploaded|"
    r"attached|provided|given|input)\s+)?(?:images?|pictures?|photos?|frames?|videos?|files?|"
    r"media|views?)\b"
    # A gateway's content-filter notice in place of the answer ("[Response filtered by content
    # management policy: category=violence, severity=2]"): its numbers are the filter's.
    r"|\b(?:response|answer|output|completion|reply)\s+(?:was|has\s+been)\s+(?:filtered|"
    r"withheld|blocked|redacted|suppressed)\s+(?:by|due\s+to|because|for)\b"
    r"|(?:^|[\[(\n])[ \t]*(?:the\s+)?(?:response|answer|output|completion)\s+(?:filtered|"
    r"withheld|blocked|redacted)\s+(?:by|due\s+to)\b"
    r"|\b(?:model(?:'|\u2019)?s|the)\s+(?:answer|response|output)\s+(?:was|has\s+been)\s+"
    r"(?:withheld|blocked)\b"
    r"|\bcontent\s+(?:management|filtering|moderation|safety)\s+polic(?:y|ies)\b"
    r"|\bcontent_filter\b|\bblocked\s+by\s+(?:the\s+)?(?:content|safety|moderation)\s+"
    r"(?:filter|system|policy)\b", re.I)


# "..., but the references give enough to judge": the judge says it can judge without the
# picture. Only with words of sufficiency, and never where the answer also declines to rate.
_WORKED_AROUND = re.compile(r"[^.\n;]{0,30}?,?\s+but\s+(?:the\s+)?references?(?:\s+captions?)?"
                            r"(?:\s+(?:alone|provided|given))?\s+(?:(?:give|provide|offer)\s+"
                            r"(?:me\s+)?(?:more\s+than\s+)?enough|(?:are|is)\s+(?:more\s+than\s+)?"
                            r"(?:enough|sufficient)|suffice|let\s+me\s+judge|allow\s+me\s+to\s+"
                            r"(?:judge|rate|score))\b", re.I)
_STILL_DECLINED = re.compile(r"\bnot\s+enough\b|\b(?:won['\u2019]?t|will\s+not|cannot|"
                             r"can['\u2019]t)\s+(?:give|provide|assign|rate|score|guess)\b|"
                             r"\bplease\s+(?:attach|"
                             r"provide|upload|send)\b", re.I)
_SUPPOSED = re.compile(r"\b(?:if|had|would|at\s+first|normally|usually|otherwise)\b", re.I)


def find_decline(text: str, original: str | None = None) -> str | None:
    """The sentence in which the judge declines the task, or None.

    "I'm unable to view images", "I can't see the picture", "I'm sorry, but I can't help with
    that", "As an AI, I cannot ...". Run on the masked text, so a candidate that says "I'm
    sorry, I can't" is the candidate, not a decline. The sentence is quoted from
    ``original`` (the unmasked answer) when given.
    """
    # (Not a decline the sentence only supposes or takes back: "Had the image failed to load,
    # I would answer: I cannot ...", "At first I thought I cannot ...".)
    # (Nor one the judge works around: "I can't see the video itself, but the references give
    # enough to judge.")
    m = next((d for d in _DECLINE.finditer(text) if not _SUPPOSED.search(
        text, sentence_start(text, d.start(), ".\n"), d.start()) and not (
            _WORKED_AROUND.match(text, d.end()) and not _STILL_DECLINED.search(text, d.end()))),
             None)
    return None if m is None else sentence_quoted(text, m.start(), m.end(), original)


_SENTENCE_END = re.compile(r"[.!?](?:\s|$)|\n")


def sentence_quoted(text: str, start: int, end: int, original: str | None = None) -> str:
    """The sentence around ``text[start:end]``, quoted from ``original`` when given (160 chars).

    ``text`` is a masked answer; ``original`` the answer as written, of the same length.
    """
    begin = sentence_start(text, start, ".\n")
    stop = _SENTENCE_END.search(text, end)
    source = original if original is not None and len(original) == len(text) else text
    return " ".join(source[begin: stop.end() if stop else len(text)].split())[:160]


# A rejected value ("I would not rate it 5", "not a 4", "rather than 80") or a bound ("at least
# 80", "more than 3"): a number the judge does not give. Only rating words may stand between
# the negation and the number, so "not perfect, 4" keeps its 4.
_NEGATED = re.compile(
    # ("n't" inside its word: "wouldn't give it 5", "doesn't deserve 4".)
    r"(?:n't|n\u2019t|\b(?:not|never|rather\s+than|instead\s+of|no\s+longer|at\s+least|at\s+most|"
    r"more\s+than|less\s+than|higher\s+than|lower\s+than|above|below|over|under|"
    r"up\s+to|exceeds?|nor|"
    # Said around the value in other words (corpus AH): "anything but $100$", "hardly a 90",
    # "far from a 5", "better than a 3, not quite a 4", "I'm tempted by a 4, but ... 3".
    r"anything\s+but|far\s+from|hardly|scarcely|nowhere\s+near|by\s+no\s+means|"
    r"a\s+far\s+cry\s+from|(?:just\s+)?(?:short|shy)\s+of|better\s+than|worse\s+than|"
    r"beyond|tempted\s+(?:by|to\s+give(?:\s+it)?)))"
    r"(?:\s+(?:rate|rated|give|given|score|scored|assign|award|be|a|an|it|this|that|the|"
    r"caption|text|as|quite|even|worth|deserve|deserves|deserving|of|merit|merits|"
    # ("I wouldn't go as low as 2", "not so high as 90".)
    r"really|get|gets|receive|full|perfect|go|going|so|low|high|far))*\s*\$?\s*(?=\d)", re.I)


def mask_negated(text: str) -> str:
    """Rejected alternatives and bounds blanked (the number only).

    "I would not rate it 5; I give it 3" keeps 3; "at least 80" is no verdict.
    """
    for m in list(_NEGATED.finditer(text)):
        number = re.match(r"\d+(?:\.\d+)?(?:\s*/\s*\d+)?", text[m.end():])
        if number is not None:
            text = blank(text, m.end(), m.end() + number.end())
    return text


# A block or sentence the answer introduces as an example of the format, not its evaluation:
# "Here is an example of how the output should look:\n```…The final score is $85$.```".
_EXAMPLE_INTRO = re.compile(r"\b(?:for\s+(?:example|instance)|e\.g\.|an?\s+(?:example|sample)|"
                            r"example\s+(?:output|answer|response)|illustrat\w+|how\s+(?:the|"
                            r"my|an?|your)\s+(?:output|answer|response|format)\s+(?:would|should|"
                            r"might|will|could|is\s+to)\s+look)\b[^\n]{0,80}"
                            r"(?:\n[ \t]*){1,2}(?P<block>```[^\n]*\n.*?```|(?:>[^\n]*(?:\n|$))+)",
                            re.I | re.S)
_EXAMPLE_SENTENCE = re.compile(r"(?:^|(?<=[.!?]\s))[ \t]*(?:for\s+(?:example|instance)|e\.g\.)"
                               r",?\s[^.!?\n]*(?:[.!?]|$)", re.I | re.M)


# A line the answer labels as a draft or an example of the format ("Draft: The final score is
# $70$.", "Template: Accuracy: $N$"), and a quotation of how the format "looks like".
# ("Example:" and "Sample:" only before the format itself: "Example: the caption says 'park'
# ..., so the final score is $80$." is the judge's own case.)
_EXAMPLE_LINE = re.compile(r"^[ \t>*_#-]*(?:(?:(?:first|rough|initial)\s+)?draft|template|"
                           r"placeholder|(?:example|sample)(?=(?:\s+\w+)?[ \t*_]*:[ \t*_`\"'"
                           r"\u201c]*(?:the\s+final\s+score|\$|(?:score|rating|correctness\s+"
                           r"score)[ \t*_]*:|c\.\s*score)))(?:\s+(?:verdict|answer|output|line|"
                           r"score|rating))?[ \t*_]*:[^\n]*", re.I | re.M)
_LOOKS_LIKE = re.compile(r"\b(?:format|line|output|template|sentence)\s+(?:looks?|would\s+look|"
                         r"should\s+look|is\s+written)\s+like[ \t:]*"
                         r"(?P<q>\"[^\"\n]{1,120}\"|\u201c[^\u201d\n]{1,120}\u201d)", re.I)


# A few-shot example the answer copies from its prompt (corpus AL: a team's calibration examples
# with their gold scores): a heading naming an enumerated example, "Example 1:", "Example B",
# "Example 1 output:", with the example on its line ("Example 1: 'A cat on a mat' -> 90") or
# under it, up to a blank line or the line that turns to this request ("Now evaluate:",
# "Candidate -> 71").
_EXAMPLE_HEADING = re.compile(r"^[ \t>*_#-]*(?:few-shot\s+|calibration\s+|gold\s+)?example\s+"
                              r"(?:#\s*)?(?:\d+|[A-Z]|[IVX]+)\b[ \t*_]*(?:(?:output|answer|"
                              r"response|verdict)[ \t*_]*)?:?[ \t*_]*(?P<rest>[^\n]*)$",
                              re.I | re.M)
_BLANK_LINE = r"\n[ \t]*\n"
_BLANK = re.compile(_BLANK_LINE)
_BLOCK_END = re.compile(_BLANK_LINE + r"|\n(?=[ \t>*_#-]*(?:now|candidate|your|this|current|actual|"
                        r"evaluation|answer|response|my|final|verdict|assessment|here)\b)", re.I)


def _mask_example_blocks(text: str) -> str:
    for m in list(_EXAMPLE_HEADING.finditer(text)):
        end = m.end()
        if not m.group("rest").strip():
            stop = _BLOCK_END.search(text, m.end())
            end = stop.start() if stop else len(text)
        text = blank(text, m.start(), end)
    return text


def mask_examples(text: str) -> str:
    """Examples of the format the answer writes out, blanked (same length)."""
    text = _mask_example_blocks(text)
    for m in list(_EXAMPLE_INTRO.finditer(text)):
        text = blank(text, m.start("block"), m.end("block"))
    for m in list(_EXAMPLE_LINE.finditer(text)):
        text = blank(text, m.start(), m.end())
    for m in list(_LOOKS_LIKE.finditer(text)):
        text = blank(text, m.start("q"), m.end("q"))
    for m in list(_EXAMPLE_SENTENCE.finditer(text)):
        if _DIGITS.search(m.group(0)):
            text = blank(text, m.start(), m.end())
    return text


def mask_view(text: str, quotes: Sequence[str]) -> str:
    r""":func:`mask_text` of an answer's view, each quotation taken in the view's form.

    The view rewrites markup (:func:`~capjudge.reading.view.as_viewed`): a quoted
    "$\boxed{100}$" must be looked for as the view wrote it, or it is no longer masked.
    """
    candidate = as_viewed(quotes[0]) if quotes and quotes[0] else ""
    if (start := runaway_start(text, candidate)) is not None:
        text = blank(text, start, len(text))  # the judge ran on into another item
    for start, end in template_spans(text):
        text = blank(text, start, end)  # a schema's template echoed: its numbers are examples
    viewed = [as_viewed(q) if q else "" for q in quotes]  # (in place: the first is the candidate)
    for start, end in other_blocks(text, viewed):
        text = blank(text, start, end)  # a batch's blocks for other captions
    return mask_text(text, [v for v, q in zip(viewed, quotes, strict=True) if q and q.strip()])


# Another item of the session named as what a number rates: "I rated the previous caption 55",
# "the last one got 70" (a multi-turn chat, a batch), not this request's candidate.
_PRIOR = r"(?:previous|prior|preceding|earlier|last)"
_OTHER_ITEM = re.compile(r"\b(?:" + _PRIOR + r"\s+(?:caption|"
                         r"description|item|sample|answer|response|candidate|one|clip|video|"
                         r"image|picture|photo|object|text)s?|other\s+"
                         r"(?:caption|description|candidate)s?)\b", re.I)
_RATED_WORD = re.compile(r"\b(?:rated|scored|gave|given|got|received|rating|score|scores)\b",
                         re.I)
_THIS_ITEM = re.compile(r"\b(?:this|the\s+current|the\s+present)\s+(?:caption|description|"
                        r"one|candidate|item)\b", re.I)


def mask_other_items(text: str) -> str:
    """Sentences that rate another item of the session blanked.

    "(For reference, I rated the previous caption for this image 55.)": its number is that
    caption's. A sentence that also names this caption ("this one deserves more than the
    previous caption's 55") compares the two, and is left to the other rules.
    """
    for m in list(_SENTENCE.finditer(text)):
        sentence = m.group(0)
        if (other := _OTHER_ITEM.search(sentence)) is None or _THIS_ITEM.search(sentence):
            continue
        # Only its clause: "The final score is $55$, down from the $70$ I gave the previous
        # caption" keeps its verdict.
        start = max(sentence.rfind(c, 0, other.start()) for c in ",;(\u2014") + 1
        ends = [i for c in ",;)\u2014" if (i := sentence.find(c, other.end())) >= 0]
        clause = sentence[start: min(ends) if ends else len(sentence)]
        # The number comes after the other item ("I rated the previous caption 55", "the
        # last one got 70") or is given to it ("the $70$ I gave the previous caption"); "$55$
        # as with the previous caption" is this caption's.
        at = other.start() - start
        given = [d for d in _DIGITS.finditer(clause, 0, at)
                 if _RATED_WORD.search(clause, d.end(), at)]
        if _RATED_WORD.search(clause) and (_DIGITS.search(clause, other.end() - start) or given):
            text = blank(text, m.start() + start, m.start() + start + len(clause))
    # "Better than the last one (70): 82": a number in brackets right after the other item is
    # its score.
    for m in list(_OTHER_ITEM_SCORE.finditer(text)):
        group = "score" if m.group("score") is not None else "labelled"
        text = blank(text, m.start(group), m.end(group))
    # A block the answer heads as another item's: "here are my scores for the previous item:"
    # and its lines, up to a blank line.
    for m in list(_OTHER_ITEM_BLOCK.finditer(text)):
        # (The heading itself stays: "I'm keeping the scores from the last clip:" says the
        # verdict is that clip's, :mod:`capjudge.reading.elsewhere`.)
        stop = _BLANK.search(text, m.end())
        text = blank(text, m.end(), stop.start() if stop else len(text))
    return text


_OTHER_ITEM_BLOCK = re.compile(r"^[^\n]*\b" + _PRIOR + r"\s+(?:caption|"
                               r"item|image|picture|photo|object|clip|video|sample|one|render)s?"
                               r"\b[^\n\d]*:[ \t*_]*$", re.I | re.M)


# ("Unlike the previous chair (C. Score 2, H. Score 2)", "Final score: \boxed{81} (previous:
# \boxed{64})": whatever the other item is called.)
_OTHER_ITEM_SCORE = re.compile(r"\b" + _PRIOR + r"(?:\s+[\w-]+){0,2}?"
                               r"(?:['\u2019]s)?[ \t]*(?P<score>\([^()\n]{0,60}\d[^()\n]{0,60}\))"
                               r"|\((?P<labelled>[ \t]*(?:previous|prior|last|earlier)"
                               r"(?:\s+[\w-]+)?[ \t]*:[^()\n]{0,40}\d[^()\n]{0,40})\)", re.I)
# A progress counter at the start of a line, before the verdict: "[7/50] 64", "Item 9/20 - 4",
# "#12 of 50:" (a judge working through a session's items; "[4/5]" and "[85/100]" are ratings).
_COUNTER = re.compile(r"^[ \t>*_]*(?:\[[ \t]*\d+[ \t]*/[ \t]*(?!(?:5|10|100)[ \t]*\])\d+[ \t]*\]"
                      r"|(?:item|sample|image|"
                      r"object|caption|progress|no\.|#)[ \t]*#?[ \t]*\d+[ \t]*(?:/|of)[ \t]*"
                      r"\d+)(?!\d)(?=[ \t]*(?:[:\u2014\u2013-][ \t]*)?(?:\S|$))", re.I | re.M)
# An index in brackets: "62 (#41)" (no score is written after '#'; "Caption #3" is left to the
# rules that name another caption).
_INDEX = re.compile(r"(?<=[(\[])[ \t]*#\d+[ \t]*(?=[)\]])")


def mask_counters(text: str) -> str:
    """Progress counters and indexes blanked ("[7/50] 64", "Item 7/50", "62 (#41)")."""
    for m in [*_COUNTER.finditer(text), *_INDEX.finditer(text)]:
        text = blank(text, m.start(), m.end())
    return text


def mask_text(text: str, quotes: Sequence[str] = ()) -> str:
    """Everything a careful reader skips blanked.

    Quotations, rubrics, examples of the format, figures of speech and irony, hypotheticals,
    rejected alternatives and bounds.
    """
    text = mask_quotes(text, [q for q in quotes if q and q.strip()])
    text = mask_examples(mask_rubric(text))
    text = mask_voices(text)  # "Reviewer 1: 4", "GPT-4 rated this 85"
    text = mask_figurative(text)  # "a high five", "Sure, let's give it a 100 🙄"
    text = mask_counters(mask_other_items(text))  # "[7/50] 64", "the last one (70): 82"
    return mask_negated(mask_hypotheticals(mask_scale_points(text)))
