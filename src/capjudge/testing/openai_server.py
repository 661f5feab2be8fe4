"""A local HTTP server that speaks the OpenAI chat-completions protocol, for tests and benchmarks.

The real API cannot be reached from tests; this stand-in answers on 127.0.0.1 only and keeps to
the real response format: ``chat.completion`` objects with ``choices[0].logprobs.content[i]``
(``token``, ``logprob``, ``bytes``, ``top_logprobs``), ``usage``, ``system_fingerprint``,
``model``; OpenAI-style error bodies; ``429`` with ``Retry-After``; ``5xx``; slow responses;
malformed bodies; and ``GET /v1/models``.

What the "model" answers is scripted: a :data:`Script` maps the request body to a
:class:`Scripted` answer (the score distribution, how the number is tokenised). Failures are
queued with :meth:`MockOpenAIServer.inject`. The server counts requests received and answered,
per prompt, so tests can prove that no answered request is ever sent twice.
"""

from __future__ import annotations

import hashlib
import json
import math
import socket
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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


Script = Callable[[dict[str, Any]], Scripted]


def prompt_key(body: dict[str, Any]) -> str:
    """A stable id for a request's messages (what the counters are keyed on)."""
    return hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest()


def _peaked(centre: int, low: int, high: int, width: float) -> dict[int, float]:
    span = range(max(low, centre - 3 * int(width) - 1), min(high, centre + 3 * int(width) + 1) + 1)
    dist = {v: math.exp(-0.5 * ((v - centre) / width) ** 2) for v in span}
    total = sum(dist.values())
    return {v: 0.95 * p / total for v, p in dist.items()}


def _prompt_text(body: dict[str, Any]) -> str:
    parts = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [c.get("text", "") for c in content if c.get("type") == "text"]
    return "\n".join(parts)


def default_script(body: dict[str, Any], salt: str = "") -> Scripted:
    """A deterministic "model" that answers in the format the prompt asks for.

    The score's centre depends on the prompt's hash: the same request always gets the same
    answer. Recognised formats: G-VEval ("The final score is $N$"), ACCR ("Accuracy: $N$" ...),
    score-first 1-5 ratings (HarmonicEval), score-first 0-100 (VisCE²), VisCE² context
    extraction, detailed descriptions, 3D C/H scoring, and a plain "Why?" explanation.
    """
    text = _prompt_text(body)
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
    if "Accuracy: $" in text:
        labels = [(name, _peaked((seed >> (8 * k)) % 101, 0, 100, 4))
                  for k, name in enumerate(("Accuracy", "Completeness", "Conciseness",
                                            "Relevance"))]
        return Scripted(labels=labels)
    if "scale of 1 to 5" in text:
        return Scripted(_peaked(1 + seed % 5, 1, 5, 0.7), score_first=True)
    if "single digit between 0 and 100" in text:
        return Scripted(_peaked(seed % 101, 0, 100, 4), score_first=True)
    return Scripted(_peaked(seed % 101, 0, 100, 4))


def _tok(token: str, logprob: float, top: list[tuple[str, float]] | None = None
         ) -> dict[str, Any]:
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


def render_answer(s: Scripted, top_n: int) -> tuple[str, list[dict[str, Any]]]:
    """Content and logprobs.content for a scripted answer."""
    if s.text is not None:
        return s.text, [_tok(t, -0.01) for t in _words(s.text)]
    if s.score_first:
        ranked = sorted(s.distribution.items(), key=lambda kv: (-kv[1], kv[0]))
        alts = [(str(v), math.log(p)) for v, p in ranked[:top_n] if p > 0]
        opening = [_tok(str(ranked[0][0]), math.log(ranked[0][1]), alts)]
        opening += [_tok(t, -0.05) for t in _words("\n" + s.reasoning)]
        return "".join(t["token"] for t in opening), opening
    tokens: list[dict[str, Any]] = [_tok(t, -0.05) for t in _words(s.reasoning + " ")]
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


