"""A rubric's level names read as its values ("Moderate Correctness" is 3) (HarmonicEval)."""

from __future__ import annotations

import re

from capjudge.protocol import ScoreSlot
from capjudge.reading.candidates import Candidate
from capjudge.reading.numbers import Number
from capjudge.reading.vocabulary import label_pattern


def level_candidates(text: str, slot: ScoreSlot) -> list[Candidate]:
    """The rubric's level names ("Moderate Correctness" is 3), when no number is written."""
    if not slot.levels:
        return []
    names = {re.sub(r"\s+", " ", name).lower(): value for name, value in slot.levels}
    rx = re.compile(label_pattern(list(names)), re.I)
    return [Candidate(Number(m.start(), m.end(), m.end(), float(value), m.group(0), "level"),
                      f"the rubric level {m.group(0)!r}", 0, source="level",
                      problem=level_span(text, m.start()) or _described(text, m.start(), value))
            for m in rx.finditer(text)
            if (value := names.get(re.sub(r"\s+", " ", m.group(0)).lower())) is not None]


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


# "where 5 means extremely high correctness", "5 = High": the scale described, not a verdict.
_DESCRIBED = re.compile(r"(?P<n>\d+)[\s*_`]*(?:=|:|-|means|is|stands\s+for|represents|"
                        r"being|for|denotes|indicates)[\s*_`\"']*$", re.I)


def _described(text: str, start: int, value: int) -> str | None:
    """Why a level named at ``start`` describes the scale (its own value says what it means)."""
    m = _DESCRIBED.search(text, max(0, start - 30), start)
    if m is None or int(m.group("n")) != value:
        return None
    return f"the answer describes the scale ({text[m.start(): start + 30].strip()!r}), not a level"
