"""Numbers as judges write them: digits, English words, CJK numerals, fractions.

All functions work on a view's canonical text (:mod:`capjudge.reading.view`), where full-width
digits are already ASCII. A value is read *whole*: "85.5" is a decimal, "2 1/2" a mixed number
(2.5), "4/5" a fraction whose denominator says the scale, "60%" a percentage; what it is then
worth on a slot's scale is the caller's decision (:mod:`capjudge.reading.locate`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from capjudge.reading.arithmetic import is_operand, result_at, steps_from
from capjudge.reading.number_words import spelled_at
from capjudge.reading.view import VULGAR

_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
          "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
          "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
WORD_VALUES: dict[str, int] = {w: i for i, w in enumerate(_UNITS)}
WORD_VALUES.update({w: 10 * i for i, w in enumerate(_TENS) if w})
WORD_VALUES["fourty"] = 40  # a common misspelling
_UNIT = "|".join(sorted(_UNITS[1:10], key=len, reverse=True))
_TEEN_OR_UNIT = "|".join(sorted(_UNITS, key=len, reverse=True))
_TEN = "|".join(sorted([*filter(None, _TENS), "fourty"], key=len, reverse=True))
NUMBER_WORDS = re.compile(
    rf"\b(?:(?:one|a)[\s-]+hundred|hundred|(?:{_TEN})(?:[\s-]+(?:{_UNIT}))?|{_TEEN_OR_UNIT})\b",
    re.I)

_CJK_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "兩": 2, "三": 3, "四": 4, "五": 5,
               "六": 6, "七": 7, "八": 8, "九": 9}
CJK_NUMBER = re.compile(r"[零〇一二两兩三四五六七八九十百]+")

# A number as digits: sign, integer part, decimals. Not the tail of a word or of a longer
# number (ASCII word characters only: "α80α", the official ACCR wrapping, stands alone).
DIGITS = re.compile(r"(?<![\w.])([-]?)(\d+)(\.\d+)?(?![\w])", re.ASCII)
_MIXED = re.compile(r"[ \t]+(\d+)[ \t]*/[ \t]*(\d+)(?!\d|\.\d)")
# "12,400", "$1,250.00", "56,780 km": digits grouped by thousands are one number (not a list:
# "80,100,90" has a group of two; nor an array: "[85,100]").
_THOUSANDS = re.compile(r"(?:,\d{3})+(?:\.\d+)?(?![\d\]]|,\d)", re.ASCII)


_GROUPS_BEFORE = re.compile(r"(?:^|[^\d.,\[-])(\d{1,3})(?:,\d{3})*,$", re.ASCII)


def _in_thousands(text: str, pos: int) -> bool:
    """Whether the digits at ``pos`` are a later group of a number grouped by thousands."""
    before = _GROUPS_BEFORE.search(text, max(0, pos - 40), pos)
    if before is None:
        return False
    return _THOUSANDS.match(text, before.end(1)) is not None


def _grouped(text: str, m: re.Match[str]) -> Number | None:
    """The number grouped by thousands that ``m``'s digits open ("12,400"), or None."""
    if len(m.group(2)) > 3 or m.group(3) is not None or m.group(1) == "-" \
            or text[max(0, m.start() - 1): m.start()] in ("[", ","):
        return None
    groups = _THOUSANDS.match(text, m.end())
    if groups is None:
        return None
    written = text[m.start(): groups.end()]
    return Number(m.start(), groups.end(), groups.end(), float(written.replace(",", "")),
                  written)


def word_value(words: str) -> int | None:
    """'seventy-five' -> 75, 'a hundred' -> 100, 'four' -> 4; None if not a number."""
    parts = [p for p in re.split(r"[\s-]+", words.lower()) if p]
    if parts and parts[-1] == "hundred":
        return 100 if len(parts) <= 2 else None
    total = 0
    for p in parts:
        if p not in WORD_VALUES:
            return None
        total += WORD_VALUES[p]
    return total if parts else None


def cjk_value(numeral: str) -> int | None:
    """'八十五' -> 85, '一百' -> 100, '十' -> 10, '四' -> 4; None when it is not one number."""
    if not numeral or any(c not in _CJK_DIGITS and c not in "十百" for c in numeral):
        return None
    total, current = 0, None
    for c in numeral:
        if c in _CJK_DIGITS:
            if current is not None:
                return None  # two digits in a row ("八五") is not how a number is written
            current = _CJK_DIGITS[c]
        elif c == "十":
            total += 10 * (1 if current is None else current)
            current = None
        else:  # 百
            total += 100 * (1 if current is None else current)
            current = None
    return total + (current or 0)


