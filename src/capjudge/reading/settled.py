"""Whether the answer leaves its verdict settled: what comes after it (issue 40, rules 9).

Each blind corpus found wrong values returned as valid in classes no earlier corpus had, and
most were one shape: the verdict was found, and something *after* it changed what it meant ("$85$
if it's a cake, $30$ otherwise", "70, or 75 if you count the reflection", "… warrants roughly 10
points less", a summary line with another value). Rules written per class after each corpus
are a treadmill; these checks are for the shape, whatever the words:

- :func:`alternative_after` (abstain): the verdict's own sentence goes on to another value of
  the scale across a word that offers it as an alternative or a condition ("or", "if",
  "otherwise", "maybe" ...). The answer leaves the choice open; a follow-up that picks one of
  the two does not make the first reading right.
- :func:`doubtful` (off-contract, so a second channel must agree, :mod:`capjudge.reading.confirm`):
  another value of the scale later in the verdict's sentence, a score-like value anywhere after
  the verdict, or, where the prompt asks the answer to *end* with its verdict (a label and an
  anchor: G-VEval, ACCR), prose after it. None of these says the reading is wrong; each says the
  rules alone cannot vouch for it.
"""

from __future__ import annotations

import re

from capjudge.protocol import ScoreSlot
from capjudge.reading.candidates import Candidate
from capjudge.reading.contract import CONDITIONAL, REVISION, sentence_start
from capjudge.reading.finders import counts_things, labelled_else
from capjudge.reading.numbers import Number, numbers_in
from capjudge.reading.view import line_before, start_of_line
from capjudge.reading.vocabulary import ANY_CRITERION, CRITERIA, is_generic, slot_names

# Where the verdict's sentence ends ("." or ";" before a space, or the line's end).
_SENTENCE_END = re.compile(r"[.!?;](?=\s|$)|\n")
# Words that offer a second value as an alternative or under a condition. ("could", "would"
# are left out: "(one could argue for 60)" is an aside, and hypotheticals are masked already.)
_ALTERNATIVE = re.compile(r"\b(?:or|otherwise|if|unless|else|maybe|perhaps|possibly|instead|"
                          r"alternatively|ou|oder|sinon|sonst|wenn)\b|或|否则",
                          re.I)
# Words near a number that make it score-like ("10 points less", "a 75", "deduct 5").
_SCORE_WORDS = re.compile(r"\b(?:points?|pts?|scores?|scored|rating|rated|rate|grade|marks?|"
                          r"deduct\w*|penal\w*|bonus|less|more|lower|higher|minus|plus|off)\b",
                          re.I)
# A number that is a denominator ("/10", "out of 5"), never a value of its own.
_DENOMINATOR_BEFORE = re.compile(r"(?:/|\bout\s+of|\bof|\bvon|\bsur|\bsobre)[\s*_`$]*$", re.I)
# Lines that are another criterion's labelled value ("Completeness: $70$"): the slot's siblings.
_LABELLED_LINE = re.compile(r"^[ \t>*_#|-]*(?:\d+[.)][ \t]*)?[^\W\d_][^\n:=]{0,40}[:=][ \t*_`$]*"
                            r"-?\d+[ \t*_`$.|]*$", re.M)


def _sentence_end(text: str, pos: int) -> int:
    m = _SENTENCE_END.search(text, pos)
    return m.start() if m else len(text)


def _rivals(chosen: Candidate, text: str, slot: ScoreSlot, end: int, *, words: bool
            ) -> list[Number]:
    """Values of the scale after the verdict up to ``end``: other than it, not a denominator."""
    n = chosen.number
    return [o for o in numbers_in(text, n.end, end, words=words)
            if o.value != n.value and slot.low <= o.value <= slot.high
            and not _DENOMINATOR_BEFORE.search(text, max(0, o.start - 10), o.start)]


_RANK_BEFORE = re.compile(r"\brank(?:ing|ed)?\b[^.\n\d]{0,30}$|\b(?:place[ds]?|position)\s+"
                          r"(?:it\s+)?(?:at\s+)?(?:number\s+|no\.\s*|#\s*)?[$*_`]*$", re.I)


# "so the pipeline can continue": a value written only to keep the run going.
_PIPELINE_WORDS = (r"so\s+(?:that\s+)?the\s+(?:pipeline|run|batch|job|script)\s+(?:can|could|"
                   r"will)\s+(?:continue|proceed|complete|finish|run)")
# The judge calls its value a stand-in: "I'm assigning $0$ as a placeholder so this item can
# be flagged", "a dummy score", "score: -1 (sentinel)".
_PLACEHOLDER = re.compile(r"\b(?:place-?holders?|dummy\s+(?:value|score|rating)|sentinel|"
                          # "this is not an assessment of the caption", "so the pipeline
                          # can continue"
                          r"not\s+(?:an?\s+)?(?:actual\s+|real\s+|genuine\s+)?(?:assessment|"
                          r"evaluation|judge?ment|rating)\s+of\s+(?:the|this)\s+(?:caption|"
                          r"candidate|description)(?=\s*(?:[.;,)!\n]|$))|" + _PIPELINE_WORDS + r"|"
                          r"(?:so|that)\s+(?:this|the)\s+(?:item|sample|example|case)\s+(?:can|"
                          r"could|will)\s+be\s+(?:flagged|re-?run|re-?checked|reviewed|"
                          r"re-?evaluated))\b", re.I)


