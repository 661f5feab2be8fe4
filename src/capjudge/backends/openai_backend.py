"""``openai/<model>``: the OpenAI API or any OpenAI-compatible server (vLLM, SGLang, Ollama).

Chat completions with images as base64 data URLs, ``logprobs=True`` and ``top_logprobs`` (20 by
default). The API key comes only from the environment (``OPENAI_API_KEY`` or the variable named
by ``api_key_env``); the base URL from ``base_url`` or ``OPENAI_BASE_URL``, as the openai client
does. A base URL carrying credentials (``http://user:pass@host/v1``) is refused (see
:mod:`capjudge.credentials`). Pictures are read with :func:`capjudge.media_check.read_verified`:
what is uploaded is exactly the bytes ingest hashed. The client is created with
``max_retries=0``: retries, backoff and rate limiting are done once, for every backend, by
:class:`capjudge.client.JudgeClient`.

Reading: each score slot is read by :mod:`capjudge.backends.logprobs` (where the prompt puts
it; whole-number and digit-split tokens). A digit-split score's other leading digits are
completed with continuation follow-ups (:meth:`OpenAIBackend.follow_ups`: the assistant's own
text up to a digit, ``continue_final_message``), which the client asks like any request; option
``continue_digits`` (default: on with a base URL other than api.openai.com). An answer without
the log-probabilities that were asked for is ``text_only``; a 200 whose body is an error or has
no choices is a transient error with the server's message.
"""

from __future__ import annotations

import base64
import mimetypes
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from capjudge.backends.base import (
    Backend,
    BackendError,
    Capabilities,
    Decoding,
    ImagePart,
    JudgeRequest,
    JudgeResponse,
    Message,
    SlotResult,
    Status,
    Usage,
    worst_status,
)
from capjudge.backends.logprobs import (
    READING_RULES_VERSION,
    TokenLogprob,
    TreeReading,
    add_continuation,
    continuation_from_result,
    finish,
    follow_up_prefixes,
    next_slot,
    read_next,
    read_text,
    read_tree,
)
from capjudge.credentials import CredentialsInURLError, check_url, strip_userinfo
from capjudge.media_check import read_verified

# Reasoning models refuse logprobs requests (HTTP 403): they cannot give a distribution.
NO_LOGPROBS_PREFIXES = ("o1", "o3", "o4", "gpt-5")

# vLLM's chat parameters of a continuation: body fields, passed through the SDK's extra_body.
_CONTINUATION_FIELDS = ("continue_final_message", "add_generation_prompt")


def sniff_image_type(data: bytes) -> str | None:
    """The MIME type of image bytes from their signature (PNG, JPEG, GIF, WebP), else None.

    The content decides, never the file name: WebP bytes named ``.png`` are ``image/webp``.
    """
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_data_url(part: ImagePart) -> str:
    """A picture as a ``data:`` URL, typed by its content (PNG/JPEG/WebP/GIF).

    It is built from bytes verified against the picture's hash; the extension is a fallback
    only for bytes of no known signature.

    Raises:
        capjudge.media_check.MediaChangedError: the file no longer hashes to ``part.sha256``.
    """
    data = read_verified(part)
    mime = sniff_image_type(data) or mimetypes.guess_type(part.path)[0] or "image/png"
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def to_openai_messages(request: JudgeRequest) -> list[dict[str, Any]]:
    """Our neutral messages in the chat-completions wire format."""
    out: list[dict[str, Any]] = []
    for message in request.messages:
        if not message.images:
            out.append({"role": message.role, "content": message.text()})
            continue
        content: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, ImagePart):
                content.append({"type": "image_url", "image_url": {
                    "url": image_data_url(part), "detail": part.detail}})
            elif part:
                content.append({"type": "text", "text": part})
        out.append({"role": message.role, "content": content})
    return out


_AUTH_WORDS = re.compile(r"(?i)api[ _-]?key|auth|credential|unauthori[sz]ed|"
                         r"invalid[_ ]key|incorrect[_ ]key|permission")


def is_auth_failure(code: int, message: str, error_code: Any = None) -> bool:
    """Whether an HTTP error is an authentication failure (the run must stop).

    401 always is; 403 when the body says it is about the key or permissions (a 403 that a
    reasoning model returns for a logprobs request is a refusal, not an auth failure).
    """
    if code == 401:
        return True
    return code == 403 and bool(_AUTH_WORDS.search(f"{message} {error_code or ''}"))


