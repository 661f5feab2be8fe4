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

import json
import random
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

# The wire types and scripted answers (re-exported: tests and benchmarks import them here).
from capjudge.testing.scripted import AssistantMessage as AssistantMessage
from capjudge.testing.scripted import ChatCompletion as ChatCompletion
from capjudge.testing.scripted import ChatMessage as ChatMessage
from capjudge.testing.scripted import ChatRequest as ChatRequest
from capjudge.testing.scripted import Choice as Choice
from capjudge.testing.scripted import ChoiceLogprobs as ChoiceLogprobs
from capjudge.testing.scripted import ContentPart as ContentPart
from capjudge.testing.scripted import Script as Script
from capjudge.testing.scripted import Scripted as Scripted
from capjudge.testing.scripted import Token as Token
from capjudge.testing.scripted import TopLogprob as TopLogprob
from capjudge.testing.scripted import Usage as Usage
from capjudge.testing.scripted import assistant_text
from capjudge.testing.scripted import default_script as default_script
from capjudge.testing.scripted import is_continuation as is_continuation
from capjudge.testing.scripted import original_request as original_request
from capjudge.testing.scripted import prompt_key as prompt_key
from capjudge.testing.scripted import prompt_text as prompt_text
from capjudge.testing.scripted import render_answer as render_answer
from capjudge.testing.scripted import render_continuation as render_continuation
from capjudge.testing.scripted import sample_jitter as sample_jitter

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
        """``mean`` in flight, ``peak``, ``now``, ``requests`` and the ``span_s`` averaged over."""
        with self._lock:
            span = (self._last - self._first) if self._first is not None \
                and self._last is not None else 0.0
            area = self._area
            return {"mean": area / span if span > 0 else 0.0, "peak": self.peak,
                    "now": self.now, "requests": self.requests, "span_s": span}


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
        # The API's own bound on top_logprobs (llama.cpp's server allows more: a proxy in
        # front of one raises it).
        self.max_top_logprobs = 20
        self._httpd: ThreadingHTTPServer = _Listener(("127.0.0.1", 0), self._handler())
        # A short poll (5 ms): shutdown() waits for the serve loop's next poll, and with the default
        # 0.5 s every stop of the server cost half a second (most of a replayed test case).
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.005}, daemon=True)

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

    def _answered(self) -> None:
        """The request in flight is answered (counted once, before its answer goes out).

        Counted before the first byte is written: a client that sends its next request as
        soon as it has this answer must not find this one still counted (the count is what
        tests hold a client's concurrency bound against).
        """
        if getattr(self, "_counted", False):
            self._counted = False
            self.mock.in_flight.leave()

    def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None
              ) -> None:
        self._answered()
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
        self._counted = True
        try:
            self._post()
        finally:
            self._answered()  # a dropped or stalled request too

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
        top = self.mock.max_top_logprobs
        if body.get("logprobs") and not 0 <= int(body.get("top_logprobs") or 0) <= top:
            self._error(400, f"top_logprobs must be between 0 and {top}",
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
            content, tokens = render_continuation(scripted, assistant_text(body), top_n)
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