@dataclass(frozen=True)
class Number:
    """One number written in a text.

    Attributes:
        start: offset of its first character (digits or word).
        end: offset just after it (a mixed number's fraction included).
        digits_end: offset just after its integer digits (what a token path covers); equal
            to ``end`` for words.
        value: the number (a float when it has a fractional part).
        written: the text as written.
        kind: ``digits``, ``words``, ``cjk`` or ``roman``.
        negative: written with a minus sign.
    """

    start: int
    end: int
    digits_end: int
    value: float
    written: str
    kind: str = "digits"
    negative: bool = False

    @property
    def integral(self) -> bool:
        """Whether the value is a whole number."""
        return float(self.value).is_integer()


def number_at(text: str, pos: int) -> Number | None:
    """The number that starts at ``pos`` (digits, words or CJK numerals), or None."""
    m = DIGITS.match(text, pos)
    if m is not None and _in_thousands(text, m.start()):
        return None  # "400" of "12,400"
    if m is not None and (grouped := _grouped(text, m)) is not None:
        return grouped
    if m is not None:
        value = float(m.group(2) + (m.group(3) or ""))
        end = m.end()
        mixed = _MIXED.match(text, end) if m.group(3) is None else None
        if m.group(3) is None and end < len(text) and text[end] in VULGAR:
            value += VULGAR[text[end]]  # "2½"
            end += 1
        elif mixed is not None and int(mixed.group(2)) > int(mixed.group(1)) > 0:
            # "2 1/2": a mixed number (a proper fraction after the whole part).
            value += int(mixed.group(1)) / int(mixed.group(2))
            end = mixed.end()
        sign = m.group(1) == "-"
        number = Number(m.start(2) - (1 if sign else 0), end, m.end(2),
                        -value if sign else value, text[m.start(): end], "digits", sign)
        return _worked(text, number) if not sign and m.group(3) is None else number
    w = NUMBER_WORDS.match(text, pos)
    if w is not None and (said := word_value(w.group(0))) is not None:
        return Number(w.start(), w.end(), w.end(), float(said), w.group(0), "words")
    c = CJK_NUMBER.match(text, pos)
    if c is not None and (written := cjk_value(c.group(0))) is not None:
        return Number(c.start(), c.end(), c.end(), float(written), c.group(0), "cjk")
    return None


# Sino-Korean numerals ("칠십오", "팔십 점"): the CJK numerals' readings in Hangul. Only a run
# with 십 or 백 (a tens or hundreds number) that is a word of its own (at most 점 after
# it), since each syllable alone is also part of everyday words.
_HANGUL_AS_CJK = str.maketrans("일이삼사오육칠팔구십백", "一二三四五六七八九十百")
_HANGUL_NUMBER = re.compile(r"(?<![\uac00-\ud7a3])[일이삼사오육칠팔구]?[십백]"
                            r"[일이삼사오육칠팔구십]*(?![\uac00-\ud7a3](?<!점))"
                            # "백점 만점에", "백 점 중", "백점 기준으로": the scale
                            r"(?![ \t]*(?:점[ \t]*)?(?:만점|중|(?:을|를)?[ \t]*기준|"
                            r"으로[ \t]*환산))")


def value_at(text: str, pos: int) -> Number | None:
    """:func:`number_at`, or a number spelled out in another language, where a value is due.

    For the places a value is expected (after a label, at the answer's opening): "setenta y
    ocho", "fünfundsiebzig" (:mod:`capjudge.reading.number_words`).
    """
    n = number_at(text, pos)
    if n is not None:
        return n
    if (h := _HANGUL_NUMBER.match(text, pos)) is not None and (
            said := cjk_value(h.group(0).translate(_HANGUL_AS_CJK))) is not None:
        return Number(pos, h.end(), h.end(), float(said), h.group(0), "cjk")
    spelled = spelled_at(text, pos)
    if spelled is None:
        return roman_at(text, pos)
    end, value = spelled
    return Number(pos, end, end, float(value), text[pos:end], "words")


# A Roman numeral where a value is due ("Rating: IV (High)", "C. Score: III", "Ⅲ —" after
# NFKC): upper case, with an I or a V (a lone "X" or "XX" is a placeholder), a word of its
# own that ends its clause ("Score: I think 4" is the pronoun, "IV." the numeral). Not before
# a word that goes on ("V-neck", "I: Analysis", "IV (having checked"); a lone "I" only at a
# line's or sentence's end, or before "/" or "out of" ("Rating: I, for one, find ..." and
# "I (having checked ...) find" are the pronoun).
_ROMAN = re.compile(
    r"(?<![^\W\d_])(?:(?P<one>I)|(?P<n>X{0,2}(?:IX|IV|VI{0,3}|I{2,3})|X{1,2}I))"
    r"(?![\w'\u2019])(?=[^\S\n]*(?:[.!?](?=\s|$|[*_)])|/|\n|$|out\s+of\b|(?(one)(?!)|(?:"
    r"[;)\]\u2014\u2013*_`$]|,(?![^\S\n]*[a-z])|:(?![^\S\n]*[^\W\d_])|\((?![^\S\n]*[a-z])|"
    r"-(?![^\W\d_])))))")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10}


