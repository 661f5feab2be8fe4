"""The one judge pipeline: items + a judge config -> judgement rows + run statistics.

:func:`judge_items` is the only place where items become requests, requests become answers
and answers become rows. ``capjudge judge`` (:func:`run_judge`), ``capjudge score``, the
Prefect judge flow (one call per chunk, on any worker) and meta-evaluation all call it.

Outputs of a judge stage (in ``out_dir``):

- ``judgements.parquet``: one row per (item, mode, criterion) with the full score distribution
  (``values``/``probs``), its expected value, argmax, sd, entropy and captured mass, the status
  and reason, the reasoning text, the template id@version, backend id, model snapshot and
  fingerprint, token usage and cost. Skipped (item, mode) pairs are rows with status
  ``skipped`` and the reason; failures are rows with their status and reason, never a score.
- ``summary.json``: counts by status and mode, requests, model calls, cache hits, tokens, cost,
  which modes ran and which were skipped and why. Computed from the rows and from statistics
  each call returns, so it is the same whichever workers did the work.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from capjudge.atomic import (
    INCOMPLETE_MARKER,
    OutputWriteError,
    atomic_path,
    stage_outputs,
    write_json,
    write_text,
)
from capjudge.backends import create_backend
from capjudge.backends.base import Backend, Capabilities
from capjudge.client import (
    DEFAULT_MAX_RETRY_AFTER_S,
    ClientStats,
    JudgeClient,
    build_client,
    raise_if_stopped,
)
from capjudge.cost import Price, price_for
from capjudge.credentials import refuse_credentials
from capjudge.item import Item, load_items
from capjudge.judge_out import check_existing, merged_with_existing, output_lock
from capjudge.media_check import MediaChangedError, verify_request
from capjudge.methods import (
    AggregateOptions,
    Criterion,
    Method,
    MethodOptions,
    Planned,
    Skip,
    Verdict,
    get_method,
    verdict,
)
from capjudge.protocol import BackendFacts, Decoding, JudgeResponse
from capjudge.records import Judgement, JudgeSummary

log = logging.getLogger(__name__)

JUDGEMENTS_SCHEMA = Judgement.schema()
"""The columns of ``judgements.parquet`` (derived from :class:`capjudge.records.Judgement`)."""

FAILURES = ("error", "refused", "parse_failure")

DEFAULT_TIMEOUT_S = 120.0


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_settings(config: Any) -> None:
    """Refuse every judge setting out of its range before anything runs.

    One rule per setting, so the CLI, ``params.yaml`` and the flows fail alike, with a
    one-line message naming the setting (the CLI turns it into exit 2).

    Raises:
        ValueError: a setting is of the wrong type or out of range (``nan`` included).
    """
    def need(ok: bool, name: str, want: str) -> None:
        if not ok:
            raise ValueError(f"{name} must be {want}, got {getattr(config, name)!r}")

    need(_is_int(config.max_tokens) and config.max_tokens >= 1, "max_tokens",
         "an integer >= 1")
    need(_is_number(config.min_mass) and 0 <= config.min_mass <= 1, "min_mass",
         "a number in [0, 1]")
    need(_is_number(config.temperature) and config.temperature >= 0, "temperature",
         "a number >= 0")
    need(_is_int(config.top_logprobs) and 0 <= config.top_logprobs <= 20, "top_logprobs",
         "an integer in 0..20")
    need(config.limit is None or (_is_int(config.limit) and config.limit >= 1), "limit",
         "an integer >= 1 (or null: every item)")
    need(_is_int(config.max_attempts) and config.max_attempts >= 1, "max_attempts",
         "an integer >= 1")
    need(_is_number(config.backoff_base_s) and config.backoff_base_s >= 0, "backoff_base_s",
         "a number >= 0")
    need(_is_number(config.max_retry_after_s) and config.max_retry_after_s > 0,
         "max_retry_after_s", "a number > 0")
    need(_is_number(config.timeout_s) and config.timeout_s > 0, "timeout_s", "a number > 0")
    need(config.concurrency is None or (_is_int(config.concurrency)
                                        and config.concurrency >= 1),
         "concurrency", "an integer >= 1 (or null)")
    for name in ("rpm", "tpm"):
        value = getattr(config, name)
        need(value is None or (_is_number(value) and value > 0), name, "a number > 0 (or null)")
    need(isinstance(config.backend_options, dict), "backend_options", "a mapping")
    need(isinstance(config.method_options, dict), "method_options", "a mapping")
    need(isinstance(config.prices, dict), "prices", "a mapping")


@dataclass
class JudgeConfig:
    """One judge: a method with its modes on one backend (``params.yaml: judges.<name>``)."""

    method: str
    backend: str
    modes: list[str] | None = None
    max_tokens: int = 512
    temperature: float = 0.0
    top_logprobs: int = 20
    detail: str = "auto"
    min_mass: float = 0.5
    backend_options: dict[str, Any] = field(default_factory=dict)
    concurrency: int | None = None
    rpm: float | None = None
    tpm: float | None = None
    max_attempts: int = 5
    backoff_base_s: float = 0.5
    limit: int | None = None  # judge only the first N items (smoke runs)
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    cache_dir: str | None = None
    method_options: dict[str, Any] = field(default_factory=dict)
    # The backend's fingerprint as last seen by the watch flow (API system_fingerprint, model
    # list). It joins the model snapshot in the cache key, so a changed remote model is asked
    # again instead of being answered from the cache.
    fingerprint: str | None = None
    # Test-retest: ask every request this many times (distinct cache keys, one sample each).
    # Needs temperature > 0; the report measures the judge's reliability from the repeats.
    repeats: int = 1
    # The longest Retry-After the client waits; a request asked to wait longer fails with the
    # reason (and every worker of the client waits out shorter windows together).
    max_retry_after_s: float = DEFAULT_MAX_RETRY_AFTER_S
    # The window rpm/tpm are enforced over, with the budget scaled to it (rpm x window / 60
    # requests per window). Providers enforce a minute's budget in shorter quanta (OpenAI:
    # "60,000 rpm may be enforced as 1,000 requests per second"): a window of a few seconds
    # avoids the bursts they reject. 60 is the plain per-minute budget.
    rate_window_s: float = 60.0
    # How requests reach the model: "sync" (one call each) or "batch" (the OpenAI Batch API,
    # openai/<model> backends: see capjudge.backends.openai_batch; ``batch_options`` tune
    # it). Not "mode": ``modes`` are the method's modes.
    submit: str = "sync"
    batch_options: dict[str, Any] = field(default_factory=dict)
    # The client's timeout for one call, in seconds (backends that take one: openai/...).
    timeout_s: float = DEFAULT_TIMEOUT_S

    def __post_init__(self) -> None:
        """Reject settings that would make the repeats meaningless, and credentials.

        Raises:
            ValueError: ``repeats`` is not a positive integer, or ``repeats > 1`` at
                temperature 0 (every repeat would be the same answer, faking perfect
                reliability).
            capjudge.credentials.CredentialsInURLError: a URL in ``backend_options`` or
                ``method_options`` carries user-info (a ValueError too).
        """
        check_settings(self)
        if isinstance(self.repeats, bool) or not isinstance(self.repeats, int) \
                or self.repeats < 1:
            raise ValueError(f"repeats must be a positive integer, got {self.repeats!r}")
        if self.repeats > 1 and not self.temperature > 0:
            raise ValueError(
                f"repeats: {self.repeats} needs temperature > 0 (got {self.temperature}): at "
                "temperature 0 every repeat is the same answer, which would fake perfect "
                "test-retest reliability; set e.g. temperature: 1.0, or repeats: 1")
        if not self.rate_window_s > 0:
            raise ValueError(f"rate_window_s must be positive, got {self.rate_window_s!r}")
        if self.rpm is not None and self.rpm * self.rate_window_s / 60 < 1:
            # A window that holds less than one request would admit one anyway (a request
            # always goes alone), i.e. more than the budget.
            raise ValueError(f"rate_window_s: {self.rate_window_s:g} s holds less than one "
                             f"request at rpm {self.rpm:g}; use at least {60 / self.rpm:g} s")
        # The config travels as Prefect parameters and into dvc.lock and summaries: a URL with
        # user-info here would be persisted everywhere, so it is refused before anything runs.
        refuse_credentials({"backend_options": self.backend_options,
                            "method_options": self.method_options})
        from capjudge.backends.openai_batch import SUBMIT_MODES, BatchOptions

        if self.submit not in SUBMIT_MODES:
            raise ValueError(f"submit must be one of {', '.join(SUBMIT_MODES)}, got "
                             f"{self.submit!r}")
        BatchOptions.from_dict(self.batch_options)  # unknown keys fail before anything runs

    @classmethod
    def from_params(cls, section: Mapping[str, object], common: Mapping[str, object] | None = None
                    ) -> JudgeConfig:
        """Build from a params section (unknown keys are an error naming them).

        Two keys are expanded first: ``profile`` (a method's named settings, e.g. G-VEval's
        ``gveval_code``; :func:`apply_profile`) and ``templates`` (a user's template folder,
        passed to the method as ``method_options.templates``).
        """
        # Any: the keys become this dataclass's keyword arguments, of several types.
        merged: dict[str, Any] = {**(common or {}), **section, **env_settings()}
        if "templates" in merged:
            merged["method_options"] = {**(merged.get("method_options") or {}),
                                        "templates": merged.pop("templates")}
        if "profile" in merged:
            merged = apply_profile(merged, merged.pop("profile"), explicit=set(section))
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(merged) - known)
        if unknown:
            raise ValueError(f"unknown judge settings: {', '.join(unknown)}")
        return cls(**merged)

    def decoding(self) -> Decoding:
        """The decoding settings every request of this judge uses."""
        return Decoding(max_tokens=self.max_tokens, temperature=self.temperature,
                        top_logprobs=self.top_logprobs)

    def stable_hash(self) -> str:
        """A hash of every setting, equal across processes and hosts (unlike ``id()``).

        It is the key under which workers share one backend and client.
        """
        payload = json.dumps(asdict(self), sort_keys=True, default=str)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


ENV_SETTINGS: dict[str, str] = {"cache_dir": "CAPJUDGE_CACHE_DIR"}
"""Judge settings an environment variable sets. The one precedence for every setting:
command-line flag > environment variable > ``params.yaml`` > default."""


def env_settings() -> dict[str, str]:
    """The judge settings set by environment variables (:data:`ENV_SETTINGS`), non-empty ones.

    They win over ``params.yaml`` (:meth:`JudgeConfig.from_params`); a command-line flag wins
    over them (the CLI builds its config from its flags).
    """
    import os

    return {key: os.environ[var] for key, var in ENV_SETTINGS.items() if os.environ.get(var)}


def apply_profile(settings: Mapping[str, object], profile: str | None,
                  explicit: set[str] | None = None) -> dict[str, object]:
    """``settings`` with a method's named profile filled in under them.

    Args:
        settings: judge settings (``method`` required).
        profile: a name from the method's :attr:`~capjudge.methods.Method.profiles` (None:
            unchanged).
        explicit: the keys the user set for this judge (default: all of ``settings``); they
            win over the profile. ``method_options`` are merged key by key, and record the
            profile's name.

    Raises:
        ValueError: the method has no such profile (the message lists its profiles).
    """
    if profile is None:
        return dict(settings)
    method = get_method(str(settings["method"]))
    if profile not in method.profiles:
        raise ValueError(f"method {method.name!r} has no profile {profile!r}; profiles: "
                         f"{', '.join(sorted(method.profiles)) or 'none'}")
    explicit = set(settings) if explicit is None else explicit
    out = dict(settings)
    chosen = method.profiles[profile]
    for key, value in chosen.items():
        if key != "method_options" and key not in explicit:
            out[key] = value
    if "method_options" in chosen:
        mine = settings.get("method_options") or {}
        if not isinstance(mine, Mapping):
            raise ValueError(f"method_options must be a mapping, got {mine!r}")
        out["method_options"] = {**chosen["method_options"], **mine, "profile": profile}
    return out


def backend_options(config: JudgeConfig) -> dict[str, Any]:
    """The keyword options the judge's backend is built with (the judge's settings filled in)."""
    from capjudge.backends import backend_class

    options = dict(config.backend_options)
    options.setdefault("min_mass", config.min_mass)
    if "timeout_s" in backend_class(config.backend).options:
        # The judge's timeout_s is the client's (backend_options.timeout_s wins when set).
        options.setdefault("timeout_s", config.timeout_s)
    return options


def make_backend(config: JudgeConfig) -> Backend:
    """The configured backend (local models are loaded once per process)."""
    return create_backend(config.backend, **backend_options(config))


@dataclass(frozen=True)
class UnbuiltBackend:
    """A judge's backend before it is built: what its class says without loading anything.

    Planning needs only the capabilities (vision); rows of recorded skips need only the id and
    snapshot. When every (item, mode) is a skip the backend is never built
    (:meth:`Backend.capabilities_for`, :meth:`Backend.describe_unloaded`).
    """

    backend_id: str
    capabilities: Capabilities
    config: JudgeConfig

    @classmethod
    def of(cls, config: JudgeConfig) -> UnbuiltBackend | None:
        """The judge's backend as its class declares it; None when only a built one can say.

        Raises:
            BackendError: an unknown kind or option, or options the class refuses.
        """
        from capjudge.backends import backend_class

        kind = backend_class(config.backend)
        options = backend_options(config)
        kind.check_options(config.backend, options)
        capabilities = kind.capabilities_for(config.backend.partition("/")[2], options)
        return None if capabilities is None else cls(config.backend, capabilities, config)

    def describe(self) -> BackendFacts | None:
        """Its lineage facts, snapshot included, without building it (None: it must be)."""
        from capjudge.backends import backend_class

        return backend_class(self.backend_id).describe_unloaded(
            self.backend_id.partition("/")[2], backend_options(self.config))


def check_reachable(config: JudgeConfig) -> None:
    """Ask a remote judge's server what it serves, before a stage starts.

    A wrong address then stops the stage with one line naming it, before any task runs (and
    before any cached answer could stand in for the server). Local models are loaded by the
    stage itself: nothing to reach here.

    Raises:
        BackendError: the server cannot be reached, or the backend refuses its options.
    """
    from capjudge.backends import backend_class

    if not backend_class(config.backend).shared:
        make_backend(config).connect()


def make_client(config: JudgeConfig, backend: Backend,
                progress: Callable[[int, int], None] | None = None,
                shared_dir: str | Path | None = None) -> JudgeClient:
    """The cached, retrying, rate-limited client around a backend.

    Args:
        config: the judge.
        backend: what answers.
        progress: called with (done, total) requests.
        shared_dir: keep the rpm/tpm window and the ``Retry-After`` pause in files here, shared
            by every process and host that uses the same folder (:mod:`capjudge.limits`);
            None: per client.
    """
    return build_client(backend, cache_dir=config.cache_dir, max_attempts=config.max_attempts,
                        backoff_base_s=config.backoff_base_s, rpm=config.rpm, tpm=config.tpm,
                        concurrency=config.concurrency, progress=progress,
                        fingerprint=config.fingerprint,
                        max_retry_after_s=config.max_retry_after_s,
                        rate_window_s=config.rate_window_s, shared_dir=shared_dir)


_SHARED: dict[str, tuple[Backend, JudgeClient]] = {}
_SHARED_LOCK = threading.Lock()


def shared_client(config: JudgeConfig, shared_dir: str | None = None
                  ) -> tuple[Backend, JudgeClient]:
    """One backend and client per judge config per process, keyed by the config's stable hash.

    Chunks running on threads of one worker share the model, the cache and the rate limiter.
    With ``shared_dir`` the limiter and the ``Retry-After`` pause are also shared with the
    other processes of the run (see :func:`make_client`).
    """
    key = f"{config.stable_hash()}|{shared_dir or ''}"
    with _SHARED_LOCK:
        if key not in _SHARED:
            backend = make_backend(config)
            _SHARED[key] = (backend, make_client(config, backend, shared_dir=shared_dir))
        return _SHARED[key]


def method_options(config: JudgeConfig, method: Method, vision: bool) -> MethodOptions:
    """Options for the method; loads the context stage's table when the method reads one."""
    extra = dict(config.method_options)
    if method.needs_context and "context_table" not in extra:
        path = extra.get("contexts")
        extra["context_table"] = method.load_context(path) if path else {}
    return MethodOptions(decoding=config.decoding(), detail=config.detail, vision=vision,
                         extra=extra)


