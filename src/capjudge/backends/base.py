"""The one backend contract: a batch of judge requests in, a batch of judge responses out.

Every backend (OpenAI-compatible API, local transformers model, the embedded default, the fake)
returns the same neutral :class:`~capjudge.protocol.JudgeResponse`: the generated text, for
each score slot the probability distribution over its scale at the score position, the mass
that distribution captured, token usage, the model snapshot/fingerprint and a status with a
reason. The request and response types live in :mod:`capjudge.protocol`, below every layer
that uses them. Retries, caching, rate limiting and concurrency are *not* here: they live once
in :class:`capjudge.client.JudgeClient`, around every backend.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from capjudge.protocol import (
    BackendError,
    BackendFacts,
    JudgeRequest,
    JudgeResponse,
    apply_min_mass,
)
from capjudge.records import JSONValue

RerunIdentity = Literal["request", "run", "none"]
"""How a rerun of a backend compares with an earlier run of the same settings.

``request``: a request's answer does not depend on anything else asked (a rerun of any sample
of the items gives identical judgements); ``run``: identical when the same requests are asked in
the same chunks and order (the numerics depend on what is batched together and on what came from
the request cache); ``none``: a rerun is a new sample (APIs, engines that batch concurrent
requests together).
"""


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do; the judge stage skips what it cannot (and says so)."""

    vision: bool
    distribution: Literal["logprobs", "exact", "none"]
    max_batch: int = 1  # requests per generate() call
    concurrency: int = 1  # parallel generate() calls the client may make
    likelihood: bool = False  # can score (context, text) log-likelihoods (local models)
    json_schema: bool = False  # enforces a JSON-schema response format (verdict_format)


