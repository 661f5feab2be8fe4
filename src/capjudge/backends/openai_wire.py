"""The OpenAI chat-completions wire format, as :mod:`capjudge.backends.openai_backend` speaks it.

What goes out (:class:`ChatBody`, :func:`to_openai_messages`, pictures as ``data:`` URLs typed
by their content: :func:`image_data_url`) and how what comes back is told apart: error bodies
as statuses (:func:`error_from_body`, :func:`no_image_input`, :func:`is_auth_failure`),
``Retry-After`` headers (:func:`retry_after_s`), a 200 that is not a chat completion
(:func:`not_a_completion`, :func:`body_error`), a bare server address as its API
(:func:`with_api_path`), and what the server reports over the calls (:class:`ServerStats`).
Nothing here holds a connection; llama.cpp's server and llama.cpp's in-process backend
(:mod:`capjudge.backends.llamacpp`) use the same format.

llama.cpp specifics: it is asked for :data:`LLAMACPP_TOP_LOGPROBS` alternatives per token (it
has no cap of 20); its logprobs entries carry token ``id`` and ``bytes`` (the token
text is what is read; digits are ASCII), its usage's ``prompt_tokens_details.cached_tokens`` and
its ``timings`` object are summed in :attr:`OpenAIBackend.server_stats`, and each answer's
timings (summed over its follow-ups) are on the response
(:class:`~capjudge.protocol.ServerTimings`; a judgement row's ``server_timings``); its
errors are statuses: a context overflow (``exceed_context_size_error``) a non-transient error
naming it, an unavailable slot/server (503) transient.
"""

from __future__ import annotations

import base64
import logging
import mimetypes
import re
from dataclasses import dataclass
from typing import Any, Required, TypedDict

from capjudge.media_check import read_verified
from capjudge.protocol import (
    BackendError,
    ChatMessage,
    ContentPart,
    ImagePart,
    JudgeRequest,
    Status,
)
from capjudge.records import JSONValue
from capjudge.util.credentials import strip_userinfo

log = logging.getLogger(__name__)


# Reasoning models refuse logprobs requests (HTTP 403): they cannot give a distribution.
NO_LOGPROBS_PREFIXES = ("o1", "o3", "o4", "gpt-5")


# vLLM's chat parameters of a continuation: body fields, passed through the SDK's extra_body.
CONTINUATION_FIELDS = ("continue_final_message", "add_generation_prompt")


class ChatBody(TypedDict, total=False):
    """A ``/v1/chat/completions`` request body as this backend sends it.

    ``continue_final_message`` and ``add_generation_prompt`` are vLLM's (a continuation).
    """

    model: Required[str]
    messages: Required[list[ChatMessage]]
    temperature: float
    max_tokens: int
    logprobs: bool
    top_logprobs: int
    seed: int | None
    continue_final_message: bool
    add_generation_prompt: bool
    response_format: dict[str, JSONValue]
    cache_prompt: bool  # llama.cpp: reuse the slot's cached prompt prefix
    # llama.cpp, deterministic: the prefix to put in the slot first (never sent as a field).
    capjudge_primer: list[ChatMessage]


LLAMACPP_TOP_LOGPROBS = 200
"""Alternatives asked of llama.cpp per token (it has no cap of 20; costs ~nothing, measured).

A score read at a forced answer start ("Output the score first" to a base model that starts
"Your task is ...") has its digits at ~0.1-1 % each: with 20 alternatives only "1" is seen,
with 200 all of 1-5 are. The request (and its cache key) still says what the method asked."""


CONTINUATIONS = ("auto", "continue_final_message", "prefill")
"""The ``continuation`` option: how a follow-up asks the server to continue the assistant."""


@dataclass
class ServerStats:
    """What the server reported over this backend's calls (summed; llama.cpp fills timings).

    Attributes:
        calls: answers read.
        prompt_tokens: prompt tokens reported in usage.
        cached_tokens: prompt tokens the server reused from its cache
            (``usage.prompt_tokens_details.cached_tokens``, llama.cpp's ``timings.cache_n``).
        completion_tokens: generated tokens.
        prompt_ms: time the server spent on prompts (``timings.prompt_ms``).
        predicted_ms: time the server spent generating (``timings.predicted_ms``).
    """

    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    prompt_ms: float = 0.0
    predicted_ms: float = 0.0

    def add(self, usage: Any, timings: Any) -> None:
        """Add one answer's ``usage`` and ``timings`` objects (JSON, as the server sent them)."""
        self.calls += 1
        if isinstance(usage, dict):
            self.prompt_tokens += usage.get("prompt_tokens") or 0
            self.completion_tokens += usage.get("completion_tokens") or 0
            details = usage.get("prompt_tokens_details")
            cached = details.get("cached_tokens") if isinstance(details, dict) else None
            if cached is None and isinstance(timings, dict):
                cached = timings.get("cache_n")
            self.cached_tokens += int(cached or 0)
        if isinstance(timings, dict):
            self.prompt_ms += float(timings.get("prompt_ms") or 0.0)
            self.predicted_ms += float(timings.get("predicted_ms") or 0.0)


