"""A corpus of judge answers, read table-driven through every method's reader.

``tests/data/judge_answers.json`` holds answers as an OpenAI-protocol API returns them: tokens
with their top alternatives, written the way GPT-4o (o200k: every integer 0-999 one token) and
Qwen2-VL / LLaVA (digit-split) write, or text without log-probabilities. Each has the reading
its method must give, worked out by hand: the item's status and score, and per criterion its
status, score, printed number and captured mass.

Each answer goes through the same steps as a real one: the backend's slot reader
(:func:`~capjudge.reading.tokens.read_slot`, with the digits continuation follow-ups would
return), then the method's ``interpret`` and the one status rule, ``verdict``.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from capjudge.methods import Planned, get_method, verdict
from capjudge.protocol import JudgeRequest, JudgeResponse, worst_status
from capjudge.reading.tokens import END, TokenLogprob, read_slot

CORPUS = json.loads((Path(__file__).parent / "data" / "judge_answers.json").read_text())
ANSWERS: list[dict[str, Any]] = CORPUS["answers"]


def tokens_of(entry: dict[str, Any]) -> list[TokenLogprob] | None:
    """The entry's tokens: a string is certain (no alternatives), a pair has them."""
    if "tokens" not in entry:
        return None
    out = []
    for piece in entry["tokens"]:
        if isinstance(piece, str):
            out.append(TokenLogprob(piece, 0.0, ((piece, 0.0),)))
        else:
            chosen, alts = piece
            top = tuple((t, math.log(p)) for t, p in alts.items())
            out.append(TokenLogprob(chosen, math.log(alts[chosen]), top))
    return out


def slots_of(method_name: str) -> tuple[Any, ...]:
    """The score slots the method's requests carry (HarmonicEval: one criterion's)."""
    method = get_method(method_name)
    if method_name == "harmoniceval":
        from capjudge.methods.harmoniceval import rating_slot

        return (rating_slot("correctness"),)
    if method_name == "visce2":
        from capjudge.methods.visce2 import rating_slot as visce2_slot

        return (visce2_slot(),)
    if method_name == "cap3d":
        from capjudge.methods.cap3d import points_slots

        return points_slots("")
    slots = getattr(method, "slots", None)
    return tuple(slots()) if slots is not None else ()


def answer(entry: dict[str, Any]) -> tuple[Planned, JudgeResponse]:
    """The request and the backend's response for one corpus entry.

    The entry's ``candidate``, ``references`` and ``context`` travel with the request as the
    methods send them (in each slot and in the request's ``quotes``), so quotations of them
    are masked.
    """
    texts = [entry.get("candidate"), *(entry.get("references") or []), entry.get("context")]
    quotes = tuple(q for q in texts if q)
    slots = tuple(replace(s, quotes=quotes) for s in slots_of(entry["method"]))
    tokens = tokens_of(entry)
    text = entry.get("text") or "".join(t.token for t in tokens or [])
    results = []
    for slot in slots:
        follow = {prefix: {(END if k == "end" else k): p for k, p in node.items()}
                  for prefix, node in (entry.get("continuations") or {}).get(slot.name,
                                                                              {}).items()}
        results.append(read_slot(tokens, text, slot, 0.5, follow))
    response = JudgeResponse(status=worst_status([r.status for r in results]), text=text,
                             slots=results)
    request = JudgeRequest(messages=(), slots=slots, template="corpus@1", quotes=quotes)
    return Planned("item", "mode", request), response


def test_the_corpus_is_large_and_covers_every_method_and_style() -> None:
    assert len(ANSWERS) >= 139
    assert len({e["id"] for e in ANSWERS}) == len(ANSWERS)
    from capjudge.methods import method_names

    readers = {"gveval", "gveval-accr", "visce2", "harmoniceval", "cap3d"}
    assert readers <= set(method_names())
    assert {e["method"] for e in ANSWERS} == readers
    styles = {e["style"] for e in ANSWERS}
    assert styles == {"o200k", "split", "text"}
    assert sum(e["style"] != "text" for e in ANSWERS) >= 60 - 25


@pytest.mark.parametrize("entry", ANSWERS, ids=[e["id"] for e in ANSWERS])
def test_every_answer_reads_as_worked_out_by_hand(entry: dict[str, Any]) -> None:
    method = get_method(entry["method"])
    planned, response = answer(entry)
    criteria = method.interpret(planned, response)
    v = verdict(method, criteria, {})
    expect = entry["expect"]
    assert v.detail == expect["status"], (entry["why"], v)
    if expect["score"] is None:
        assert v.score is None
    else:
        assert v.score == pytest.approx(expect["score"], abs=1e-3), entry["why"]
    by_name = {c.name: c for c in criteria}
    for name, want in expect["criteria"].items():
        got = by_name[name]
        assert got.status == want["status"], (name, got.reason)
        if got.status not in ("ok", "low_mass", "text_only"):
            assert got.reason, name  # every failure says why
            assert got.score is None
        if "score" in want:
            assert got.score == pytest.approx(want["score"], abs=1e-3), (name, entry["why"])
        if "printed" in want:
            assert got.printed == pytest.approx(want["printed"]), name
        if "mass" in want:
            assert got.mass == pytest.approx(want["mass"], abs=1e-6), name
        if "expected" in want:
            assert got.expected == pytest.approx(want["expected"], abs=1e-3), name
        if got.status == "text_only":
            # The printed number stands; there is no distribution to pretend certainty with.
            assert got.probs is None and got.sd is None


def test_a_split_answer_without_follow_ups_reports_the_lost_mass() -> None:
    entry = next(e for e in ANSWERS if e["id"] == "gv-split-no-follow-ups")
    _, response = answer(entry)
    slot = response.slots[0]
    assert slot.status == "low_mass" and slot.reason is not None
    assert "0.400" in slot.reason and "'7…'" in slot.reason and "'9…'" in slot.reason
