"""A serving API's whole response logged as the answer (capjudge.reading.envelope).

Each API's shape is read as the text it carries, decoded, and located in the original; what
the response keeps apart as thought is not carried; what is not wholly such a response (a
judge's own JSON verdict, JSON in prose, a body with no keys an API writes around its text)
is left as it is.
"""

from __future__ import annotations

import json

import pytest
from reading_probe import value as _value

from capjudge.methods.gveval import score_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.reading.envelope import unwrap
from capjudge.reading.locate import Located, locate
from capjudge.reading.view import answer_view

GV, VIS = score_slot(), visce2_slot()
VERDICT = "The caption names the dog but not the ball.\n\nThe final score is $64$."


def _chat(content: str, **extra: object) -> str:
    return json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
                       "model": "qwen2.5-vl-7b", "choices": [
                           {"index": 0, "message": {"role": "assistant", "content": content,
                                                    **extra}, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 812, "completion_tokens": 31}})


def _sse(pieces: list[str]) -> str:
    lines = [f"data: {json.dumps({'id': 'c1', 'object': 'chat.completion.chunk', 'model': 'm', 'choices': [{'index': 0, 'delta': {'content': p}}]})}"  # noqa: E501
             for p in pieces]
    return "\n\n".join([*lines, "data: [DONE]"]) + "\n"


SHAPES = {
    "openai chat completion": _chat(VERDICT),
    "openai stream as data: lines, the number split over two chunks": _sse(
        ["The caption names the dog but not the ball.\n\nThe final score is $", "6", "4$."]),
    "batch API output line": json.dumps({"id": "batch_req_1", "custom_id": "item-7",
                                         "response": {"status_code": 200, "body": json.loads(
                                             _chat(VERDICT))}, "error": None}),
    "llama.cpp /completion": json.dumps({"index": 0, "content": VERDICT, "id_slot": 0,
                                         "tokens_predicted": 31, "tokens_evaluated": 1543,
                                         "timings": {"predicted_ms": 61.8}}),
    "ollama generate, NDJSON": "\n".join(json.dumps(
        {"model": "llava:13b", "created_at": "2025-03-14T09:21:07Z", "response": p,
         "done": p == "."}) for p in [VERDICT[:-1], "."]),
    "ollama chat": json.dumps({"model": "llava", "created_at": "t", "message": {
        "role": "assistant", "content": VERDICT}, "done": True, "eval_count": 31}),
    "anthropic message, a thinking block first": json.dumps({
        "id": "msg_1", "type": "message", "role": "assistant", "content": [
            {"type": "thinking", "thinking": "At first I thought 90."},
            {"type": "text", "text": VERDICT}], "stop_reason": "end_turn"}),
    "responses API items, a reasoning summary first": json.dumps([
        {"id": "rs_1", "type": "reasoning", "summary": [
            {"type": "summary_text", "text": "I lean towards 90."}]},
        {"id": "msg_1", "type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": VERDICT}]}]),
    "gemini, a thought part first": json.dumps({"candidates": [{"content": {"parts": [
        {"text": "Maybe 90.", "thought": True}, {"text": VERDICT}], "role": "model"}}],
        "usageMetadata": {"promptTokenCount": 812}}),
    "TGI": json.dumps([{"generated_text": VERDICT}]),
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_a_logged_response_reads_as_the_text_it_carries(name: str) -> None:
    text = SHAPES[name]
    carried = unwrap(text)
    assert carried is not None
    assert carried[0] == VERDICT
    assert _value(text) == 64


def test_the_number_is_located_in_the_original() -> None:
    # Escaped characters (\u201c, \n) before the verdict: the view's offsets are not the
    # original's.
    text = _chat("The caption \u201ca dog\u201d misses the ball.\n\nThe final score is $64$.")
    assert "\\u201c" in text
    found = locate(text, GV)
    assert isinstance(found, Located) and found.value == 64
    assert text[found.start:found.digits_end] == "64"
    view = answer_view(text)
    assert view.original == text and len(view.index) == len(view.text) + 1


