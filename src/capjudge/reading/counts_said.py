"""The 3D prompt's two counts said without its labels: in prose, or in the precision formula.

Judges that drop the "C. Score:" and "H. Score:" lines still say the counts: "I count three
correct attributes (...) and one hallucination (...)", "The caption gets four attributes right
and one wrong", "Precision = 3 / (3 + 1) = 75%". Five blind corpora's writers (I, J, L, N, O)
read those counts, unprompted, as a person does. They are read here only where the answer has
no labelled count, field, table row or tally (:func:`capjudge.reading.points.read_ch` asks
last), and only when the answer settles them:

- each count said with the thing it counts ("three correct attributes", "one hallucinated
  detail", "one hallucination", "four attributes right ... and one wrong"), one value each;
- not a share ("3 of the 4 attributes are correct": what of the fourth?), nor a hedge
  ("maybe one wrong");
- the formula's numerator repeated in its denominator's sum ("3 / (3 + 1)") names C and H;
- where the answer states a precision, it must agree with the counts (to a point).

A reading here is off the method's contract: it needs its second channel
(:mod:`capjudge.reading.confirm`) and says how it was read on the row.
"""

from __future__ import annotations

import re

from capjudge.reading.numbers import NUMBER_WORDS, word_value

_THINGS = r"(?:attributes?|details?|elements?|features?|items?|facts?|properties|claims?)"
_N = rf"(?P<n>\d+|{NUMBER_WORDS.pattern})"
_M = _N.replace("?P<n>", "?P<m>")  # the same, in the other alternative of one pattern
_GOOD = r"(?:correct(?:ly[ \t]+(?:described|identified|stated))?|accurate|right)"
_BAD = r"(?:hallucinated|incorrect|wrong|inaccurate|invented|fabricated|false)"
# What each count is said with: "three correct attributes", "four attributes (are) right",
# "one hallucination", "one hallucinated detail", "... and one wrong".
_SAID = {
    "correctness": re.compile(
        rf"\b{_N}[ \t]+(?:{_GOOD}[ \t]+{_THINGS}|{_THINGS}[ \t]+(?:(?:are|were)[ \t]+)?"
        rf"(?:all[ \t]+)?{_GOOD})\b", re.I),
    "hallucination": re.compile(
        rf"\b{_N}[ \t]+(?:{_BAD}[ \t]+{_THINGS}|hallucinations?|{_THINGS}[ \t]+"
        rf"(?:(?:are|were|is|was)[ \t]+)?{_BAD})\b"
        rf"|\band[ \t]+{_M}[ \t]+(?:(?:is|are|was|were)[ \t]+)?{_BAD}\b"
        rf"(?![ \t]+{_THINGS})",
        re.I),
}
# Before the number: a share ("3 of the 4 attributes"), a comparison or a hedge.
_NOT_A_COUNT = re.compile(r"(?:\bof(?:[ \t]+(?:the|its|all))?|\bout[ \t]+of|/|\bthan|\bor|\bto|-|"
                          r"\bmaybe|"
                          r"\bperhaps|\bpossibly|\bprobably|\bmight|\bcould|\bwould|\bif|"
                          r"\babout|\baround|\broughly|\bnearly|\bat[ \t]+(?:least|most)|"
                          r"\bup[ \t]+to|\bonly[ \t]+if|\bnot)[ \t]*$", re.I)
# After it: an aside that leaves the count open ("three (maybe four) correct ...", "one or two").
_OPEN_AFTER = re.compile(r"[ \t]*(?:\(|or\b|to\b|-|\u2013|\+)", re.I)
# An aside after the counted things that reopens the count: "(maybe four)", "(+1 partial)".
_ASIDE = re.compile(r"[ \t]*\((?:[^()\n]*?\b(?:maybe|perhaps|possibly|probably|or|plus|up\s+to|"
                    r"arguably)\b|[ \t]*[+\d])", re.I)
# "Precision = 3 / (3 + 1)": the numerator again in the denominator's sum.
_FORMULA = re.compile(r"(?<![\d.])(?P<c>\d+(?:\.\d+)?)[ \t]*/[ \t]*\([ \t]*(?P<c2>\d+(?:\.\d+)?)"
                      r"[ \t]*\+[ \t]*(?P<h>\d+(?:\.\d+)?)[ \t]*\)")
_PRECISION = re.compile(r"\bprecision\b[^\n%]{0,60}?(?<![\d.])(?P<p>\d+(?:\.\d+)?)[ \t]*%", re.I)


def _count(m: re.Match[str]) -> float | None:
    """The count a match says, or None when it is not one count."""
    n = m.groupdict().get("n") or m.groupdict()["m"]  # ("m": "... and one wrong")
    value = float(n) if n.isdigit() else word_value(n)
    return None if value is None else float(value)


def _said(name: str, text: str) -> set[float] | None:
    """The values of ``name``'s count said in prose; None when one is a share or a hedge."""
    found: set[float] = set()
    for m in _SAID[name].finditer(text):
        start = m.start()
        if _NOT_A_COUNT.search(text[max(0, start - 20): start]) or \
                _OPEN_AFTER.match(text, _number_end(m)) or _ASIDE.match(text, m.end()):
            return None
        value = _count(m)
        if value is None:
            return None
        found.add(value)
    return found


def _number_end(m: re.Match[str]) -> int:
    """Where the count's number ends in a match of :data:`_SAID`."""
    return m.end("n") if m.groupdict().get("n") else m.end("m")


def counts_said(text: str, hallucination: float | None = None
                ) -> tuple[dict[str, float] | None, str | None]:
    """Both counts said without labels, with the way they were said; or why not.

    ``text`` is the masked answer (quotations of the candidate blanked); ``hallucination``
    the count read otherwise, if any ("there are no hallucinations": 0). Returns ``(None,
    None)`` where the answer says no count this way, ``(None, reason)`` where it says them
    but does not settle them, else the counts and a note for the row.
    """
    prose = {name: _said(name, text) for name in _SAID}
    if hallucination is not None and prose["hallucination"] is not None:
        prose["hallucination"] |= {hallucination}
    formulas = {(float(m["c"]), float(m["h"])) for m in _FORMULA.finditer(text)
                if float(m["c"]) == float(m["c2"])}
    if not formulas and not any(prose.values()):
        return None, None
    counts: set[tuple[float, float]] = set(formulas)
    c, h = prose["correctness"], prose["hallucination"]
    if c is None or h is None or len(c) > 1 or len(h) > 1:
        return None, ("the answer says its counts without the labels and does not settle "
                      "them (a share, a hedge or two values)")
    if c and h:
        counts.add((next(iter(c)), next(iter(h))))
    elif c or h:
        if not formulas:
            return None, None  # one count said: the other is looked for as before
    if len(counts) != 1:
        return None, "the counts said in prose and in the precision formula disagree"
    correct, hallucinated = counts.pop()
    for m in _PRECISION.finditer(text):
        if correct + hallucinated and abs(
                100 * correct / (correct + hallucinated) - float(m["p"])) > 1:
            return None, (f"the counts said ({correct:g} correct, {hallucinated:g} "
                          f"hallucinated) and the answer's precision ({m['p']}%) disagree")
    how = "said in the precision formula" if formulas else "said in prose"
    return {"correctness": correct, "hallucination": hallucinated}, \
        f"counts {how}, not in the prompt's labelled lines"


__all__ = ["counts_said"]
