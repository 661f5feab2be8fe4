"""``openai/<model>``: the OpenAI API or any OpenAI-compatible server (vLLM, SGLang, Ollama).

Chat completions with images as base64 data URLs, ``logprobs=True`` and ``top_logprobs`` (20 by
default). The API key comes only from the environment (``OPENAI_API_KEY`` or the variable named
by ``api_key_env``); the base URL from ``base_url`` or ``OPENAI_BASE_URL``, as the openai client
does. A base URL carrying credentials (``http://user:pass@host/v1``) is refused (see
:mod:`capjudge.util.credentials`). Pictures are read with
:func:`capjudge.media_check.read_verified`: what is uploaded is exactly the bytes ingest
hashed. Chat completions go out through the process's sending process
(:mod:`capjudge.backends.http_loop`: aiohttp on its own event loop, the gate of requests in
flight around the exchange alone); the OpenAI SDK's client (``max_retries=0``) lists models and
runs the Batch API. Retries, backoff and rate limiting are done once, for every backend, by
:class:`capjudge.client.JudgeClient`.

Reading: each score slot is read by :mod:`capjudge.reading.tokens` (where the prompt puts
it; whole-number and digit-split tokens). A digit-split score's other leading digits are
completed with continuation follow-ups (:meth:`OpenAIBackend.follow_ups`: the assistant's own
text up to a digit), which the client asks like any request; option ``continue_digits``
(default: on with a base URL other than api.openai.com). An answer without the
log-probabilities that were asked for is ``text_only``; a 200 whose body is an error or has no
choices is a transient error with the server's message.

Continuation conventions (option ``continuation``): vLLM continues the last assistant message
when asked with ``continue_final_message``/``add_generation_prompt`` in the body; llama.cpp's
server continues it by itself (assistant prefill) and echoes the prefilled text in the answer.
``auto`` (default) asks the server's model list once: ``owned_by: llamacpp`` is llama.cpp
(plain prefills), ``owned_by: vllm`` is vLLM (its fields); another server gets vLLM's fields
until an answer shows llama.cpp's convention (its ``timings`` object, or the echoed prefill). A
400 to a continuation carrying vLLM's fields is retried once as a plain prefill. Either way the
follow-up's first token is read, so both give the same digit distributions.

Anchor forcing, two uses. **Confirming** an off-contract reading at its forced anchor (the
second channel of :mod:`capjudge.reading.confirm`): on where the server is recognised as
llama.cpp or vLLM and ``continue_digits`` is on (``force_anchor: false`` turns it off).
**Reading a slot whose number was never written** (a small base model that rambles) at its
forced anchor: the answer is asked again with the slot's ``forced_prefix`` prefilled after its
text (``"first"`` slots: at the answer's start, read from the answer's own first token when
the prefix is empty), as the local backends teacher-force it, and the slot records
``anchor_forced``. That reading is one channel alone where the judge wrote no verdict, a
deviation from the papers (which read the verdict the judge writes): only with the option
``force_anchor: true`` (the bundled sample's llama.cpp judges set it). Without it such a slot
is a ``parse_failure`` "no number ...".

The wire format (request bodies, messages and pictures, error bodies, ``Retry-After``, what a
body that is not a completion is) and llama.cpp's specifics are in
:mod:`capjudge.backends.openai_wire`; its names are re-exported here.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import ssl
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from capjudge.backends.base import Capabilities
from capjudge.backends.http_loop import HTTPSender, Reply, TransportError, sending_process
from capjudge.backends.openai_served import OpenAIServed
from capjudge.backends.openai_wire import (
    CONTINUATION_FIELDS,
    CONTINUATIONS,
    LLAMACPP_TOP_LOGPROBS,
    NO_LOGPROBS_PREFIXES,
    ChatBody,
    ServerStats,
    body_error,
    error_from_body,
    image_data_url,
    is_auth_failure,
    is_continuation,
    no_image_input,
    not_a_completion,
    retry_after_s,
    sniff_image_type,
    to_openai_messages,
    with_api_path,
)
from capjudge.backends.served_identity import (
    ServedModel,
)
from capjudge.protocol import (
    BackendError,
    JudgeRequest,
    JudgeResponse,
    ServerTimings,
    Usage,
)
from capjudge.reading import (
    CONFIRM_MODES,
    FOLLOW_UP_MIN_P,
    Answer,
    Reading,
    ResponseBase,
    TokenLogprob,
    read,
)
from capjudge.records import JSONValue
from capjudge.util.credentials import CredentialsInURLError, check_url, strip_userinfo

log = logging.getLogger(__name__)

def tls_context() -> ssl.SSLContext:
    """The TLS context every OpenAI client of this process verifies servers with.

    The one the HTTP client builds by default (its CA paths, ``SSL_CERT_FILE`` and
    ``SSL_CERT_DIR``), made once per process and per those variables: loading the CA bundle
    takes ~20 ms, paid by every client otherwise (``capjudge score`` makes one per run).
    """
    return _tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _tls_context(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    import httpx2

    return httpx2.create_ssl_context()


class OpenAIBackend(OpenAIServed):
    """Chat completions with log-probabilities against an OpenAI-protocol server."""

    options = frozenset({"base_url", "api_key_env", "timeout_s", "min_mass", "concurrency",
                         "vision", "snapshot", "continue_digits", "continuation",
                         "force_anchor", "confirm", "follow_up_min_p"})
    default_concurrency = 8
    pipelined = True  # see Backend; LlamaCppBackend says False
    gates_in_flight = True  # see Backend: the sending loop's gate (capjudge.backends.http_loop)

    def __init__(self, model: str, *, base_url: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", timeout_s: float = 120.0,
                 min_mass: float = 0.5, concurrency: int = 8, vision: bool = True,
                 snapshot: str | None = None, continue_digits: bool | None = None,
                 continuation: str = "auto", force_anchor: bool | None = None,
                 confirm: str = "auto", follow_up_min_p: float = FOLLOW_UP_MIN_P) -> None:
        import openai

        self.model = model
        self.backend_id = f"openai/{model}"
        where = "base_url" if base_url else "OPENAI_BASE_URL"
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        try:
            # Refused, not stripped: the URL's user-info would otherwise be sent as Basic auth
            # in place of the key, and the user would not learn where the key belongs.
            check_url(base_url, where)
        except CredentialsInURLError as exc:
            raise BackendError(str(exc), transient=False) from None
        api_key = os.environ.get(api_key_env)
        if not api_key:
            if base_url is None:
                raise BackendError(
                    f"{api_key_env} is not set: the OpenAI API key is read only from the "
                    "environment", transient=False)
            api_key = "EMPTY"  # local OpenAI-compatible servers usually need no key
        base_url = with_api_path(base_url)
        self.base_url = base_url
        self.min_mass = min_mass
        # What the server says about the weights behind the name: asked once, before the
        # first request or cache look-up (it joins the snapshot and the cache key).
        self._served = ServedModel(model, base_url, api_key, snapshot, timeout_s)
        self._client = openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0,
                                     timeout=timeout_s, http_client=openai.DefaultHttpxClient(
                                         verify=tls_context()))
        # Chat completions go out through the process's sending loop (_call); the SDK's client
        # lists models and runs the Batch API. The same key, organisation and project headers.
        headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json",
                   "Accept": "application/json"}
        for header, value in (("OpenAI-Organization", self._client.organization),
                              ("OpenAI-Project", self._client.project)):
            if value:
                headers[header] = value
        self._http = HTTPSender(str(self._client.base_url), headers, timeout_s, concurrency)
        sending_process()  # started now, not in the first request's time
        self.capabilities = Capabilities(vision=vision, distribution="logprobs", max_batch=1,
                                         concurrency=concurrency, json_schema=True)
        # Complete digit-split scores with continuation follow-ups (vLLM, llama.cpp and other
        # servers that continue an assistant message). Default: on with a base URL, except
        # OpenAI's own API, which cannot continue and writes 0-999 as single tokens anyway.
        self._init_reading(min_mass, continue_digits if continue_digits is not None else
                           base_url is not None and "api.openai.com" not in base_url,
                           continuation, force_anchor, confirm=confirm,
                           follow_up_min_p=follow_up_min_p)

    def _init_reading(self, min_mass: float, continue_digits: bool, continuation: str,
                      force_anchor: bool | None, server: str | None = None,
                      confirm: str = "auto", follow_up_min_p: float = FOLLOW_UP_MIN_P
                      ) -> None:
        """The reading state shared with subclasses that send bodies another way."""
        if not 0 < float(follow_up_min_p) < 1:
            raise BackendError(f"follow_up_min_p must be in (0, 1), got {follow_up_min_p!r}",
                               transient=False)
        # A digit-split score's unobserved leading digits at least this likely are asked
        # (one follow-up each); what is below it is reported as lost mass, at most this much
        # per prefix (issue 42: the embedded model's G-VEval asked ~11 per answer at 1e-3).
        self.follow_up_min_p = float(follow_up_min_p)
        if continuation not in CONTINUATIONS:
            raise BackendError(f"continuation must be one of {', '.join(CONTINUATIONS)}, got "
                               f"{continuation!r}", transient=False)
        if confirm not in CONFIRM_MODES:
            raise BackendError(f"confirm must be one of {', '.join(CONFIRM_MODES)}, got "
                               f"{confirm!r}", transient=False)
        # How an off-contract verdict is confirmed (capjudge.reading.confirm): "auto" at the
        # forced anchor where the server can continue an answer; "follow_up" also asks one
        # short question where it cannot; "off" never (the rules' reading, unconfirmed).
        self.confirm = confirm
        self.min_mass = min_mass
        self.continue_digits = continue_digits
        self.continue_off_reason: str | None = None if self.continue_digits else (
            "continuation follow-ups are off for this backend (continue_digits: false)")
        # "auto" until an answer shows which convention the server honours.
        self.continuation = continuation
        self.server_stats = ServerStats()
        self._force_anchor = force_anchor
        # Which server this is ("llama.cpp", "vllm"), once asked (None: not recognised).
        self.server = server
        self._detected = server is not None or not continue_digits
        self._detect_lock = threading.Lock()
        self._pending: dict[int, Reading] = {}
        self._pending_lock = threading.Lock()

    @property
    def force_anchor(self) -> bool:
        """Whether a slot whose number was never written is read at its forced anchor.

        Only when asked (``force_anchor: true``): the judge wrote no verdict, and the anchor's
        distribution would be the reading's only channel.
        """
        return self.continue_digits and self._force_anchor is True

    @property
    def confirm_at_anchor(self) -> bool:
        """Whether an off-contract reading is confirmed at its forced anchor (a second channel).

        Where the server can continue the answer (recognised as llama.cpp or vLLM, or
        ``force_anchor: true``); ``force_anchor: false`` turns it off.
        """
        if not self.continue_digits:
            return False
        if self._force_anchor is not None:
            return self._force_anchor
        return self.server is not None

    def limit_in_flight(self, limit: int) -> None:
        """Keep at most ``limit`` requests in flight (the client's concurrency)."""
        self._http.set_limit(limit)

    def drop_queued(self) -> None:
        """Send none of the requests queued at the gate (they fail as not sent)."""
        self._http.drop()

    def generate(self, requests: Sequence[JudgeRequest]) -> list[JudgeResponse | BackendError]:
        """Send each request as its own chat completion; per request a response or an error."""
        return [self._one(r) for r in requests]

    # -- the wire format, shared with the Batch API (capjudge.client.batch) -------------------

    @property
    def api(self) -> Any:
        """The ``openai.OpenAI`` client (files and batches for the Batch API).

        Used by :mod:`capjudge.client.batch`.
        """
        return self._client

    def request_body(self, request: JudgeRequest) -> ChatBody:
        """The ``/v1/chat/completions`` body of a request, exactly as :meth:`generate` sends it.

        It is also a Batch API input line's ``body``.

        Raises:
            capjudge.media_check.MediaChangedError: a picture no longer matches its hash.
        """
        dec = request.decoding
        body: ChatBody = {
            "model": self.model, "messages": to_openai_messages(request),
            "temperature": dec.temperature, "max_tokens": dec.max_tokens,
            "logprobs": True, "top_logprobs": dec.top_logprobs,
        }
        if self.server == "llama.cpp" and dec.top_logprobs > 0:
            body["top_logprobs"] = max(dec.top_logprobs, LLAMACPP_TOP_LOGPROBS)
        if dec.seed is not None:
            body["seed"] = dec.sampling_seed()  # a new seed per repeat: a new sample
        if request.verdict_schema:
            # verdict_format: json_schema. OpenAI's structured outputs; vLLM and llama.cpp's
            # server turn the schema into a grammar, so the answer is the schema's JSON.
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "verdict", "strict": True,
                "schema": json.loads(request.verdict_schema)}}
        if is_continuation(request) and self.continuation != "prefill":
            # A follow-up that continues the assistant's own text (vLLM's chat parameters)
            # instead of starting a new turn: see follow_ups(). llama.cpp continues a final
            # assistant message by itself and ignores these fields.
            body["continue_final_message"] = True
            body["add_generation_prompt"] = False
        return body

    def parse_completion(self, request: JudgeRequest, body: Mapping[str, JSONValue],
                         latency_s: float = 0.0) -> JudgeResponse | BackendError:
        """Read a ``chat.completion`` body received outside :meth:`generate`.

        Such a body is a Batch API or ``vllm run-batch`` result line; it is read exactly as
        :meth:`generate` reads its own.
        """
        return self._parse(request, dict(body), latency_s)

    def _one(self, request: JudgeRequest) -> JudgeResponse | BackendError:
        if self.model.startswith(NO_LOGPROBS_PREFIXES):
            return BackendError(f"{self.model} does not return log-probabilities (reasoning "
                                "model); choose e.g. gpt-4o or gpt-4.1", transient=False)
        if not self._detected:
            self._detect_server()
        body = self.request_body(request)
        started = time.perf_counter()
        completion = self._call(body)
        if (isinstance(completion, BackendError) and self.continuation == "auto"
                and "continue_final_message" in body and str(completion).startswith("HTTP 400")):
            # A server that rejects vLLM's fields: continue by plain prefill (llama.cpp's way).
            retry = body.copy()
            retry.pop("continue_final_message", None)
            retry.pop("add_generation_prompt", None)
            completion = self._call(retry)
            if not isinstance(completion, BackendError):
                self.continuation = "prefill"
        if isinstance(completion, BackendError):
            return completion
        latency = time.perf_counter() - started
        return self._parse(request, completion, latency)

    def _call(self, body: ChatBody) -> Any:
        """Send one chat-completions body; its JSON object (text if it is none), or the error.

        The body is ours (:class:`ChatBody`, checked where it is built) and goes out through
        the process's sending loop (:mod:`capjudge.backends.http_loop`), not the SDK: the
        SDK's request building and its HTTP pool were nearly half of the client's CPU per
        request (issue 42: that CPU, spent while a wave of answers is read, bounds how many
        requests stay in flight). Errors are read as the SDK reads them (its message,
        ``Retry-After``, the error object's ``code``).
        """
        try:
            reply = self._http.post("/chat/completions", json.dumps(body).encode())
        except TransportError as exc:
            if exc.kind == "held":
                return BackendError(f"not sent: {exc}", transient=True,
                                    retry_after=exc.retry_after, not_sent=True)
            name = "APITimeoutError" if exc.kind == "timeout" else "APIConnectionError"
            return BackendError(f"{name} at {self._where()}: {exc}", transient=True)
        if reply.status >= 400:
            return self._http_error(reply)
        try:
            return json.loads(reply.content)
        except ValueError as exc:
            if "json" in reply.headers.get("content-type", ""):
                # JSON cut off: the server may be restarting; worth one more try.
                return BackendError(f"malformed response: {exc}", transient=True)
            return reply.text  # an HTML page, a proxy's text: said as such in _parse

    def _http_error(self, reply: Reply) -> BackendError:
        """An HTTP error reply as a :class:`BackendError` (status, message, retry, auth)."""
        text = reply.text.strip()
        body: Any = text
        message = f"Error code: {reply.status}"
        try:
            body = json.loads(text)
        except ValueError:
            pass
        else:
            error = body.get("error", body) if isinstance(body, dict) else None
            said = error.get("message") if isinstance(error, dict) else None
            if isinstance(said, str) and said:
                message += f" - {said}"
            body = error if isinstance(body, dict) else body
        wait = retry_after_s(reply.headers)
        if reply.status == 429:
            return BackendError(f"429 rate limited: {message}", transient=True, retry_after=wait)
        error = error_from_body(reply.status, body, message)
        if reply.status == 404:  # a wrong path or model: say where it was asked
            error = BackendError(f"{error} (at {self._where()})", transient=False)
        error.retry_after = wait
        code = body.get("code") if isinstance(body, dict) else None
        if is_auth_failure(reply.status, message, code):
            # A rejected key: the client stops at once (never retried, never "refused").
            error.auth, error.transient, error.status = True, False, "error"
        return error

    def _where(self) -> str:
        """The base URL requests go to, without credentials (for error messages)."""
        return strip_userinfo(self.base_url) if self.base_url else "the OpenAI API"

    def _parse(self, request: JudgeRequest, completion: Any, latency: float
               ) -> JudgeResponse | BackendError:
        """One answer's JSON body (``completion``; text when it was none) as a response."""
        wrong = not_a_completion(completion)
        if wrong is not None:
            # An HTML login page, a wrong port, another API: every request would get the same.
            where = strip_userinfo(self.base_url) if self.base_url else self.backend_id
            return BackendError(f"{where} did not answer as an OpenAI chat-completions API: "
                                f"it sent {wrong}", transient=False, fatal=True)
        error = body_error(completion)
        if error is not None or not completion.get("choices"):
            # A 200 whose body is an error, or has no answer: the server's trouble (a restart, an
            # overloaded worker), worth another try; its message is kept in the reason.
            return BackendError(f"HTTP 200 without an answer: {error or 'no choices'}",
                                transient=True)
        timings = completion.get("timings")
        with self._pending_lock:
            self.server_stats.add(completion.get("usage"), timings)
        usage = Usage()
        if isinstance(used := completion.get("usage"), dict):
            usage = Usage(prompt_tokens=used.get("prompt_tokens") or 0,
                          completion_tokens=used.get("completion_tokens") or 0)
        base: ResponseBase = {"usage": usage, "model": completion.get("model") or self.model,
                "system_fingerprint": completion.get("system_fingerprint"),
                "latency_s": latency, "timings": ServerTimings.from_server(timings)}
        choice = completion["choices"][0] or {}
        message = choice.get("message") or {}
        text = message.get("content") or ""
        finish_reason = choice.get("finish_reason")
        if is_continuation(request) and self.continuation == "auto":
            prefill = request.messages[-1].text()
            if isinstance(timings, dict) or (prefill and text.startswith(prefill)):
                # llama.cpp: it continued the assistant message by itself (and says so by
                # echoing it, or by its timings object); vLLM's fields are not needed.
                self.continuation = "prefill"
        refusal = message.get("refusal") or (
            finish_reason if finish_reason == "content_filter" else None)
        tokens: list[TokenLogprob] | None = None
        if (content := (choice.get("logprobs") or {}).get("content")):
            tokens = [
                TokenLogprob(t["token"], t["logprob"],
                             tuple((a["token"], a["logprob"]) for a in t.get("top_logprobs")
                                   or ()))
                for t in content
            ]
        answer = Answer(text, base, tokens, finish_reason,
                        thinking=message.get("reasoning_content") or message.get("reasoning"),
                        refusal=refusal)
        reading = read(self, request, answer)
        if reading.pending is not None:
            with self._pending_lock:
                self._pending[id(reading.response)] = reading
        return reading.response

    def confirmable(self, request: JudgeRequest) -> bool:
        """Whether off-contract readings of this request are confirmed (never a follow-up's)."""
        return self.confirm != "off" and not request.template.endswith(
            ("+confirm", "+continue"))

    def ask_again(self, request: JudgeRequest, stored: JudgeResponse) -> bool:
        """Whether a cached answer's digit trees were completed less far than asked now.

        An answer stored under a higher ``follow_up_min_p`` left more leading digits unasked:
        it is asked again (one request; the follow-ups asked before come from the cache). A
        follow-up itself never is.
        """
        if is_continuation(request) or not self.continue_digits:
            return False
        was = stored.read_with.get("follow_up_min_p", FOLLOW_UP_MIN_P)
        return isinstance(was, (int, float)) and was > self.follow_up_min_p

    def reread(self, request: JudgeRequest, response: JudgeResponse) -> JudgeResponse:
        """A cached answer under the current settings and reading rules (never asked again).

        An answer stored under other reading rules (:data:`READING_RULES_VERSION`) is read
        again from its raw tokens and follow-up continuations; otherwise only ``min_mass`` is
        re-applied (:meth:`Backend.reread`).
        """
        reading = read(self, request, response)
        return reading.response if reading.changed else super().reread(request, response)

    # -- continuation follow-ups (digit-split tokenizers) -----------------------------------

    def follow_ups(self, request: JudgeRequest, response: JudgeResponse
                   ) -> list[JudgeRequest]:
        """What the reading of ``response`` still needs asked.

        See :meth:`capjudge.reading.Reading.follow_ups`: digit continuations, forced
        anchors, the confirmation question.
        """
        with self._pending_lock:
            reading = self._pending.get(id(response))
        if reading is None:
            return []
        out = reading.follow_ups(self.continue_digits)
        if not out:
            with self._pending_lock:
                self._pending.pop(id(response), None)
        return out

    def complete(self, request: JudgeRequest, response: JudgeResponse,
                 follow_ups: Sequence[JudgeRequest], answers: Sequence[JudgeResponse]
                 ) -> JudgeResponse:
        """The response with its follow-ups' answers merged (:meth:`Reading.complete`)."""
        with self._pending_lock:
            reading = self._pending.pop(id(response), None)
        if reading is None:
            return response
        off = reading.complete(answers, min_mass=self.min_mass,
                               continuing=self.continue_digits,
                               refused=self._refuses_continuation)
        done = reading.response
        if off is not None:
            # The server refuses continuation requests: no more follow-ups from here on.
            self.continue_digits = False
            self.continue_off_reason = off
        if reading.pending is not None:
            with self._pending_lock:
                self._pending[id(done)] = reading  # "10" after "1": another round
        return done

    @staticmethod
    def _refuses_continuation(answer: JudgeResponse) -> str | None:
        """Why a failed follow-up shows the server cannot continue an assistant message."""
        why = answer.reason or (answer.slots[0].reason if answer.slots else None)
        if answer.status == "error" and why and "HTTP 4" in why:
            return ("the server cannot continue an assistant message "
                    f"({why}); continuation follow-ups turned off")
        return None


__all__ = ["CONTINUATIONS", "CONTINUATION_FIELDS", "ChatBody", "LLAMACPP_TOP_LOGPROBS",
           "NO_LOGPROBS_PREFIXES", "OpenAIBackend", "ServerStats", "body_error", "error_from_body",
           "image_data_url", "is_auth_failure", "is_continuation", "no_image_input",
           "not_a_completion", "retry_after_s", "sniff_image_type",
           "to_openai_messages", "with_api_path"]
