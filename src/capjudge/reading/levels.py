"""A rubric's level names read as its values ("Moderate Correctness" is 3) (HarmonicEval)."""

from __future__ import annotations

import re

from capjudge.protocol import ScoreSlot
from capjudge.reading.candidates import Candidate
from capjudge.reading.contract import sentence_start
from capjudge.reading.numbers import Number
from capjudge.reading.vocabulary import label_pattern


def _names(slot: ScoreSlot) -> tuple[dict[str, int], re.Pattern[str]]:
    """The slot's level names (spacing and case as :func:`_key` makes them), and their regex."""
    names = {_key(name): value for name, value in slot.levels}
    return names, re.compile(label_pattern(list(names)), re.I)


def _key(name: str) -> str:
    return re.sub(r"\s+", " ", name).lower()


def level_candidates(text: str, slot: ScoreSlot) -> list[Candidate]:
    """The rubric's level names ("Moderate Correctness" is 3), when no number is written."""
    if not slot.levels:
        return []
    names, rx = _names(slot)
    return [Candidate(Number(m.start(), m.end(), m.end(), float(value), m.group(0), "level"),
                      f"the rubric level {m.group(0)!r}", 0, source="level",
                      problem=level_span(text, m.start()) or _described(text, m.start(), value)
                      or _qualified(text, m.start()))
            for m in rx.finditer(text) if (value := names.get(_key(m.group(0)))) is not None]


# A degree word before a level's name that the rubric does not make part of one: "perfectly
# fluent" is more than the level "Fluent" (4), "not concise" less than "Concise"; neither is a
# level the rubric names. (A rubric's own "Very fluent" is matched whole, before this asks.)
_DEGREE = re.compile(r"\b(?:[^\W\d_]{2,}ly|very|quite|fairly|pretty|rather|so|too|super|most|"
                     r"more|less|not|never)[\s*_]+$", re.I)
# Which way the degree word moves the level: to it or beyond it (away from the scale's
# middle), below it (towards the other end), or a step at most.
_BEYOND = re.compile(r"\b(?:perfectly|totally|completely|fully|highly|extremely|truly|really|"
                     r"very|super|so|exceptionally|remarkably|impeccably|flawlessly|utterly|"
                     r"absolutely|entirely|incredibly|most)[\s*_]+$", re.I)
_SHORT_OF = re.compile(r"\b(?:not|never|barely|hardly|scarcely|less)[\s*_]+$", re.I)
_A_STEP = re.compile(r"\b(?:mostly|largely|fairly|reasonably|somewhat|slightly|partly|"
                     r"partially|moderately|mildly|pretty|rather)[\s*_]+$", re.I)


def _qualified(text: str, start: int) -> str | None:
    """Why a level named at ``start`` is qualified by a degree word, or None."""
    m = _DEGREE.search(text, max(0, start - 30), start)
    if m is None:
        return None
    return f"the level's name is qualified ({text[m.start(): start + 20].strip()!r}), no level"


def qualified_range(text: str, level: Number, slot: ScoreSlot) -> tuple[float, float] | None:
    """The ratings a level named with a degree word allows, or None (no such word, or unknown).

    "perfectly fluent" (Fluent is 4) allows 4-5, "totally disfluent" (1) only 1, "not
    concise" (4) 1-3, "mostly clear" (4) 3-4.
    """
    before = text[max(0, level.start - 30): level.start]
    v, upper = level.value, level.value >= (slot.low + slot.high) / 2
    if _BEYOND.search(before):
        return (v, slot.high) if upper else (slot.low, v)
    if _SHORT_OF.search(before):
        return (slot.low, v - 1) if upper else (v + 1, slot.high)
    if _A_STEP.search(before):
        return (v - 1, v) if upper else (v, v + 1)
    return None


_OF_THE_SCALE = r"\s+of\s+(?:the|your|this|my|our)\s+(?:[\w-]+\s+)?scale\b"
_POSITION = re.compile(r"\b(?:(?P<top>top)|(?P<bottom>bottom)|(?P<middle>mid-?point|middle))"
                       + _OF_THE_SCALE, re.I)
# The scale's top described or approached, not given: "not the top of the scale", "the top of
# the scale needs every detail", "if it named the colour, ...", "near the top of the scale",
# "one level below the top of the scale".
_UNGIVEN = re.compile(r"\b(?:not|never|no|nor|nowhere|than|if|unless|whether|needs?|requires?|"
                      r"reserved|means?|(?<!I\s)(?:would|could|might)|should|near|nearly|almost|"
                      r"close|toward|towards|short|far|from|below|above|under|over|within|"
                      r"points?|steps?|levels?|notch(?:es)?|bit|little|slightly|goes|captions)\b|"
                      r"n't|n\u2019t",
                      re.I)


