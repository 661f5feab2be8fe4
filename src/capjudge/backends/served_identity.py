"""Which weights an OpenAI-compatible server is serving: asked of the server itself.

A served model name says nothing about the weights behind it: the same name can be served again
with other weights (a re-quantised GGUF at the same path, a new fine-tune under the same alias),
and llama.cpp's ``system_fingerprint`` is its build (``b0-unknown`` whatever the weights). So
before a run the backend asks what the server reports about the weights, in the server's own
terms, and the answer becomes part of the snapshot, the cache key and the lineage:

================  =============================================  ============================
server            where it says                                  what identifies the weights
================  =============================================  ============================
``capjudge serve``  ``/v1/models`` entry ``tags``: ``sha256:<hex>``  the GGUF's sha256
llama.cpp         ``/props`` (``model_path``, ``modalities``),     nothing (path and shape
                  ``/v1/models`` ``meta`` (size, parameters)       only: *unpinned*)
Ollama            ``/api/tags`` ``models[].digest``               the model's digest
TGI               ``/info`` ``model_sha``                         the model repository's sha
vLLM              ``/v1/models`` ``root``                         a Hugging Face cache path's
                                                                 ``snapshots/<commit>``
================  =============================================  ============================

Anything else the server says (a path, a size, a parameter count, a build) is kept as *facts*:
they join the cache key, so a different file is never answered from another's cache, but they
cannot tell two equal-sized weight files apart, so they do not pin the snapshot. A server that
reports nothing identifying is *unpinned*: every run says so, ``capjudge watch`` says it cannot
watch the judge, and the user pins it (``backend_options.snapshot``).

A server that cannot be reached at all is an error naming the URL (:class:`ServerUnreachable`):
a run never goes on from the request cache alone against a wrong address.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from capjudge.records import JSONValue
from capjudge.util.credentials import strip_userinfo

PROBE_TIMEOUT_S = 10.0
"""How long one identity request may take (they are small GETs)."""

_SHA256 = re.compile(r"^(?:sha256[:-])?([0-9a-f]{64})$")
_HF_SNAPSHOT = re.compile(r"/snapshots/([0-9a-f]{40})(?:/|$)")


class ServerUnreachable(OSError):
    """The server did not answer at all (refused, unknown host, timed out)."""


@dataclass(frozen=True)
class ServedIdentity:
    """What a server said about the weights behind one served model name.

    Attributes:
        weights: what identifies the weights' content (``gguf-sha256:<hex>``,
            ``ollama-digest:<hex>``, ``tgi-sha:<sha>``, ``hf-revision:<commit>``), or None.
        source: where ``weights`` came from (an endpoint), or why there is none.
        facts: everything else the server said that describes the model (path, size,
            parameter count, build); JSON.
        vision: whether the server says the model takes images (None: it does not say).
        server: the server software recognised from its answers (``llama.cpp``, ``ollama``,
            ``tgi``, ``vllm``), or None.
    """

    weights: str | None
    source: str
    facts: dict[str, JSONValue] = field(default_factory=dict)
    vision: bool | None = None
    server: str | None = None
    listed: bool = True
    """Whether ``/v1/models`` answered as an OpenAI-compatible list (to the key sent)."""

    @property
    def pinned(self) -> bool:
        """Whether the server identified the weights' content."""
        return self.weights is not None

    def facts_key(self) -> str:
        """A short hash of the facts (empty when there are none): joins the cache key."""
        if not self.facts:
            return ""
        blob = json.dumps(self.facts, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


def server_root(api_url: str) -> str:
    """``http://host:8080/v1`` as ``http://host:8080`` (where ``/props``, ``/info`` live)."""
    parts = urlsplit(api_url)
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit(parts._replace(path=path, query="", fragment="")).rstrip("/")


def _get(url: str, headers: Mapping[str, str], timeout_s: float) -> Any:
    """GET ``url`` as JSON; None for an HTTP error or a body that is not JSON.

    Raises:
        ServerUnreachable: nothing answered (connection refused, unknown host, timeout).
    """
    request = urllib.request.Request(url, headers=dict(headers))  # noqa: S310 - the user's server
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:  # noqa: S310
            raw = answer.read(4 << 20)
    except urllib.error.HTTPError:
        return None  # it answered: the endpoint is not this server's
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ServerUnreachable(f"{type(reason).__name__}: {reason}") from None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _entry(models: Any, model: str) -> dict[str, Any] | None:
    """The ``/v1/models`` entry serving ``model`` (by id or alias), or None."""
    data = models.get("data") if isinstance(models, dict) else None
    for entry in data if isinstance(data, list) else []:
        if isinstance(entry, dict) and (entry.get("id") == model
                                        or model in (entry.get("aliases") or [])):
            return entry
    return None


def _from_models_entry(entry: dict[str, Any], facts: dict[str, JSONValue]
                       ) -> tuple[str | None, str | None, bool | None]:
    """(weights, source, vision) from an OpenAI-style models entry; fills ``facts``."""
    weights = source = None
    projector = ""
    for tag in entry.get("tags") or []:
        text = str(tag).strip().lower()
        match = _SHA256.match(text)
        if match:  # ``capjudge serve`` tags its model with the GGUF's sha256
            weights, source = f"gguf-sha256:{match.group(1)}", "/v1/models tags"
        elif text.startswith("mmproj-sha256:"):  # and with its projector's, if any
            projector = "+mmproj:" + text.removeprefix("mmproj-sha256:")[:16]
    if weights is not None:
        weights += projector
    meta = entry.get("meta")
    if isinstance(meta, dict):  # llama.cpp: the model's shape and file size
        facts.update({f"meta.{k}": v for k, v in sorted(meta.items())
                      if k in ("n_params", "size", "ftype", "n_vocab", "n_embd",
                               "n_ctx_train")})
    root = entry.get("root")
    if isinstance(root, str) and root:  # vLLM: what it loaded (a path or a repository id)
        facts["root"] = root
        commit = _HF_SNAPSHOT.search(root)
        if commit and weights is None:
            weights, source = f"hf-revision:{commit.group(1)}", "/v1/models root"
    modalities = (entry.get("architecture") or {}).get("input_modalities") \
        if isinstance(entry.get("architecture"), dict) else None
    vision = ("image" in modalities) if isinstance(modalities, list) else None
    return weights, source, vision


def server_of(owners: Iterable[object]) -> str | None:
    """The server a model list's ``owned_by`` values name (``llama.cpp``, ``vllm``), or None."""
    seen = set(owners)
    return "llama.cpp" if "llamacpp" in seen else "vllm" if "vllm" in seen else None


def _llamacpp_props(props: Any, facts: dict[str, JSONValue]) -> bool | None:
    """llama.cpp's ``/props``: path, build and whether it takes images; fills ``facts``."""
    for key in ("model_path", "build_info", "model_ftype"):
        if isinstance(props.get(key), str | int) and props.get(key) != "":
            facts[key] = props[key]
    modalities = props.get("modalities")
    return bool(modalities.get("vision")) if isinstance(modalities, dict) else None


def _ollama_digest(tags: Any, model: str) -> str | None:
    """The ``digest`` of ``model`` in Ollama's ``/api/tags`` (``name`` or ``model``)."""
    wanted = {model, model if ":" in model else f"{model}:latest"}
    for entry in (tags.get("models") or []) if isinstance(tags, dict) else []:
        if isinstance(entry, dict) and {entry.get("name"), entry.get("model")} & wanted:
            digest = str(entry.get("digest") or "").removeprefix("sha256:")
            return digest or None
    return None


def probe_identity(api_url: str, model: str, api_key: str | None = None,
                   timeout_s: float = PROBE_TIMEOUT_S) -> ServedIdentity:
    """Ask the server at ``api_url`` what it reports about the weights of ``model``.

    Args:
        api_url: the OpenAI-compatible base URL (``http://host:port/v1``).
        model: the served model name the judge asks for.
        api_key: sent as a bearer token (servers started with a key need it on every route).
        timeout_s: per request.

    Returns:
        The identity: pinned when the server identified the weights' content.

    Raises:
        ServerUnreachable: the server did not answer at all; the message names the URL
            (without credentials).
    """
    headers = {"Accept": "application/json"}
    if api_key and api_key != "EMPTY":
        headers["Authorization"] = f"Bearer {api_key}"
    root = server_root(api_url)
    shown = strip_userinfo(api_url)
    try:
        models = _get(api_url.rstrip("/") + "/models", headers, timeout_s)
    except ServerUnreachable as exc:
        raise ServerUnreachable(f"cannot reach the judge server at {shown}: {exc}") from None
    if not isinstance(models, dict) or not isinstance(models.get("data"), list):
        # Not an OpenAI-compatible server (a sign-in page, another API): nothing more is
        # asked of it; the first request says what it is.
        return ServedIdentity(weights=None, source=f"{shown}/models did not answer as an "
                              "OpenAI-compatible model list", listed=False)
    facts: dict[str, JSONValue] = {}
    entry = _entry(models, model)
    weights, source, vision = _from_models_entry(entry, facts) if entry else (None, None, None)
    server = server_of(e.get("owned_by") for e in models["data"] if isinstance(e, dict))
    try:
        weights, source, vision, server = _other_endpoints(
            root, model, headers, timeout_s, facts, (weights, source, vision, server))
    except ServerUnreachable:
        pass  # /v1/models answered: a later hiccup leaves what was learnt
    return ServedIdentity(weights=weights, source=source or _unpinned_reason(server),
                          facts=facts, vision=vision, server=server)


def _other_endpoints(root: str, model: str, headers: Mapping[str, str], timeout_s: float,
                     facts: dict[str, JSONValue],
                     known: tuple[str | None, str | None, bool | None, str | None]
                     ) -> tuple[str | None, str | None, bool | None, str | None]:
    """llama.cpp's ``/props``, TGI's ``/info``, Ollama's ``/api/tags``: what each adds."""
    weights, source, vision, server = known
    props = _get(root + "/props", headers, timeout_s)
    if isinstance(props, dict) and ("model_path" in props or "build_info" in props):
        server = "llama.cpp"
        said = _llamacpp_props(props, facts)
        vision = said if said is not None else vision
    info = _get(root + "/info", headers, timeout_s)
    if isinstance(info, dict) and "model_id" in info:
        server = "tgi"
        facts["model_id"] = info["model_id"]
        if info.get("model_sha") and weights is None:
            weights, source = f"tgi-sha:{info['model_sha']}", "/info model_sha"
    if server is None or weights is None:
        tags = _get(root + "/api/tags", headers, timeout_s)
        digest = _ollama_digest(tags, model) if tags is not None else None
        if digest:
            server = "ollama"
            weights, source = weights or f"ollama-digest:{digest}", source or "/api/tags digest"
    return weights, source, vision, server


def _unpinned_reason(server: str | None) -> str:
    """Why a server's answer identifies no weights, in one clause."""
    if server == "llama.cpp":
        return ("llama.cpp reports the model's path and shape but no hash of its weights "
                "(capjudge serve adds one)")
    if server == "vllm":
        return "vLLM reports what it loaded, but no revision of the weights"
    return "the server reports nothing that identifies the weights behind the model name"


_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")
UNREACHABLE_TRIES = 3
"""How often an unreachable server is asked before the run fails (one starting up)."""


class ServedModel:
    """One served model name and what is known of the weights behind it, asked once.

    The remote backends' home of the snapshot: :meth:`snapshot` (what rows record and the
    cache keys on), :meth:`pinning` (whether a weight change could be seen), and the facts for
    lineage and the watch flow. Asked lazily, once, thread-safely.

    Args:
        model: the served model name.
        api_url: the server's base URL; None: OpenAI's own API (nothing to ask: a dated model
            name is a snapshot OpenAI keeps fixed, an undated one an alias it moves).
        api_key: sent with the identity requests.
        configured: ``backend_options.snapshot``: the user's pin.
        timeout_s: per identity request.
    """

    def __init__(self, model: str, api_url: str | None, api_key: str | None = None,
                 configured: str | None = None, timeout_s: float = PROBE_TIMEOUT_S) -> None:
        self.model = model
        self.api_url = api_url
        self.configured = configured
        self._api_key = api_key
        self._timeout_s = min(timeout_s, PROBE_TIMEOUT_S)
        self._identity: ServedIdentity | None = None
        self._lock = threading.Lock()

    @property
    def remote_server(self) -> bool:
        """A server of the user's (a base URL other than OpenAI's API): it can be asked."""
        return self.api_url is not None and "api.openai.com" not in self.api_url

    def identity(self) -> ServedIdentity | None:
        """What the server says (asked the first time); None for OpenAI's own API.

        Raises:
            ServerUnreachable: the server did not answer (after :data:`UNREACHABLE_TRIES`).
        """
        if not self.remote_server:
            return None
        with self._lock:
            if self._identity is None:
                self._identity = self._ask()
            return self._identity

    def _ask(self) -> ServedIdentity:
        assert self.api_url is not None
        for attempt in range(UNREACHABLE_TRIES):
            try:
                return probe_identity(self.api_url, self.model, self._api_key,
                                      self._timeout_s)
            except ServerUnreachable:
                if attempt == UNREACHABLE_TRIES - 1:
                    raise
                time.sleep(0.5 * (attempt + 1))
        raise AssertionError("not reached")

    def snapshot(self) -> str:
        """What rows record and the cache keys on.

        The pin (or the model name), then ``@`` and the server's weights identity where it
        gave one; an unpinned server's other facts (path, size, build) as ``~facts:<hash>``,
        so another file behind the same name is never answered from this one's cache.
        """
        base = self.configured or self.model
        identity = self.identity()
        if identity is None:
            return base
        if identity.weights is not None:
            kind, _, value = identity.weights.partition(":")
            return f"{base}@{kind}:{value[:16]}"
        key = identity.facts_key()
        return f"{base}~facts:{key}" if key else base

    def pinning(self) -> tuple[bool, str]:
        """(pinned, how or why not): whether a weight change behind the name would be seen."""
        identity = self.identity()
        if identity is not None and identity.weights is not None:
            return True, f"the server reports {identity.weights} ({identity.source})"
        if self.configured:
            return True, f"pinned by backend_options.snapshot: {self.configured}"
        if identity is None:
            if _DATED.search(self.model):
                return True, f"{self.model} is a dated snapshot"
            return False, (f"{self.model} is an alias the provider can move to other weights; "
                           "name a dated snapshot or set backend_options.snapshot")
        return False, (f"{identity.source}; a weight change behind the name "
                       f"{self.model!r} would not be seen: pin it with "
                       "backend_options.snapshot")
