"""Whether a number is a reading of a slot's scale: the scale's phrasings, ranges, other scales.

:func:`check_number` says why a number is not a value of the slot (a range or hedge, a
fraction or percentage on another scale, a decimal on a whole-number scale, a value outside
the scale); :func:`clean_text` blanks the scale's own phrasings ("on a scale of 0 to 100")
before the first number is read (VisCE² §3).
"""

from __future__ import annotations

import re

from capjudge.protocol import ScoreSlot
from capjudge.reading.arithmetic import contradiction
from capjudge.reading.candidates import Candidate
from capjudge.reading.number_words import spelled_pattern
from capjudge.reading.numbers import NUMBER_WORDS, Number, value_at

# "70 or 75" in the languages the vocabulary knows ("70 o 75", "3 ou 4", "3 oder 4", "3 или 4").
_RANGE_AFTER = re.compile(r"[\s$*_]*(?:-|\u2013|\u2014|to|~|or|and|至|到|或|o|ou|oder|или|и|y|und|"
                          r"et|e|bis|ó|또는|أو|または|か|hoặc|atau)\s*(?:an?\s+)?"
                          r"[$*_\s]*"
                          r"(?:[-]?\d|(?P<word>(?:" + NUMBER_WORDS.pattern + r")|(?:"
                          + spelled_pattern().pattern + r")))", re.I)
_RANGE_BEFORE = re.compile(r"(?:\bbetween|\beither|\bfrom|\brange\s+of|\bentre|\bzwischen|"
                           r"между|\btra)\s*(?:an?\s+)?\$?\s*$", re.I)
# "82,5": a decimal comma (German, French, Spanish ...), not a list ("3,4,5") or thousands.
_DECIMAL_COMMA = re.compile(r",\d{1,2}(?![\d,])")
# ("4 (out of 5), i.e. 80 out of 100": the scale in brackets is still the number's own.)
_FRACTION_AFTER = re.compile(r"[\s*_`$]*(?:/|(?:\(\s*)?\bout\s+of\b|\bof\b|\b(?:sobre|sur|de|"
                             r"von|auf|su|di|em|en)\b)[\s*_`$]*(?=\d|" + NUMBER_WORDS.pattern + "|"
                             + spelled_pattern().pattern + ")", re.I)
_PERCENT_AFTER = re.compile(r"\s*(?:%|percent\b)")
# "70, or 75 if ...", "80, maybe 85": an alternative left open after a comma.
_ALTERNATIVE_AFTER = re.compile(r"[\s$*_`]*,\s*(?:or|o|ou|oder|или|maybe|perhaps|possibly)\s+"
                                r"(?:maybe\s+|perhaps\s+|possibly\s+|even\s+|else\s+)?"
                                r"[$*_\s]*(?:\d|" + NUMBER_WORDS.pattern + r")", re.I)
# "$50$ (strict) / $70$ (lenient)": a value under a qualifier, then another under its own.
_QUALIFIED_PAIR = re.compile(r"[\s$*_`]*\([^()\n\d]{1,40}\)[\s$*_`]*(?:/|\||,|;|\bor\b|"
                             r"\bvs\.?)[\s$*_`]*\(?[\s$*_`]*\d", re.I)
