"""What the stand-in OpenAI-protocol server answers: its wire types and scripted answers.

A :data:`Script` maps a request body to a :class:`Scripted` answer (the score distribution, how
the number is tokenised, a fixed text or tokens); :func:`render_answer` and
:func:`render_continuation` turn it into the ``chat.completion`` content and log-probabilities
the real API would send (a continuation: the next digit of a digit-split score, or the
distribution at a forced anchor). The server itself is :mod:`capjudge.testing.openai_server`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from capjudge.records import JSONValue


class ContentPart(TypedDict, total=False):
    """One part of a message's content: ``{"type": "text", "text": ...}`` or an image."""

    type: str
    text: str
    image_url: dict[str, str]


class ChatMessage(TypedDict, total=False):
    """One message of a chat-completions request."""

    role: str
    content: str | list[ContentPart] | None


class ChatRequest(TypedDict, total=False):
    """A chat-completions request body: the keys this server reads.

    The body is the client's JSON as received; keys this server ignores (``response_format``,
    ...) are kept as they came and copied along (:func:`original_request`).
    """

    model: str
    messages: list[ChatMessage]
    temperature: float | None
    seed: int | None
    max_tokens: int | None
    logprobs: bool
    top_logprobs: int | None
    continue_final_message: bool
    """vLLM: continue the last (assistant) message instead of answering it."""
    add_generation_prompt: bool


class TopLogprob(TypedDict):
    """One alternative at a token position (``top_logprobs[i]``)."""

    token: str
    logprob: float
    bytes: list[int]


class Token(TypedDict):
    """One token of ``choices[0].logprobs.content``."""

    token: str
    logprob: float
    bytes: list[int]
    top_logprobs: list[TopLogprob]


class ChoiceLogprobs(TypedDict):
    """``choices[0].logprobs``."""

    content: list[Token]
    refusal: None


class AssistantMessage(TypedDict):
    """``choices[0].message``: the answer, or a refusal (``content`` None)."""

    role: str
    content: str | None
    refusal: str | None
    annotations: list[JSONValue]
    reasoning_content: NotRequired[str]
    """A reasoning model's thinking, apart from the answer (vLLM, DeepSeek, llama.cpp)."""


class Choice(TypedDict):
    """One element of ``choices``."""

    index: int
    message: AssistantMessage
    logprobs: ChoiceLogprobs | None
    finish_reason: str


class Usage(TypedDict):
    """A completion's ``usage``."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: dict[str, int]
    completion_tokens_details: dict[str, int]


class ChatCompletion(TypedDict):
    """A ``chat.completion`` object as the API shapes it."""

    id: str
    object: str
    created: int
    model: str
    system_fingerprint: str
    service_tier: str
    choices: list[Choice]
    usage: Usage


@dataclass
class Scripted:
    """One scripted answer.

    Attributes:
        distribution: score -> probability at the score position (the chosen score is the
            argmax). For ``labels`` answers, one distribution per label.
        reasoning: text before the score sentence.
        split_digits: tokenise numbers digit by digit (Qwen/Llama-2 style) instead of one token
            per integer (o200k style).
        space_token: put a lone " " token between ``$`` and the number (as o200k does for
            "$ 85$").
        labels: for multi-score answers (ACCR, HarmonicEval), ``[(label, distribution)]``
            written as ``Label: $N$`` lines.
        logprobs: include ``logprobs`` at all.
        refusal: answer with a refusal message instead.
        text: a fixed content (no score sentence), overriding the rest.
        tokens: the exact answer as tokens, each ``(token, {alternative: probability})``
            (an empty mapping: the token is certain); overrides ``text`` and the rest.
        reasoning_content: the message's separate reasoning field (as vLLM's and DeepSeek's
            reasoning parsers return it), never part of ``content``.
        finish_reason: ``stop`` unless set (``length``: the answer was cut at max_tokens).
        anchor: score -> probability where a continuation goes past the answer's own end
            (a forced anchor appended after it: "... The final score is $"); None: such a
            continuation gets nothing, as before.
        anchors: per forced prefix, ``(label, score -> probability)``: past the answer's end,
            the distribution of the label written last ("Correctness Score (C. Score): ",
            "Hallucination Score (H. Score): "); overrides ``anchor``.
    """

    distribution: dict[int, float] = field(default_factory=lambda: {70: 1.0})
    reasoning: str = "The caption was compared with the image, object by object."
    split_digits: bool = False
    space_token: bool = False
    labels: list[tuple[str, dict[int, float]]] | None = None
    logprobs: bool = True
    refusal: str | None = None
    text: str | None = None
    score_first: bool = False  # the number opens the answer (HarmonicEval, VisCE²)
    tokens: list[tuple[str, dict[str, float]]] | None = None
    reasoning_content: str | None = None
    finish_reason: str | None = None
    anchor: dict[int, float] | None = None
    anchors: list[tuple[str, dict[int, float]]] | None = None


Script = Callable[[ChatRequest], Scripted]


def prompt_key(body: ChatRequest) -> str:
    """A stable id for a request's messages (what the counters are keyed on)."""
    return hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest()


