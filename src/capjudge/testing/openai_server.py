"""A local HTTP server that speaks the OpenAI chat-completions protocol, for tests and benchmarks.

The real API cannot be reached from tests; this stand-in answers on 127.0.0.1 only and keeps to
the real response format: ``chat.completion`` objects with ``choices[0].logprobs.content[i]``
(``token``, ``logprob``, ``bytes``, ``top_logprobs``), ``usage``, ``system_fingerprint``,
``model``; OpenAI-style error bodies; ``429`` with ``Retry-After``; ``5xx``; slow responses;
malformed bodies; and ``GET /v1/models``.

What the "model" answers is scripted: a :data:`Script` maps the request body to a
:class:`Scripted` answer (the score distribution, how the number is tokenised). Failures are
queued with :meth:`MockOpenAIServer.inject`, or drawn at random by a seeded :class:`FaultPlan`
(also stalls past the client's timeout, dropped connections, 200s carrying an error, answers
without logprobs). A request with ``continue_final_message: true`` whose last message is the
assistant's text up to a digit ("... $9") is answered as vLLM would: the scripted number's next
digit (or its end), with the distribution's conditional probabilities as top logprobs
(:func:`render_continuation`), so digit-split answers can be completed exactly. The server
counts requests received and answered,
per prompt, so tests can prove that no answered request is ever sent twice.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import socket
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar, NotRequired, TypedDict

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
    """

    distribution: dict[int, float] = field(default_factory=lambda: {70: 1.0})
    reasoning: str = "The caption names the main objects and their colours correctly."
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


def _assistant_text(body: ChatRequest) -> str:
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
    if s.anchor is not None and answer and len(head) > len(answer):
        dist = s.anchor  # past the answer's end: a forced anchor
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


# Kinds a FaultPlan draws from, equally likely by default.
FAULT_KINDS: tuple[str, ...] = ("429", "500", "503", "stall", "drop", "malformed", "error200",
                                "nologprobs")
# Faults handled by MockOpenAIServer._extra_fault (the others by the inject() code path).
_EXTRA_FAULTS = ("stall", "drop", "error200", "nologprobs")


@dataclass(frozen=True)
class FaultPlan:
    """Seeded random faults: the server as an adversarial probe of the client.

    Whether the ``n``-th receipt of a prompt fails, and how, depends only on (seed, prompt,
    ``n``): a run meets the same faults whatever order its threads send in, and a rerun after a
    kill continues the same sequence. Queued :meth:`MockOpenAIServer.inject` faults go first.

    Attributes:
        rate: probability that a receipt is a fault.
        seed: the seed.
        kinds: (kind, relative weight) pairs. Kinds: ``"429"`` (with ``Retry-After:
            retry_after_s``), ``"500"``, ``"503"``, ``"stall"`` (hold ``stall_s``, then close
            without answering: set the client's timeout below it), ``"drop"`` (close the
            connection without answering), ``"malformed"`` (a 200 whose JSON is cut off),
            ``"error200"`` (a 200 whose body is an error object), ``"nologprobs"`` (a real
            answer without ``logprobs``: counted as answered).
        retry_after_s: the ``Retry-After`` of a 429.
        stall_s: how long a stall holds the request.
    """

    rate: float = 0.1
    seed: int = 0
    kinds: tuple[tuple[str, float], ...] = tuple((k, 1.0) for k in FAULT_KINDS)
    retry_after_s: float = 0.05
    stall_s: float = 1.0

    def draw(self, key: str, n: int) -> tuple[str, float] | None:
        """The fault (kind, seconds) for the ``n``-th receipt of prompt ``key``, or None."""
        rng = random.Random(f"{self.seed}|{key}|{n}")
        if rng.random() >= self.rate:
            return None
        kind = rng.choices([k for k, _ in self.kinds], [w for _, w in self.kinds])[0]
        seconds = {"429": self.retry_after_s, "stall": self.stall_s}.get(kind, 0.0)
        return kind, seconds