# A value given as a bound ("4 or more", "80 at most", "≥ 4", "至少 $80$", "80점 이상") or marked
# provisional ("$72$, pending the image", "60 (tentative)"): the judge does not commit to the one
# value (corpus AC). Only where the qualifier ends its clause or takes its object: "$85$, at
# least the dog is right" and "preliminary observations are below" qualify something else.
# (A spread, "$80 \\pm 10$", is read at its centre: eight corpora's writers read it so, AC's
# alone abstains.)
# (Within the value's line: "$72$\n\nPreliminary notes" is the next paragraph.)
_LEAD = r"(?:[$*_`]|[^\S\n])*"
# The clause ends right after the qualifier (also in CJK punctuation and Japanese/Korean
# sentence endings): "$85$ or more." and "80分以上。", not "or more to the point" or "以上是".
_STOPS = r".;!?)\]\n\u2014\u2013\u3002\uff1b\uff09"
_CLAUSE_END = (r"(?=[^\S\n]*(?:[" + _STOPS + r",:\uff0c\uff1a\uff01\uff1f]|$|です|입니다|이다))")
# (A comma ends a bound's clause, not a provisional word's: "4; tentatively, I'd say the dog
# is a retriever" qualifies what follows.)
_CLOSED = r"(?=[^\S\n]*(?:[" + _STOPS + r":]|$))"
_BOUND_AFTER = re.compile(
    _LEAD + r"(?:[分点點점][^\S\n]*)?,?[^\S\n]*(?:(?:and\s+up|or\s+(?:more|higher|above|better|"
    r"greater|less|lower|below|worse)|(?:at\s+(?:the\s+(?:very\s+)?)?|at\s+a\s+)(?:least|most|"
    r"minimum|maximum)|tops|minimum|max(?:imum)?|or\s+thereabouts|or\s+so|give\s+or\s+take|"
    r"at\s+(?:best|worst)|at\s+(?:the|my|its)\s+most\s+(?:generous|lenient|charitable)|"
    r"(?:ou|o|oder|o\s+di)\s+(?:plus|más|mehr|mais|più|moins|menos|weniger)|"
    r"au\s+moins|al\s+menos|mindestens|almeno|pelo\s+menos|au\s+plus|höchstens|al\s+massimo)\b"
    r"|-plus\b|以上|以下|以内|左右|上下|이상|이하|정도)" + _CLAUSE_END
    # "80 (at least)", "4 (or more)": the bound alone in brackets
    + r"|" + _LEAD + r"[(\uff08][^\S\n]*(?:at\s+(?:least|most|best|worst)|or\s+(?:more|less|so)|"
    r"max(?:imum)?|min(?:imum)?)[^\S\n]*[)\uff09]", re.I)
# An upper bound at the scale's top is its value: "5, max", "100, tops".
_UPPER = re.compile(r"max|tops|at\s+most|less|lower|below|worse|au\s+plus|höchstens|massimo|"
                    r"以下|이하|以内", re.I)
_BOUND_BEFORE = re.compile(
    r"(?:[\u2265\u2264\u2267\u2266\u2273\u2272\u2a7d\u2a7e]|>=|<=|(?:(?<![=-]):|\b(?:is|be|of))"
    r"[^\S\n]*(?:>|<(?=[\s$*_`]*$))|\bat\s+(?:least|most|(?:a\s+)?minimum|(?:a\s+)?maximum)|"
    r"\bat\s+the\s+(?:very\s+)?(?:least|most)|\ba\s+(?:minimum|maximum)\s+of|\b(?:no|not)\s+"
    r"(?:more|less|fewer|lower|higher)\s+than|\b(?:more|less|fewer|higher|lower)\s+than|"
    r"\bupwards?\s+of|\bin\s+excess\s+of|\bnorth\s+of|\bsouth\s+of|\bau\s+(?:moins|plus)|"
    r"\bal\s+menos|\bcomo\s+m[ií]nimo|\bmindestens|\bhöchstens|\balmeno|\bal\s+massimo|"
    r"\bpelo\s+menos|\bno\s+m[ií]nimo|не\s+(?:менее|более)|как\s+минимум|至少|最少|最多|不低于|"
    r"不少于|不超过|少なくとも|最低でも|최소|최대|적어도)(?:[^\S\n]*(?:为|為|是|は|는|은|한))?"
    r"[\s$*_`]*$", re.I)
_PROVISIONAL_WORD = (r"(?:tentative(?:ly)?|provisional(?:ly)?|preliminary|prelim\.?|temporary|"
                     r"unconfirmed|not\s+final|tbc|tbd|may\s+revise|vorläufig|provisoire|"
                     r"предварительно|暂定|暫定|잠정)")
# Said to await a review, in a clause or in brackets: "(subject to revision)", "to be confirmed".
_UNDER_REVIEW = (r"subject\s+to\s+(?:change|revision|review|confirmation|verification)|"
                 r"to\s+be\s+(?:confirmed|revised|updated)|awaiting")