# A value the judge labels as not yet its verdict: "Preliminary score: $75$", "draft rating".
_DRAFT_LABEL = re.compile(r"\b(?:preliminary|tentative|provisional|interim|draft|initial|"
                          r"first[- ]pass)\s+(?:\w+\s+)?(?:scores?|ratings?|verdicts?|estimates?|"
                          r"assessments?|grades?)\b[^\n\d]{0,12}$", re.I)


# "Rating: 75 (draft)": the label after the value.
_DRAFT_AFTER = re.compile(r"[\s$*_`]*[(\[][\s*_]*(?:preliminary|tentative|provisional|interim|"
                          r"draft|initial|first[- ]pass|not\s+final)\b[^()\[\]\n]{0,20}[)\]]",
                          re.I)
# A rating the judge recalls giving before: "I gave this caption 80 earlier, but that was for
# the other photo".
_RECALLED_VERB = re.compile(r"\b(?:I|we)\s+(?:had\s+)?(?:gave|given|rated|scored|assigned|"
                            r"graded)\b", re.I)
_EARLIER = re.compile(r"\b(?:earlier|previously|before|last\s+time|in\s+(?:my|the|a)\s+"
                      r"(?:previous|earlier|last|prior)\s+\w+)\b", re.I)


# For counts, whose objects may be a "placeholder cube" or a "stone sentinel": the word must
# name the values.
_STAND_IN_VALUES = re.compile(r"(?<![\"'\u2018\u201c])\b(?:place-?holder|dummy|sentinel)s?\s+(?:"
                              r"values?|scores?|"
                              r"counts?|numbers?|zeros?)\b|\b(?:values?|scores?|counts?|numbers?|"
                              r"zeros?)\s+(?:are|is)\s+(?:only\s+|just\s+)?(?:place-?holders?|"
                              r"dummies|dummy\s+values?)\b", re.I)


_PIPELINE = re.compile(r"\b" + _PIPELINE_WORDS + r"\b", re.I)


def stand_in(text: str, *, counts: bool = False) -> str | None:
    """The words in which the judge calls its values stand-ins, or None.

    ``counts``: cap3d's counts, where only words that name the values as stand-ins count.
    """
    if counts:
        m = _STAND_IN_VALUES.search(text) or _PIPELINE.search(text)
    else:
        m = _PLACEHOLDER.search(text)
    return m.group(0) if m is not None else None


def not_a_verdict(chosen: Candidate, text: str) -> str | None:
    """Why the number is no verdict at all: a question, a rank, a stand-in or a draft value."""
    n = chosen.number
    if (words := stand_in(text)) is not None:
        return f"the judge calls its value a stand-in ({words!r}), not a rating of the caption"
    line_start = start_of_line(text, n.start)
    if (draft := _DRAFT_LABEL.search(text, line_start, n.start)) is not None:
        return (f"the judge labels {n.written.strip()!r} as not yet its verdict "
                f"({draft.group(0).strip(' :*_`$')!r}) and gives no final one")
    if (draft := _DRAFT_AFTER.match(text, n.end)) is not None:
        return (f"the judge labels {n.written.strip()!r} as not yet its verdict "
                f"({draft.group(0).strip(' :*_`$')!r}) and gives no final one")
    start = sentence_start(text, n.start)
    end = min([i for c in ".!\n" if (i := text.find(c, n.end)) >= 0] or [len(text)])
    sentence = text[start:end]
    if _RECALLED_VERB.search(sentence) and _EARLIER.search(sentence):
        return (f"{n.written.strip()!r} is a rating the judge recalls giving earlier "
                f"({' '.join(sentence.split())[:80]!r}), not its verdict here")
    question = text.find("?", n.end)
    if 0 <= question < end:
        return (f"the value {n.written.strip()!r} is asked as a question "
                f"({' '.join(text[start: question + 1].split())[:80]!r}), not stated")
    if _RANK_BEFORE.search(text, start, n.start):
        return f"{n.written.strip()!r} is a rank among captions, not a score"
    return None


# The verdict put in a band of ten: "in the high 70s", "low-80s", "the mid-seventies".
_DECADES = {"twenties": 20, "thirties": 30, "forties": 40, "fifties": 50, "sixties": 60,
            "seventies": 70, "eighties": 80, "nineties": 90}
_BAND = re.compile(r"\b(?:(?P<part>low|lower|early|mid|middle|high|upper|late)[\s-]*)?"
                   r"(?:(?P<tens>[1-9]0)\s?'?s\b|(?P<word>" + "|".join(_DECADES) + r")\b)",
                   re.I)
# Where in its ten each part of a band lies (a generous reading: "high 70s" is 76-79).
_PARTS = {"low": (0, 4), "lower": (0, 4), "early": (0, 4), "mid": (3, 7), "middle": (3, 7),
          "high": (6, 9), "upper": (6, 9), "late": (6, 9)}