def judge_modes(config: JudgeConfig, method: Method) -> list[str]:
    """The modes a judge runs (validated against the method's)."""
    modes = list(config.modes or method.default_modes)
    for mode in modes:
        method.check_mode(mode)
    return modes


def plan(items: Sequence[Item], config: JudgeConfig, vision: bool = True,
         options: MethodOptions | None = None) -> tuple[list[Planned], list[Skip]]:
    """Every (item, mode[, criterion]) as a request to send or a recorded skip.

    Args:
        items: typed items (:func:`capjudge.item.load_items`).
        config: the judge.
        vision: whether the backend accepts images (ignored when ``options`` is given).
        options: method options (default: from the config).
    """
    method = get_method(config.method)
    options = options or method_options(config, method, vision)
    modes = judge_modes(config, method)
    planned: list[Planned] = []
    skipped: list[Skip] = []
    for item in items:
        for mode in modes:
            try:
                results = method.plan(item, mode, options)
            except (ValueError, OSError) as exc:
                # A bad item (a missing picture, a malformed option) is that item's recorded
                # skip, never the end of the stage.
                results = [Skip(item.id, mode, f"could not build the request: {exc}")]
            except Exception as exc:  # noqa: BLE001 - one item must not end the stage
                log.exception("planning item %r (%s) failed", item.id, mode)
                results = [Skip(item.id, mode, f"could not build the request: "
                                               f"{type(exc).__name__}: {exc}")]
            for result in results:
                if isinstance(result, Planned):
                    planned.append(method.constrained(result))
                else:
                    skipped.append(result)
    return planned, skipped