_PROVISIONAL_AFTER = re.compile(
    # "$72$ so far.": right after the value, closing its clause ("80; so far, every caption
    # ..." and "85 — so far, the only one ..." say something else)
    _LEAD + r"so\s+far" + _CLOSED + r"|"
    + _LEAD + r"(?:[分点點점][^\S\n]*)?[,;\u2014\u2013-]?[^\S\n]*(?:" + _PROVISIONAL_WORD
    + _CLOSED + r"|pending\s+(?:the|a|an|further|more|my|closer|full|review|confirmation|"
    r"verification|clarification|access|receipt)\b|(?:for\s+(?:now|the\s+moment|the\s+time\s+"
    r"being)|as\s+of\s+now)" + _CLAUSE_END + r"|(?:" + _UNDER_REVIEW + r"|subject\s+to\s+"
    r"(?:the\s+)?(?:full\s+)?(?:image|picture|frame|photo)s?|until\s+(?:I|the\s+(?:image|picture|"
    r"frame|photo)s?))\b)"
    # "(TBD after zoom)", "(pending)", "(tentative, pending a look)": in brackets, with no
    # other value in them ("(tentatively 80 before I zoomed in)" names an earlier one)
    # ("(tentatively identified breed aside, ...)": an adverb qualifies the words after it.)
    + r"|" + _LEAD + r"(?:[分点點점][^\S\n]*)?[(\uff08][^\S\n]*(?:(?:tentatively|"
    r"provisionally)(?=[^\S\n]*[,;:)\u2014\u2013\uff09])|(?!tentatively|provisionally)"
    + _PROVISIONAL_WORD + r"|pending|for\s+now|" + _UNDER_REVIEW + r")\b"
    r"(?![^()\n\uff09]*\d)", re.I)
# "in the high $70$s", "mid-80s", "80-odd": a decade of the scale, not one value of it ("80's
# fair" is "80 is fair" unless the decade is named: "the 80's").
_DECADE_AFTER = re.compile(r"[$*_`]*(?:s\b|-(?:odd|something)\b)")
_DECADE_RANGE = re.compile(r"[$*_`]*[^\S\n]+range\b", re.I)  # "the high $70$ range"
_DECADE_NAMED = re.compile(r"[$*_`]*['\u2019]s\b")
_DECADE_CUE = re.compile(r"(?:\bthe|\bhigh|\blow|\bmid|\bupper|\blower|\bearly|\blate)[\s-]*"
                         r"[$*_`]*$", re.I)
# "$85$ if it's a cake", "4, provided the dog is a husky": a verdict under a condition the
# answer never settles.
_CONDITION_AFTER = re.compile(r"[\s$*_`)]*,?\s*(?:if|unless|provided|assuming|depending\s+on|"
                              r"only\s+if|as\s+long\s+as|in\s+case|si|wenn|falls)\b", re.I)
# ('If "cat" were corrected to "dog":' after a blank line heads a block of its own.)
_HEADING_AFTER = re.compile(r"[\s$*_`)]*\n[^\S\n]*\n\s*[A-Z\"'\u201c\u2018][^\n]*:[\s*_`]*(?:\n|$)")
# "100 minus those 40 points", "Baseline 100, minus 20 ...": a sum the judge leaves to be
# worked out, whose first term is no verdict.
_EXPRESSION_AFTER = re.compile(r"[\s$*_`]*,?\s*(?:minus|less|plus|times|multiplied\s+by|"
                               r"divided\s+by)\s+(?:[^\W\d_]+\s+){0,2}[$*_`]*\d", re.I)
# "Start at 100.", "Starting from 100: -20 ...", "Baseline: 100": what deductions start from.
_BASELINE_BEFORE = re.compile(r"(?:\b(?:start|begin)(?:s|ning|ing)?\s+(?:at|from|with)|"
                              r"\bbaseline(?:\s+(?:of|is|at))?[\s:=]*)[\s$*_`]*$", re.I)
# "seventy—no, sixty-five", "80... wait, 75": a value taken back as soon as it is written.
# ("4, no 5" is "4, not 5", and "sorry 4.5 is not allowed" apologises: "no", "wait" and "sorry"
# take back only with their own comma.)
_TAKEN_BACK_AFTER = re.compile(r"[\s$*_`]*(?:[\u2014\u2013]|--|\.{3}|\u2026|,)\s*(?:(?:no|wait|"
                               r"sorry)[,.!:]|I\s+mean\b,?|make\s+(?:it|that)\b)[\s$*_`]*"
                               r"(?=\d|" + NUMBER_WORDS.pattern + r")", re.I)
# What makes a starting value a baseline: a deduction or an addition after it.
_DEDUCTED = re.compile(r"(?:^|\s)[-\u2212\u2013+]\s*\d|\b(?:minus|deduct\w*|subtract\w*|less|plus|"
                       r"penal\w*|take\s+off|knock\w*\s+off|off\s+for)\b", re.I)