class Backend(ABC):
    """Abstract judge backend.

    Implementations are registered by kind (the part of the id before the ``/``) and
    imported lazily; see :mod:`capjudge.backends`.

    Class attributes:
        options: the keyword options the backend accepts (``params.yaml:
            judges.<name>.backend_options``); anything else is a clear error, for every
            backend alike.
        default_concurrency: how many requests a judge may have in flight against this kind
            of backend when the config does not say (the flow's worker count comes from it).
        shared: construct once per process and share (local models: loading costs seconds
            and memory).
        pipelined: a judge's chunk tasks may run side by side on one client without changing
            any answer (a remote API: the client's ``concurrency`` bounds the requests in
            flight across them), so the next chunk's requests start while the previous
            chunk's last ones are answered. Local engines say False: interleaving chunks
            changes what is batched or cached together.
        gates_in_flight: the backend bounds its own requests in flight around the exchange
            alone (:meth:`limit_in_flight`), not around reading the answer: the client then
            holds no slot around the whole call and runs more threads than its concurrency,
            so the bodies of the next requests wait at the gate while answers are read and
            go out the moment an answer frees a place (issue 42).
    """

    backend_id: str
    capabilities: Capabilities
    options: ClassVar[frozenset[str]] = frozenset({"min_mass"})
    default_concurrency: ClassVar[int] = 1
    shared: ClassVar[bool] = False
    pipelined: ClassVar[bool] = False
    gates_in_flight: ClassVar[bool] = False

    def limit_in_flight(self, limit: int) -> None:
        """Keep at most ``limit`` requests in flight (only where :attr:`gates_in_flight`)."""
        raise NotImplementedError(f"{type(self).__name__} does not gate its own requests")

    def ask_again(self, request: JudgeRequest, stored: JudgeResponse) -> bool:
        """Whether a cached answer must be asked again under the current settings.

        Never by default: a change of reading settings re-reads a stored answer
        (:meth:`reread`). A backend whose stored answer can hold less than the settings now
        ask for (a digit tree completed less far) says so here.
        """
        return False

    def drop_queued(self) -> None:
        """Send none of the requests waiting at the gate (where :attr:`gates_in_flight`).

        They fail as ``not_sent`` :class:`BackendError`; called when the client stops or
        learns that nothing more may be sent (a rejected key, the wrong server).
        """
        raise NotImplementedError(f"{type(self).__name__} does not gate its own requests")

    @classmethod
    def create(cls, name: str, **options: Any) -> Backend:
        """Build the backend for the id ``KIND/name`` (options already validated)."""
        return cls(name, **options)  # type: ignore[call-arg]

    @classmethod
    def check_options(cls, backend_id: str, options: Mapping[str, object]) -> None:
        """Raise a non-transient :class:`BackendError` naming any option this backend rejects."""
        unknown = sorted(set(options) - set(cls.options))
        if unknown:
            raise BackendError(
                f"backend {backend_id!r} does not accept the option(s) {', '.join(unknown)}; "
                f"it accepts: {', '.join(sorted(cls.options))}", transient=False)

    @classmethod
    def concurrency_for(cls, options: Mapping[str, object]) -> int:
        """Requests in flight by default (the ``concurrency`` option, else the class's)."""
        return int_option(options.get("concurrency") or cls.default_concurrency)

    @classmethod
    def rerun_identity(cls, options: Mapping[str, object]) -> RerunIdentity:
        """How a rerun with ``options`` compares with an earlier run (:data:`RerunIdentity`).

        A remote service promises nothing: ``none`` unless a backend knows better.
        """
        return "none"

    @classmethod
    def capabilities_for(cls, name: str, options: Mapping[str, object]) -> Capabilities | None:
        """What ``cls.create(name, **options)`` would declare, known without building it.

        A stage plans with it before loading anything: when every (item, mode) turns out to be
        a recorded skip (a text-only model asked for pictures), no model is loaded and no
        engine started. None (the default): only a built backend knows, so it is built.
        """
        return None

    @classmethod
    def describe_unloaded(cls, name: str, options: Mapping[str, object]) -> BackendFacts | None:
        """The lineage facts of a backend that was never built (nothing was asked of it).

        ``backend`` and ``snapshot`` must be exactly what a built one would give (they go on
        every skipped row); facts only a loaded model can give are left out and ``loaded`` is
        False. None (the default): build the backend to find out.
        """
        return None

    @abstractmethod
    def snapshot(self) -> str:
        """A string that changes when the model changes (snapshot name, weights hash)."""

    @abstractmethod
    def generate(self, requests: Sequence[JudgeRequest]) -> list[JudgeResponse | BackendError]:
        """Answer a batch; per request either a response or the error it raised."""

    def connect(self) -> None:  # noqa: B027 - a hook: local backends have no server to ask
        """Ask the serving side what it serves, once, before the first request (default: no-op).

        Raises:
            BackendError: it cannot be reached (non-transient: the run stops naming it).
        """

    def verified(self) -> bool:
        """Whether the server has shown, before any request, that it is the API asked for.

        That is: it answered as that API and accepted the credentials. Then the client sends
        its first requests together, at full concurrency; otherwise (the default) the first
        request goes alone, so a wrong server (a sign-in page, a rejected key) costs one
        request rather than ``concurrency`` of them.
        """
        return False

    def pinning(self) -> tuple[bool, str]:
        """(pinned, how or why not): whether :meth:`snapshot` changes with the weights.

        Local backends hash the weights they load: pinned. A remote backend is pinned only when
        its server identifies the weights, or the user pins them (``snapshot``).
        """
        return True, "the backend's snapshot identifies its weights"

    def describe(self) -> BackendFacts:
        """Lineage facts about the backend (model id, snapshot, fingerprint where known)."""
        return {"backend": self.backend_id, "snapshot": self.snapshot()}

    def follow_ups(self, request: JudgeRequest, response: JudgeResponse
                   ) -> list[JudgeRequest]:
        """Further requests needed to finish ``response`` (default: none).

        The client asks them like any request (cache, rate limits, retries, counted in the
        run's statistics) and hands the answers to :meth:`complete`, then asks again, until
        this returns nothing. The OpenAI backend completes the digits of a score written by a
        digit-split tokenizer this way. Only a response this backend has just produced can
        have follow-ups (a cached one is already complete).
        """
        return []

    def complete(self, request: JudgeRequest, response: JudgeResponse,
                 follow_ups: Sequence[JudgeRequest], answers: Sequence[JudgeResponse]
                 ) -> JudgeResponse:
        """``response`` finished with the answers to :meth:`follow_ups` (default: unchanged)."""
        return response

    def reread(self, request: JudgeRequest, response: JudgeResponse) -> JudgeResponse:
        """A cached answer's statuses derived again from this backend's current settings.

        The cache stores the answer; whether it is ``low_mass`` depends on ``min_mass``, which
        is not part of the cache key (changing it must not ask again). The default re-applies
        ``min_mass`` to each slot's stored mass (:func:`apply_min_mass`); a backend that keeps
        its raw answer (``response.raw``) also re-reads it when the reading rules changed.
        """
        min_mass = getattr(self, "min_mass", None)
        if isinstance(min_mass, (int, float)):
            return apply_min_mass(response, float(min_mass))
        return response

    def end_of_chain(self) -> None:  # noqa: B027 - a hook: most backends keep no state
        """The calling thread has finished a request and its follow-ups (the client says so).

        A backend that keeps per-thread state across a request's follow-ups (llama.cpp's
        single-slot engines) lets it go here; the default does nothing.
        """

    def fingerprint_facts(self, probe: bool = True) -> dict[str, JSONValue]:
        """What identifies the model this backend serves *now* (the watch flow hashes it).

        Local backends: the weights' snapshot. Remote backends override this (model list,
        a one-token probe's ``model`` and ``system_fingerprint``). ``probe=False`` must not
        spend tokens.
        """
        return {"snapshot": self.snapshot()}


def int_option(value: object) -> int:
    """An integer backend option as ``int()`` reads it (params may give a number or a string).

    Raises:
        TypeError: The value is neither a number nor a string.
    """
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"expected an integer option, got {type(value).__name__}: {value!r}")