class InFlight:
    """The server's view of requests in flight: how many at once, averaged over time.

    The average is over the span from the first request received to the last one answered
    since :meth:`reset` (the time the client was sending), weighted by time: what a throughput
    benchmark compares between clients (``GET /_stats/in_flight``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Forget everything counted so far."""
        with self._lock:
            self.now = 0
            self.peak = 0
            self.requests = 0
            self._area = 0.0
            self._since: float | None = None
            self._first: float | None = None
            self._last: float | None = None

    def _move(self, step: int) -> None:
        t = time.monotonic()
        with self._lock:
            if self._since is not None:
                self._area += self.now * (t - self._since)
            self._since = t
            self.now += step
            self.peak = max(self.peak, self.now)
            if step > 0:
                self.requests += 1
                self._first = t if self._first is None else self._first
            else:
                self._last = t

    def enter(self) -> None:
        """A request was received."""
        self._move(1)

    def leave(self) -> None:
        """A request was answered (or failed)."""
        self._move(-1)

    def summary(self) -> dict[str, float]:
        """``mean`` in flight, ``peak``, ``requests`` and the ``span_s`` averaged over."""
        with self._lock:
            span = (self._last - self._first) if self._first is not None \
                and self._last is not None else 0.0
            area = self._area
            return {"mean": area / span if span > 0 else 0.0, "peak": self.peak,
                    "requests": self.requests, "span_s": span}


class _Listener(ThreadingHTTPServer):
    """The listening socket: one thread per connection, and a deep accept queue.

    http.server's default backlog is 5. With eight client workers reconnecting after faults on
    a loaded machine, a sixth pending connection can have its handshake dropped; the kernel
    retries only after a second, past a short client timeout (the fault tests once used
    0.4 s), so the client counts an attempt the server never sees (one suspect for a CI
    failure of ``test_faults``, where the server had 1 receipt for a prompt the client tried
    twice). Real servers queue hundreds.
    """

    daemon_threads = True
    # 1024: a benchmark opens hundreds of connections at once (concurrency 256); a shorter
    # queue drops handshakes the kernel retries a second later, which would be measured as
    # the client's slowness.
    request_queue_size = 1024