# "three stars": stars are no value of a 0-100 scale (nor, unless of 5, of any other).
_STARS_AFTER = re.compile(r"[\s*_`]*stars?\b", re.I)
# "70 (40%), 80 (35%), 60 (25%)": a distribution over ratings, not one rating.
_SHARE = r"[\s$*_`]*\(\s*\d+(?:\.\d+)?\s*%\s*\)"
_SHARED_AFTER = re.compile(_SHARE + r"\s*[,;/]\s*(?:and\s+)?[$*_`]*\d+" + _SHARE)
_SHARED_BEFORE = re.compile(r"\d+" + _SHARE + r"\s*[,;/]\s*(?:and\s+)?[$*_`]*$")
# "+10 relative to that one", "10 points higher than the last": a difference from a score
# outside the answer, not a score.
_RELATIVE_AFTER = re.compile(r"[\s$*_`]*(?:points?\s+|pts?\s+)?(?:(?:higher|lower|more|less|"
                             r"better|worse|above|below)\s+than|relative\s+to|compared\s+"
                             r"(?:to|with)|over\s+(?:the|that|my)\s+(?:previous|last|earlier|"
                             r"other))\b", re.I)


def _blank(text: str, pattern: re.Pattern[str]) -> str:
    return pattern.sub(lambda m: " " * len(m.group(0)), text)


def scale_phrases(low: int, high: int) -> list[re.Pattern[str]]:
    """The canonical phrasings that name the scale ``low``-``high``.

    VisCE² §3 removes them before taking the first integer: "on a scale of 0 to 100", "(1-5)",
    "between 0 and 100", "out of 5", "/100", "满分100分". Only the slot's own scale: "8/10" on
    0-100 is a number on another scale, not a phrasing to drop.
    """
    lo, hi = re.escape(str(low)), re.escape(str(high))
    num_lo, num_hi = rf"\$?{lo}\$?", rf"\$?{hi}\$?"
    between = r"\s*(?:-|\u2013|\u2014|to|and|至|到|~)\s*"
    return [
        re.compile(rf"\b(?:on\s+)?(?:a\s+)?(?:precise\s+)?scale\s+(?:of|from)\s+{num_lo}"
                   rf"{between}{num_hi}", re.I),
        re.compile(rf"\bon\s+a\s+{num_lo}{between}{num_hi}\s+scale\b", re.I),
        re.compile(rf"\b(?:from|between)\s+{num_lo}{between}{num_hi}(?!\d)", re.I),
        re.compile(rf"[(\[]\s*{num_lo}{between}{num_hi}\s*[)\]]"),
        re.compile(rf"(?<![\d.]){num_lo}{between}{num_hi}\s*(?:-?point\s+)?(?:scale|分)", re.I),
        # "1 to 5: 4": the scale echoed as the value's label.
        re.compile(rf"(?<![\d.]){num_lo}{between}{num_hi}(?=[ \t*_`]*[:=][ \t*_`$]*\d)", re.I),
        re.compile(rf"\b(?:on\s+)?an?\s+{num_hi}-point\s+scale\b", re.I),
        # (Not the "$" after: "$90/100$" keeps the anchor that closes the verdict.)
        # (A full stop may end the sentence: "X out of 100." is the scale, not 100.)
        re.compile(rf"\bout\s+of\s+\$?{hi}(?!\d|\.\d)", re.I),
        re.compile(rf"/\s*\$?{hi}(?!\d|\.\d)"),
        re.compile(rf"满分\s*{num_hi}\s*分?|満点\s*{num_hi}\s*点?|{num_hi}\s*点满分|"
                   rf"{num_hi}\s*点満点|{num_hi}\s*分制|{num_hi}\s*점\s*만점|"
                   rf"{num_hi}\s*점\s*척도|{num_hi}\s*段階|{num_hi}\s*级|{num_hi}\s*級"),
        # Tamil "100-க்கு 68" and Hindi "100 में से 68": "out of 100" before the value.
        re.compile(rf"(?<![\d.]){num_hi}\s*-?\s*க்கு|(?<![\d.]){num_hi}\s*में\s*से"),
    ]


