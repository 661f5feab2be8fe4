"""A judge's thought that says the printed verdict is not the rating (capjudge.reading.thought).

VisCE²'s prompt asks for "a single digit between 0 and 100"; a reasoning judge that settles on
75 and "compresses" it writes 7. The answer is on contract, so only the thought says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from replay import judged, replay

from capjudge.protocol import SlotResult
from capjudge.reading.thought import KEPT, kept, settled_by_thought, thought_of

COMPRESSED = ("The barn is red and the field is snowy; a fence is missing. On 0-100 I'd say "
              "about 75. But the prompt insists on a single digit, so I'll compress: 75 → 7. "
              "Answer: 7.")


def _entry(text: str, want: float | None, reasoning: str | None = None) -> dict[str, Any]:
    expect: dict[str, Any] = {"status": "text_only" if want is not None else "parse_failure",
                              "score": want}
    return {"id": "t", "method": "visce2", "kind": "thought", "style": "text", "text": text,
            "reasoning_content": reasoning, "finish_reason": "stop",
            "candidate": "A red barn in a snowy field.", "expect": expect}


@pytest.mark.parametrize(("text", "reasoning"), [
    ("7", COMPRESSED),  # the API's reasoning field
    (f"<think>{COMPRESSED}</think>\n7", None),  # a think block in the answer
    ("7", "Around 75. As a single digit: 7."),
])
def test_a_rating_compressed_in_the_thought_abstains(text: str, reasoning: str | None,
                                                     tmp_path: Path) -> None:
    entry = _entry(text, None, reasoning)
    out = replay(entry, tmp_path)
    assert judged(entry, out).right, out
    assert "thought rates" in out["criteria"]["score"]["reason"]


@pytest.mark.parametrize(("text", "reasoning", "want"), [
    ("75", COMPRESSED, 75),  # the answer writes the rating itself
    ("80", "I thought 85 → 80 after the missing fence.", 80),  # a revision, not a compression
    ("7", "Only 7 of the 12 objects are named; I'd rate it 7.", 7),  # nothing mapped
    ("70", None, 70),
])
def test_a_thought_that_maps_nothing_onto_the_verdict_leaves_it(text: str,
                                                               reasoning: str | None,
                                                               want: float,
                                                               tmp_path: Path) -> None:
    entry = _entry(text, want, reasoning)
    out = replay(entry, tmp_path)
    assert judged(entry, out).right, out


def test_the_thought_kept_is_its_end() -> None:
    long = "x" * (2 * KEPT) + " 75 → 7"
    assert kept(long).endswith("75 → 7") and len(kept(long)) == KEPT
    assert thought_of("<think>a</think> b <reasoning>c</reasoning>", "d") == "d\na\nc"


@pytest.mark.parametrize(("text", "want"), [
    ("a</think> b", "a"),  # the template opened the block in the prompt
    ("<|begin_of_thought|>a<|end_of_thought|> b", "a"),  # OpenThoughts
    ("\u25c1think\u25b7a\u25c1/think\u25b7 b", "a"),  # Kimi-VL
    ("<seed:think>a</seed:think> b", "a"),  # namespaced
    ("b <think>a", "a"),  # cut inside its thought
    ("<think>a<|begin_of_thought|>c<|end_of_thought|></think> b", "a<|begin_of_thought|>c"
                                                                  "<|end_of_thought|>"),
])
def test_the_thought_is_every_block_the_reader_sets_aside(text: str, want: str) -> None:
    # One home for what a thought block is: what the reader blanks is what is checked.
    assert thought_of(text, None) == want


def test_only_a_valid_reading_is_checked() -> None:
    failed = SlotResult("score", tuple(range(101)), None, None, "text", "parse_failure",
                        printed=7)
    assert settled_by_thought(failed, 0, 100, COMPRESSED) is None
    read = SlotResult("score", tuple(range(101)), None, None, "text", "text_only", printed=7)
    assert settled_by_thought(read, 0, 100, COMPRESSED) is not None


def test_checked_fails_the_slot_and_the_response() -> None:
    from dataclasses import replace as _replace

    from capjudge.methods.visce2 import rating_slot
    from capjudge.protocol import Decoding, JudgeRequest, JudgeResponse, Message
    from capjudge.reading.thought import checked

    slot = rating_slot()
    request = JudgeRequest(messages=(Message("user", ("rate",)),), slots=(slot,),
                           decoding=Decoding(max_tokens=8), template="t@1")
    read = SlotResult("score", slot.values, None, None, "text", "text_only", printed=7)
    response = JudgeResponse(status="text_only", text="7", slots=[read])
    out = checked(request, response, COMPRESSED)
    assert out.status == "parse_failure" and out.slots[0].status == "parse_failure"
    assert out.reason is not None and "thought rates 75" in out.reason
    assert checked(request, response, "") is response
    assert checked(request, _replace(response, slots=[_replace(read, printed=75)]),
                   COMPRESSED).status == "text_only"