@dataclass
class JudgeResult:
    """What :func:`judge_items` returns.

    Attributes:
        rows: judgement rows (JUDGEMENTS_SCHEMA), answered requests first, then skips.
        stats: this call's client statistics (requests, model calls, cache hits, ...).
        criteria: per (item id, mode) every criterion result, skipped ones included (with
            ``repeats > 1``, those of repeat 0; every repeat is in ``rows``).
        responses: the answers, aligned with ``planned``.
        planned: the requests that were sent (or answered from the cache).
        skips: what was not judged, and why.
        backend: the backend that answered (None when none was built).
        unbuilt_facts: when no backend was built, its facts (:meth:`backend_facts`).
    """

    rows: list[Judgement]
    stats: ClientStats
    criteria: dict[tuple[str, str], list[Criterion]]
    responses: list[JudgeResponse]
    planned: list[Planned]
    skips: list[Skip]
    # The backend that answered, or the facts of one never built (every row a skip).
    backend: Backend | None = None
    unbuilt_facts: BackendFacts | None = None

    def backend_facts(self) -> BackendFacts:
        """The lineage facts of the judge's backend (``loaded: False`` when never built).

        Raises:
            ValueError: the result records no backend (built by hand).
        """
        if self.unbuilt_facts is not None:
            return self.unbuilt_facts
        if self.backend is None:
            raise ValueError("this result records no backend")
        return self.backend.describe()

    def verdicts(self, method: Method, options: AggregateOptions
                 ) -> dict[tuple[str, str], Verdict]:
        """Each (item, mode)'s overall score and status under the one rule."""
        return {key: verdict(method, crit, options) for key, crit in self.criteria.items()}