def clean_text(text: str, slot: ScoreSlot) -> str:
    """The text with the slot's own scale phrasings blanked (same length, same offsets)."""
    for pattern in scale_phrases(slot.low, slot.high):
        text = _blank(text, pattern)
    return text


# The scale in CJK notation after a value: "8점 (10점 만점)", "8分（满分10分）", "8点（10点満点）".
_CJK_SCALE_AFTER = re.compile(r"\s*(?:점|分|点)?\s*[(\uff08]?\s*(?:(?:满分|滿分|満点)\s*(?P<a>\d+)|"
                              r"(?P<b>\d+)\s*(?:점|分|点)\s*(?:만점|满分|滿分|満点|制))")


def denominator(after: str) -> Number | None:
    """The scale a number is stated on, from the text right after it ("/10", "out of 100").

    Also in CJK notation: "8점 (10점 만점)" is 8 on a scale of 10.
    """
    frac = _FRACTION_AFTER.match(after)
    if frac is not None:
        return value_at(after, frac.end())
    cjk = _CJK_SCALE_AFTER.match(after)
    if cjk is None:
        return None
    return value_at(after, cjk.start("a") if cjk.group("a") else cjk.start("b"))


def _gloss(after: str, rng: re.Match[str], n: Number) -> bool:
    """Whether a "range" is a dash and a gloss that opens with a smaller number word.

    "Conciseness: $95$ — one short sentence": a range runs upwards ("3-4", "seventy to
    eighty"); a spelled number below the value after a dash starts the explanation.
    """
    if rng.group("word") is None or not re.match(r"[\s$*_]*[-\u2013\u2014]", after):
        return False
    second = value_at(after, rng.start("word"))
    if second is None or second.value >= n.value:
        return False
    # A gloss counts something ("one short sentence", "two small omissions"); a number word
    # left alone or hedged ("eighty-five at worst", "three, to be fair") is a second value.
    return re.match(r"\s+(?!(?:at|if|or|to|perhaps|maybe|possibly|probably|would|could|"
                    r"might|points?|percent|out|of|tops|max(?:imum)?|min(?:imum)?)\b)"
                    r"[^\W\d_]", after[second.end:], re.I) is not None


def _taken_back(text: str, end: int) -> tuple[re.Match[str], Number] | None:
    """The take-back right after a value ending at ``end``, and the value written in its place.

    Only a value that ends its clause replaces: "$85$, no, 10-point penalties apply" does not.
    """
    back = _TAKEN_BACK_AFTER.match(text, end)
    m = value_at(text, back.end()) if back is not None else None
    if back is None or m is None or not re.match(r"[\s$*_`]*(?:[.,;:!)\n\u2014\u2013]|$)",
                                                  text[m.end:]):
        return None
    return back, m


# Why a number is no one value: the start of its problem, asked by whoever weighs a hedge.
HEDGED = "the score is a range or a hedge"


def _uncommitted(n: Number, after: str, before: str, slot: ScoreSlot) -> str | None:
    """Why ``n`` is a value the judge does not commit to, or None.

    A bound, a decade or a value marked provisional (corpus AC).
    """
    written = n.written.strip()
    if (bound := _BOUND_AFTER.match(after)) is not None and not (
            _UPPER.search(bound.group(0)) and n.value >= slot.high):
        return f"the score is a bound ({written}{bound.group(0).rstrip()}), not one value"
    if (bound := _BOUND_BEFORE.search(before)) is not None and not (
            bound.group(0).rstrip(" $*_`").endswith("<") and re.match(r"[\s$*_`]*>", after)):
        # ("Score: <85>": the value in angle brackets.)
        return f"the score is a bound ({bound.group(0).strip()} {written}), not one value"
    if _PROVISIONAL_AFTER.match(after) is not None:
        return (f"the score {written!r} is marked provisional "
                f"({after[:40].strip()!r}), not a verdict")
    if (n.integral and slot.high >= 100 and n.value >= 10 and n.value % 10 == 0
            and (_DECADE_AFTER.match(after) or (
                (_DECADE_NAMED.match(after) or _DECADE_RANGE.match(after))
                and _DECADE_CUE.search(before)))):
        return f"the score names a decade (the {int(n.value)}s), not one value"
    return None


def uncommitted_after(after: str) -> str | None:
    """The bound or provisional mark right after a value ("or more", "(tentative)"), or None.

    For counts too (cap3d's points: "C. Score: 3 or more", "3, pending a closer look").
    """
    m = _BOUND_AFTER.match(after) or _PROVISIONAL_AFTER.match(after)
    return m.group(0).strip() if m is not None else None