def _retry_after(headers: Any) -> float | None:
    if headers is None:
        return None
    for key, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(key)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            continue  # an HTTP date; fall back to our own backoff
    return None


class OpenAIBackend(Backend):
    """Chat completions with log-probabilities against an OpenAI-protocol server."""

    options = frozenset({"base_url", "api_key_env", "timeout_s", "min_mass", "concurrency",
                         "vision", "snapshot", "continue_digits"})
    default_concurrency = 8

    def __init__(self, model: str, *, base_url: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", timeout_s: float = 120.0,
                 min_mass: float = 0.5, concurrency: int = 8, vision: bool = True,
                 snapshot: str | None = None, continue_digits: bool | None = None) -> None:
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
        self.base_url = base_url
        self.min_mass = min_mass
        self._snapshot = snapshot or model
        self._client = openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0,
                                     timeout=timeout_s)
        self.capabilities = Capabilities(vision=vision, distribution="logprobs", max_batch=1,
                                         concurrency=concurrency)
        # Complete digit-split scores with continuation follow-ups (vLLM and other servers that
        # continue an assistant message). Default: on with a base URL, except OpenAI's own API,
        # which cannot continue and writes 0-999 as single tokens anyway.
        self.continue_digits = (continue_digits if continue_digits is not None else
                                base_url is not None and "api.openai.com" not in base_url)
        self._continue_off_reason: str | None = None if self.continue_digits else (
            "continuation follow-ups are off for this backend (continue_digits: false)")
        self._pending: dict[int, _Pending] = {}
        self._pending_lock = threading.Lock()

    def snapshot(self) -> str:
        """The configured snapshot name (the model name when none was given)."""
        return self._snapshot

    def describe(self) -> dict[str, Any]:
        """Backend facts for summaries and lineage (never credentials).

        The key is not here and the URL passes :func:`~capjudge.credentials.strip_userinfo`
        again.
        """
        return {"backend": self.backend_id, "snapshot": self._snapshot, "model": self.model,
                "base_url": strip_userinfo(self.base_url) if self.base_url else None}

    def fingerprint_facts(self, probe: bool = True) -> dict[str, Any]:
        """The server's model list and, with ``probe``, a one-token answer's identity.

        The identity is the answer's ``model`` and ``system_fingerprint`` (what changes when
        the provider swaps the model).
        """
        facts: dict[str, Any] = {"models": self.list_models()}
        if self.model not in facts["models"]:
            facts["note"] = f"{self.model} is not in the server's model list"
        facts["served"] = self.model in facts["models"]
        if probe:
            answer = self.generate([JudgeRequest(
                messages=(Message("user", ("Reply with the single word OK.",)),),
                slots=(), decoding=Decoding(max_tokens=1, top_logprobs=0),
                template="watch-probe@1")])[0]
            if isinstance(answer, BackendError):
                raise answer
            facts["model"] = answer.model
            facts["system_fingerprint"] = answer.system_fingerprint
        return facts

    def list_models(self) -> list[str]:
        """The server's ``/v1/models`` answer, sorted.

        For lineage: what an OpenAI-compatible server says it serves.
        """
        return sorted(m.id for m in self._client.models.list())

    def generate(self, requests: Sequence[JudgeRequest]) -> list[JudgeResponse | BackendError]:
        """Send each request as its own chat completion; per request a response or an error."""
        return [self._one(r) for r in requests]

    # -- the wire format, shared with the Batch API (capjudge.batch) --------------------------

    @property
    def api(self) -> Any:
        """The ``openai.OpenAI`` client (files and batches for :mod:`capjudge.batch`)."""
        return self._client

    def request_body(self, request: JudgeRequest) -> dict[str, Any]:
        """The ``/v1/chat/completions`` body of a request, exactly as :meth:`generate` sends it.

        It is also a Batch API input line's ``body``.

        Raises:
            capjudge.media_check.MediaChangedError: a picture no longer matches its hash.
        """
        dec = request.decoding
        body: dict[str, Any] = {
            "model": self.model, "messages": to_openai_messages(request),
            "temperature": dec.temperature, "max_tokens": dec.max_tokens,
            "logprobs": True, "top_logprobs": dec.top_logprobs,
        }
        if dec.seed is not None:
            body["seed"] = dec.sampling_seed()  # a new seed per repeat: a new sample
        if is_continuation(request):
            # A follow-up that continues the assistant's own text (vLLM's chat parameters)
            # instead of starting a new turn: see follow_ups().
            body.update({"continue_final_message": True, "add_generation_prompt": False})
        return body

    def parse_completion(self, request: JudgeRequest, body: dict[str, Any],
                         latency_s: float = 0.0) -> JudgeResponse | BackendError:
        """Read a ``chat.completion`` body received outside :meth:`generate`.

        Such a body is a Batch API or ``vllm run-batch`` result line; it is read exactly as
        :meth:`generate` reads its own.
        """
        from openai.types.chat import ChatCompletion

        # construct(), as the SDK itself does: lenient about fields a server adds or omits.
        return self._parse(request, ChatCompletion.construct(**body), latency_s)

    def _one(self, request: JudgeRequest) -> JudgeResponse | BackendError:
        import openai

        if self.model.startswith(NO_LOGPROBS_PREFIXES):
            return BackendError(f"{self.model} does not return log-probabilities (reasoning "
                                "model); choose e.g. gpt-4o or gpt-4.1", transient=False)
        kwargs = self.request_body(request)
        extra = {k: kwargs.pop(k) for k in _CONTINUATION_FIELDS if k in kwargs}
        if extra:
            kwargs["extra_body"] = extra  # not parameters of the SDK's create()
        started = time.perf_counter()
        try:
            completion = self._client.chat.completions.create(**kwargs)
        except openai.RateLimitError as exc:
            return BackendError(f"429 rate limited: {exc.message}", transient=True,
                                retry_after=_retry_after(exc.response.headers))
        except openai.APIStatusError as exc:
            code = exc.status_code
            transient = code in (408, 409) or code >= 500
            auth = is_auth_failure(code, exc.message, getattr(exc, "code", None))
            status: Status = "refused" if code == 403 and not auth else "error"
            return BackendError(f"HTTP {code}: {exc.message}", transient=transient,
                                retry_after=_retry_after(exc.response.headers), status=status,
                                auth=auth)
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            return BackendError(f"{type(exc).__name__}: {exc}", transient=True)
        except (openai.APIResponseValidationError, ValueError) as exc:
            # A malformed body: the server may be restarting; worth one more try.
            return BackendError(f"malformed response: {exc}", transient=True)
        latency = time.perf_counter() - started
        return self._parse(request, completion, latency)

    def _parse(self, request: JudgeRequest, completion: Any, latency: float
               ) -> JudgeResponse | BackendError:
        error = _body_error(completion)
        if error is not None or not completion.choices:
            # A 200 whose body is an error, or has no answer: the server's trouble (a restart, an
            # overloaded worker), worth another try; its message is kept in the reason.
            return BackendError(f"HTTP 200 without an answer: {error or 'no choices'}",
                                transient=True)
        usage = Usage()
        if completion.usage is not None:
            usage = Usage(prompt_tokens=completion.usage.prompt_tokens or 0,
                          completion_tokens=completion.usage.completion_tokens or 0)
        base: dict[str, Any] = {"usage": usage, "model": completion.model or self.model,
                "system_fingerprint": getattr(completion, "system_fingerprint", None),
                "latency_s": latency}
        choice = completion.choices[0]
        message = choice.message
        text = (message.content if message is not None else None) or ""
        refusal = getattr(message, "refusal", None)
        if refusal or choice.finish_reason == "content_filter":
            return JudgeResponse(status="refused", text=text,
                                 reason=f"model refused: {refusal or choice.finish_reason}",
                                 **base)
        tokens: list[TokenLogprob] | None = None
        if choice.logprobs is not None and choice.logprobs.content:
            tokens = [
                TokenLogprob(t.token, t.logprob,
                             tuple((a.token, a.logprob) for a in (t.top_logprobs or [])))
                for t in choice.logprobs.content
            ]
        slots: list[SlotResult] = []
        readings: dict[int, TreeReading] = {}
        for i, slot in enumerate(request.slots):
            if slot.position == "next":
                slots.append(read_next(tokens, slot))
            elif not tokens:
                slots.append(read_text(text, slot))  # text_only: no distribution
            else:
                readings[i] = read_tree(tokens, slot)
                if not self.continue_digits and follow_up_prefixes(readings[i]):
                    readings[i].notes.append(self._continue_off_reason or "")
                slots.append(finish(readings[i], self.min_mass))
        response = _response(text, slots, choice.finish_reason, request, base)
        if tokens:
            # The raw answer, so a change of reading rules re-reads it (reread), never re-asks.
            response.raw = {"tokens": [[t.token, t.logprob, [list(a) for a in t.top]]
                                       for t in tokens],
                            "finish_reason": choice.finish_reason,
                            "notes": {str(i): list(r.notes) for i, r in readings.items()
                                      if r.notes}}
        if self.continue_digits and any(follow_up_prefixes(r) for r in readings.values()):
            joined = "".join(t.token for t in tokens or [])
            with self._pending_lock:
                self._pending[id(response)] = _Pending(joined, readings, set(), [])
        return response

    def reread(self, request: JudgeRequest, response: JudgeResponse) -> JudgeResponse:
        """A cached answer under the current settings and reading rules (never asked again).

        An answer stored under other reading rules (:data:`READING_RULES_VERSION`) is read
        again from its raw tokens and follow-up continuations; otherwise only ``min_mass`` is
        re-applied (:meth:`Backend.reread`).
        """
        stale = response.read_with.get("reading_rules") != READING_RULES_VERSION
        if stale and response.raw and response.raw.get("tokens") and request.slots:
            return _reread_raw(self, request, response)
        return super().reread(request, response)

    # -- continuation follow-ups (digit-split tokenizers) -----------------------------------

    def follow_ups(self, request: JudgeRequest, response: JudgeResponse
                   ) -> list[JudgeRequest]:
        """One continuation request per likely, unobserved leading-digit prefix.

        A prefix qualifies with at least :data:`~capjudge.backends.logprobs.FOLLOW_UP_MIN_P`
        probability. Each request is the conversation, then the assistant's own output up to
        and including that prefix ("... The final score is $9"), asking for one token with its
        top-20 alternatives (the next digit or the end of the number).
        """
        with self._pending_lock:
            pending = self._pending.get(id(response))
        if pending is None or not self.continue_digits:
            return []
        out: list[JudgeRequest] = []
        pending.batch = []
        for i, reading in sorted(pending.readings.items()):
            assert reading.located is not None
            for prefix in follow_up_prefixes(reading):
                if (i, prefix) in pending.asked:
                    continue
                pending.asked.add((i, prefix))
                pending.batch.append((i, prefix))
                slot = request.slots[i]
                content = pending.text[: reading.located.start] + prefix
                out.append(JudgeRequest(
                    messages=(*request.messages, Message("assistant", (content,))),
                    slots=(next_slot(f"{slot.name}@{prefix}"),),
                    decoding=replace(request.decoding, max_tokens=1, top_logprobs=20),
                    template=f"{request.template}+continue", tag=f"{request.tag}|{prefix}"))
        if not out:
            with self._pending_lock:
                self._pending.pop(id(response), None)
        return out

    def complete(self, request: JudgeRequest, response: JudgeResponse,
                 follow_ups: Sequence[JudgeRequest], answers: Sequence[JudgeResponse]
                 ) -> JudgeResponse:
        """The response with the follow-ups' next-digit distributions in its digit trees."""
        with self._pending_lock:
            pending = self._pending.pop(id(response), None)
        if pending is None:
            return response
        usage = Usage(response.usage.prompt_tokens, response.usage.completion_tokens)
        raw = dict(response.raw or {})
        followed: dict[str, dict[str, Any]] = {
            k: dict(v) for k, v in (raw.get("after") or {}).items()}
        for (i, prefix), answer in zip(pending.batch, answers, strict=True):
            reading = pending.readings[i]
            if not answer.cached:
                usage.prompt_tokens += answer.usage.prompt_tokens
                usage.completion_tokens += answer.usage.completion_tokens
            node = continuation_from_result(answer.slots[0]) if answer.slots else None
            if answer.status == "ok" and node is not None:
                add_continuation(reading, prefix, node)
                followed.setdefault(str(i), {})[prefix] = dict(node)  # kept raw (reread)
                continue
            why = answer.reason or (answer.slots[0].reason if answer.slots else None)
            if answer.status == "error" and why and "HTTP 4" in why:
                # The server refuses continuation requests: no more follow-ups from here on.
                self.continue_digits = False
                self._continue_off_reason = ("the server cannot continue an assistant message "
                                             f"({why}); continuation follow-ups turned off")
                note = self._continue_off_reason
            else:
                note = f"the follow-up for {prefix!r} failed ({why})"
            if note not in reading.notes:
                reading.notes.append(note)
        slots = list(response.slots)
        for i, reading in pending.readings.items():
            slots[i] = finish(reading, self.min_mass)
        base = {"usage": usage, "model": response.model,
                "system_fingerprint": response.system_fingerprint,
                "latency_s": response.latency_s}
        done = _response(response.text, slots, None, request, base)
        if raw:
            done.raw = {**raw, "after": followed,
                        "notes": {str(i): list(r.notes) for i, r in pending.readings.items()
                                  if r.notes}}
        if self.continue_digits and any(
                set(follow_up_prefixes(r)) - {p for j, p in pending.asked if j == i}
                for i, r in pending.readings.items()):
            with self._pending_lock:
                self._pending[id(done)] = pending  # "10" after "1": another round
        return done