def roman_at(text: str, pos: int) -> Number | None:
    """The Roman numeral (1-29, with an I or a V) that starts at ``pos``, or None."""
    m = _ROMAN.match(text, pos)
    if m is None:
        return None
    digits = [_ROMAN_VALUES[c] for c in m.group("one") or m.group("n")]
    value = sum(-d if i + 1 < len(digits) and d < digits[i + 1] else d
                for i, d in enumerate(digits))
    return Number(pos, m.end(), m.end(), float(value), m.group(0), "roman")


def numbers_in(text: str, start: int = 0, end: int | None = None, *, words: bool = False
               ) -> list[Number]:
    """Every number written as digits in ``text[start:end]`` (and in words, if asked)."""
    end = len(text) if end is None else end
    found = [n for m in DIGITS.finditer(text, start, end)
             if (n := number_at(text, m.start())) is not None and n.end <= end]
    if words:
        found += [n for m in NUMBER_WORDS.finditer(text, start, end)
                  if (n := number_at(text, m.start())) is not None]
    return sorted(found, key=lambda n: n.start)


def first_number(text: str, start: int = 0, end: int | None = None) -> Number | None:
    """The first number (digits, words or CJK) in ``text[start:end]``."""
    end = len(text) if end is None else end
    best: Number | None = None
    for rx in (DIGITS, NUMBER_WORDS, CJK_NUMBER):
        m = rx.search(text, start, end)
        while m is not None:
            n = number_at(text, m.start())
            if n is not None and n.end <= end:
                if best is None or n.start < best.start:
                    best = n
                break
            m = rx.search(text, m.end(), end)
    return best


def _worked(text: str, n: Number) -> Number:
    """``n``, or the result of the computation that starts at it.

    A judge that works its score out writes the steps and (usually) the result: the result is
    the number it states ("100 - 12 - 6 = 82", "82 -> 71", "Base 90 - 15 (shirt) = 75"),
    kept only when the steps give it; a result that the steps contradict, or a range ("70 -
    80": a step that rises), leaves ``n`` as it is. Steps with no result stated are worked
    out only where the judge's own delimiters close the expression (``$100 - 15 - 10$``): a
    number of kind ``arithmetic`` spanning the steps, with no token distribution of its own.
    A number that is itself a step of a computation is left as written.
    """
    if is_operand(text, n.start):
        return n
    steps = steps_from(text, n.end, int(n.value))
    value, pos = steps.value, steps.end
    at = result_at(text, pos)
    if at is not None:
        stated = number_at(text, at)
        if stated is not None and (steps.count == 0 or stated.value == value):
            return stated
        # (Steps that contradict the result: neither is read; the scale's check names the
        # contradiction, capjudge.reading.arithmetic.contradiction.)
        return n
    # One step from a number that is no scale's top ("$85 - 80$") may be a range written
    # downwards: only deductions from the top, or two steps or more, are worked out.
    from_top = n.value in (5, 10, 100) or steps.count >= 2
    if steps.count and from_top and value >= 0 and re.match(r"[ \t]*\$", text[pos:]) and re.search(
            r"\$[ \t*_`]*$", text[:n.start]):
        return Number(n.start, pos, pos, float(value), text[n.start:pos].strip(), "arithmetic")
    return n


# Digits a stray space split or a stream doubled ("C. Score: 5 6", "$8 5$"): 5, 6 or 56, and
# nobody can tell which (corpus AJ). Not a mixed number ("3 1/2"), a percentage or a count
# with its noun ("4 3-star reviews"); a third run repeating the second is a loop.
_SPLIT = re.compile(r"(?P<a>\d+)[ \t]+(?P<b>\d+)(?![\d.]*[ \t]*-?(?:/|%|[^\W\d_]))"
                    r"(?P<more>[ \t]+(?P=b)\b)?")
# The first run of such a pair in a value's place: after a label's colon, a delimiter or the
# line's start ("Score: 8 5", "$8 5$"), not a name's index ("Caption 2 85" is no pair).
_SPLIT_BEFORE = re.compile(r"(?:^|(?<=[:=$*(\[]))[ \t]*(?P<d>\d+)[ \t]+$", re.M)


def split_digits(text: str, start: int, top: float | None = None) -> str | None:
    """Why the digits at ``start`` are no number: a pair split by a space, or None.

    ``start`` is where the number read begins; the pair may begin there or one run before it.
    With ``top`` (the scale's), a pair whose join is above it is two values, not one split.
    """
    line = text.rfind("\n", 0, start) + 1
    before = _SPLIT_BEFORE.search(text, line, start)
    m = _SPLIT.match(text, before.start("d") if before else start)
    if m is None or (m.group("a") == m.group("b") and (len(m.group("a")) > 1 or m.group("more"))):
        return None  # ("85 85", "5 5 5": a loop repeating the number, not digits split)
    a, b = m.group("a"), m.group("b")
    if top is not None and int(a + b) > top:
        return None
    return f"digits split by a space ({m.group(0)!r}): {a}, {b} or {a}{b}"