def check_number(text: str, n: Number, slot: ScoreSlot) -> tuple[str | None, bool]:
    """Why ``n`` is not a reading of ``slot`` (None when it is one), and its scale.

    The second value says whether it is written against the slot's own scale ("4/5",
    "70 out of 100").
    """
    after = text[n.end:]
    before = text[max(0, n.start - 24): n.start]
    if (worked := contradiction(text, n.start)) is not None:
        # "$100 - 15 - 10 = 80$": the steps give 75; which did the judge mean?
        return worked, False
    if (rng := _RANGE_AFTER.match(after)) is not None and _gloss(after, rng, n):
        rng = None
    if rng is not None or _RANGE_BEFORE.search(before):
        span = after[: rng.end()] if rng else ""
        return f"{HEDGED} ({(n.written + span).strip()!r}), not one number", False
    if (alt := _ALTERNATIVE_AFTER.match(after) or _QUALIFIED_PAIR.match(after)) is not None:
        return f"{HEDGED} ({(n.written + alt.group(0)).strip()!r}), not one number", False
    # (Within the line: "1. Accuracy: $80$\n2. Completeness: $70$" numbers its lines.)
    if re.match(r"\$+[^\S\n]*\d", after) or re.search(r"\d\$+[^\S\n]*$", before):
        # "$7$$5$": 75 with a stray pair of delimiters, or 7 and 5?
        return f"the score {n.written.strip()!r} runs into another delimited number", False
    # (A sum worked out after it, "85, minus 5: 85 - 5 = 80", is the arithmetic's to read.)
    summed = _EXPRESSION_AFTER.match(after) and not re.search(r"=\s*[$*_`]*\d", after[:80])
    if summed or (_BASELINE_BEFORE.search(before) and _DEDUCTED.search(after[:200])):
        what = "a sum left to be worked out" if summed else "the baseline the judge deducts from"
        return f"the number {n.written.strip()!r} is {what}, not the verdict", False
    if _SHARED_AFTER.match(after) or (_SHARED_BEFORE.search(before)
                                      and re.match(_SHARE, after)):
        return (f"the score {n.written.strip()!r} is one value of a distribution the answer "
                "gives over several, not one verdict"), False
    if (taken := _taken_back(text, n.end)) is not None:
        return (f"the judge takes {n.written.strip()!r} back at once "
                f"({(n.written + taken[0].group(0)).strip()!r} ...)"), False
    if (why := _uncommitted(n, after, before, slot)) is not None:
        return why, False
    if (cond := _CONDITION_AFTER.match(after)) is not None and not _HEADING_AFTER.match(after):
        return (f"the score {n.written.strip()!r} is conditional ({cond.group(0).strip()!r} "
                "...), and the answer does not settle the condition"), False
    if _RELATIVE_AFTER.match(after) or (before.endswith("+") and not n.negative
                                        and re.match(r"[\s$*_`]*(?:relative|compared|more|"
                                                     r"higher|better|than|over)\b", after)):
        return (f"the score {n.written.strip()!r} is a difference from another score, not a "
                f"value of {slot.low}-{slot.high}"), False
    own = False
    if (den := denominator(after)) is not None:
        if den.value != slot.high:
            written = (n.written + after[:den.end]).strip()
            return (f"the score is given on another scale ({written}), not "
                    f"{slot.low}-{slot.high}"), False
        own = True
    if den is None and slot.high != 5 and _STARS_AFTER.match(after):
        return (f"the score is given in stars ({(n.written + after[:12]).strip()!r}), not "
                f"{slot.low}-{slot.high}"), False
    if (approx := re.match(r"-?ish\b", after, re.I)) is not None:
        return (f"the score is approximate ({(n.written + approx.group(0)).strip()!r}), not one "
                "value"), False
    if (plus := re.match(r"\+(?![\s$*_]*\d)", after)) is not None:
        return (f"the score is written as {n.written.strip()}{plus.group(0)}: more than "
                f"{n.written.strip()}, not one value of {slot.low}-{slot.high}"), False
    if _PERCENT_AFTER.match(after) and slot.high != 100:
        return f"the score is a percentage ({n.written}%), not {slot.low}-{slot.high}", False
    if n.kind == "digits" and n.integral and (dec := _DECIMAL_COMMA.match(after)) \
            and dec.group(0).strip(",0"):  # "4,0" is 4, written with a decimal comma
        return (f"the score is written as a decimal with a comma ({n.written.strip()}"
                f"{dec.group(0)}); the scale is whole numbers {slot.low}-{slot.high}"), own
    if not n.integral:
        form = "a decimal" if "." in n.written else "a mixed number"
        return (f"the score is written as {form} ({n.written.strip()}); the scale is whole "
                f"numbers {slot.low}-{slot.high}"), own
    if not slot.low <= n.value <= slot.high:
        return f"printed score {int(n.value)} is outside {slot.low}-{slot.high}", own
    return None, own