def _reread_raw(backend: OpenAIBackend, request: JudgeRequest, response: JudgeResponse
                ) -> JudgeResponse:
    """``response`` read again from its raw tokens under the current reading rules."""
    raw = response.raw or {}
    tokens = [TokenLogprob(str(t), float(lp), tuple((str(a), float(b)) for a, b in top))
              for t, lp, top in raw["tokens"]]
    after = raw.get("after") or {}
    notes = raw.get("notes") or {}
    slots: list[SlotResult] = []
    for i, slot in enumerate(request.slots):
        if slot.position == "next":
            slots.append(read_next(tokens, slot))
            continue
        reading = read_tree(tokens, slot)
        for prefix, node in (after.get(str(i)) or {}).items():
            add_continuation(reading, prefix, node)
        reading.notes.extend(n for n in notes.get(str(i), []) if n not in reading.notes)
        slots.append(finish(reading, backend.min_mass))
    base = {"usage": response.usage, "model": response.model,
            "system_fingerprint": response.system_fingerprint,
            "latency_s": response.latency_s}
    done = _response(response.text, slots, raw.get("finish_reason"), request, base)
    done.raw = raw
    done.attempts = response.attempts
    done.read_with = {**response.read_with, "reading_rules": READING_RULES_VERSION,
                      "min_mass": backend.min_mass}
    return done