def band_apart(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    r"""Why the verdict's own line puts it in a band that leaves it out, or None.

    "$\approx 80$ — somewhere in the high 70s": the judge gives 80 and 77-79 in one breath;
    nothing says which it means. A band that holds the value ("78, in the high 70s") agrees.
    """
    n = chosen.number
    if slot.high < 50:
        return None
    # Its line: "$85$, i.e. in the low seventies." ("i.e." would end a sentence).
    start = start_of_line(text, n.start)
    end = text.find("\n", n.end) % (len(text) + 1)
    for m in _BAND.finditer(text, start, end):
        tens = int(m.group("tens")) if m.group("tens") else _DECADES[m.group("word").lower()]
        low, high = _PARTS.get((m.group("part") or "").lower(), (0, 9))
        if not tens + low <= n.value <= tens + high:
            return (f"the verdict {n.written.strip()!r} is put in a band that leaves it out "
                    f"({m.group(0).strip()!r}: {tens + low}-{tens + high}): two values, "
                    "nothing says which")
    return None


# A candidate that is a short numeric answer ("3", "3 zebras", "About 12"): a VQA answer.
_NUMERIC_ANSWER = re.compile(r"^\W*(?:\w+\W+)?\d+(?:[.,]\d+)?(?:\W+\w+){0,2}\W*$")


def own_answer(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    """Why a bare number may be the judge's own answer to the question, not a rating.

    The candidate is itself a number ("How many zebras?" answered "3") and the judge wrote
    nothing but a number ("4"): its count of the zebras, or its rating of the answer? Nothing
    in the answer says which. A rating with any word of its own stands.
    """
    n = chosen.number
    if text[:n.start].strip(" \t\n*_`#>:([") or text[n.end:].strip(" \t\n*_`.!)]"):
        return None
    if not any(_NUMERIC_ANSWER.match(q.strip()) for q in slot.quotes if q):
        return None
    return (f"the answer is the bare number {n.written.strip()!r} and the candidate is itself a "
            "number: the judge's own answer to the question, or its rating? Nothing says which")


def bare_numbers(text: str) -> str | None:
    """Why an answer of numbers alone, several of them, has no one verdict ("4, 3, 5, 5, 4")."""
    if re.search(r"[^\W\d_]", text):
        return None
    values = {n.value for n in numbers_in(text)}
    if len(values) < 2:
        return None
    return (f"the answer is numbers alone ({' '.join(text.split())[:40]!r}) and nothing says "
            f"which is the verdict")


# The judge proposes a caption of its own before its verdict: which of the two does the
# verdict score? ("I'd rewrite it as '...'. The final score is $88$.")
_REWRITE = re.compile(r"\b(?:I(?:'d|\u2019d|\s+would)\s+(?:rewrite|rephrase|reword|revise)|"
                      r"rewrit(?:e|ten|ing)\s+(?:it|this|the\s+caption)\s+as|"
                      r"(?:a\s+)?(?:better|improved|revised|corrected|suggested|stronger)\s+"
                      r"(?:caption|version|description)\s*(?:would\s+be|could\s+be|is|:))", re.I)


# A value rated in words before the verdict's sentence: "Overall I'd put this around 40",
# "I'd rate it 40 overall", "this deserves about 40", "a score around 40 would be harsh".
# (The judge's own rating: "I'd rate/give/put it", "deserves", "overall"; not "gives 2 of the 3",
# "scored 2 goals", "I'll give 3 reasons".)
_RATED_BEFORE = re.compile(
    r"(?:\bI(?:['\u2019]d|\s+would|\s+will|['\u2019]ll)?\s+(?:rate|give|score|put|grade|say)\s+"
    r"(?:it|this|the\s+caption|this\s+caption)\b|\b(?:deserv|merit|earn)\w*|\boverall\b)"
    r"[^.!?;\n\d]{0,25}$", re.I)
_CRITERION_WORD = re.compile(r"\b(?:" + "|".join(CRITERIA) + r"|grammar|fluent|style)\w*", re.I)
# What makes a value rated before the verdict no rating of the verdict's scale: "of" a count,
# another scale ("8/10", "4 stars out of 5"), a share ("100% accurate"), a part ("earns 100 on
# objects"), an adjective before a count ("the 2 main subjects").
_NOT_A_RATING_AFTER = re.compile(r"\s*(?:/|out\s+of\b|%|percent\b|stars?\b|:\d)|\s+(?:of|on|for|in)"
                                 r"\s+\w|\s+(?:main|other|key|major|minor|distinct)\s+\w", re.I)
# A step, an item or a bullet of its own: a part the verdict is built from.
_PART_LINE = re.compile(r"[ \t>*_#]*(?:step\s*\d|\d+[.)]\s|[-*\u2022]\s|for\s+\w+\b)", re.I)


def _own_rating(text: str, o: Number, slot: ScoreSlot) -> bool:
    """Whether a value rated before the verdict is the slot's, not a part's or a criterion's.

    The sentence is no step, item or bullet ("Step 1: ... I'd rate it 90"), and the last
    criterion named before the value is the slot's own (ACCR's "I'd rate accuracy 90,
    completeness 70"); for a request's only verdict (G-VEval), none is named in the sentence.
    """
    start = sentence_start(text, o.start)
    line = start_of_line(text, o.start)
    if _PART_LINE.match(text, start) or _PART_LINE.match(text, line):
        return False
    named = list(_CRITERION_WORD.finditer(text, max(0, o.start - 200), o.start))
    if is_generic(slot):
        return not any(m.start() >= start for m in named)
    own = {w.lower() for w in slot_names(slot)}
    return bool(named) and any(named[-1].group(0).lower().startswith(w) for w in own)


def ratings_stated(text: str, slot: ScoreSlot, end: int | None = None) -> list[Number]:
    """The values the answer rates in its own words ("I'd put this around 40", "deserves 40").

    Values of the scale only, none another scale's, a share, a count or a part's; up to
    ``end`` (the whole answer by default).
    """
    return [o for o in numbers_in(text, 0, len(text) if end is None else end, words=True)
            if slot.low <= o.value <= slot.high and not o.value % 1
            and not _DENOMINATOR_BEFORE.search(text, max(0, o.start - 10), o.start)
            and not counts_things(text, o) and not _NOT_A_RATING_AFTER.match(text, o.end)
            and _RATED_BEFORE.search(text, max(0, o.start - 40), o.start) is not None]


def _rated_before(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    r"""Another value of the scale rated before the verdict's sentence (G-VEval, ACCR).

    "Overall I'd put this around 40, since the subject is wrong.\n\nThe final score is $85$."
    states its verdict twice, with two values; a draft revised on the way ("at first I'd
    have said 60") reads the same to a rule. Neither is the format stated once: a second
    channel must say which stands.
    """
    if not (slot.label and slot.anchor):
        return None
    n = chosen.number
    for o in ratings_stated(text, slot, sentence_start(text, n.start)):
        if o.value == n.value or labelled_else(text, o.start, slot) \
                or text[o.start - 1: o.start] == ":" or not _own_rating(text, o, slot):
            continue
        m = _RATED_BEFORE.search(text, max(0, o.start - 40), o.start)
        assert m is not None  # (ratings_stated found it)
        return (f"before its verdict the answer rates it {o.written.strip()!r} "
                f"({' '.join(text[m.start(): o.end].split())!r}): the verdict is stated "
                "twice, with two values")
    return None


def _rewrite_before(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    if (m := _REWRITE.search(text, 0, chosen.number.start)) is None:
        return None
    return (f"the answer proposes a caption of its own ({m.group(0).strip()!r}) before its "
            "verdict: whether the verdict scores it or the candidate needs a second channel")


# "I'd say 70. Or 75.": the next sentence opens by offering another value.
_OFFERED_NEXT = re.compile(r"[\s$*_`]*[.;:!\u2014\u2013-]*[\s*_`]*(?:or|maybe|perhaps|possibly|"
                           r"alternatively)\b[\s,]*(?:maybe\s+|perhaps\s+|even\s+|else\s+)?"
                           r"(?:an?\s+)?[$*_`\s]*$", re.I)
# A later sentence that weighs another side: "On the other hand, 65 if the setting matters."
_OTHER_HAND = re.compile(r"(?:(?<=[.!?;])\s+|\n[ \t>*_-]*)(?:on\s+the\s+other\s+hand|then\s+again|"
                         r"alternatively|equally,|one\s+could\s+(?:also\s+)?(?:argue|say))\b",
                         re.I)
# A value that ends as a rating does: "65.", "65 if ...", "65/100", "65 points".
_VALUE_ENDS = re.compile(r"[$*_`]*(?:\s*(?:[.,;:!?)\u2014\u2013]|$)|\s+(?:if|for|because|since|"
                         r"points?|out\s+of|would|could|might|is|seems)\b|\s*/)", re.I)
# Two values of the scale offered together ("3 or 4", "70-75", "70 to 75"), not a count of
# things ("2-3 people") nor a fraction or a percentage.
_HEDGE = re.compile(r"(?<![\w.,/$])[$*_`]*(?P<a>\d{1,3})[$*_`]*\s*(?:or|to|-|\u2013|~)\s*"
                    r"(?:an?\s+)?[$*_`]*(?P<b>\d{1,3})(?![\d/%]|[.,]\d)[$*_`]*"
                    r"(?=\s*(?:[.,;:!?)\u2014\u2013-]|$|points?\b|stars?\b))", re.I)


def hedged_after(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    """Why the answer's one verdict is reopened into a choice after it is stated, or None.

    "I'd say 70. Or 75." (the next sentence offers another value), "4 ... Actually, 3 or 4"
    (a later hedge of two values of the scale, one of them the verdict, or after a revision
    cue): the judge has not settled, and a follow-up that picks one does not make the first
    reading right. Not a hedge in a conditional sentence ("if the boat counts, 3 or 4").
    """
    n = chosen.number
    for o in numbers_in(text, n.end, min(len(text), n.end + 60)):
        if o.value != n.value and slot.low <= o.value <= slot.high and _OFFERED_NEXT.fullmatch(
                text, n.end, o.start):
            return (f"the verdict {n.written.strip()!r} is followed by another value "
                    f"{o.written.strip()!r} offered in its place: the answer leaves the choice "
                    "open")
    for m in _OTHER_HAND.finditer(text, n.end):
        for o in numbers_in(text, m.end(), _sentence_end(text, m.end()), words=False):
            if o.value != n.value and slot.low <= o.value <= slot.high and \
                    _VALUE_ENDS.match(text, o.end):
                return (f"after the verdict {n.written.strip()!r} the answer turns to another "
                        f"value ({m.group(0).strip()!r} … {o.written.strip()!r}): the choice "
                        "is left open")
    for m in _HEDGE.finditer(text, n.end):
        a, b = int(m.group("a")), int(m.group("b"))
        if a == b or not (slot.low <= min(a, b) and max(a, b) <= slot.high):
            continue
        sentence = text[sentence_start(text, m.start()): _sentence_end(text, m.end())]
        if CONDITIONAL.search(sentence):
            continue
        if n.value in (a, b) or REVISION.search(sentence):
            return (f"after the verdict {n.written.strip()!r} the answer hedges "
                    f"({m.group(0).strip()!r}): the choice is left open")
    return None


def alternative_after(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    """Why the verdict's sentence leaves another value open ("$85$ if …, $30$ otherwise").

    Also a value set beside it with nothing between ("5 4", "$7$ $5$", "85 with the
    reference, 70 without"), and a later value in the method's own delimiters ("… the final
    score is $60$. Personally … it deserves $90$."): two verdicts, nothing says which stands.
    """
    n = chosen.number
    if (band := band_apart(chosen, text, slot)) is not None:
        return band
    if (other := _restated_after(chosen, text, slot)) is not None:
        return other
    # (For one criterion of several, the others' values follow it in any layout: only the
    # answer's one verdict has no sibling.)
    rivals = _rivals(chosen, text, slot, _sentence_end(text, n.end), words=True)
    if is_generic(slot):
        if (hedged := hedged_after(chosen, text, slot)) is not None:
            return hedged
        if slot.anchor and (later := _anchored_after(chosen, text, slot)) is not None:
            return later
        if (field := _field_after(chosen, text, slot)) is not None:
            return field
        if (other := _other_scale_after(chosen, text, slot)) is not None:
            return other
        for o in rivals:
            if o.kind != "words" and (_BESIDE.fullmatch(text, n.end, o.start) or (
                    _QUALIFIED.match(text, o.end) and _PARALLEL.match(text, n.end, o.start))):
                return (f"the verdict {n.written.strip()!r} has another value "
                        f"{o.written.strip()!r} set beside it: two values, nothing says which")
    if not is_generic(slot) and slot.anchor and \
            (later := _anchored_on_line(chosen, text, slot)) is not None:
        return later
    for o in rivals:
        # Between the two, or right after the second ("$30$ otherwise", "50 instead").
        if (word := _ALTERNATIVE.search(text, n.end, min(o.end + 12, len(text)))) is not None:
            return (f"the verdict {n.written.strip()!r} is followed in its own sentence by "
                    f"another value {o.written.strip()!r} offered as an alternative or under a "
                    f"condition ({word.group(0)!r}): the answer leaves the choice open")
    return None


# Words that prefer another value to the verdict: "safer", "fairer", "more appropriate".
_PREFERRED = (r"(?:safer|fairer|better|wiser|preferable|more\s+(?:appropriate|accurate|"
              r"defensible|reasonable|realistic|cautious|conservative|suitable|justified|"
              r"prudent|honest))")
# "a neutral 50 may be the safer rating", "perhaps 60 would be fairer", "a fairer score would
# be 60", "60 might be more appropriate": another value offered as the better verdict.
_PREFERS = re.compile(
    rf"(?P<a>\d+)[^\d.;\n]{{0,25}}?\b(?:may|might|could|would|should)\s+(?:well\s+|also\s+|"
    rf"actually\s+|perhaps\s+)?be\s+(?:a\s+|the\s+|an\s+)?{_PREFERRED}"
    rf"|{_PREFERRED}\s+(?:rating|score|grade|choice|option|value|call|verdict)\s+(?:may|"
    rf"might|could|would|should)\s+be\s+(?:a\s+|an\s+)?[^\d.;\n]{{0,15}}?(?P<b>\d+)", re.I)
# "that corresponds to 70", "equivalent to 70", "which translates to 70": the verdict restated.
_RESTATES = re.compile(r"\b(?:correspond\w*|equat\w*|equivalent|translat\w*|maps?|mapped|"
                       r"convert\w*|amounts?)\s+(?:to\s+)?(?:about\s+|roughly\s+|approximately\s+|"
                       r"around\s+|an?\s+)?[~\u2248]?[\s$*_`]*(?P<n>\d+(?:\.\d+)?)"
                       r"(?P<after>[^\n.;]{0,40})", re.I)


# The good end and the bad end of a scale, as a judge names them when it states its own.
_GOOD_END = (r"(?:no\s+(?:problems?|errors?|issues?|mistakes?|flaws?|faults?|hallucinations?)|"
             r"perfect(?:ly\s+(?:appropriate|accurate|correct|fine))?|flawless|(?:the\s+)?best|"
             r"(?:entirely|completely|fully|totally)\s+(?:correct|accurate|appropriate))")
_BAD_END = (r"(?:(?:the\s+caption\s+is\s+)?(?:entirely|completely|totally|fully)\s+"
            r"(?:wrong|incorrect|inaccurate|inappropriate)|(?:the\s+)?worst|most\s+severe|"
            r"unusable)")
_MEANS = r"[ \t]*(?:=|:|means|meaning|is|indicates|represents|stands\s+for|->|\u2192)[ \t]*"
# A scale the judge turns round: "where 0 means no problems and 100 means the caption is
# entirely wrong", "(1 = no errors, 5 = completely wrong)", "lower is better".
_ENDS = re.compile(rf"(?<![\d.])(?P<n>\d+){_MEANS}(?:(?P<good>{_GOOD_END})|(?P<bad>{_BAD_END}))\b",
                   re.I)
_LOWER_BETTER = re.compile(r"\b(?:lower\s+(?:is|=|means)\s+better|the\s+lower\s+the\s+(?:score|"
                           r"number|value|rating),?\s+the\s+better|higher\s+(?:is|=|means)\s+"
                           r"worse|error[- ]severity|severity\s+(?:scale|score|rating|level))\b",
                           re.I)


def inverted_scale(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    """Why the verdict is on a scale the judge turned round (its low end the good one), or None.

    Every slot read here rates quality, higher better; a judge that declares its own scale
    the other way round ("an error-severity assessment, where 0 means no problems") states
    a value whose quality score it never gives (100 - 30? nothing says the scale is linear).
    ``text`` is the answer as written: masking blanks a restated scale.
    """
    if slot.kind != "score" or slot.low >= slot.high:
        return None
    for m in _ENDS.finditer(text):
        n = int(m.group("n"))
        if (m.group("good") and n == slot.low) or (m.group("bad") and n == slot.high):
            return (f"the answer scores on a scale it turns round ({' '.join(m.group(0).split())!r}"
                    f"): its {chosen.number.written.strip()!r} is not a value of the asked "
                    f"{slot.low}-{slot.high} scale, higher better")
    if (lower := _LOWER_BETTER.search(text)) is not None:
        return (f"the answer scores on a scale where lower is better ({lower.group(0)!r}): its "
                f"{chosen.number.written.strip()!r} is not a value of the asked scale")
    return None


def preferred_after(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    """A later value the answer prefers to its verdict ("… a neutral 50 may be safer").

    ``text`` is the answer as written (canonical, not masked): "perhaps 65 would be fairer"
    is a hypothetical to the masking, and what it proposes is the point here. Also a value
    the verdict rests on doubted (:func:`_self_doubt_after`) and the rating restated as a
    single digit (:func:`_single_digit`).
    """
    n = chosen.number
    for m in _PREFERS.finditer(text, n.end):
        value = float(m.group("a") or m.group("b"))
        if value != n.value and slot.low <= value <= slot.high:
            return (f"after the verdict {n.written.strip()!r} the answer offers another value "
                    f"as the better one ({' '.join(m.group(0).split())!r}): the answer leaves "
                    "the choice open")
    return _self_doubt_after(chosen, text, slot) or _single_digit(chosen, text, slot)


# The judge doubting what its verdict rests on: "I may have read the tile right-to-left",
# "if I misread the frames", "I might have mistaken the dog for a fox".
_SELF_DOUBT = re.compile(
    r"\bI\s+(?:may|might|could)\s+(?:well\s+)?have\s+(?:read|misread|misjudged|mistaken|"
    r"misidentified|misinterpreted|misunderstood|confused|swapped|reversed|miscounted|"
    r"overlooked|missed|got)\b|\bif\s+I\s+(?:misread|misjudged|mistook|misidentified|"
    r"misinterpreted|misunderstood|miscounted|got\s+(?:\w+\s+){0,3}wrong)\b", re.I)
# A value of the scale offered as a verdict: "$85$", "it would deserve 85", "score of 85".
_VERDICT_VALUE = re.compile(r"\$[\s*_`]*(?P<a>\d+)[\s*_`]*\$|\b(?:deserve[sd]?|merit[s]?|"
                            r"warrant[s]?|score[sd]?|rate[sd]?|rating\s+of|score\s+of|be)\s+"
                            r"(?:an?\s+|about\s+|around\s+)?[*_`]*(?P<b>\d+)\b", re.I)


def _self_doubt_after(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    """The verdict rests on a reading the judge doubts, and another value goes with the doubt.

    "The final score is $45$. P.S. I may have read the tile right-to-left: … it would deserve
    $85$": which reading of the picture is right is not settled, so neither value is the
    verdict (a counterfactual about the caption, "had it named the dog, 90", is no doubt).
    """
    n = chosen.number
    for doubt in _SELF_DOUBT.finditer(text, n.end):
        paragraph_end = text.find("\n\n", doubt.end())
        end = paragraph_end if paragraph_end >= 0 else len(text)
        for m in _VERDICT_VALUE.finditer(text, doubt.end(), end):
            value = float(m.group("a") or m.group("b"))
            if value != n.value and slot.low <= value <= slot.high:
                return (f"after the verdict {n.written.strip()!r} the judge doubts what it "
                        f"rests on ({' '.join(doubt.group(0).split())!r}) and gives "
                        f"{m.group(0).strip()!r} for the other reading: the verdict is not "
                        "settled")
    return None


# The rating restated as the prompt's "single digit" (VisCE²): "I rate it 85. Since the final
# rating must be a single digit: 9".
_SINGLE_DIGIT = re.compile(r"\b(?:single|one)[ -]digit\b(?P<between>[^\n\d]{0,40}?)(?<![\d.])"
                           r"(?P<n>\d+)\b(?![ \t]*(?:[-\u2013/]|to\b)[ \t]*\d)", re.I)
# (Not a scale: '"single digit" but also a 0-100 scale'.)
# The instruction echoed ("a single digit between 0 and 100"), or the digit only offered
# ("as a single digit, that would be 7"): no second rating.
_NOT_RESTATED = re.compile(r"\b(?:between|from|would|could|might|if|e\.g\.|like)\b", re.I)


def _single_digit(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    """Why the rating and its restatement as a single digit leave the verdict open, or None."""
    n = chosen.number
    for m in _SINGLE_DIGIT.finditer(text):
        value = float(m.group("n"))
        if m.start("n") != n.start and value != n.value and slot.low <= value <= slot.high \
                and not _NOT_RESTATED.search(m.group("between")):
            return (f"the answer rates {n.written.strip()!r} and also gives the rating as a "
                    f"single digit ({' '.join(m.group(0).split())!r}): two values, nothing "
                    "says which is the rating")
    return None


def _restated_after(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    """The verdict restated as another value of the slot's own scale ("7 … corresponds to 70").

    A restatement on another scale ("4 (≈ 80 on a 0–100 scale)" for a 1-5 slot) leaves the
    verdict as it is.
    """
    n = chosen.number
    for m in _RESTATES.finditer(text, n.end):
        value = float(m.group("n"))
        if value == n.value or not slot.low <= value <= slot.high:
            continue
        scale = re.search(r"(\d+)\s*(?:-|\u2013|\u2014|to)\s*(\d+)", m.group("after"))
        if scale is not None and (int(scale.group(1)), int(scale.group(2))) != (slot.low,
                                                                              slot.high):
            continue  # restated on another scale
        return (f"the answer restates its verdict {n.written.strip()!r} as "
                f"{m.group('n')} ({' '.join(m.group(0).split())!r}): which is the value on "
                f"{slot.low}-{slot.high} is not settled")
    return None


# Nothing but spaces, delimiters or markup between two values ("5 4", "$7$$5$").
_BESIDE = re.compile(r"[ \t$*_`]*")
# A value with a short qualifier of its own ("85 with the reference taken into account, 70
# without it"): a comma ends the first one's qualifier, the second has its own.
_QUALIFIER = (r"[\s$*_`]*(?:with|without|for|on|under|in|given|when|counting|excluding|"
              r"including|ignoring)\b")
_PARALLEL = re.compile(_QUALIFIER + r"[^\d,;.]{0,60},[\s*_`$]*$", re.I)  # "85 with X, "
_QUALIFIED = re.compile(_QUALIFIER, re.I)  # "70 without it"


# A value stated on a scale of 5 or 10 ("a solid 7/10", "4 out of 5").
# (Not a count: "3/5 objects", "4 out of 5 details".)
_SHORT_SCALE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*(?:/|out\s+of)\s*(5|10)(?![\d.]\d)"
                          r"(?![ \t]+(?:of\s+)?(?:the\s+|its\s+)?[^\W\d_]+s\b)", re.I)


# What a breakdown rates: a criterion or an aspect of the caption, never "Conclusion:", "In
# short:", "Caption quality:" (a verdict under another name).
_ASPECT = re.compile(r"^[ \t>*_#|-]*(?:objects?|attributes?|relations?(?:hips?)?|actions?|counts?|"
                     r"counting|colou?rs?|setting|scene|background|details?|spatial|positions?|"
                     r"text|ocr|style|grammar|coverage|specificity|informativeness|"
                     rf"(?:{'|'.join(CRITERIA)})s?)\b[\w ]{{0,12}}[)\]*_` ]*[:=\uff1a|][\s*_`$]*$",
                     re.I)


def _other_scale_after(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    """A later verdict on a scale of 5 or 10 that, made a value of the slot, is another one."""
    if slot.high != 100:
        return None
    for m in _SHORT_SCALE.finditer(text, chosen.number.end):
        value, top = float(m.group(1)), int(m.group(2))
        start = max(text.rfind(c, 0, m.start()) + 1 for c in "\n,;.")
        if _ASPECT.match(text[start: m.start()]):
            continue  # a breakdown ("- Objects: 8/10 — ...", "Fluency: 9/10,"): a sub-score
        if value <= top and abs(value / top * slot.high - chosen.number.value) > 0.5:
            return (f"after the verdict {chosen.number.written.strip()!r} the answer states "
                    f"{m.group(0).strip()!r} ({value / top * slot.high:g} of {slot.high}): two "
                    "verdicts, nothing says which stands")
    return None


# A score field of a structured block: '"score": 68', '"final_score": "68"'.
# (A quoted key only: a labelled line "Rating: 6" after the verdict is the rules' other
# business, a loop cut at max_tokens among them.)
_SCORE_FIELD = re.compile(r"[\"'](?:final[_ ]?|overall[_ ]?)?(?:score|rating|verdict)[\"']"
                          r"[ \t]*:[ \t]*[\"']?(?P<n>\d+(?:\.\d+)?)(?![\d.])", re.I)


def _field_after(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    """A score field after the verdict that states another value ("$72$" … '{"score": 68}')."""
    for m in _SCORE_FIELD.finditer(text, chosen.number.end):
        value = float(m.group("n"))
        if value != chosen.number.value and slot.low <= value <= slot.high:
            return (f"after the verdict {chosen.number.written.strip()!r} the answer states "
                    f"another value in a score field ({m.group(0).strip()!r}): two verdicts, "
                    "nothing says which stands")
    return None


def _anchored_after(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    """A later value of the scale in the method's own delimiters ("$90$"), not the same one."""
    a = re.escape(slot.anchor)
    for m in re.finditer(rf"{a}[ \t]*(\d+)[ \t]*{a}", text[chosen.number.end:]):
        value = int(m.group(1))
        at = chosen.number.end + m.start()
        line = line_before(text, at)
        if re.search(r"[^\W\d_][\w)\]*_` ]{0,40}[:=\uff1a|][\s*_`]*$", line):
            continue  # another criterion's labelled value ("Completeness: $70$"), a table cell
        if value != chosen.number.value and slot.low <= value <= slot.high:
            return (f"after the verdict {chosen.number.written.strip()!r} the answer states "
                    f"another value in the method's delimiters ({m.group(0).strip()!r}): two "
                    "verdicts, nothing says which stands")
    return None


# A later value the answer itself sets aside as former or hypothetical: "(was $90$",
# "would be $85$", "could have been $90$", "from $70$", "$85$ if it named the city".
_SET_ASIDE_BEFORE = re.compile(r"\b(?:was|were|used\s+to\s+be|(?:would|could|might|should)"
                               r"(?:\s+have)?\s+(?:be|been)|previously|originally|initially|earlier|formerly|"
                               r"before|from|instead\s+of|rather\s+than|not|vs|versus|"
                               r"compared\s+(?:to|with)|against)\b[^.;\n]{0,25}$"
                               r"|\bvs\.[^.;\n]{0,25}$|~~[\s$]*$", re.I)
_SET_ASIDE_AFTER = re.compile(r"[\s*_`~]*(?:~~|\b(?:if|unless|had|were|once|when|"
                              r"before|earlier)\b)", re.I)
# A label right before the later value, after the last separator: "| Comp $70$", ", Rel.:
# $85$", "; 完整性：$70$" (another criterion's, abbreviated or in a language the vocabulary
# lacks); not prose ("my heart says $70$", "as written, $65$").
_LABEL_TAIL = re.compile(r"(?:^|[|;,/])[\s*_`]*(?:[A-Z][\w.]{0,20}(?:[ \t]+[\w.]+){0,2}[\s*_`]*"
                         r"[:=\uff1a]?|[^\W\d_][\w.]{0,20}[\s*_`]*[:=\uff1a])[\s*_`]*$")
# Nothing but separators between two values ("$80$ / $65$", "$80$ | $65$").
_ONLY_SEPARATORS = re.compile(r"[\s*_`$/|,;]*")


def _anchored_on_line(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    """A criterion's line that holds a second value in the method's delimiters.

    "Completeness: had it mentioned the stick, $90$; as written, $65$", "my head says $60$,
    my heart says $70$", "$100$... kidding, it repeats itself. $60$": the line gives the
    criterion two values in the format, and nothing the rules know says which one stands (a
    revision, a strike-through, "was", a hypothetical are masked or settled before this).
    Another criterion's value on the same line is named ("Accuracy: $80$, Completeness:
    $65$", "Accuracy $80$ | Completeness $60$"), or the line's header names several criteria
    and its values follow one another ("Accuracy / Completeness: $80$ / $65$").
    """
    a = re.escape(slot.anchor)
    n = chosen.number
    line_start = start_of_line(text, n.start)
    line_end = len(text) if (e := text.find("\n", n.end)) < 0 else e
    own = {w.lower() for w in slot_names(slot)}
    header = any(m.group(0).lower() not in own
                 for m in ANY_CRITERION.finditer(text, line_start, n.start))
    for m in re.finditer(rf"{a}[ \t]*(\d+)[ \t]*{a}", text[n.end: line_end]):
        value = int(m.group(1))
        if value == n.value or not slot.low <= value <= slot.high:
            continue
        between = text[n.end: n.end + m.start()]
        if ANY_CRITERION.search(between) or (header and _ONLY_SEPARATORS.fullmatch(between)) \
                or _LABEL_TAIL.search(between):
            return None  # the line goes on to another criterion's value
        if _SET_ASIDE_BEFORE.search(between[-40:]) or _SET_ASIDE_AFTER.match(
                text, n.end + m.end()):
            continue  # "(was $90$ ...)", "(would be $85$ if ...)": the doubtful rules' business
        return (f"the line of {slot.name} holds another value in the method's delimiters "
                f"after {n.written.strip()!r} ({m.group(0).strip()!r}): two values, nothing "
                "says which is the verdict")
    return None


def _rival_in_sentence(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    n = chosen.number
    rivals = _rivals(chosen, text, slot, _sentence_end(text, n.end), words=True)
    if not rivals:
        return None
    return (f"the verdict's sentence goes on to another value ({n.written.strip()!r} … "
            f"{rivals[0].written.strip()!r})")


def _score_like_after(chosen: Candidate, text: str, slot: ScoreSlot) -> str | None:
    n = chosen.number
    for o in _rivals(chosen, text, slot, len(text), words=False):
        near = text[max(n.end, o.start - 25): o.end + 25]
        if _SCORE_WORDS.search(near):
            return (f"after its verdict the answer writes another score-like value "
                    f"{o.written.strip()!r} ({' '.join(near.split())!r})")
    return None


def _goes_on(chosen: Candidate, text: str, slot: ScoreSlot, written: str | None) -> str | None:
    if not (slot.label and slot.anchor):
        return None  # a slot asked first: the reasons follow the score, as asked
    if written is not None and len(written) == len(text):
        # What the reading blanked goes on too ("Edit: ..., so it should be 40" is masked as
        # a hypothetical, yet the judge did not end at its verdict).
        text = written
    m = _SENTENCE_END.search(text, chosen.number.end)
    if m is None:
        return None
    rest = " ".join(_LABELLED_LINE.sub("", text[m.end():]).split())
    if len(re.findall(r"[^\W\d_]{2,}", rest)) < 2:
        return None
    return (f"the answer goes on after its verdict ({rest[:60]!r}), where the prompt asks it "
            "to end there")


def doubtful(chosen: Candidate, text: str, slot: ScoreSlot, written: str | None = None
             ) -> str | None:
    """Why the rules alone cannot vouch for the reading (it needs a second channel), or None.

    Args:
        chosen: the reading.
        text: the answer as read (canonical, masked, the scale's phrasings blanked).
        slot: its slot.
        written: the answer before masking, position for position (what was masked after
            the verdict is still the judge going on).
    """
    return (_rival_in_sentence(chosen, text, slot) or _score_like_after(chosen, text, slot)
            or _goes_on(chosen, text, slot, written) or _rewrite_before(chosen, text, slot)
            or _rated_before(chosen, text, slot))