def test_escapes_are_decoded_with_their_offsets() -> None:
    text = json.dumps({"model": "m", "created_at": "t", "done": True,
                       "response": 'Score: "4"\n\u00e9\U0001f600 5'}, ensure_ascii=True)
    carried = unwrap(text)
    assert carried is not None
    inner, offsets = carried
    assert inner == 'Score: "4"\n\u00e9\U0001f600 5'
    assert text[offsets[inner.index("4")]] == "4"
    assert text[offsets[inner.index("\U0001f600")]:].startswith("\\ud83d\\ude00")
    assert offsets[-1] == len(text)


def test_two_choices_are_two_answers_not_one_number() -> None:
    text = json.dumps({"id": "c", "object": "chat.completion", "model": "m", "choices": [
        {"index": 0, "message": {"content": "80"}}, {"index": 1, "message": {"content": "60"}}]})
    carried = unwrap(text)
    assert carried is not None and carried[0] == "80\n\n60"
    assert _value(text, VIS) is None


@pytest.mark.parametrize("text", [
    '{"score": 78, "reason": "the caption is accurate"}',  # a judge's own JSON verdict
    '{"content": "78"}',  # no llama.cpp field beside it
    '{"choices": [{"message": {"content": "5"}}]}',  # nothing an API writes around its text
    'Here it is: {"id": "c", "model": "m", "choices": [{"message": {"content": "5"}}]}',
    '{"id": "c", "model": "m", "choices": [{"message": {"content": "5"}}]} and more prose',
    '{"response": "80", "model": "llava"}',  # Ollama's shape needs its "done"
    '{"type": "message", "content": [{"type": "tool_use", "text": "90"}]}',
    "data: not json\n",
])
def test_what_is_not_wholly_a_response_is_left_as_it_is(text: str) -> None:
    assert unwrap(text) is None


def test_a_response_carrying_no_text_is_left_as_it_is() -> None:
    text = json.dumps({"id": "c", "object": "chat.completion", "model": "m", "choices": [
        {"index": 0, "message": {"content": None, "tool_calls": [
            {"function": {"name": "score", "arguments": "{\"score\": 72}"}}]}}]})
    assert unwrap(text) is None
    assert _value(text) == 72  # the tool call's arguments, read as before


@pytest.mark.parametrize(("text", "want"), [
    # An agent framework's result object printed whole.
    ("RunResponse(content='The caption misses the ball.\\n\\nThe final score is $64$.', "
     "content_type='str', metrics={'input_tokens': [1534], 'time': [2.87]}, model='gpt-4.1')",
     64),
    ("ChatMessageContent(inner_content=None, ai_model_id='gpt-4.1', metadata={'usage': "
     "CompletionUsage(prompt_tokens=1204, completion_tokens=41)}, items=[TextContent(text='The "
     "dog is there, the ball is not. The final score is $64$.')], finish_reason=None)", 64),
    ("AgentRunResult(output=\"The caption's dog is right. The final score is $64$.\")", 64),
    # A chat message as a dict.
    ("{'role': 'assistant', 'content': 'The final score is $64$.'}", 64),
])
def test_a_printed_result_object_reads_as_its_text(text: str, want: float) -> None:
    assert unwrap(text) is not None
    assert _value(text) == want


@pytest.mark.parametrize("text", [
    "Result(score=64)",  # no text field
    "The caption (content='dog') scores 64.",  # prose
    "RunResponse(content='The final score is $64$.') and then more prose",
])
def test_what_is_not_wholly_a_printed_object_is_left_as_it_is(text: str) -> None:
    assert unwrap(text) is None


@pytest.mark.parametrize("text", [
    # A tool call beside an empty or preamble text: read as it stands (its arguments).
    json.dumps({"model": "llava", "created_at": "t", "message": {
        "role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "score", "arguments": {"score": 85}}}]}, "done": True}),
    json.dumps({"id": "msg", "type": "message", "role": "assistant", "content": [
        {"type": "text", "text": "I'll record the score."},
        {"type": "tool_use", "name": "score", "input": {"score": 85}}], "stop_reason": "tool_use"}),
    # A verdict field of its own beside the text.
    "Verdict(answer='yes', score=85)",
    "CaptionScore(score=85, text='The caption is accurate.')",
    '{"role": "assistant", "content": "The caption is accurate.", "score": 85}',
])
def test_a_response_with_a_verdict_of_its_own_is_read_as_it_stands(text: str) -> None:
    assert unwrap(text) is None
    assert _value(text, VIS) == 85