def check_verdict_format(method: Method, options: MethodOptions,
                         backend: Backend | UnbuiltBackend) -> None:
    """``verdict_format: json_schema`` needs a backend that enforces the schema.

    Raises:
        ValueError: the backend cannot (a local transformers model, a fake judge).
    """
    if dict(method.settings(options)).get("verdict_format") == "json_schema" and \
            not backend.capabilities.json_schema:
        raise ValueError(f"verdict_format: json_schema needs a backend that enforces a JSON "
                         f"schema (openai/..., llamacpp/..., an OpenAI-compatible server); "
                         f"{backend.backend_id} cannot")


def judge_items(items: Sequence[Item], config: JudgeConfig, *, backend: Backend | None = None,
                client: JudgeClient | None = None, options: MethodOptions | None = None,
                progress: Callable[[int, int], None] | None = None,
                connect: Callable[[], tuple[Backend, JudgeClient]] | None = None
                ) -> JudgeResult:
    """Judge items with one method on one backend: plan, ask (cached), read, build rows.

    Without ``backend`` and ``client`` the items are planned with what the backend's class
    declares (:class:`UnbuiltBackend`) and the backend is built only when a request is to be
    sent: a judge whose every (item, mode) is a recorded skip (a text-only model asked for
    pictures) loads no model and starts no engine, and writes the same rows.

    Args:
        items: the items (``config.limit`` is applied by the caller that owns the item list).
        config: the judge.
        backend: an existing backend (default: built by ``connect`` when needed).
        client: an existing client around ``backend`` (default: a new one).
        options: method options (default: from the config; loads a context table if needed).
        progress: called with (done, total) requests while answering.
        connect: builds the backend and its client (default: :func:`make_backend` and
            :func:`make_client`); called at most once, and only when something is to be asked
            or only a built backend knows its capabilities or snapshot.

    Returns:
        The rows, this call's statistics and the per-item criteria.
    """
    method = get_method(config.method)
    if backend is None and client is not None:
        backend = client.backend
    if connect is None:
        def connect() -> tuple[Backend, JudgeClient]:
            built = make_backend(config)
            return built, make_client(config, built, progress)
    target: Backend | UnbuiltBackend | None = backend or UnbuiltBackend.of(config)
    if target is None:
        backend, client = connect()
        target = backend
    options = options or method_options(config, method, target.capabilities.vision)
    check_verdict_format(method, options, target)
    planned, skips = plan(items, config, options=options)
    if config.repeats > 1:
        check_repeatable(target)
        planned = repeat_planned(planned, config.repeats)
    unbuilt = target.describe() if backend is None and not planned else None
    if backend is None and unbuilt is None:
        backend, client = connect()
    if backend is not None and client is None:
        client = make_client(config, backend, progress)
    by_id = {item.id: item for item in items}
    planned, responses, explanations, stats = _answer(config, method, planned, by_id, client)
    if backend is not None:
        backend_id, snapshot = backend.backend_id, backend.snapshot()
    else:
        assert unbuilt is not None  # built above unless its facts were known
        backend_id, snapshot = config.backend, unbuilt["snapshot"]
    rows, criteria = _rows(config, method, options, by_id, planned, responses, explanations,
                           skips, backend_id, snapshot)
    return JudgeResult(rows, stats, criteria, responses, planned, skips, backend, unbuilt)