def _peaked(centre: int, low: int, high: int, width: float) -> dict[int, float]:
    span = range(max(low, centre - 3 * int(width) - 1), min(high, centre + 3 * int(width) + 1) + 1)
    dist = {v: math.exp(-0.5 * ((v - centre) / width) ** 2) for v in span}
    total = sum(dist.values())
    return {v: 0.95 * p / total for v, p in dist.items()}


def prompt_text(body: ChatRequest) -> str:
    """The text parts of a chat-completions request's messages, joined."""
    parts = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [c.get("text", "") for c in content if c.get("type") == "text"]
    return "\n".join(parts)


def sample_jitter(body: ChatRequest, salt: str, width: int) -> int:
    """How far a sampled answer's score moves from the prompt's centre (test-retest).

    At temperature 0 (or without a seed) the answer is the prompt's alone: 0. Above it, each
    ``seed`` (capjudge sends ``seed + repeat``) draws a shift in ``[-width, width]`` from the
    prompt, salt and seed, so repeats vary around a stable centre as a sampled judge's would.
    """
    if not float(body.get("temperature") or 0) > 0 or body.get("seed") is None or width <= 0:
        return 0
    digest = hashlib.sha256(f"{prompt_key(body)}|{salt}|seed={body['seed']}".encode())
    return int(digest.hexdigest(), 16) % (2 * width + 1) - width


def default_script(body: ChatRequest, salt: str = "") -> Scripted:
    """A deterministic "model" that answers in the format the prompt asks for.

    The score's centre depends on the prompt's hash: the same request always gets the same
    answer (at temperature > 0, each seed moves the score around that centre: see
    :func:`sample_jitter`). Recognised formats: G-VEval ("The final score is $N$"), ACCR
    ("Accuracy: $N$" ...),
    score-first 1-5 ratings (HarmonicEval), score-first 0-100 (VisCE²), VisCE² context
    extraction, detailed descriptions, 3D C/H scoring, and a plain "Why?" explanation.
    """
    text = prompt_text(body)
    seed = int(hashlib.sha256((prompt_key(body) + salt).encode()).hexdigest(), 16)
    if "Correctness Score (C. Score)" in text:
        c, h = seed % 4, (seed // 4) % 3
        return Scripted(text=f"Correctness Score (C. Score): {c}\nHallucination Score "
                             f"(H. Score): {h}\nPrecision Score: "
                             f"{'n/a' if c + h == 0 else round(100 * c / (c + h))}%\n"
                             "Explanation: scripted.")
    if "Analyze the uploaded image" in text:
        return Scripted(text="List of Important Objects (up to five):\n- Object 1: a red "
                             "circle\n- Object 2: a blue square\nFeatures:\n- Features of "
                             "Object 1: red, round, large\n- Features of Object 2: blue, small"
                             "\nRelationships:\n- The circle is left of the square.")
    if "Generate a detailed description" in text:
        return Scripted(text="A large red circle on the left and a small blue square on the "
                             "right, on a light grey background.")
    if text.strip().endswith("Why? Tell me the reason."):
        return Scripted(text="Because the caption matches the image in most respects.")
    shift = sample_jitter(body, salt, 8)  # 0 at temperature 0: answers as before
    if "Accuracy: $" in text:
        labels = [(name, _peaked(min(100, max(0, (seed >> (8 * k)) % 101 + shift)), 0, 100, 4))
                  for k, name in enumerate(("Accuracy", "Completeness", "Conciseness",
                                            "Relevance"))]
        return Scripted(labels=labels)
    if "scale of 1 to 5" in text:
        small = sample_jitter(body, salt, 1)
        return Scripted(_peaked(min(5, max(1, 1 + seed % 5 + small)), 1, 5, 0.7),
                        score_first=True)
    if "single digit between 0 and 100" in text:
        return Scripted(_peaked(min(100, max(0, seed % 101 + shift)), 0, 100, 4),
                        score_first=True)
    return Scripted(_peaked(min(100, max(0, seed % 101 + shift)), 0, 100, 4))


def _tok(token: str, logprob: float, top: list[tuple[str, float]] | None = None
         ) -> Token:
    top = top if top is not None else [(token, logprob)]
    return {"token": token, "logprob": logprob, "bytes": list(token.encode()),
            "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())}
                             for t, lp in top]}


