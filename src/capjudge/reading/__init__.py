r"""Reading a judge's verdict from its answer, as a careful person does: one seam (issue 40).

Backends send requests and say what the judge sent; every reading step lives here. A backend
calls one function and imports only the entry point's names (a test enforces it):

- :func:`read`: each slot of a request read from one :class:`Answer` (its text, its tokens
  with their alternatives, its finish reason, a thought in its own field, a refusal), or a
  stored response read again under the current rules (:data:`READING_RULES_VERSION`). It
  returns a :class:`Reading`: the response, and what more the reading needs asked (digit
  follow-ups, a forced anchor, the confirmation of an off-contract verdict), which the
  backend sends like any request and hands back to :meth:`Reading.complete`.
- A backend that computes exact distributions itself (transformers' teacher forcing) passes
  a :class:`Teacher`: the reading decides where the verdict is, what is an abstention and
  what needs confirming; the teacher gives the distribution at those positions.
- :class:`ResponseBase`, :class:`TokenLogprob`: the neutral fields an answer carries;
  :data:`CONFIRM_MODES`, :data:`FOLLOW_UP_MIN_P`: the reading options' values and defaults.

The steps, one module each:

- :mod:`capjudge.reading.view`: the answer in canonical form (NFKC, invisible characters
  removed, reasoning blocks dropped, chat-template turns cut), with a map back to the
  original offsets.
- :mod:`capjudge.reading.masking`: what a reader skips (quotations, restated rubrics,
  hypotheticals, rejected alternatives) and declines.
- :mod:`capjudge.reading.numbers`: numbers in digits, English words and CJK numerals, and a worked
  score's stated result; :mod:`capjudge.reading.arithmetic`: a judge's computations, worked
  out and checked against the result they state.
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
  through its follow-ups; :mod:`capjudge.reading.teacher`: with exact distributions;
  :mod:`capjudge.reading.entry`: the entry point.
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
from capjudge.reading.entry import Answer, Reading, read
from capjudge.reading.locate import Located, find_printed
from capjudge.reading.pending import (
    CONFIRM,
    QUESTION,
    PendingDigits,
    follow_up_requests,
    forced_reading,
)
from capjudge.reading.points import parse_ch, parse_points, read_ch, read_points_slot
from capjudge.reading.teacher import Teacher
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

__all__ = ["Answer", "CONFIRM", "CONFIRM_MODES", "FOLLOW_UP_MIN_P", "Located", "PendingDigits",
           "QUESTION", "READING_RULES_VERSION", "Reader", "Reading", "ResponseBase", "Teacher",
           "TokenLogprob", "TreeReading", "abstention", "add_continuation", "confirm_at_anchors",
           "confirm_by_question", "confirmed", "continuation_from_result", "contract_fields",
           "find_printed", "finish_slot", "follow_up_prefixes", "follow_up_question",
           "follow_up_requests", "follow_up_schema", "forced_reading", "merge_follow_ups",
           "needs_confirmation", "next_slot", "parse_ch", "parse_points", "read", "read_answer",
           "read_ch", "read_points_slot", "reasoning_only", "reread_raw", "reread_text",
           "rereadable_text", "response_of"]
