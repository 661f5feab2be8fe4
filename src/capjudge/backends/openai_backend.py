"""``openai/<model>``: the OpenAI API or any OpenAI-compatible server (vLLM, SGLang, Ollama).

Chat completions with images as base64 data URLs, ``logprobs=True`` and ``top_logprobs`` (20 by
default). The API key comes only from the environment (``OPENAI_API_KEY`` or the variable named
by ``api_key_env``); the base URL from ``base_url`` or ``OPENAI_BASE_URL``, as the openai client
does. The client is created with ``max_retries=0``: retries, backoff and rate limiting are done
once, for every backend, by :class:`capjudge.client.JudgeClient`.
"""

from __future__ import annotations

import base64
import mimetypes
import os
import time
from collections.abc import Sequence
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
    Status,
    Usage,
    worst_status,
)
from capjudge.backends.logprobs import TokenLogprob, read_slot

# Reasoning models refuse logprobs requests (HTTP 403): they cannot give a distribution.
NO_LOGPROBS_PREFIXES = ("o1", "o3", "o4", "gpt-5")


def image_data_url(path: str) -> str:
    """A file as a ``data:`` URL (PNG/JPEG/WebP/GIF by extension)."""
    mime = mimetypes.guess_type(path)[0] or "image/png"
    with open(path, "rb") as handle:
        return f"data:{mime};base64,{base64.b64encode(handle.read()).decode('ascii')}"


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
                    "url": image_data_url(part.path), "detail": part.detail}})
            elif part:
                content.append({"type": "text", "text": part})
        out.append({"role": message.role, "content": content})
    return out


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
                         "vision", "snapshot"})
    default_concurrency = 8

    def __init__(self, model: str, *, base_url: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", timeout_s: float = 120.0,
                 min_mass: float = 0.5, concurrency: int = 8, vision: bool = True,
                 snapshot: str | None = None) -> None:
        import openai

        self.model = model
        self.backend_id = f"openai/{model}"
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
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

    def snapshot(self) -> str:
        return self._snapshot

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend_id, "snapshot": self._snapshot, "model": self.model,
                "base_url": self.base_url}

    def fingerprint_facts(self, probe: bool = True) -> dict[str, Any]:
        """The server's model list and, with ``probe``, a one-token answer's ``model`` and
        ``system_fingerprint`` (what changes when the provider swaps the model)."""
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
        """The server's ``/v1/models`` answer (lineage: what an OpenAI-compatible server says
        it serves)."""
        return sorted(m.id for m in self._client.models.list())

    def generate(self, requests: Sequence[JudgeRequest]) -> list[JudgeResponse | BackendError]:
        return [self._one(r) for r in requests]

    def _one(self, request: JudgeRequest) -> JudgeResponse | BackendError:
        import openai

        if self.model.startswith(NO_LOGPROBS_PREFIXES):
            return BackendError(f"{self.model} does not return log-probabilities (reasoning "
                                "model); choose e.g. gpt-4o or gpt-4.1", transient=False)
        dec = request.decoding
        kwargs: dict[str, Any] = {
            "model": self.model, "messages": to_openai_messages(request),
            "temperature": dec.temperature, "max_tokens": dec.max_tokens,
            "logprobs": True, "top_logprobs": dec.top_logprobs,
        }
        if dec.seed is not None:
            kwargs["seed"] = dec.seed
        started = time.perf_counter()
        try:
            completion = self._client.chat.completions.create(**kwargs)
        except openai.RateLimitError as exc:
            return BackendError(f"429 rate limited: {exc.message}", transient=True,
                                retry_after=_retry_after(exc.response.headers))
        except openai.APIStatusError as exc:
            code = exc.status_code
            transient = code in (408, 409) or code >= 500
            status: Status = "refused" if code == 403 else "error"
            return BackendError(f"HTTP {code}: {exc.message}", transient=transient,
                                retry_after=_retry_after(exc.response.headers), status=status)
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            return BackendError(f"{type(exc).__name__}: {exc}", transient=True)
        except (openai.APIResponseValidationError, ValueError) as exc:
            # A malformed body: the server may be restarting; worth one more try.
            return BackendError(f"malformed response: {exc}", transient=True)
        latency = time.perf_counter() - started
        return self._parse(request, completion, latency)

    def _parse(self, request: JudgeRequest, completion: Any, latency: float) -> JudgeResponse:
        usage = Usage()
        if completion.usage is not None:
            usage = Usage(prompt_tokens=completion.usage.prompt_tokens or 0,
                          completion_tokens=completion.usage.completion_tokens or 0)
        base: dict[str, Any] = {"usage": usage, "model": completion.model or self.model,
                "system_fingerprint": getattr(completion, "system_fingerprint", None),
                "latency_s": latency}
        if not completion.choices:
            return JudgeResponse(status="error", reason="response has no choices", **base)
        choice = completion.choices[0]
        message = choice.message
        text = message.content or ""
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
        slots = [read_slot(tokens, text, slot, self.min_mass) for slot in request.slots]
        status = worst_status([s.status for s in slots])
        reason = "; ".join(f"{s.name}: {s.reason}" for s in slots if s.status != "ok") or None
        if choice.finish_reason == "length" and status != "ok":
            reason = f"output cut at max_tokens ({request.decoding.max_tokens}); {reason}"
        return JudgeResponse(status=status, text=text, slots=slots, reason=reason, **base)