# What turns a value the slot cannot take into one it can: "7 out of 10, i.e. 70", "3.5, which
# rounds to 4", "between 60 and 65 ... so 62".
_RESOLVES = re.compile(r"(?:\bi\.?\s?e\.?|\bthat\s+is\b|\bwhich\s+(?:rounds|converts|translates|"
                       r"corresponds|maps|comes\s+out)\s+(?:up\s+|down\s+)?to\b|\bso\b|"
                       r"\bthus\b|\bhence\b|\btherefore\b|\brounded(?:\s+(?:up|down))?(?:\s+to)?\b|"
                       r"\bequivalent\s+to\b|\bcall\s+it\b|\bsettl\w+\s+on\b|→|=>)"
                       r"[^\d\n]{0,40}?(?=\d)", re.I)


def _agrees(n: Number, m: Number, text: str, slot: ScoreSlot) -> bool:
    """Whether ``m`` is ``n`` made a value of the slot: rescaled, rounded, or inside its range."""
    if (den := denominator(text[n.end:])) is not None and den.value != slot.high:
        return abs(n.value / den.value * (slot.high - slot.low) + slot.low - m.value) <= 0.5
    if not n.integral:
        return m.value in (float(int(n.value)), float(int(n.value) + 1))
    if (rng := _RANGE_AFTER.match(text[n.end:])) is not None:
        # The range's other end as written (not read on to a worked result: "65, so 70").
        other = re.match(r"\d+", text[n.end + rng.end() - 1:])
        return other is not None and min(n.value, int(other.group(0))) <= m.value <= max(
            n.value, int(other.group(0)))
    return False


def resolved(cands: list[Candidate], text: str, slot: ScoreSlot) -> list[Candidate]:
    """``cands``, each value the slot cannot take replaced by the answer's own resolution of it.

    "7 out of 10, i.e. 70", "3.5, which rounds to 4", "between 60 and 65 ... so 62": a
    connective within the next sentence or so, then a value of the scale that agrees with
    the first (:func:`_agrees`). Anything else is a second value, not a resolution, and the
    candidate keeps its problem.
    """
    return [_resolution(c, text, slot) or c if c.problem is not None else c for c in cands]


def _resolution(c: Candidate, text: str, slot: ScoreSlot) -> Candidate | None:
    n = c.number
    if (taken := _taken_back(text, n.end)) is not None:
        # "seventy—no, sixty-five": the value written at once in its place (off-contract,
        # as every resolution: its how is not the method's format).
        later = make_candidate(text, taken[1], f"{c.how}, corrected at once "
                               f"({taken[0].group(0).strip()!r})", c.rank, slot, c.final,
                               source=c.source)
        return later if later.problem is None else None
    conn = _RESOLVES.search(text, n.end, n.end + 160)
    m = value_at(text, conn.end()) if conn is not None else None
    if conn is None or m is None or not _agrees(n, m, text, slot):
        return None
    later = make_candidate(text, m, f"{c.how}, as the answer resolves it "
                           f"({conn.group(0).strip()!r})", c.rank, slot, c.final,
                           source=c.source)
    return later if later.problem is None else None


def make_candidate(text: str, n: Number, how: str, rank: int, slot: ScoreSlot,
                   final: bool = False, *, source: str) -> Candidate:
    """A candidate reading of ``slot`` at ``n``, with why it is not one (:func:`check_number`)."""
    problem, own = check_number(text, n, slot)
    return Candidate(n, how, rank, final, problem, own, source)