def _answer(config: JudgeConfig, method: Method, planned: list[Planned],
            by_id: dict[str, Item], client: JudgeClient | None
            ) -> tuple[list[Planned], list[JudgeResponse], list[str | None], ClientStats]:
    """Ask every planned request (cached) and the method's explanation turn.

    Returns the requests rebuilt on their verified pictures, the answers aligned with them (a
    picture changed since ingest is that request's error, answered without a call), the
    explanations and this call's statistics. ``client`` is None only when nothing is planned.
    """
    if client is None:
        return planned, [], [], ClientStats()
    planned, media_errors = verify_media(planned, by_id)
    sendable = shared_context_order(
        [k for k, why in enumerate(media_errors) if why is None], planned)
    sent, stats = client.run_with_stats([planned[k].request for k in sendable])
    responses = [JudgeResponse(status="error", reason=why, attempts=0) if why is not None
                 else JudgeResponse(status="error", reason="not answered")
                 for why in media_errors]
    for k, response in zip(sendable, sent, strict=True):
        responses[k] = response
    try:
        explanations = _explain(config, method, planned, responses, client, stats)
    except Exception:  # noqa: BLE001 - the optional turn must not lose the answers
        log.exception("the explanation turn failed; rows are written without explanations")
        explanations = [None] * len(planned)
    return planned, responses, explanations, stats


def _rows(config: JudgeConfig, method: Method, options: MethodOptions, by_id: dict[str, Item],
          planned: Sequence[Planned], responses: Sequence[JudgeResponse],
          explanations: Sequence[str | None], skips: Sequence[Skip], backend_id: str,
          snapshot: str) -> tuple[list[Judgement], dict[tuple[str, str], list[Criterion]]]:
    """The judgement rows (answered requests first, then skips) and per-item criteria."""
    price = price_for(backend_id.split("/", 1)[1], config.prices)
    if price is not None and config.submit == "batch":
        price = price.batch()  # what the Batch API charges
    rows: list[Judgement] = []
    criteria: dict[tuple[str, str], list[Criterion]] = {}
    for p, response, why in zip(planned, responses, explanations, strict=True):
        results = _interpret(method, p, response)
        if p.request.decoding.sample == 0:  # ``criteria`` is one answer per request
            criteria.setdefault((p.item_id, p.mode), []).extend(results)
        rows += [judgement(by_id[p.item_id], method.name, p.mode, c,
                           template=p.request.template, settings=format_settings(p.settings),
                           backend=backend_id, snapshot=snapshot, response=response,
                           price=price, explanation=why, repeat=p.request.decoding.sample)
                 for c in results]
    try:
        skip_settings = format_settings(method.settings(options))
    except ValueError:
        skip_settings = None
    for s in skips:
        criteria.setdefault((s.item_id, s.mode), []).append(
            Criterion(s.criterion, "skipped", s.reason))
        rows.append(judgement(by_id[s.item_id], method.name, s.mode,
                              Criterion(s.criterion, "skipped", s.reason),
                              template=s.template, settings=skip_settings,
                              backend=backend_id, snapshot=snapshot))
    return rows, criteria


def shared_context_order(indices: Sequence[int], planned: Sequence[Planned]) -> list[int]:
    """``indices`` reordered so that requests whose first pair shares a context go together.

    The order is stable; a group's first appearance decides its place. A likelihood request's
    first pair is the candidate after its references: one picture's candidates share it, so
    they reach the backend in the same batches and its references are encoded once (the
    backend's prefix cache). Requests without pairs are grouped by template (their shared
    instructions stay in a server's prompt cache). The caller puts the answers back in plan
    order.
    """
    first: dict[str, int] = {}

    def group(k: int) -> int:
        pairs = planned[k].request.continuations
        # A generation request goes with those of its template (HarmonicEval's criteria):
        # an engine that keeps one template's instructions cached reuses them in a row.
        key = pairs[0][0] if pairs else f"\x00{planned[k].request.template}"
        return first.setdefault(key, len(first))

    return sorted(indices, key=group)