def error_from_body(code: int | None, body: Any, message: str | None = None) -> BackendError:
    """An error answer (HTTP status and JSON body) as a :class:`BackendError` with a status.

    llama.cpp's error objects carry a ``type``: ``exceed_context_size_error`` (the prompt does
    not fit the context: non-transient, retrying cannot help), ``unavailable_error`` (loading,
    no free slot: transient). Otherwise the status code decides: 408, 409, 429 and 5xx are
    transient, 403 is a refusal.
    """
    error = body.get("error", body) if isinstance(body, dict) else body
    if message is None:
        message = str(error.get("message") or error) if isinstance(error, dict) else str(error)
    kind = error.get("type") if isinstance(error, dict) else None
    if code is None and isinstance(error, dict) and isinstance(error.get("code"), int):
        code = int(error["code"])
    if kind == "exceed_context_size_error":
        return BackendError(f"context overflow (HTTP {code}): {message}", transient=False)
    if kind == "unavailable_error":
        return BackendError(f"server unavailable (HTTP {code}): {message}", transient=True)
    if no_image_input(message):
        # llama.cpp without a projector answers 500 to an image: retrying cannot help.
        return BackendError(f"the server's model takes no images (HTTP {code}): {message}",
                            transient=False)
    transient = code is None or code in (408, 409, 429) or code >= 500
    status: Status = "refused" if code == 403 else "error"
    return BackendError(f"HTTP {code}: {message}", transient=transient, status=status)


_NO_IMAGES = re.compile(
    r"\b(?:image|images|vision|multimodal|mmproj|image_url)\b[^.]{0,60}?\b(?:not supported|"
    r"unsupported|is not enabled|not enabled|does not support|doesn't support|cannot|"
    r"can't)\b|\b(?:does not|doesn't|cannot|can't) (?:support|accept|process|handle)\b"
    r"[^.]{0,30}?\b(?:image|images|vision|multimodal|image_url)\b", re.IGNORECASE)


def no_image_input(message: str) -> bool:
    """Whether an error message says the model or server takes no image input."""
    return bool(_NO_IMAGES.search(message or ""))


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


def to_openai_messages(request: JudgeRequest) -> list[ChatMessage]:
    """Our neutral messages in the chat-completions wire format."""
    out: list[ChatMessage] = []
    for message in request.messages:
        if not message.images:
            out.append({"role": message.role, "content": message.text()})
            continue
        content: list[ContentPart] = []
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


def retry_after_s(headers: Any) -> float | None:
    """The wait a ``Retry-After-Ms`` or ``Retry-After`` header asks for, in seconds (None: none).

    An HTTP date is not read (None): the client falls back to its own backoff.
    """
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


def is_continuation(request: JudgeRequest) -> bool:
    """A request that ends with the assistant's own text asks the server to continue it."""
    return bool(request.messages) and request.messages[-1].role == "assistant"


def with_api_path(base_url: str | None) -> str | None:
    """``http://host:8000`` as ``http://host:8000/v1``: a bare server address means its API.

    OpenAI-compatible servers (vLLM, llama.cpp, TGI, Ollama) serve it under ``/v1``; a URL
    with a path of its own is taken as it is.
    """
    if not base_url:
        return base_url
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(base_url)
    if parts.path.strip("/") == "":
        fixed = urlunsplit(parts._replace(path="/v1"))
        log.info("base URL %s has no path: using %s", strip_userinfo(base_url),
                 strip_userinfo(fixed))
        return fixed
    return base_url


def not_a_completion(completion: Any) -> str | None:
    """What came back instead of a chat completion (its first characters), or None.

    A string (an HTML page, text: no JSON at all), JSON that is no object, or a JSON object
    with neither ``choices`` nor an ``error`` nor the ``chat.completion`` object type.
    """
    if completion is None:
        return "an empty body"
    if isinstance(completion, str | bytes):
        text = completion.decode(errors="replace") if isinstance(completion, bytes) \
            else completion
        kind = "an HTML page" if "<html" in text[:2000].lower() or \
            "<!doctype" in text[:200].lower() else "text"
        return f"{kind}: {' '.join(text.split())[:80]!r}"
    if not isinstance(completion, dict):
        return f"JSON that is no object ({type(completion).__name__}: {str(completion)[:60]!r})"
    if completion.get("choices") is not None or body_error(completion):
        return None
    if completion.get("object") == "chat.completion":
        return None
    return f"a JSON object with the keys {sorted(completion)[:8]} and no 'choices'"


def body_error(completion: Any) -> str | None:
    """The ``error`` object of a 200 body that carries one, as text.

    Some proxies and servers send such a body instead of an error status.
    """
    error = completion.get("error") if isinstance(completion, dict) else None
    if error is None:
        return None
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)
