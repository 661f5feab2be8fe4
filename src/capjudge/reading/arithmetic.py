"""A judge's arithmetic: worked out, and checked against the result it states (one home).

Judges work their scores out ("100 - 15 - 10 = 75", "Base 90 - 15 (shirt) = 75",
"$(70 + 90) / 2 = 80$"). Three readings need the same computation:

- the number a computation starts at is read as its stated result when the steps give it
  (:func:`capjudge.reading.numbers.number_at`, through :func:`steps_from` and :func:`result_at`);
- an arithmetic verdict in the method's delimiters reads as its result
  (:func:`capjudge.reading.view.plain_math`, through :func:`miscounted`);
- a computation whose steps contradict the result it states is neither value: the judge
  miscounted, and which one it meant is not settled (:func:`contradiction`, used by
  :func:`capjudge.reading.scale.check_number`).

Expressions are worked out by Python's parser on numbers, ``+ - * / ×`` and brackets only,
never ``eval``.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

_OPERATORS: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv}


def evaluate(expression: str) -> float | None:
    """The value of a judge's arithmetic ("100 - 15 - 10", "(4 + 5) / 2", "2 × 40"), or None.

    Numbers, ``+ - * / × x`` and brackets only (Python's parser on that, never ``eval``);
    None for anything else, or a division by zero.
    """
    written = re.sub(r"(?<=[\d)\s])[×x](?=[\s\d(])", "*", expression).strip().rstrip("=").strip()
    if not written or re.search(r"[^\d\s.+\-*/()]", written):
        return None
    try:
        tree = ast.parse(written, mode="eval")
    except SyntaxError:
        return None

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            inner = value(node.operand)
            return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            # a division by zero raises ZeroDivisionError: no value
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        raise ValueError(type(node).__name__)

    try:
        return value(tree.body)
    except (ValueError, ZeroDivisionError):
        return None


def miscounted(expression: str, stated: float) -> float | None:
    """What ``expression`` gives when that is not the ``stated`` result, else None.

    A lone fraction ("4/5 = 80", "7/10 = 70") is a value moved onto another scale, not a sum
    to check; an expression that cannot be worked out is not contradicted either.
    """
    if re.fullmatch(r"\s*\d+(?:\.\d+)?\s*/\s*\d+(?:\.\d+)?\s*=?\s*", expression):
        return None
    worked = evaluate(expression)
    if worked is None or abs(worked - stated) <= 1e-6 * max(1.0, abs(stated)):
        return None
    return worked


# A running computation from a number: "100 - 15 - 10", "Base 90 - 15 (wrong shirt colour)",
# "100, -10 for the jacket, -5 for the place": each step a sign and a whole number, then a
# short note of what it is for (no digits in it).
_STEP = re.compile(r"[ \t]*,?[ \t]*(?P<op>[-+])[ \t]*(?P<n>\d+)(?![\w.]|,\d)"
                   r"(?P<note>[ \t]*\([^()\n\d]{0,60}\)|[ \t]+(?:for|as|because|due\s+to|"
                   r"since)\b[^,;\n\d=$>\u2190-\u21ff\u27f0-\u27ff\u2794-\u27bf]{0,60})?")
# What states the result: "= 75", "→ 85", "=> 85", "so 80", "gives 80".
_RESULT = re.compile(r"[ \t]*[,:]?[ \t]*(?:=|-+>|=+>|[\u2192\u21d2\u27f6\u27f9\u2794\u279c"
                     r"\u27a1]|\b(?:so|gives|leaves|makes|which\s+is)\b)[ \t*_`$]*(?=\d)")
# A step of a computation, or the scale a number is stated on ("7 out of 10 -> 70/100").
_OPERAND_BEFORE = re.compile(r"(?:[-+=/]|\bout\s+of|\bof)[ \t]*$")


@dataclass(frozen=True)
class Steps:
    """The +/- steps that follow a number.

    Attributes:
        value: the running value after them.
        end: where the last step (and its note) ends.
        count: how many there were (0: none, or a range such as "70 - 80").
    """

    value: int
    end: int
    count: int


def is_operand(text: str, start: int) -> bool:
    """Whether the number at ``start`` is itself a step or a scale ("- 15", "out of 10")."""
    return _OPERAND_BEFORE.search(text, max(0, start - 8), start) is not None


def steps_from(text: str, pos: int, value: int) -> Steps:
    """The running computation from ``value``, whose number ends at ``pos``.

    A first step that subtracts more than the value ("70 - 80") is a range, not a
    subtraction: no steps.
    """
    count = 0
    while (m := _STEP.match(text, pos)) is not None:
        step = int(m.group("n"))
        if m.group("op") == "-" and count == 0 and step > value:
            return Steps(value, pos, 0)
        value += step if m.group("op") == "+" else -step
        pos, count = m.end(), count + 1
    return Steps(value, pos, count)


def result_at(text: str, pos: int) -> int | None:
    """Where the result that the text states at ``pos`` starts ("= 75", "→ 75"), or None."""
    m = _RESULT.match(text, pos)
    return m.end() if m is not None else None


# A computation of numbers and operators that states its result: "100 - 15 - 10 = 80".
_COMPUTED = re.compile(r"(?P<expr>[(\d][\d \t.+\-*/\u00d7x()]*?[-+*/\u00d7x]"
                       r"[\d \t.+\-*/\u00d7x()]*?)"
                       r"=[ \t]*(?P<result>\d+(?:\.\d+)?)(?!\.?\d)")


def contradiction(text: str, start: int) -> str | None:
    """Why the computation that starts at ``start`` is no reading: its steps contradict its result.

    "$100 - 15 - 10 = 80$" (the steps give 75) and "Base 90 - 15 (wrong shirt) = 70" alike:
    which number the judge meant is not settled. None when no computation starts there, or
    when its steps give the result it states.
    """
    brackets = re.search(r"\([( \t]*$", text[max(0, start - 24): start])
    begin = start - len(brackets.group(0)) if brackets else start
    sum_ = _COMPUTED.match(text, begin)
    if sum_ is not None and (worked := miscounted(sum_.group("expr"),
                                                  float(sum_.group("result")))) is not None:
        return (f"the computation {sum_.group(0).strip(' $')!r} gives {worked:g}, not the "
                f"{sum_.group('result')} it states")
    first = re.match(r"\d+(?![\d.])", text[start:])
    if first is None or is_operand(text, start):
        return None
    steps = steps_from(text, start + first.end(), int(first.group(0)))
    at = result_at(text, steps.end) if steps.count else None
    stated = re.match(r"\d+(?![\d.])", text[at:]) if at is not None else None
    if stated is None or at is None or int(stated.group(0)) == steps.value:
        return None
    written = " ".join(text[start: at + stated.end()].split())
    return f"the computation {written!r} gives {steps.value}, not the {stated.group(0)} it states"