def _words(text: str) -> list[str]:
    """Split text into word tokens with their leading space (roughly how BPE tokenises)."""
    out: list[str] = []
    current = ""
    for ch in text:
        if ch == " " and current:
            out.append(current)
            current = ch
        elif ch in "$.\n":
            if current:
                out.append(current)
            out.append(ch)
            current = ""
        else:
            current += ch
    if current:
        out.append(current)
    return out


def _exact_tokens(tokens: list[tuple[str, dict[str, float]]], top_n: int
                  ) -> tuple[str, list[Token]]:
    """A scripted answer given token by token, each with its alternatives."""
    out = []
    for token, alternatives in tokens:
        probs = alternatives or {token: 1.0}
        top = sorted(probs.items(), key=lambda kv: -kv[1])[:max(top_n, 1)]
        out.append(_tok(token, math.log(probs.get(token, 1.0)),
                        [(t, math.log(p)) for t, p in top if p > 0]))
    return "".join(t["token"] for t in out), out


def render_answer(s: Scripted, top_n: int) -> tuple[str, list[Token]]:
    """Content and logprobs.content for a scripted answer."""
    if s.tokens is not None:
        return _exact_tokens(s.tokens, top_n)
    if s.text is not None:
        return s.text, [_tok(t, -0.01) for t in _words(s.text)]
    if s.score_first and s.split_digits:
        # Digit by digit from the start (Qwen, LLaVA): the first digit's alternatives are
        # leading digits; the rest of the number and its end follow the chosen path.
        leading = _leading_digits(s.distribution, top_n)
        lead = leading[0][0]
        opening = [_tok(lead, leading[0][1], leading)]
        opening += _continuation_tokens(s, lead, top_n)
        return "".join(t["token"] for t in opening), opening
    if s.score_first:
        ranked = sorted(s.distribution.items(), key=lambda kv: (-kv[1], kv[0]))
        alts = [(str(v), math.log(p)) for v, p in ranked[:top_n] if p > 0]
        opening = [_tok(str(ranked[0][0]), math.log(ranked[0][1]), alts)]
        opening += [_tok(t, -0.05) for t in _words("\n" + s.reasoning)]
        return "".join(t["token"] for t in opening), opening
    tokens: list[Token] = [_tok(t, -0.05) for t in _words(s.reasoning + " ")]
    sentences = s.labels or [("The final score is", s.distribution)]
    for label, dist in sentences:
        tokens += [_tok(t, -0.02) for t in _words(("\n" if tokens else "") + label + " ")]
        tokens.append(_tok("$", -0.01))
        if s.space_token:
            tokens.append(_tok(" ", -0.01))
        ranked = sorted(dist.items(), key=lambda kv: (-kv[1], kv[0]))
        chosen = ranked[0][0]
        if s.split_digits:
            digits = str(chosen)
            first: dict[str, float] = defaultdict(float)
            for v, p in ranked:
                first[str(v)[0]] += p
            alts = [(d, math.log(p))
                    for d, p in sorted(first.items(), key=lambda kv: -kv[1])[:top_n]]
            tokens.append(_tok(digits[0], math.log(first[digits[0]]), alts))
            for k in range(1, len(digits)):
                prefix = digits[:k]
                cond: dict[str, float] = defaultdict(float)
                total = 0.0
                for v, p in ranked:
                    sv = str(v)
                    if sv.startswith(prefix):
                        total += p
                        cond[sv[k] if len(sv) > k else "$"] += p
                alts = [(t, math.log(p / total))
                        for t, p in sorted(cond.items(), key=lambda kv: -kv[1])[:top_n]]
                tokens.append(_tok(digits[k], math.log(cond[digits[k]] / total), alts))
            # After the number: the closing "$", with what remains of "the number goes on".
            cond = defaultdict(float)
            total = 0.0
            for v, p in ranked:
                sv = str(v)
                if sv.startswith(digits):
                    total += p
                    cond[sv[len(digits)] if len(sv) > len(digits) else "$"] += p
            alts = [(t, math.log(p / total))
                        for t, p in sorted(cond.items(), key=lambda kv: -kv[1])[:top_n]]
            tokens.append(_tok("$", math.log(cond["$"] / total), alts))
        else:
            alts = [(str(v), math.log(p)) for v, p in ranked[:top_n] if p > 0]
            tokens.append(_tok(str(chosen), math.log(ranked[0][1]), alts))
            tokens.append(_tok("$", -0.001))
        tokens.append(_tok(".", -0.001))
    return "".join(t["token"] for t in tokens), tokens