def verify_media(planned: Sequence[Planned], items: dict[str, Item]
                 ) -> tuple[list[Planned], list[str | None]]:
    """Re-check every picture a request would send against what ingest recorded.

    Returns:
        The requests rebuilt on the verified real paths of their pictures, and per request
        None (send it) or why it must not be sent (missing, outside the item's roots, or
        changed since ingest: see :mod:`capjudge.media_check`).
    """
    out: list[Planned] = []
    errors: list[str | None] = []
    for p in planned:
        try:
            out.append(replace(p, request=verify_request(p.request, items[p.item_id])))
            errors.append(None)
        except MediaChangedError as exc:
            log.warning("item %s (%s): %s", p.item_id, p.mode, exc)
            out.append(p)
            errors.append(str(exc))
    return out, errors


def _interpret(method: Method, p: Planned, response: JudgeResponse) -> list[Criterion]:
    """The method's reading of an answer.

    A method that fails on one answer makes that request's criteria errors with the reason,
    not the end of the stage.
    """
    try:
        return method.interpret(p, response)
    except Exception as exc:  # noqa: BLE001 - one answer must not end the stage
        log.exception("reading the answer for item %r (%s) failed", p.item_id, p.mode)
        why = f"could not read the answer: {type(exc).__name__}: {exc}"
        return [Criterion(slot.name, "error", why) for slot in p.request.slots] \
            or [Criterion(p.criterion or "*", "error", why)]


def check_repeatable(backend: Backend | UnbuiltBackend) -> None:
    """Refuse repeats on a backend whose answer cannot vary between them.

    Raises:
        ValueError: the backend reads an exact distribution after greedy decoding (local
            models): every repeat would be identical, faking perfect reliability.
    """
    if backend.capabilities.distribution == "exact":
        raise ValueError(
            f"repeats > 1 need a backend that samples; {backend.backend_id} decodes greedily "
            "and reads the exact score distribution, so every repeat would be the same answer")


def repeat_planned(planned: Sequence[Planned], repeats: int) -> list[Planned]:
    """Each request ``repeats`` times, repeat ``r`` with ``Decoding.sample = r``.

    Each repeat has its own cache key and sampling seed. The order is request-major, so the
    repeats of a request are adjacent.
    """
    return [replace(p, request=replace(p.request, decoding=replace(p.request.decoding,
                                                                   sample=r)))
            for p in planned for r in range(repeats)]


def format_settings(settings: Sequence[tuple[str, str]]) -> str | None:
    """A method's named options as recorded on rows: ``prompt_variant=paper; score=printed``."""
    return "; ".join(f"{k}={v}" for k, v in settings) or None


def judgement(item: Item, method: str, mode: str, result: Criterion, *, template: str | None,
              settings: str | None, backend: str, snapshot: str,
              response: JudgeResponse | None = None, price: Price | None = None,
              explanation: str | None = None, repeat: int = 0) -> Judgement:
    """The one place a judgement row is built: one criterion of one request, or a skip.

    Args:
        item: the item judged.
        method: the method's name.
        mode: the mode.
        result: the method's reading of the criterion (for a skip: its status and reason).
        template: the template id@version.
        settings: the method's named options (:func:`format_settings`).
        backend: the backend id.
        snapshot: the model snapshot (what the cache is keyed on).
        response: the answer; None for a skip (nothing was asked: no score, no usage).
        price: what the model costs (None: unknown, no cost recorded).
        explanation: the method's optional explanation turn.
        repeat: the test-retest repeat index.
    """
    if response is None:
        return Judgement(item_id=item.id, method=method, mode=mode, criterion=result.name,
                         status=result.status, reason=result.reason, template=template,
                         settings=settings, backend=backend, snapshot=snapshot,
                         media_sha256=item.media_sha256, system=item.system, repeat=repeat)
    usage = response.usage
    cost = price.cost(usage.prompt_tokens, usage.completion_tokens) \
        if price and not response.cached else (0.0 if price else None)
    c = result
    return Judgement(
        item_id=item.id, method=method, mode=mode, criterion=c.name, status=c.status,
        reason=c.reason, score=c.score, expected=c.expected, paths_disagree=c.paths_disagree,
        argmax=c.argmax, sd=c.sd, entropy=c.entropy, mass=c.mass,
        printed=None if c.printed is None else float(c.printed), values=c.values,
        probs=c.probs, source=c.source, anchor_forced=c.anchor_forced, read_by=c.read_by,
        reasoning=c.reasoning if c.reasoning is not None else response.text,
        explanation=explanation, template=template,
        settings=settings, backend=backend, model=response.model, snapshot=snapshot,
        system_fingerprint=response.system_fingerprint, prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens, cost_usd=cost,
        latency_s=response.latency_s, attempts=response.attempts, cached=response.cached,
        cache_key=response.cache_key, media_sha256=item.media_sha256, system=item.system,
        repeat=repeat, server_timings=response.timings)


def _explain(config: JudgeConfig, method: Method, planned: Sequence[Planned],
             responses: Sequence[JudgeResponse], client: JudgeClient,
             stats: ClientStats) -> list[str | None]:
    """The method's optional explanation turn (``method_options.explain``), for answered requests.

    Its requests count in ``stats`` like any other.
    """
    out: list[str | None] = [None] * len(planned)
    if not config.method_options.get("explain") or not method.explains:
        return out
    todo: list[int] = []
    follow_ups = []
    for i, r in enumerate(responses):
        if r.status in ("ok", "low_mass", "text_only"):
            request = method.explanation_request(planned[i], r)
            if request is not None:
                todo.append(i)
                follow_ups.append(request)
    answers, extra = client.run_with_stats(follow_ups)
    stats.merge(extra)
    for i, answer in zip(todo, answers, strict=True):
        out[i] = answer.text if answer.status in ("ok", "low_mass", "text_only") \
            and answer.text else None
    return out