class MockOpenAIServer:
    """The server. Use as a context manager; ``url`` is the ``base_url`` for the client.

    ``faults`` turns on seeded random faults (:class:`FaultPlan`). Besides ``received`` and
    ``answered``, the server keeps ``arrivals`` (monotonic time, prompt key) of every request,
    ``reasked`` (per prompt, receipts after it had been answered), ``fault_counts`` and
    ``authorization`` (the Authorization headers received, counted).
    """

    def __init__(self, script: Script | None = None, *, model: str = "gpt-4o-2024-08-06",
                 fingerprint: str = "fp_test_0001", latency_s: float = 0.0,
                 faults: FaultPlan | None = None) -> None:
        # The default "model" answers differently when its model id or fingerprint changes,
        # as a re-deployed model would.
        self.script: Script = script or (
            lambda body: default_script(body, salt=f"{self.model}|{self.fingerprint}"))
        self.model = model
        self.fingerprint = fingerprint
        self.latency_s = latency_s
        self.received: Counter[str] = Counter()
        self.answered: Counter[str] = Counter()
        self.requests: list[ChatRequest] = []
        self._faults: list[tuple[str, float]] = []
        self._lock = threading.Lock()
        self.stall_after: int | None = None  # answer this many, then hold the rest
        self.release = threading.Event()
        self.stalled = 0
        self.faults = faults
        self.arrivals: list[tuple[float, str]] = []
        self.reasked: Counter[str] = Counter()
        self.fault_counts: Counter[str] = Counter()
        self.authorization: Counter[str] = Counter()  # Authorization headers as received
        self.in_flight = InFlight()
        # Answer every request 401, repeating the key received in the message (as some
        # servers do): the probe of auth handling and of redaction.
        self.reject_key = False
        self._httpd: ThreadingHTTPServer = _Listener(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The server's base URL, ``http://127.0.0.1:<port>/v1`` (the client's ``base_url``)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def inject(self, *faults: str, retry_after: float = 0.05) -> None:
        """Queue faults for the next requests, one fault per request.

        The faults: ``"429"``, ``"500"``, ``"503"``, ``"400"``, ``"403"``, ``"malformed"``,
        ``"slow"`` (sleeps ``retry_after`` seconds first), and the :class:`FaultPlan` kinds
        ``"stall"`` (holds ``retry_after`` seconds, then closes), ``"drop"``, ``"error200"``,
        ``"nologprobs"``.
        """
        with self._lock:
            self._faults.extend((f, retry_after) for f in faults)

    @property
    def total_received(self) -> int:
        """Requests received, over every prompt."""
        return sum(self.received.values())

    @property
    def total_answered(self) -> int:
        """Requests answered, over every prompt."""
        return sum(self.answered.values())

    def __enter__(self) -> MockOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class, bound to this server (http.server builds one per call)."""
        return type("Handler", (MockHandler,), {"mock": self})


class MockHandler(BaseHTTPRequestHandler):
    """The HTTP side of :class:`MockOpenAIServer` (``mock``: the server it answers for)."""

    protocol_version = "HTTP/1.1"
    mock: ClassVar[MockOpenAIServer]

    def log_message(self, *args: object) -> None:
        """Log nothing (keeps test output clean)."""
        return

    def setup(self) -> None:
        """Set up the connection with Nagle's algorithm off."""
        super().setup()
        # Headers and body go out in two writes; without TCP_NODELAY, Nagle's algorithm
        # and the client's delayed ACK add ~40 ms to every keep-alive response (real
        # API front-ends disable Nagle too).
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None
              ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, code: int, message: str, kind: str,
               headers: dict[str, str] | None = None) -> None:
        body = {"error": {"message": message, "type": kind, "param": None,
                          "code": kind}}
        self._send(code, json.dumps(body).encode(), headers)

    def _extra_fault(self, kind: str, seconds: float) -> None:
        """The FaultPlan faults that are not an HTTP error status."""
        if kind == "error200":
            self._send(200, json.dumps({"error": {
                "message": "The server had an error while processing your request.",
                "type": "server_error", "param": None, "code": None}}).encode())
            return
        if kind == "stall":
            time.sleep(seconds)  # past the client's timeout; then no answer at all
        # stall and drop: close the connection without a response.
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # the client already went away

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        """``/models``: the one model this server serves; ``/_stats/in_flight``: requests in flight.

        ``/_stats/in_flight`` answers :class:`InFlight`'s summary (for benchmarks);
        ``?reset`` starts a new count after answering.
        """
        if self.path.startswith("/_stats/in_flight"):
            summary = self.mock.in_flight.summary()
            if self.path.endswith("?reset"):
                self.mock.in_flight.reset()
            self._send(200, json.dumps(summary).encode())
        elif self.path.rstrip("/").endswith("/models"):
            body = {"object": "list", "data": [
                {"id": self.mock.model, "object": "model", "created": 1722902400,
                 "owned_by": "system"}]}
            self._send(200, json.dumps(body).encode())
        else:
            self._error(404, f"no route {self.path}", "invalid_request_error")

    def do_POST(self) -> None:  # noqa: N802
        """``/chat/completions``: the scripted answer, or the fault planned for it."""
        self.mock.in_flight.enter()
        try:
            self._post()
        finally:
            self.mock.in_flight.leave()

    def _post(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._error(404, f"no route {self.path}", "invalid_request_error")
            return
        try:
            # What the client sent, taken to be a chat request (as the real API, this stand-in
            # does not validate it beyond the keys it reads).
            body: ChatRequest = json.loads(raw)
        except json.JSONDecodeError:
            self._error(400, "could not parse the JSON body", "invalid_request_error")
            return
        key = prompt_key(body)
        fault, stall = self._record(body, key)
        if self.mock.reject_key:
            sent = self.headers.get("Authorization", "").removeprefix("Bearer ")
            self._error(401, f"Incorrect API key provided: {sent}. You can find your "
                        "API key at https://platform.openai.com/account/api-keys.",
                        "invalid_api_key")
            return
        if stall:
            self.mock.release.wait()
        if fault is not None:
            answered, body = self._fault(fault, body)
            if answered:
                return
        if self.mock.latency_s:
            time.sleep(self.mock.latency_s)
        if body.get("logprobs") and not 0 <= int(body.get("top_logprobs") or 0) <= 20:
            self._error(400, "top_logprobs must be between 0 and 20",
                        "invalid_request_error")
            return
        try:
            self._send(200, json.dumps(self._completion(body, key)).encode())
        except (BrokenPipeError, ConnectionResetError):
            return  # the client went away: not answered
        with self.mock._lock:
            self.mock.answered[key] += 1

    def _record(self, body: ChatRequest, key: str) -> tuple[tuple[str, float] | None, bool]:
        """Count the request; the fault planned for it and whether the server stalls it."""
        server = self.mock
        with server._lock:
            server.received[key] += 1
            server.requests.append(body)
            server.arrivals.append((time.monotonic(), key))
            server.authorization[self.headers.get("Authorization", "")] += 1
            if server.answered[key]:
                server.reasked[key] += 1
            fault = server._faults.pop(0) if server._faults else None
            if fault is None and server.faults is not None:
                fault = server.faults.draw(key, server.received[key])
            if fault is not None:
                server.fault_counts[fault[0]] += 1
            stall = (server.stall_after is not None
                     and server.total_answered >= server.stall_after)
            if stall:
                server.stalled += 1
        return fault, stall

    def _fault(self, fault: tuple[str, float], body: ChatRequest
               ) -> tuple[bool, ChatRequest]:
        """Apply a planned fault: (whether it answered the request, the body to answer)."""
        kind, seconds = fault
        if kind in _EXTRA_FAULTS:
            if kind != "nologprobs":
                self._extra_fault(kind, seconds)
                return True, body
            return False, {**body, "logprobs": False}  # answered, without logprobs
        if kind == "429":
            self._error(429, "Rate limit reached for requests", "rate_limit_exceeded",
                        {"retry-after": f"{seconds:g}"})
            return True, body
        if kind in ("500", "503", "400", "403"):
            messages = {"500": "The server had an error", "503": "Overloaded",
                        "400": "Invalid request", "403": "Not allowed"}
            self._error(int(kind), messages[kind], "server_error"
                        if kind.startswith("5") else "invalid_request_error")
            return True, body
        if kind == "malformed":
            self._send(200, b'{"id": "chatcmpl-x", "object": "chat.compl')
            return True, body
        if kind == "slow":
            time.sleep(seconds)
        return False, body

    def _completion(self, body: ChatRequest, key: str) -> ChatCompletion:
        """The chat.completion object for a request: its scripted answer, as the API shapes it."""
        server = self.mock
        top_n = int(body.get("top_logprobs") or 0)
        finish_reason = "stop"
        if is_continuation(body):
            # A digit follow-up: continue the original answer after the given prefix.
            scripted = server.script(original_request(body))
            content, tokens = render_continuation(scripted, _assistant_text(body), top_n)
            limit = int(body.get("max_tokens") or 0)
            if limit and len(tokens) > limit:
                tokens, finish_reason = tokens[:limit], "length"
                content = "".join(t["token"] for t in tokens)
        else:
            scripted = server.script(body)
            content, tokens = render_answer(scripted, top_n)
            finish_reason = scripted.finish_reason or finish_reason
        prompt_tokens = sum(len(json.dumps(m.get("content"))) // 4
                            for m in body.get("messages", []))
        message: AssistantMessage = {"role": "assistant", "content": content,
                                     "refusal": None, "annotations": []}
        logprobs: ChoiceLogprobs | None = None
        if scripted.refusal is not None:
            message = {"role": "assistant", "content": None,
                       "refusal": scripted.refusal, "annotations": []}
        elif body.get("logprobs") and scripted.logprobs:
            logprobs = {"content": tokens, "refusal": None}
        if scripted.reasoning_content is not None:
            message["reasoning_content"] = scripted.reasoning_content
        return {
            "id": f"chatcmpl-{key[:24]}", "object": "chat.completion",
            "created": int(time.time()), "model": server.model,
            "system_fingerprint": server.fingerprint, "service_tier": "default",
            "choices": [{"index": 0, "message": message, "logprobs": logprobs,
                         "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(tokens),
                      "total_tokens": prompt_tokens + len(tokens),
                      "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                      "completion_tokens_details": {"reasoning_tokens": 0,
                                                    "audio_tokens": 0}},
        }


def main(argv: list[str] | None = None) -> None:  # pragma: no cover - manual/bench use
    """Run the stand-in in the foreground: ``python -m capjudge.testing.openai_server``.

    Prints the base URL on the first line of stdout (``--port 0`` picks a free port).
    """
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--model", default="gpt-4o-2024-08-06")
    parser.add_argument("--fingerprint", default="fp_test_0001")
    parser.add_argument("--faults", type=float, default=0.0, metavar="RATE",
                        help="seeded random faults at this rate (see FaultPlan)")
    parser.add_argument("--fault-seed", type=int, default=0)
    parser.add_argument("--stall", type=float, default=1.0, help="seconds a stall holds")
    args = parser.parse_args(argv)
    plan = FaultPlan(rate=args.faults, seed=args.fault_seed, stall_s=args.stall) \
        if args.faults else None
    server = MockOpenAIServer(model=args.model, fingerprint=args.fingerprint,
                              latency_s=args.latency, faults=plan)
    if args.port:
        server._httpd.server_close()
        server._httpd = _Listener(("127.0.0.1", args.port), server._handler())
    print(server.url, flush=True)
    server._httpd.serve_forever()


if __name__ == "__main__":  # pragma: no cover
    main()