@dataclass
class _Pending:
    """A response whose digit trees wait for follow-ups.

    Keyed by the response's id() while the client finishes it; never stored.

    Attributes:
        text: the answer's text as its tokens spell it (the offsets refer to it).
        readings: slot index -> its digit-tree reading.
        asked: (slot index, prefix) already asked, so a failed one is not asked again.
        batch: what the last :meth:`OpenAIBackend.follow_ups` asked, in order.
    """

    text: str
    readings: dict[int, TreeReading]
    asked: set[tuple[int, str]] = field(default_factory=set)
    batch: list[tuple[int, str]] = field(default_factory=list)


def is_continuation(request: JudgeRequest) -> bool:
    """A request that ends with the assistant's own text asks the server to continue it."""
    return bool(request.messages) and request.messages[-1].role == "assistant"


def _body_error(completion: Any) -> str | None:
    """The ``error`` object of a 200 body that carries one, as text.

    Some proxies and servers send such a body instead of an error status.
    """
    extra = getattr(completion, "model_extra", None) or {}
    error = extra.get("error") if isinstance(extra, dict) else None
    if error is None:
        return None
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)


def _response(text: str, slots: list[SlotResult], finish_reason: str | None,
              request: JudgeRequest, base: dict[str, Any]) -> JudgeResponse:
    status = worst_status([s.status for s in slots])
    reason = "; ".join(f"{s.name}: {s.reason}" for s in slots if s.status != "ok") or None
    if finish_reason == "length" and status not in ("ok", "text_only"):
        reason = f"output cut at max_tokens ({request.decoding.max_tokens}); {reason}"
    return JudgeResponse(status=status, text=text, slots=slots, reason=reason, **base)