def is_continuation(body: ChatRequest) -> bool:
    """A request that asks the server to continue the assistant's last message.

    Such a request sets vLLM's chat parameters ``continue_final_message: true`` and
    ``add_generation_prompt: false``.
    """
    messages = body.get("messages") or []
    return bool(body.get("continue_final_message")) and bool(messages) \
        and messages[-1].get("role") == "assistant"


def original_request(body: ChatRequest) -> ChatRequest:
    """A continuation's body as the request whose answer it continues.

    Same messages less the assistant's partial one, so a script answers it as it answered the
    original.
    """
    out = body.copy()
    out.pop("continue_final_message", None)
    out.pop("add_generation_prompt", None)
    out["messages"] = list(body["messages"][:-1])
    return out


def assistant_text(body: ChatRequest) -> str:
    """The text of a continuation request's last (assistant) message."""
    content = body["messages"][-1].get("content")
    if isinstance(content, list):
        return "".join(c.get("text", "") for c in content if c.get("type") == "text")
    return str(content or "")


def _leading_digits(dist: dict[int, float], top_n: int) -> list[tuple[str, float]]:
    """(digit, logprob) of a number's first digit, most likely first."""
    first: dict[str, float] = defaultdict(float)
    for v, p in dist.items():
        if p > 0:
            first[str(v)[0]] += p
    ranked = sorted(first.items(), key=lambda kv: (-kv[1], kv[0]))[:max(1, top_n)]
    return [(d, math.log(p)) for d, p in ranked]


def _continuation_tokens(s: Scripted, partial: str, top_n: int) -> list[Token]:
    return render_continuation(s, partial, top_n)[1]


def render_continuation(s: Scripted, partial: str, top_n: int) -> tuple[str, list[Token]]:
    """What the scripted model writes after the assistant's ``partial`` text.

    When that text ends inside a score ("... The final score is $9"): the number's next digit
    or its end, with the distribution's conditional probabilities as top logprobs, then the
    rest of the greedy path. Text that does not end in digits continues with nothing (an
    immediate stop).
    """
    digits = partial[len(partial.rstrip("0123456789")):]
    head = partial[: len(partial) - len(digits)]
    answer = "".join(t for t, _ in s.tokens) if s.tokens else (s.text or "")
    past = bool(answer) and len(head) > len(answer)  # past the answer's end: a forced anchor
    if past and s.anchors:
        dist = max(s.anchors, key=lambda kv: head.rfind(kv[0]))[1]
    elif past and s.anchor is not None:
        dist = s.anchor
    elif not digits:
        return "", []
    elif s.labels:
        dist = max(s.labels, key=lambda kv: head.rfind(kv[0]))[1]
    else:
        dist = s.distribution
    closing = "\n" if s.score_first else "$"
    out: list[Token] = []
    prefix = digits
    while True:
        cond: dict[str, float] = defaultdict(float)
        for v, p in dist.items():
            sv = str(v)
            if sv.startswith(prefix) and p > 0:
                cond[sv[len(prefix)] if len(sv) > len(prefix) else closing] += p
        total = sum(cond.values())
        if total <= 0:
            out.append(_tok(closing, 0.0))
            break
        ranked = sorted(cond.items(), key=lambda kv: (-kv[1], kv[0]))
        alts = [(t, math.log(p / total)) for t, p in ranked[:top_n]]
        chosen, p_chosen = ranked[0]
        out.append(_tok(chosen, math.log(p_chosen / total), alts))
        if chosen == closing:
            break
        prefix += chosen
    out += [_tok(t, -0.01) for t in _words("." if not s.score_first else s.reasoning)]
    return "".join(t["token"] for t in out), out