def rows_table(rows: Sequence[Judgement]) -> pa.Table:
    """Judgement rows as an Arrow table with the fixed schema."""
    return Judgement.table(rows)


def summarise(table: pa.Table, stats: ClientStats, config: JudgeConfig,
              backend: Mapping[str, object], seconds: float) -> JudgeSummary:
    """The run's counts for summary.json (and DVC metrics).

    They come from the judgement table and the merged statistics of every call that produced
    it.
    """
    status = table.column("status").to_pylist()
    mode = table.column("mode").to_pylist()
    reason = table.column("reason").to_pylist()
    costs = [c for c, s in zip(table.column("cost_usd").to_pylist(), status, strict=True)
             if c is not None and s != "skipped"]
    by_status = Counter(status)
    judged = len(status) - by_status.get("skipped", 0)
    modes_ran = sorted({m for m, s in zip(mode, status, strict=True) if s != "skipped"})
    skipped_modes: dict[str, dict[str, int]] = {}
    for m, s, r in zip(mode, status, reason, strict=True):
        if s == "skipped":
            per_mode = skipped_modes.setdefault(m, {})
            per_mode[r or "skipped"] = per_mode.get(r or "skipped", 0) + 1
    templates = sorted({t for t in table.column("template").to_pylist() if t})
    settings = sorted({t for t in table.column("settings").to_pylist() if t}) \
        if "settings" in table.column_names else []
    # Answers that hit max_tokens: for a method that reasons before its score (G-VEval) the
    # reasoning was cut, which is another method (its "w/o reason" ablation), said so here.
    tokens = (table.column("completion_tokens").to_pylist()
              if "completion_tokens" in table.column_names else [None] * len(status))
    cut = sum(1 for s, n in zip(status, tokens, strict=True)
              if s != "skipped" and n is not None and n >= config.max_tokens)
    notes = []
    cut_note = getattr(get_method(config.method), "cut_reasoning", None)
    if cut and cut_note:
        notes.append(f"reasoning cut at max_tokens ({config.max_tokens}) in {cut} of {judged} "
                     f"judgements: {cut_note}")
    return {
        "method": config.method, "backend": backend, "modes_ran": modes_ran,
        "modes_skipped": {m: v for m, v in skipped_modes.items() if m not in modes_ran},
        "skips": skipped_modes, "rows": len(status), "by_status": dict(sorted(by_status.items())),
        # Failures have no score; low_mass judgements do (flagged), so they are counted apart.
        "failure_rate": sum(by_status.get(k, 0) for k in FAILURES) / max(1, judged),
        "low_mass_rate": by_status.get("low_mass", 0) / max(1, judged),
        "requests": stats.requests, "model_calls": stats.calls,
        "cache_hits": stats.cache_hits, "retries": stats.retries,
        "cache_write_failures": stats.cache_write_failures,
        "prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.completion_tokens,
        "cost_usd": round(sum(costs), 6) if costs else None,
        "templates": templates, "settings": settings, "seconds": round(seconds, 2),
        "text_only_rate": by_status.get("text_only", 0) / max(1, judged),
        "reasoning_cut": cut, "notes": notes,
    }


def write_part(path: str | Path, rows: Sequence[Judgement]) -> Path:
    """Write one chunk's rows (a worker writes its own part; nothing travels back)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        pq.write_table(rows_table(rows), tmp)
    return path


def combine_parts(parts: Iterable[str | Path], out: str | Path) -> pa.Table:
    """Concatenate part files into one judgements.parquet, a part at a time (row groups).

    Returns the columns the summary needs.
    """
    out = Path(out)
    kept: list[pa.Table] = []
    summary_columns = ["status", "mode", "reason", "cost_usd", "template", "completion_tokens"]
    with atomic_path(out) as tmp, pq.ParquetWriter(tmp, JUDGEMENTS_SCHEMA) as writer:
        for part in parts:
            table = pq.read_table(part, schema=JUDGEMENTS_SCHEMA)
            writer.write_table(table)
            kept.append(table.select(summary_columns))
    if not kept:
        return rows_table([]).select(summary_columns)
    return pa.concat_tables(kept)


def adaptive_chunk_size(n_items: int, workers: int, minimum: int = 16,
                        maximum: int = 2000) -> int:
    """Items per judge task: about four chunks per worker.

    That keeps workers busy and progress visible, without thousands of tiny tasks whose
    orchestration would cost more than the work.
    """
    return max(minimum, min(maximum, math.ceil(n_items / max(1, 4 * workers))))


def chunk_bounds(n_items: int, size: int) -> list[tuple[int, int]]:
    """The ``[start, stop)`` item ranges of a judge stage's chunks, in order."""
    return [(lo, min(n_items, lo + size)) for lo in range(0, n_items, max(1, size))]


def write_summary(out_dir: str | Path, summary: JudgeSummary) -> None:
    """Write summary.json."""
    write_json(Path(out_dir) / "summary.json", summary)


def progress_logger(label: str) -> Callable[[int, int], None]:
    """A progress callback that logs about every 5 % (and the end)."""
    state = {"last": -1.0, "t0": time.perf_counter()}

    def report(done: int, total: int) -> None:
        fraction = done / total if total else 1.0
        if fraction - state["last"] >= 0.05 or done == total:
            state["last"] = fraction
            elapsed = time.perf_counter() - state["t0"]
            eta = elapsed / fraction - elapsed if fraction > 0 else float("nan")
            log.info("%s: %d/%d requests (%.0f%%), %.0f s elapsed, ~%.0f s left", label, done,
                     total, 100 * fraction, elapsed, eta)

    return report


