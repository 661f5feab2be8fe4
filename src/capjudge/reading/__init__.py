r"""Reading a judge's verdict from its answer, as a careful person does: one seam (issue 40).

Backends send requests and return what the judge sent; every reading step lives here, and a
backend imports only this package's names (never its submodules; a test enforces it):

- :func:`read_answer`: each slot of a request read from one answer (its text, its tokens with
  their alternatives, whether it was cut), with what more the reading needs asked: digit
  follow-ups, a forced anchor, the confirmation of an off-contract verdict
  (:class:`PendingDigits`, :data:`CONFIRM`, :data:`QUESTION`).
- :func:`confirm_at_anchors`, :func:`confirm_by_question`, :func:`finish_slot`: the reading
  finished once those answers came; :func:`reread_raw`, :func:`reread_text`: a cached answer
  read again under new rules (:data:`READING_RULES_VERSION`).
- :func:`find_printed`, :func:`abstention`, :func:`contract_fields`, :func:`confirmed`: for
  backends that compute distributions themselves (transformers' teacher forcing): where the
  verdict is written, the reader's abstention (never teacher-forced away), whether it is on
  the method's contract, and its confirmation.

The steps, one module each:

- :mod:`capjudge.reading.view`: the answer in canonical form (NFKC, invisible characters
  removed, reasoning blocks dropped, chat-template turns cut), with a map back to the
  original offsets.
- :mod:`capjudge.reading.masking`: what a reader skips (quotations, restated rubrics,
  hypotheticals, rejected alternatives) and declines.
- :mod:`capjudge.reading.numbers`: numbers in digits, English words and CJK numerals, and a worked
  score's stated result.
- :mod:`capjudge.reading.number_words`: numbers spelled out in Spanish, French, German,
  Italian and Portuguese.
- :mod:`capjudge.reading.scale`: whether a number is a value of the slot's scale (ranges,
  hedges, other scales, the scale's own phrasings).
- :mod:`capjudge.reading.structure`: JSON (and JSON inside its strings), markdown, HTML and
  CSV tables, tags and ``\boxed{}``, with their offsets.
- :mod:`capjudge.reading.vocabulary`: the names of a verdict in other languages.
- :mod:`capjudge.reading.locate`: the order in which a verdict is looked for, and when the
  reader abstains; :mod:`capjudge.reading.candidates` what it finds.
- :mod:`capjudge.reading.points`: counts of attribute points (cap3d's C. and H. scores), the
  slots of kind ``points``.
- :mod:`capjudge.reading.contract`: whether the verdict keeps to the method's contract.
- :mod:`capjudge.reading.confirm`: the second channel an off-contract verdict needs.
- :mod:`capjudge.reading.tokens`: the digit tree at the located number (log-probabilities).
- :mod:`capjudge.reading.pending`, :mod:`capjudge.reading.answer`: one answer's reading
  through its follow-ups.
"""

from capjudge.reading.answer import (
    CONFIRM_MODES,
    Reader,
    ResponseBase,
    confirm_at_anchors,
    confirm_by_question,
    finish_slot,
    merge_follow_ups,
    read_answer,
    reread_raw,
    reread_text,
    rereadable_text,
    response_of,
)
from capjudge.reading.confirm import (
    confirmed,
    contract_fields,
    follow_up_question,
    follow_up_schema,
    needs_confirmation,
)
from capjudge.reading.locate import Located, find_printed
from capjudge.reading.pending import (
    CONFIRM,
    QUESTION,
    PendingDigits,
    follow_up_requests,
    forced_reading,
)
from capjudge.reading.points import parse_ch, parse_points, read_ch, read_points_slot
from capjudge.reading.tokens import (
    FOLLOW_UP_MIN_P,
    READING_RULES_VERSION,
    TokenLogprob,
    TreeReading,
    abstention,
    add_continuation,
    continuation_from_result,
    follow_up_prefixes,
    next_slot,
    reasoning_only,
)

__all__ = ["CONFIRM", "CONFIRM_MODES", "FOLLOW_UP_MIN_P", "Located", "PendingDigits", "QUESTION",
           "READING_RULES_VERSION", "Reader", "ResponseBase", "TokenLogprob", "TreeReading",
           "abstention", "add_continuation", "confirm_at_anchors", "confirm_by_question",
           "confirmed", "continuation_from_result", "contract_fields", "find_printed",
           "finish_slot", "follow_up_prefixes", "follow_up_question", "follow_up_requests",
           "follow_up_schema", "forced_reading", "merge_follow_ups", "needs_confirmation",
           "next_slot", "parse_ch", "parse_points", "read_answer", "read_ch",
           "read_points_slot", "reasoning_only", "reread_raw", "reread_text", "rereadable_text",
           "response_of"]