class MockOpenAIServer:
    """The server. Use as a context manager; ``url`` is the ``base_url`` for the client."""

    def __init__(self, script: Script | None = None, *, model: str = "gpt-4o-2024-08-06",
                 fingerprint: str = "fp_test_0001", latency_s: float = 0.0) -> None:
        # The default "model" answers differently when its model id or fingerprint changes,
        # as a re-deployed model would.
        self.script: Script = script or (
            lambda body: default_script(body, salt=f"{self.model}|{self.fingerprint}"))
        self.model = model
        self.fingerprint = fingerprint
        self.latency_s = latency_s
        self.received: Counter[str] = Counter()
        self.answered: Counter[str] = Counter()
        self.requests: list[dict[str, Any]] = []
        self._faults: list[tuple[str, float]] = []
        self._lock = threading.Lock()
        self.stall_after: int | None = None  # answer this many, then hold the rest
        self.release = threading.Event()
        self.stalled = 0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def inject(self, *faults: str, retry_after: float = 0.05) -> None:
        """Queue faults for the next requests: ``"429"``, ``"500"``, ``"503"``, ``"400"``,
        ``"403"``, ``"malformed"``, ``"slow"`` (sleeps ``retry_after`` seconds first)."""
        with self._lock:
            self._faults.extend((f, retry_after) for f in faults)

    @property
    def total_received(self) -> int:
        return sum(self.received.values())

    @property
    def total_answered(self) -> int:
        return sum(self.answered.values())

    def __enter__(self) -> MockOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output clean
                return

            def setup(self) -> None:
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

            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                if self.path.rstrip("/").endswith("/models"):
                    body = {"object": "list", "data": [
                        {"id": server.model, "object": "model", "created": 1722902400,
                         "owned_by": "system"}]}
                    self._send(200, json.dumps(body).encode())
                else:
                    self._error(404, f"no route {self.path}", "invalid_request_error")

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._error(404, f"no route {self.path}", "invalid_request_error")
                    return
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    self._error(400, "could not parse the JSON body", "invalid_request_error")
                    return
                key = prompt_key(body)
                with server._lock:
                    server.received[key] += 1
                    server.requests.append(body)
                    fault = server._faults.pop(0) if server._faults else None
                    stall = (server.stall_after is not None
                             and server.total_answered >= server.stall_after)
                    if stall:
                        server.stalled += 1
                if stall:
                    server.release.wait()
                if fault is not None:
                    kind, seconds = fault
                    if kind == "429":
                        self._error(429, "Rate limit reached for requests", "rate_limit_exceeded",
                                    {"retry-after": f"{seconds:g}"})
                        return
                    if kind in ("500", "503", "400", "403"):
                        messages = {"500": "The server had an error", "503": "Overloaded",
                                    "400": "Invalid request", "403": "Not allowed"}
                        self._error(int(kind), messages[kind], "server_error"
                                    if kind.startswith("5") else "invalid_request_error")
                        return
                    if kind == "malformed":
                        self._send(200, b'{"id": "chatcmpl-x", "object": "chat.compl')
                        return
                    if kind == "slow":
                        time.sleep(seconds)
                if server.latency_s:
                    time.sleep(server.latency_s)
                if body.get("logprobs") and not 0 <= int(body.get("top_logprobs", 0)) <= 20:
                    self._error(400, "top_logprobs must be between 0 and 20",
                                "invalid_request_error")
                    return
                scripted = server.script(body)
                top_n = int(body.get("top_logprobs") or 0)
                content, tokens = render_answer(scripted, top_n)
                prompt_tokens = sum(len(json.dumps(m.get("content"))) // 4
                                    for m in body.get("messages", []))
                message: dict[str, Any] = {"role": "assistant", "content": content,
                                           "refusal": None, "annotations": []}
                logprobs = None
                if scripted.refusal is not None:
                    message = {"role": "assistant", "content": None,
                               "refusal": scripted.refusal, "annotations": []}
                elif body.get("logprobs") and scripted.logprobs:
                    logprobs = {"content": tokens, "refusal": None}
                answer = {
                    "id": f"chatcmpl-{key[:24]}", "object": "chat.completion",
                    "created": int(time.time()), "model": server.model,
                    "system_fingerprint": server.fingerprint, "service_tier": "default",
                    "choices": [{"index": 0, "message": message, "logprobs": logprobs,
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(tokens),
                              "total_tokens": prompt_tokens + len(tokens),
                              "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                              "completion_tokens_details": {"reasoning_tokens": 0,
                                                            "audio_tokens": 0}},
                }
                try:
                    self._send(200, json.dumps(answer).encode())
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client went away: not answered
                with server._lock:
                    server.answered[key] += 1

        return Handler


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
    args = parser.parse_args(argv)
    server = MockOpenAIServer(model=args.model, fingerprint=args.fingerprint,
                              latency_s=args.latency)
    if args.port:
        server._httpd.server_close()
        server._httpd = ThreadingHTTPServer(("127.0.0.1", args.port), server._handler())
        server._httpd.daemon_threads = True
    print(server.url, flush=True)
    server._httpd.serve_forever()


if __name__ == "__main__":  # pragma: no cover
    main()