# A scale the answer names that is not the slot's ("on a scale of 1 to 10", "a 5-point scale").
FOREIGN_SCALE = re.compile(
    r"\bscale\s*(?:of\s+|from\s+|:\s*)?\$?(\d+)\$?\s*(?:to|-|\u2013)\s*\$?(\d+)\$?"
    r"|\bon\s+an?\s+(\d+)\s*(?:-|\u2013|to)\s*(\d+)\s+scale"
    r"|\b(?:an?\s+)?(\d+)[- ]point\s+(?:scale|rating)"
    # A label's own range before its colon: "Fluency (1-3): 3" (G-Eval's form).
    r"|[(\[]\s*(\d+)\s*(?:-|\u2013|to)\s*(\d+)\s*[)\]][ \t*_]*[:=]", re.I)


def foreign_top(cleaned: str, slot: ScoreSlot) -> float:
    """The top of another scale the answer names (-1 when it names none)."""
    m = FOREIGN_SCALE.search(cleaned)
    if m is None or foreign_scale(cleaned, slot) is None:
        return -1
    return float(m.group(5) or m.group(2) or m.group(4) or m.group(7))


def foreign_scale(cleaned: str, slot: ScoreSlot) -> str | None:
    """A "scale of 1 to 10" phrase naming another scale than the slot's (after blanking)."""
    m = FOREIGN_SCALE.search(cleaned)
    if m is None:
        return None
    if m.group(5):  # "a 5-point scale": its top is what tells it apart
        low, high = (slot.low, int(m.group(5))) if int(m.group(5)) != slot.high else (
            slot.low, slot.high)
    else:
        low, high = (int(x) for x in (m.group(1, 2) if m.group(1) else m.group(3, 4)
                                      if m.group(3) else m.group(6, 7)))
    if m.group(7) and high == slot.high:
        return None  # "Score (0-5): 4" on 1-5: the same top, the same 4
    if (low, high) != (slot.low, slot.high) and high > low:
        return (f"the judge answered on another scale ({m.group(0).strip()!r}), not "
                f"{slot.low}-{slot.high}")
    return None


# A verdict given twice, on another scale and on the slot's, side by side: "$8/10$ (75/100)",
# "75/100 (8/10)", "8.5/10, i.e. 85".
_GLOSS_JOIN = r"[\s$*_`]*(?:[(,=:\u2192~\u2248]|\bi\.?e\.?|\bthat\s+is|\bor)?[\s$*_`(]*"
# (A fraction of things, "2/3 objects correct", "1/3 of the image", is a count, no scale.)
_UNIT = (r"(?<![\d.])(?P<n>\d+(?:\.\d+)?)\s*(?:/|out\s+of)\s*(?P<d>\d+)(?![\d.])"
         r"(?![\s*_`]*(?:of\b|[^\W\d_]))")
_UNIT_BEFORE = re.compile(_UNIT + _GLOSS_JOIN + "$", re.I)
_UNIT_AFTER = re.compile(r"(?:\s*(?:/|out\s+of)\s*\d+|\s*%)?" + _GLOSS_JOIN + _UNIT, re.I)


def disagreeing_units(text: str, n: Number, slot: ScoreSlot) -> str | None:
    """Why a verdict written beside its value on another scale is unreadable, or None.

    "$8/10$ (75/100)": 8 of 10 is 80, the gloss says 75; both are the judge's, and they
    disagree. (Agreeing, "8.5/10, i.e. 85", they are one verdict.) A coarser gloss after the
    verdict may round it: "Accuracy: $85$ (4/5)" is 85, shown in stars.
    """
    for m, rounded in ((_UNIT_BEFORE.search(text, max(0, n.start - 40), n.start), False),
                       (_UNIT_AFTER.match(text, n.end), True)):
        if m is None or not (d := float(m.group("d"))) or d == slot.high:
            continue
        share = float(m.group("n")) / d
        # (On 1-5, 9/10 is 4.6 from the bottom or 4.5 of 5: either way of rescaling agrees.)
        other = min((share * (slot.high - slot.low) + slot.low, share * slot.high),
                    key=lambda v: abs(v - n.value))
        step = (slot.high - slot.low) / d / 2 if rounded else 0.5
        if abs(other - n.value) > max(0.5, step):
            return (f"the verdict {n.written.strip()!r} is written beside "
                    f"{m.group('n')}/{m.group('d')} ({other:g} on {slot.low}-{slot.high}): "
                    "two values for one verdict")
    return None