def position_candidates(text: str, slot: ScoreSlot) -> list[Candidate]:
    """A position on the scale named in words: "deserves the top of the scale" is its top.

    Asked only when the answer writes no number and names no level: beside a number, "the top
    of the scale" is more often said of the scale ("the top of the scale goes to captions
    with every detail right") than given.
    """
    if slot.kind != "score":
        return []
    out = []
    middle = (slot.low + slot.high) / 2
    for m in _POSITION.finditer(text):
        value = slot.high if m.group("top") else slot.low if m.group("bottom") else middle
        start = sentence_start(text, m.start(), ".!?\n;")
        end = min([i for c in ".!?\n;" if (i := text.find(c, m.end())) >= 0] or [len(text)])
        problem = None
        if _UNGIVEN.search(text, start, end):
            problem = f"the answer describes {m.group(0)!r}, not gives it"
        elif value != int(value):
            problem = f"{m.group(0)!r} of {slot.low}-{slot.high} is no whole number"
        out.append(Candidate(Number(m.start(), m.end(), m.end(), float(value), m.group(0),
                                    "level"), f"a position on the scale {m.group(0)!r}", 0,
                             source="level", problem=problem))
    return out


# A level named as the end of a span of levels ("High-to-Extremely-High Correctness", "Moderate
# or High Correctness") or as the tail of a longer hyphenated name ("Extremely-High").
LEVEL_SPAN_BEFORE = re.compile(r"(?:\b(?:to|or|and|between)[\s\-\u2010-\u2015/]*|[^\W\d_]"
                                r"[\-\u2010-\u2015/]|[\-\u2013/]\s*)$", re.I)


def level_span(text: str, start: int) -> str | None:
    """Why a rubric level named at ``start`` is not one level, or None."""
    before = text[max(0, start - 40): start]
    if LEVEL_SPAN_BEFORE.search(before) and re.search(r"[^\W\d_]{3,}", before):
        return (f"the answer names a span of levels or a longer level "
                f"({(before.split(chr(10))[-1] + text[start: start + 30]).strip()!r}), not one")
    return None


# A level's word after a verb, in lower case: the text described in prose ("The text is
# concise", "reads very fluently"), not the rubric's level named ("Rating: Concise").
PREDICATE = re.compile(r"\b(?:is|are|was|were|be|been|being|seems?|looks?|reads?|remains?|"
                       r"feels?|sounds?|stays?)[^\S\n]+(?:(?:\w+ly|quite|fairly|pretty|also|"
                       r"still|otherwise|mostly|generally)[^\S\n]+)?$", re.I)


def said_in_prose(text: str, n: Number) -> bool:
    """Whether the level word ``n`` describes the text in prose (:data:`PREDICATE`)."""
    return n.written.islower() and PREDICATE.search(text, max(0, n.start - 60), n.start) \
        is not None


# "where 5 means extremely high correctness", "5 = High": the scale described, not a verdict.
_DESCRIBED = re.compile(r"(?P<n>\d+)[\s*_`]*(?:=|:|-|means|is|stands\s+for|represents|"
                        r"being|for|denotes|indicates)[\s*_`\"']*$", re.I)


def _described(text: str, start: int, value: int) -> str | None:
    """Why a level named at ``start`` describes the scale (its own value says what it means)."""
    m = _DESCRIBED.search(text, max(0, start - 30), start)
    if m is None or int(m.group("n")) != value:
        return None
    return f"the answer describes the scale ({text[m.start(): start + 30].strip()!r}), not a level"


# "3 – High Correctness", "3 (Moderate Correctness)", "3: Moderate": a rating glossed with the
# name of its level.
_GLOSS = re.compile(r"[\s$*_`]*(?:[-\u2013\u2014:=(/,]|\bi\.?e\.?)[\s*_`\"']*", re.I)


def glossed_level(text: str, end: int, slot: ScoreSlot) -> tuple[str, int] | None:
    """The rubric level (its name and value) named right after a rating ending at ``end``."""
    if not slot.levels:
        return None
    names, rx = _names(slot)
    gloss = _GLOSS.match(text, end)
    level = rx.match(text, gloss.end()) if gloss else None
    if level is None or re.match(r"[\s*_`]*(?:is|was|would|seems?|feels?|or|at\s+(?:best|most|"
                                 r"least))\b", text[level.end():], re.I):
        return None  # "4 — Moderate Correctness is too low for it": the level weighed
    value = names.get(_key(level.group(0)))
    return None if value is None else (level.group(0), value)
