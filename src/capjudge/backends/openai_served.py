"""Which server and weights an ``openai/<model>`` backend talks to (issue 39).

What :class:`~capjudge.backends.openai_backend.OpenAIBackend` asks before its first request and
says about itself: the server recognised once from its model list (llama.cpp, vLLM: the
continuation convention and anchor forcing follow), the weights' identity joined to the
snapshot (:mod:`capjudge.backends.served_identity`), the facts ``describe`` and ``watch``
read, and whether the server listed its models to the key.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from typing import Any

from capjudge.backends.base import Backend
from capjudge.backends.served_identity import (
    ServedIdentity,
    ServedModel,
    ServerUnreachable,
    server_of,
)
from capjudge.protocol import (
    BackendError,
    BackendFacts,
    Decoding,
    JudgeRequest,
    Message,
)
from capjudge.records import JSONValue
from capjudge.util.credentials import strip_userinfo

log = logging.getLogger(__name__)


class OpenAIServed(Backend):
    """The served model's identity and the server's kind, for an OpenAI-protocol backend."""

    model: str
    backend_id: str
    base_url: str | None
    server: str | None
    continuation: str
    continue_digits: bool
    _force_anchor: bool | None
    _detected: bool
    _detect_lock: threading.Lock
    _client: Any
    _listed: bool | None
    # Subclasses that serve in process (llama.cpp) have no server to ask.
    _served: ServedModel | None = None

    def _detect_server(self) -> None:
        """Recognise llama.cpp or vLLM once from the model list's ``owned_by``.

        It decides the continuation convention and anchor forcing (see the module doc).
        An unreachable list leaves both as configured.
        """
        # Held while asking: concurrent first requests wait, so every answer is read alike.
        with self._detect_lock:
            if self._detected:
                return
            server: str | None
            if self._served is not None and self._served.remote_server:
                # Already asked with the weights' identity: no second request.
                try:
                    identity = self._served.identity()
                except ServerUnreachable:
                    identity = None
                server = identity.server if identity else None
            else:
                try:
                    server = server_of(getattr(m, "owned_by", None)
                                       for m in self._client.models.list())
                except Exception:  # noqa: BLE001 - best effort; the requests say what fails
                    server = None
            self._recognise(server)
            self._detected = True

    def _recognise(self, server: str | None) -> None:
        if server == "llama.cpp":
            self.server = "llama.cpp"
            if self.continuation == "auto":
                self.continuation = "prefill"
        elif server == "vllm":
            self.server = "vllm"
            if self.continuation == "auto":
                self.continuation = "continue_final_message"

    def connect(self) -> None:
        """Ask the server, once, what it serves (:mod:`~.served_identity`).

        The weights' identity joins the snapshot; a server that says the model takes no
        images turns vision off, so image modes are recorded skips rather than requests the
        server would fail.

        Raises:
            BackendError: the server cannot be reached (non-transient, naming the URL): a run
                never goes on from the request cache alone against a wrong address.
        """
        if self._served is None:
            return
        try:
            identity = self._served.identity()
        except ServerUnreachable as exc:
            raise BackendError(str(exc), transient=False, fatal=True) from None
        # Once turned off, vision stays off: the warning is said once.
        if identity is not None and identity.vision is False and self.capabilities.vision:
            log.warning("%s: the server at %s says %s takes text only: image modes are "
                        "skipped", self.backend_id, strip_userinfo(self.base_url or ""),
                        self.model)
            self.capabilities = replace(self.capabilities, vision=False)

    def snapshot(self) -> str:
        """The snapshot: the pin or model name, with what the server says of its weights."""
        if self._served is None:  # no server to ask (a subclass serving in process)
            return self.model
        self.connect()
        return self._served.snapshot()

    def pinning(self) -> tuple[bool, str]:
        """Whether a weight change behind the served name would be seen, and how."""
        if self._served is None:
            return super().pinning()
        self.connect()
        return self._served.pinning()

    def describe(self) -> BackendFacts:
        """Backend facts for summaries and lineage (never credentials).

        The key is not here and the URL passes :func:`~capjudge.util.credentials.strip_userinfo`
        again.
        """
        facts: BackendFacts = {
            "backend": self.backend_id, "snapshot": self.snapshot(), "model": self.model,
            "base_url": strip_userinfo(self.base_url) if self.base_url else None,
            "continuation": self.continuation, "server": self.server}
        if self._served is not None:
            facts["pinned"], facts["pinning"] = self._served.pinning()
            identity = self._served.identity()
            if identity is not None:
                facts["weights"], facts["served_by"] = identity.weights, identity.server
                if identity.facts:
                    facts["server_facts"] = dict(identity.facts)
        return facts

    def fingerprint_facts(self, probe: bool = True) -> dict[str, JSONValue]:
        """The model list, weights identity and (``probe``) a one-token answer's identity.

        The answer's identity is its ``model`` and ``system_fingerprint``.

        ``watchable`` says whether these can show a weight change: the server's weights
        identity can; so can OpenAI's (or an unrecognised server's) ``system_fingerprint``.
        llama.cpp's is its build and vLLM sends none: without a weights identity such a judge
        cannot be watched (``unwatchable`` says why).
        """
        self.connect()  # an unreachable server: the error names its URL
        models = self.list_models()
        facts: dict[str, JSONValue] = {"models": list[JSONValue](models)}
        if self.model not in models:
            facts["note"] = f"{self.model} is not in the server's model list"
        facts["served"] = self.model in models
        identity = self._served.identity() if self._served is not None else None
        if identity is not None:
            facts["weights"] = identity.weights
            if identity.weights is None:  # the weights' identity says it all when there is one
                facts.update({f"server.{k}": v for k, v in sorted(identity.facts.items())})
        if probe:
            answer = self.generate([JudgeRequest(
                messages=(Message("user", ("Reply with the single word OK.",)),),
                slots=(), decoding=Decoding(max_tokens=1, top_logprobs=0),
                template="watch-probe@1")])[0]
            if isinstance(answer, BackendError):
                raise answer
            facts["model"] = answer.model
            facts["system_fingerprint"] = answer.system_fingerprint
        why = self._unwatchable(identity, facts.get("system_fingerprint"))
        facts["watchable"] = why is None
        if why is not None:
            facts["unwatchable"] = why
        return facts

    def _unwatchable(self, identity: ServedIdentity | None, fingerprint: JSONValue
                     ) -> str | None:
        """Why a change of weights would go unseen by the watch flow (None: it is seen)."""
        if identity is None or identity.weights is not None:
            return None  # OpenAI's API (model + system_fingerprint), or hashed weights
        if fingerprint and identity.server not in ("llama.cpp", "vllm"):
            return None  # an OpenAI-like provider's fingerprint tracks its deployment
        said = ("its system_fingerprint is the server's build, not its weights"
                if identity.server == "llama.cpp" and fingerprint else identity.source)
        return (f"{said}: a weight change behind {self.model!r} cannot be seen; serve it "
                "with capjudge serve (which reports the GGUF's sha256), or re-run the judge "
                "yourself after changing the weights and the pin (backend_options.snapshot)")

    def verified(self) -> bool:
        """Whether the server listed its models to this key (asked once, no tokens spent).

        A server that lists them speaks the API and took the credentials, so the client need
        not send its first request alone (see :meth:`Backend.verified`); a sign-in page or a
        rejected key lists nothing, and the first request goes alone as before. A backend
        without an HTTP client (llama.cpp in process) says False: its requests are unchanged.
        """
        if getattr(self, "_client", None) is None:
            return False
        if self._served is not None and self._served.remote_server:
            # Already asked, with the key, when the weights' identity was: no second request.
            try:
                identity = self._served.identity()
            except ServerUnreachable:
                return False
            return identity is not None and identity.listed
        if getattr(self, "_listed", None) is None:
            try:
                self._listed = bool(self.list_models())
            except Exception:  # noqa: BLE001 - any failure: not verified, probe as before
                self._listed = False
        return bool(self._listed)

    def list_models(self) -> list[str]:
        """The server's ``/v1/models`` answer, sorted.

        For lineage: what an OpenAI-compatible server says it serves.
        """
        return sorted(m.id for m in self._client.models.list())
