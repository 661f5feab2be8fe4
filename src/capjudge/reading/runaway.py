"""A judge that runs on past its answer into another item (issue 40, corpus AJ).

A server with ``ignore_eos`` or ``min_tokens``, or a base model continuing the prompt's
pattern, writes its verdict and goes on: a new "Generated caption:" it made up and that
caption's score, or the prompt's own text restated with its example ("Response Format: ...
The final score is $50$"). What follows such a header is not the answer to this request, so
it is blanked before the answer is read. A header that brings back *this* request's
candidate is the same item rated again: it is left in, for the rules to weigh the two
verdicts.
"""

from __future__ import annotations

import re

# A header that opens an item's caption, at the start of a line: "Generated caption:",
# "Candidate caption: ...", "Model-generated caption: "...", "Caption 2:".
_CAPTION_HEADER = re.compile(
    r"^[ \t>*_#]*(?:(?:generated|candidate|model[- ]generated|predicted|new|next|another)\s+)?"
    r"caption(?:\s*#?\s*\d+)?[ \t*_]*:[ \t*_]*(?P<rest>[^\n]*)", re.I | re.M)
# The same inside a restated prompt's line: "... appropriate for the given image. Candidate
# caption: A brown dog ... Your rating must be ..." (VisCE²'s prompt is one paragraph).
_CAPTION_INLINE = re.compile(r"\b(?:generated|candidate|model[- ]generated)\s+caption[ \t*_]*:"
                             r"[ \t*_]*(?P<rest>[^\n]*)", re.I)
# The prompt's own parts restated at the start of a line: its opening, its sections.
_PROMPT_HEADER = re.compile(
    r"^[ \t>*_#]*(?:you\s+will\s+be\s+given\b|your\s+task\s+is\b|response\s+format\s*:|"
    r"evaluation\s+(?:steps|criteria)\b[^\n]*:|reference\s+captions?\s*:|on\s+a\s+precise\s+"
    r"scale\s+from\b|task\s*:|(?:user|human|question)\s*:)", re.I | re.M)
# A verdict's shape, whatever the method: "The final score is $58$", "Accuracy: $75$",
# "C. Score): 3", "74" on its own line or opening the answer.
_VERDICT = re.compile(r"\b(?:score|rating|accuracy|completeness|conciseness|relevance)\b"
                      r"[^\n]{0,40}?\d|^[ \t*_$]*\d+(?:\.\d+)?[ \t*_$.]*$|\A[ \t*_$]*\d+\b",
                      re.I | re.M)
# What a header brings that is no caption: a label's line or a verdict ("Accuracy: $60$").
_NOT_A_CAPTION = re.compile(r"^[^\W\d_][\w .'()-]{0,40}:|\$|^\W*\d+\W*$")
_STOP = frozenset("the and with for that this are from its has have was were into onto over "
                  "under near".split())


def _words(text: str) -> set[str]:
    return {w.rstrip("s") for w in re.findall(r"[^\W\d_]{3,}", text.lower())} - _STOP


def _same(caption: str, candidate: str) -> bool:
    """Whether ``caption`` is the candidate (most content words shared, both ways)."""
    a, b = _words(caption), _words(candidate)
    return bool(a) and bool(b) and len(a & b) >= 0.6 * max(len(a), len(b))


def _caption_at(text: str, m: re.Match[str]) -> str:
    """The caption a header brings: the rest of its line, else the next non-empty line."""
    rest = m.group("rest").strip(" \t\"'\u201c\u201d*_<>")
    if m.re is _CAPTION_INLINE:  # the caption ends where the prompt's next sentence starts
        rest = re.split(r"(?<=[.!?])\s+(?=[A-Z])", rest)[0]
    if rest:
        return rest
    for line in text[m.end():].splitlines():
        if line.strip():
            return line.strip(" \t\"'\u201c\u201d*_")
    return ""


def _first_header(text: str, candidate: str) -> tuple[int, bool] | None:
    """The first header after a verdict's shape, and whether it brings the candidate again."""
    verdict = _VERDICT.search(text)
    if verdict is None:
        return None
    headers = sorted((m for rx in (_CAPTION_HEADER, _PROMPT_HEADER)
                      for m in rx.finditer(text, verdict.end())), key=lambda m: m.start())
    if not headers:
        return None
    caption = min((m for rx in (_CAPTION_HEADER, _CAPTION_INLINE)
                   if (m := rx.search(text, headers[0].start())) is not None),
                  key=lambda m: m.start(), default=None)
    if caption is None:
        return headers[0].start(), False
    said = _caption_at(text, caption)
    if _NOT_A_CAPTION.search(said):
        return None  # "Generated caption:" heading the judge's own lines for this request
    return headers[0].start(), not candidate.strip() or _same(said, candidate)


def runaway_start(text: str, candidate: str) -> int | None:
    """Where the answer runs on into another item, or None.

    Only after a verdict's shape (a score or rating with a number, a number alone on its line
    or opening the answer): a header before it restates what the answer judges. The first
    header after that decides: the prompt's own text, or a caption that is not the
    candidate, starts the run-on; the candidate again does not (nor does a caption when the
    candidate is unknown).
    """
    found = _first_header(text, candidate)
    return None if found is None or found[1] else found[0]


def rated_again_at(text: str, candidate: str) -> int | None:
    """Where the answer, after its verdict, brings the candidate back to rate it again.

    "55", then "On a precise scale ... Candidate caption: <the candidate> ... 60": a model
    that restated the prompt and answered it a second time. Its second value competes with
    the first; the rules weigh them (None: no such header, or the candidate unknown).
    """
    found = _first_header(text, candidate)
    return found[0] if found is not None and found[1] and candidate.strip() else None