def judge_section(params: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``judges.NAME`` or ``context_judges.NAME`` from params.yaml."""
    for group in ("judges", "context_judges"):
        if name in (params.get(group) or {}):
            return dict(params[group][name])
    known = [*(params.get("judges") or {}), *(params.get("context_judges") or {})]
    raise KeyError(f"no judge {name!r} in params.yaml (known: {', '.join(known)})")


def config_from_params(params: Mapping[str, Any], name: str) -> JudgeConfig:
    """The named judge's config, with the shared ``judge`` section as defaults."""
    section = judge_section(params, name)
    section.pop("out", None)
    context = section.pop("context", None)
    if context is not None:
        ctx = (params.get("contexts") or {}).get(context)
        if ctx is None:
            raise KeyError(f"judge {name!r} reads contexts.{context}, which is not defined")
        out = ctx.get("out", f"data/context/{context}")
        section["method_options"] = {**section.get("method_options", {}),
                                     "contexts": f"{out}/contexts.parquet"}
    common = dict(params.get("judge") or {})
    return JudgeConfig.from_params(section, common)


def check_writable_dir(out_dir: str | Path) -> Path:
    """Create ``out_dir`` if needed and prove a file can be written in it.

    Raises:
        ValueError: it exists and is not a folder, or cannot be created or written (the
            message names it).
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: output exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        from capjudge.atomic import temp_path

        probe = temp_path(out / "write-probe")
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ValueError(f"{out}: output folder cannot be written ({exc.strerror or exc})"
                         ) from None
    return out


def run_judge(items_path: str | Path, out_dir: str | Path, config: JudgeConfig,
              backend: Backend | None = None,
              progress: Callable[[int, int], None] | None = None) -> JudgeSummary:
    """Run one judge over the ingested items in this process and write its outputs.

    Returns the summary (the same one the Prefect flow writes). ``progress`` is called with
    (done, total) requests (default: log lines about every 5 %).
    """
    started = time.perf_counter()
    items = load_items(items_path)
    total = len(items)
    if config.limit:
        items = items[: config.limit]
    # Before any model call: an output that cannot be written must not be found after the
    # calls were paid for.
    check_writable_dir(out_dir)
    with output_lock(out_dir):
        backend = backend or make_backend(config)
        # Another judge's judgements in the folder are refused before anything is asked.
        check_existing(out_dir, {"method": [config.method], "backend": [backend.backend_id],
                                 "snapshot": [backend.snapshot()]}, {i.id for i in items})
        progress = progress or progress_logger(f"judge {config.method}")
        if config.submit == "batch":
            from capjudge.batch_client import make_batch_client

            # Batches are submitted and polled by this one process; their state (batches.json)
            # lives in the stage's output directory unless batch_options.state_dir says so.
            client: JudgeClient = make_batch_client(config, backend, out_dir, progress)
        else:
            client = make_client(config, backend, progress)
        result = judge_items(items, config, backend=backend, client=client)
        raise_if_stopped(result.stats)
        table = rows_table(result.rows)
        if not result.stats.interrupted:
            table = merged_with_existing(out_dir, table, dict(
                get_method(config.method).settings(MethodOptions())))
        summary = summarise(table, result.stats, config, backend.describe(),
                            time.perf_counter() - started)
        summary["items"] = {"judged": len(items), "total": total}
        write_outputs(out_dir, table, summary, complete=not result.stats.interrupted)
    if result.stats.interrupted:
        answered = sum(r.status != "error" or "not sent" not in (r.reason or "")
                       for r in result.responses)
        raise RunInterrupted(
            f"stopped ({client.stop_reason or 'interrupted'}) with {answered} of "
            f"{len(result.responses)} requests answered; the answers are in the request "
            f"cache and {out_dir} is marked incomplete: run the same command again to "
            "finish (nothing answered is asked again)")
    return summary


class RunInterrupted(KeyboardInterrupt):
    """A signal stopped the run; what was answered is cached and written, marked incomplete."""


def write_outputs(out_dir: str | Path, table: pa.Table, summary: JudgeSummary, *,
                  complete: bool = True) -> None:
    """The judgements and summary as one set (each file renamed into place whole).

    The folder is marked incomplete in between; a run stopped by a signal writes what it
    has and leaves the mark (``complete=False``): later stages refuse the folder until a run
    finishes it.

    Raises:
        OutputWriteError: the disk is full or the folder cannot be written.
    """
    try:
        with stage_outputs(out_dir) as out:
            with atomic_path(out / "judgements.parquet") as tmp:
                pq.write_table(table, tmp)
            write_summary(out, summary)
        if not complete:
            write_text(Path(out_dir) / INCOMPLETE_MARKER, "stopped by a signal\n")
    except OSError as exc:
        raise OutputWriteError.of(out_dir, exc, table.nbytes, what="the judgements",
                                  then="nothing paid for is lost: the answers are in the "
                                       "request cache, run again once there is room") from None


__all__ = ["JUDGEMENTS_SCHEMA", "JudgeConfig", "JudgeResult", "Judgement", "OutputWriteError",
           "RunInterrupted", "check_reachable", "combine_parts", "config_from_params",
           "judge_section", "judge_items", "judgement", "load_items", "make_backend",
           "make_client",
           "method_options", "plan", "repeat_planned", "run_judge", "shared_client",
           "summarise", "verify_media", "write_part", "write_summary"]
