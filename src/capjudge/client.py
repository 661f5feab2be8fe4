"""The wrapper every backend runs inside: cache, retries, rate limiting, concurrency, progress.

Backends only answer batches (see :class:`capjudge.backends.base.Backend`). Everything that is
about *calling* them lives here, once:

- a content-addressed cache (:class:`capjudge.cache.RequestCache`): an answered request is never
  asked again, and answers are stored the moment they arrive, so a killed run resumes without
  repeating any answered request;
- retries of transient failures (429, 5xx, timeouts, malformed bodies) with exponential backoff
  and full jitter, honouring ``Retry-After`` when the server sends one: the wait is capped
  (``max_retry_after_s``; past the cap the request fails with the reason instead of sleeping
  for a day), and every worker of the client pauses until the window ends
  (:class:`~capjudge.limits.SharedPause`), so the others do not keep sending into a window the
  server asked us to leave alone;
- a client-side requests-per-minute and tokens-per-minute limiter;
- a thread pool of ``concurrency`` workers;
- per-request statuses: a request that still fails is an ``error`` (or ``refused``) response
  with the reason, never an exception that loses the batch, and never a score. That holds for
  the client's own steps too: a token estimate that cannot read an image falls back to a
  conservative guess, and an unexpected error in one batch fails that batch's requests only.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from capjudge.backends.base import Backend
from capjudge.cache import RequestCache, is_cacheable
from capjudge.cost import request_tokens
from capjudge.credentials import redact
from capjudge.limits import Limiter, Pause, RateLimiter, SharedPause, shared_limits
from capjudge.protocol import BackendError, JudgeRequest, JudgeResponse
from capjudge.records import JSONValue
from capjudge.stopping import on_stop

log = logging.getLogger(__name__)

# Every client alive in this process: a SIGINT/SIGTERM stops them all (capjudge.stopping).
_LIVE: weakref.WeakSet[JudgeClient] = weakref.WeakSet()


def stop_all(reason: str = "interrupted") -> None:
    """Stop every live client of this process: nothing new is sent after this returns."""
    for client in list(_LIVE):
        client.stop(reason)


on_stop(stop_all)

# What the limiter charges for a request whose estimate failed: a high-detail image at the
# largest tile count (1445) plus a long prompt, so the budget errs on the safe side.
CONSERVATIVE_REQUEST_TOKENS = 4000

# Rounds of follow-ups an answer may take (a 0-100 score needs at most two: the leading digits,
# then "10" on the way to "100").
MAX_FOLLOW_UP_ROUNDS = 4


DEFAULT_MAX_RETRY_AFTER_S = 120.0

# How long a claim on a request (a cache lease, see RequestCache.claim) may stand before
# another process asks the question itself: longer than any one call with its retries.
DEFAULT_LEASE_S = 900.0


class AuthError(RuntimeError):
    """The server rejected the credentials (401, or 403 about the key): the run stopped.

    The message is the server's, redacted of credentials.
    """


_WARNED_UNPINNED: set[tuple[str, str]] = set()


def warn_unpinned(backend_id: str, why: str) -> None:
    """Say once per process that ``backend_id``'s snapshot does not identify its weights."""
    if (backend_id, why) not in _WARNED_UNPINNED:
        _WARNED_UNPINNED.add((backend_id, why))
        log.warning("unpinned snapshot: %s: %s", backend_id, why)


class WrongServerError(RuntimeError):
    """The base URL does not answer as an OpenAI-compatible API: the run stopped."""


def raise_if_stopped(stats: ClientStats) -> None:
    """End the run when its client stopped for good: credentials rejected, or not the API.

    Nothing is written: every row after the failure would be a copy of it. The answers that
    came before it are in the request cache; the next run reads them from there.

    Raises:
        AuthError: the server rejected the credentials.
        WrongServerError: the server is not an OpenAI-compatible API.
    """
    if stats.auth_failure:
        raise AuthError(f"the server rejected the credentials, the run stopped: "
                        f"{stats.auth_failure}")
    if stats.fatal_failure:
        raise WrongServerError(f"the run stopped: {stats.fatal_failure}")


@dataclass
class RetryPolicy:
    """Exponential backoff with full jitter; ``Retry-After`` is a floor when given.

    Attributes:
        max_attempts: tries per request, the first included.
        base_s: the first backoff's upper bound (doubling per attempt, up to ``max_s``).
        max_s: the largest backoff without a ``Retry-After``.
        max_retry_after_s: the longest ``Retry-After`` the client waits; a request asked to
            wait longer fails with the reason (a daily quota's "come back tomorrow" must not
            hang a stage for a day).
    """

    max_attempts: int = 5
    base_s: float = 0.5
    max_s: float = 30.0
    max_retry_after_s: float = DEFAULT_MAX_RETRY_AFTER_S

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1: the first) before the next try.

        A uniform draw from ``rng`` up to the attempt's backoff, raised to ``retry_after``
        when that is longer.
        """
        backoff = min(self.max_s, self.base_s * 2 ** (attempt - 1))
        jittered = rng.uniform(0, backoff)
        return max(jittered, retry_after or 0.0)


class ClientStatsDict(TypedDict, total=False):
    """:class:`ClientStats` as JSON (what tasks return to their flow)."""

    requests: int
    cache_hits: int
    calls: int
    retries: int
    statuses: dict[str, int]
    prompt_tokens: int
    completion_tokens: int
    cache_write_failures: int
    auth_failure: str | None
    fatal_failure: str | None
    interrupted: bool


@dataclass
class ClientStats:
    """What a run did: calls made, cache hits, retries, statuses.

    Every :meth:`JudgeClient.run` counts into a fresh instance and returns it, so a task on any
    worker (thread, process, host) reports exactly its own work; a flow adds them up with
    :meth:`merge`. Nothing here depends on which process the client lives in.
    """

    requests: int = 0
    cache_hits: int = 0
    calls: int = 0  # backend.generate() invocations x batch size (i.e. requests sent)
    retries: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_write_failures: int = 0
    # Why the server rejected our credentials (the first such failure); the run must stop.
    auth_failure: str | None = None
    # Why the run stopped because the server is not what was asked for (not the API).
    fatal_failure: str | None = None
    # The run was stopped by a signal (Ctrl-C, SIGTERM): what was not answered was not sent.
    interrupted: bool = False

    def merge(self, other: ClientStats) -> ClientStats:
        """Add ``other``'s counts to this one (in place); returns self."""
        self.auth_failure = self.auth_failure or other.auth_failure
        self.fatal_failure = self.fatal_failure or other.fatal_failure
        self.interrupted = self.interrupted or other.interrupted
        self.requests += other.requests
        self.cache_hits += other.cache_hits
        self.calls += other.calls
        self.retries += other.retries
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cache_write_failures += other.cache_write_failures
        for status, n in other.statuses.items():
            self.statuses[status] = self.statuses.get(status, 0) + n
        return self

    def to_dict(self) -> ClientStatsDict:
        """A JSON-able copy (what tasks return to their flow)."""
        return {"requests": self.requests, "cache_hits": self.cache_hits, "calls": self.calls,
                "retries": self.retries, "statuses": dict(self.statuses),
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "cache_write_failures": self.cache_write_failures,
                "auth_failure": self.auth_failure, "fatal_failure": self.fatal_failure,
                "interrupted": self.interrupted}

    @classmethod
    def from_dict(cls, data: ClientStatsDict) -> ClientStats:
        """The inverse of :meth:`to_dict`."""
        fields = data.copy()
        if "statuses" in fields:
            fields["statuses"] = dict(fields["statuses"])
        return cls(**fields)


class JudgeClient:
    """Runs requests through a backend with caching, retries, rate limits and concurrency."""

    def __init__(self, backend: Backend, cache: RequestCache | None = None, *,
                 retry: RetryPolicy | None = None, rpm: float | None = None,
                 tpm: float | None = None, concurrency: int | None = None,
                 progress: Callable[[int, int], None] | None = None, seed: int = 0,
                 fingerprint: str | None = None, pause: Pause | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 limiter: Limiter | None = None) -> None:
        """Wrap ``backend``.

        Args:
            backend: what answers.
            cache: the request cache (None: no caching).
            retry: retry policy (attempts, backoff, the ``Retry-After`` cap).
            rpm: requests-per-minute budget (None: unlimited).
            tpm: tokens-per-minute budget (None: unlimited).
            concurrency: worker threads (default: the backend's).
            progress: called with (done, total) requests.
            seed: seeds the backoff jitter.
            fingerprint: joins the model snapshot in the cache key.
            pause: the ``Retry-After`` pause every worker honours (default: one shared by the
                threads of this client).
            sleep: how to wait (tests pass a fake).
            limiter: the rpm/tpm limiter (default: one for the threads of this client, from
                ``rpm``/``tpm``; a runner spreading a judge over processes or hosts passes a
                shared one, :class:`capjudge.limits.FileRateLimiter`).
        """
        self.backend = backend
        self.cache = cache
        self.retry = retry or RetryPolicy()
        self.limiter: Limiter = limiter or RateLimiter(rpm, tpm)
        self.pause: Pause = pause or SharedPause()
        self._sleep = sleep
        self.concurrency = max(1, concurrency or backend.capabilities.concurrency)
        # Bounds the backend calls in flight across *every* run of this client: a flow runs
        # several chunk tasks on one shared client, each with its own thread pool, and without
        # this they would make up to concurrency x tasks calls at once.
        self._slots = threading.BoundedSemaphore(self.concurrency)
        self.progress = progress
        self.stats = ClientStats()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        # Asks a remote server what it serves (a server that cannot be reached stops the run
        # here, before any cache look-up could answer for it).
        self._snapshot = backend.snapshot() + (f"+{fingerprint}" if fingerprint else "")
        verified = backend.verified()
        pinned, how = backend.pinning()
        # Not for a server that did not even list its models: the first request stops the
        # run with what it is instead (one line, not a warning about weights besides it).
        if not pinned and verified:
            warn_unpinned(backend.backend_id, how)
        # Set by the first authentication failure: nothing more is sent by this client.
        self.auth_failure: str | None = None
        # Set by an answer showing the server is not the API asked for: nothing more is sent.
        self.fatal_failure: str | None = None
        # Set by stop() (a signal): nothing new is sent; requests in flight finish.
        self._stop = threading.Event()
        self.stop_reason: str | None = None
        # Until one answer came back, the first request of a run goes alone: a wrong server
        # (an HTML page, a rejected key) costs one request, not `concurrency` of them. A
        # backend whose server already proved itself (it listed its models to this key) needs
        # no probe: the pipe fills from the first request (a whole latency saved per run).
        self._probed = verified
        # How deep this thread is in _send (a follow-up is sent from inside its parent's).
        self._depth = threading.local()
        _LIVE.add(self)
        self.lease_s = DEFAULT_LEASE_S
        self.poll_s = 0.05

    def stop(self, reason: str = "interrupted") -> None:
        """Send nothing more.

        Requests not yet sent fail as not sent; those in flight finish (their answers are
        cached). Called on SIGINT/SIGTERM for every live client.
        """
        self.stop_reason = self.stop_reason or reason
        self._stop.set()

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stop.is_set()

    def lookup(self, request: JudgeRequest, key: str) -> JudgeResponse | None:
        """The cached answer to ``request``, its statuses derived from the current settings.

        The cache stores the answer (and, where the backend keeps it, its raw form); whether
        it is ``low_mass`` is decided now by :meth:`Backend.reread`, so changing ``min_mass``
        or the reading rules re-reads cached answers and never asks again.
        """
        if self.cache is None:
            return None
        hit = self.cache.get(key)
        if hit is None:
            return None
        try:
            hit = self.backend.reread(request, hit)
        except Exception:  # noqa: BLE001 - a re-read that fails keeps the stored reading
            log.exception("re-reading a cached answer failed; its stored reading is kept")
        hit.cached = True
        hit.cache_key = key
        return hit

    def key(self, request: JudgeRequest) -> str:
        """The request's cache key under this backend and model snapshot."""
        return request.cache_key(self.backend.backend_id, self._snapshot)

    def run(self, requests: Sequence[JudgeRequest]) -> list[JudgeResponse]:
        """Answer every request (order preserved); never raises for a failed request.

        Each response carries its cache key (``response.cache_key``), computed once here.
        """
        return self.run_with_stats(requests)[0]

    def run_with_stats(self, requests: Sequence[JudgeRequest]
                       ) -> tuple[list[JudgeResponse], ClientStats]:
        """:meth:`run`, also returning the statistics of this call alone.

        The client's cumulative :attr:`stats` are updated too.
        """
        stats = ClientStats()
        results: list[JudgeResponse | None] = [None] * len(requests)
        keys = [self.key(r) for r in requests]
        pending: list[int] = []
        first_of: dict[str, int] = {}
        duplicates: dict[int, int] = {}
        for i, key in enumerate(keys):
            hit = self.lookup(requests[i], key)
            stats.requests += 1
            stats.cache_hits += hit is not None
            if hit is not None:
                results[i] = hit
            elif key in first_of:
                duplicates[i] = first_of[key]  # same question twice in one run: ask once
            else:
                first_of[key] = i
                pending.append(i)
        done = len(requests) - len(pending) - len(duplicates)
        if self.progress:
            self.progress(done, len(requests))
        batch_size = max(1, self.backend.capabilities.max_batch)
        batches = [pending[i:i + batch_size] for i in range(0, len(pending), batch_size)]
        try:
            if batches and not self._probed:
                # The first request alone: a wrong server stops the run after one request.
                first = self._batch_of(requests, keys, batches[0], stats)
                done = self._record_batch(batches[0], first, results, done, requests)
                batches = batches[1:]
            if batches:
                done = self._fan_out(batches, requests, keys, stats, results, done)
        except KeyboardInterrupt:
            # Ctrl-C (or SIGTERM made KeyboardInterrupt): send nothing more, keep what came.
            self.stop("interrupted")
        stats.interrupted = self.stopped
        for i, j in duplicates.items():
            results[i] = results[j]
        unanswered = ("not sent: the run was stopped" + (f" ({self.stop_reason})"
                                                          if self.stop_reason else "")
                      if self.stopped else "not answered")
        final = [r if r is not None else JudgeResponse(status="error", reason=unanswered)
                 for r in results]
        for r, key in zip(final, keys, strict=True):
            r.cache_key = key
            if r.reason:
                # A server may repeat the key in its message: never stored or printed.
                r.reason = redact(r.reason)
        with self._lock:
            for r in final:
                stats.statuses[r.status] = stats.statuses.get(r.status, 0) + 1
            stats.auth_failure = stats.auth_failure or self.auth_failure
            stats.fatal_failure = stats.fatal_failure or self.fatal_failure
            self.stats.merge(stats)
        return final, stats

    def _batch_of(self, requests: Sequence[JudgeRequest], keys: list[str], batch: list[int],
                  stats: ClientStats) -> list[JudgeResponse]:
        return self._run_batch([requests[i] for i in batch], [keys[i] for i in batch], stats)

    def _record_batch(self, batch: list[int], answered: list[JudgeResponse],
                 results: list[JudgeResponse | None], done: int,
                 requests: Sequence[JudgeRequest]) -> int:
        """Record a batch's answers; returns the new count of done requests."""
        for i, response in zip(batch, answered, strict=True):
            results[i] = response
        if any(r.status != "error" or "not sent" not in (r.reason or "") for r in answered):
            self._probed = True
        done += len(batch)
        if self.progress:
            self.progress(done, len(requests))
        return done

    def _fan_out(self, batches: list[list[int]], requests: Sequence[JudgeRequest],
                 keys: list[str], stats: ClientStats, results: list[JudgeResponse | None],
                 done: int) -> int:
        """The batches on ``concurrency`` threads; on Ctrl-C the queued ones are dropped."""
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(batches)))
        try:
            futures = {pool.submit(self._batch_of, requests, keys, b, stats): b
                       for b in batches}
            for future in as_completed(futures):
                batch = futures[future]
                try:
                    answered = future.result()
                except Exception as exc:  # noqa: BLE001 - a client bug fails one batch only
                    log.exception("a batch of %d request(s) failed in the client", len(batch))
                    answered = [JudgeResponse(status="error", reason=f"client error: "
                                              f"{type(exc).__name__}: {exc}") for _ in batch]
                done = self._record_batch(batch, answered, results, done, requests)
        except BaseException:
            # Requests in flight finish on their threads (their answers are cached); none
            # queued is started, and nobody waits for them here.
            self.stop("interrupted")
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return done

    def _run_batch(self, batch: list[JudgeRequest], keys: list[str], stats: ClientStats
                   ) -> list[JudgeResponse]:
        """Answer a batch, checking the cache just before sending.

        Another process on the same cache may have answered a request since this run looked
        (two runs started together), or be asking it right now: each request is looked up
        again (O(1)) and claimed (:meth:`RequestCache.claim`) before it is sent; one another
        process has claimed is waited for and read from the cache when its answer lands (or
        asked here if that process gives up or dies).
        """
        if self.cache is None:
            return self._send(batch, keys, stats)
        out: list[JudgeResponse | None] = [None] * len(batch)
        waiting = list(range(len(batch)))
        poll = self.poll_s
        while waiting:
            send: list[int] = []
            held: list[int] = []
            for i in waiting:
                hit = self.lookup(batch[i], keys[i])
                if hit is not None:
                    out[i] = hit
                    with self._lock:
                        stats.cache_hits += 1
                elif self.cache.claim(keys[i], self.lease_s):
                    send.append(i)
                else:
                    held.append(i)
            if send:
                try:
                    answers = self._send([batch[i] for i in send], [keys[i] for i in send],
                                         stats)
                finally:
                    for i in send:
                        self.cache.release(keys[i])
                for i, answer in zip(send, answers, strict=True):
                    out[i] = answer
            waiting = held
            if waiting:
                self._sleep(poll)
                poll = min(1.0, poll * 1.5)
        return [o if o is not None else JudgeResponse(status="error", reason="not answered")
                for o in out]

    def _send(self, batch: list[JudgeRequest], keys: list[str], stats: ClientStats
              ) -> list[JudgeResponse]:
        out: list[JudgeResponse | None] = [None] * len(batch)
        todo = list(range(len(batch)))
        attempt = 0
        while todo:
            attempt += 1
            not_sent = self._not_sent_reason()
            if not_sent is not None:
                for i in todo:
                    out[i] = JudgeResponse(status="error", reason=not_sent, attempts=attempt - 1)
                break
            # Every request of the batch counts against rpm (a batch of 16 is 16 requests).
            self.limiter.acquire(sum(self._tokens(batch[i]) for i in todo), len(todo))
            answers, elapsed = self._generate([batch[i] for i in todo])
            with self._lock:
                stats.calls += len(todo)
            retry_later: list[int] = []
            retry_after: float | None = None
            self._depth.value = getattr(self._depth, "value", 0) + 1
            try:
                for i, answer in zip(todo, answers, strict=True):
                    if isinstance(answer, JudgeResponse):
                        out[i] = self._accept(batch[i], keys[i], answer, attempt,
                                              elapsed / len(todo), stats)
                        continue
                    final = self._failed(answer, attempt, stats)
                    if final is not None:
                        out[i] = final
                        continue
                    retry_later.append(i)
                    if answer.retry_after is not None:
                        retry_after = max(retry_after or 0.0, answer.retry_after)
            finally:
                self._depth.value -= 1
                if self._depth.value == 0:
                    # The batch and its follow-ups (sent from inside it) are done.
                    self.backend.end_of_chain()
            todo = retry_later
            if todo:
                self._back_off(len(todo), attempt, retry_after, stats)
        return [o if o is not None else JudgeResponse(status="error", reason="not answered")
                for o in out]

    def _not_sent_reason(self) -> str | None:
        """Why nothing more may be sent, or None.

        Stopped, credentials rejected, not the API asked for, or a pause past the cap.
        """
        if self.stopped:
            return "not sent: the run was stopped" + (f" ({self.stop_reason})"
                                                       if self.stop_reason else "")
        if self.auth_failure is not None:
            return f"not sent: the server rejected the credentials ({self.auth_failure})"
        if self.fatal_failure is not None:
            return f"not sent: {self.fatal_failure}"
        # The server asked every worker to stay away longer than we may wait: fail what is
        # left with that reason rather than send into the window.
        return self._wait_for_pause()

    def _generate(self, requests: list[JudgeRequest]
                  ) -> tuple[list[JudgeResponse | BackendError], float]:
        """One backend call: per request an answer or its error, and the seconds it took."""
        started = time.perf_counter()
        try:
            with self._slots:
                started = time.perf_counter()  # latency, not the wait for a slot
                answers = self.backend.generate(requests)
        except BackendError as exc:
            # Raised rather than returned (e.g. a picture that changed since ingest, found
            # while building the request): an expected failure, recorded with its reason.
            log.warning("backend %s: %s", self.backend.backend_id, exc)
            answers = [exc] * len(requests)
        except Exception as exc:  # noqa: BLE001 - a backend bug must not lose the batch
            log.exception("backend %s raised", self.backend.backend_id)
            answers = [BackendError(f"backend raised {type(exc).__name__}: {exc}",
                                    transient=False)] * len(requests)
        return answers, time.perf_counter() - started

    def _accept(self, request: JudgeRequest, key: str, answer: JudgeResponse, attempt: int,
                latency_s: float, stats: ClientStats) -> JudgeResponse:
        """An answer finished (follow-ups), counted and cached."""
        answer = self._follow_up(request, answer, stats)
        answer.attempts = attempt
        if not answer.latency_s:
            answer.latency_s = latency_s
        with self._lock:
            stats.prompt_tokens += answer.usage.prompt_tokens
            stats.completion_tokens += answer.usage.completion_tokens
        if self.cache is not None:
            answer.read_with = self._read_with()
            self._store(key, answer, request, stats)
        return answer

    def _failed(self, error: BackendError, attempt: int, stats: ClientStats
                ) -> JudgeResponse | None:
        """A failed request's final response, or None when it is to be retried."""
        if getattr(error, "auth", False):
            # Stop at once: every further request would be rejected the same way.
            with self._lock:
                self.auth_failure = self.auth_failure or str(error)
                stats.auth_failure = stats.auth_failure or str(error)
            return JudgeResponse(status="error", attempts=attempt, reason=(
                f"authentication failed: {error}"))
        if getattr(error, "fatal", False):
            # The server is not what was asked for: every request would get the same.
            with self._lock:
                self.fatal_failure = self.fatal_failure or str(error)
                stats.fatal_failure = stats.fatal_failure or str(error)
            return JudgeResponse(status="error", attempts=attempt, reason=str(error))
        if (error.transient and error.retry_after is not None
                and error.retry_after > self.retry.max_retry_after_s):
            # Everyone else stays away too (see _wait_for_pause).
            self.pause.pause_for(error.retry_after)
            return JudgeResponse(status=error.status, attempts=attempt, reason=(
                f"{error} (the server asked to retry after {error.retry_after:g} s, "
                f"over the {self.retry.max_retry_after_s:g} s cap, max_retry_after_s; "
                f"not retried; after {attempt} attempt{'s' if attempt > 1 else ''})"))
        if error.transient and attempt < self.retry.max_attempts:
            return None
        why = f"{error} (after {attempt} attempt{'s' if attempt > 1 else ''})"
        return JudgeResponse(status=error.status, reason=why, attempts=attempt)

    def _back_off(self, n: int, attempt: int, retry_after: float | None,
                  stats: ClientStats) -> None:
        """Wait before retrying ``n`` requests (a ``Retry-After`` pauses every worker)."""
        if retry_after is not None:
            # The window is the server's, not this worker's: every worker waits it out.
            self.pause.pause_for(retry_after)
        with self._lock:
            stats.retries += n
            delay = self.retry.delay(attempt, retry_after, self._rng)
        log.info("retrying %d request(s) in %.2f s (attempt %d)", n, delay, attempt + 1)
        if self._sleep is time.sleep:
            self._stop.wait(delay)  # a stop wakes the wait: nothing is retried after it
        else:
            self._sleep(delay)

    def _follow_up(self, request: JudgeRequest, answer: JudgeResponse, stats: ClientStats
                   ) -> JudgeResponse:
        """Finish an answer with the follow-up requests its backend asks for, before caching it.

        See :meth:`~capjudge.backends.base.Backend.follow_ups`: e.g. the other leading digits
        of a score a digit-split tokenizer wrote one digit at a time.

        Follow-ups go through the cache, the limiter and the retries like any request and are
        counted in ``stats`` (requests, calls, cache hits, retries); their tokens are in the
        finished answer's usage, so they are not counted twice.
        """
        for _ in range(MAX_FOLLOW_UP_ROUNDS):
            follow = self.backend.follow_ups(request, answer)
            if not follow:
                break
            scratch = ClientStats()
            replies: list[JudgeResponse] = []
            for r in follow:
                key = self.key(r)
                hit = self.lookup(r, key)
                scratch.requests += 1
                scratch.cache_hits += hit is not None
                replies.append(hit if hit is not None
                               else self._run_batch([r], [key], scratch)[0])
            with self._lock:
                stats.requests += scratch.requests
                stats.cache_hits += scratch.cache_hits
                stats.calls += scratch.calls
                stats.retries += scratch.retries
                stats.cache_write_failures += scratch.cache_write_failures
            answer = self.backend.complete(request, answer, follow, replies)
        return answer

    def _read_with(self) -> dict[str, JSONValue]:
        """The settings an answer's statuses are derived with (stored with the answer)."""
        from capjudge.reading.tokens import READING_RULES_VERSION

        out: dict[str, JSONValue] = {"reading_rules": READING_RULES_VERSION}
        min_mass = getattr(self.backend, "min_mass", None)
        if isinstance(min_mass, (int, float)):
            out["min_mass"] = float(min_mass)
        confirm = getattr(self.backend, "confirm", None)
        if isinstance(confirm, str):
            # How off-contract verdicts were confirmed (capjudge.reading.confirm): a change
            # re-reads the stored answer (what it cannot confirm from it stays unconfirmed).
            out["confirm"] = confirm
        return out

    def _wait_for_pause(self) -> str | None:
        """Wait until the shared ``Retry-After`` window ends.

        Returns None, or the reason to give up when what is left of the window is longer than
        the cap.
        """
        while (left := self.pause.remaining()) > 0:
            if left > self.retry.max_retry_after_s:
                return (f"rate limited: the server asked every request to wait {left:.0f} s "
                        f"more (Retry-After), over the {self.retry.max_retry_after_s:g} s cap "
                        "(max_retry_after_s); not sent")
            self._sleep(left)
        return None

    def _tokens(self, request: JudgeRequest) -> int:
        """The request's estimated tokens for the limiter.

        Never fails the batch: a picture that cannot be read is the backend's to report, with
        the item's reason.
        """
        try:
            return sum(request_tokens(request))
        except Exception as exc:  # noqa: BLE001 - an estimate must not end the stage
            log.warning("token estimate failed (%s: %s); assuming a conservative %d tokens",
                        type(exc).__name__, exc, CONSERVATIVE_REQUEST_TOKENS)
            return CONSERVATIVE_REQUEST_TOKENS + request.decoding.max_tokens

    def _store(self, key: str, answer: JudgeResponse, request: JudgeRequest,
               stats: ClientStats) -> None:
        """Cache an answer.

        A failed write is counted and logged, never fatal (the answer is still returned and
        written to the stage's output).
        """
        assert self.cache is not None
        meta = {"backend": self.backend.backend_id, "template": request.template,
                "tag": request.tag}
        try:
            stored = self.cache.put(key, answer, meta)
        except OSError as exc:  # a blocked shard directory, a full or read-only disk
            log.warning("request cache write failed (%s); the answer is kept in this run's "
                        "output but will be asked again next time", exc)
            stored = None
        if stored is None or (stored is False and is_cacheable(answer)):
            with self._lock:
                stats.cache_write_failures += 1


_CLEANED: set[str] = set()
_CLEANED_LOCK = threading.Lock()


def _clean_once(cache: RequestCache) -> None:
    """Remove a cache's orphan temporaries and stale claims, once per process per cache."""
    root = str(cache.root.resolve())
    with _CLEANED_LOCK:
        if root in _CLEANED:
            return
        _CLEANED.add(root)
    cache.clean()


def build_client(backend: Backend, *, cache_dir: str | Path | None = None,
                 max_attempts: int = 5, backoff_base_s: float = 0.5,
                 rpm: float | None = None, tpm: float | None = None,
                 concurrency: int | None = None,
                 progress: Callable[[int, int], None] | None = None,
                 fingerprint: str | None = None,
                 max_retry_after_s: float = DEFAULT_MAX_RETRY_AFTER_S,
                 pause: Pause | None = None, rate_window_s: float = 60.0,
                 shared_dir: str | Path | None = None) -> JudgeClient:
    """The cached, retrying, rate-limited client around a backend, as every stage builds it.

    ``max_retry_after_s`` caps a ``Retry-After`` wait; ``pause`` replaces the per-client
    ``Retry-After`` pause (for a runner that shares it between processes). ``rate_window_s``
    is the window rpm/tpm are enforced over (:class:`~capjudge.limits.RateLimiter`). With
    ``shared_dir`` the rpm/tpm window and the ``Retry-After`` pause live in files there
    (:func:`capjudge.limits.shared_limits`), so they hold across every process and host that
    builds its client with the same folder.
    """
    from capjudge.cache import RequestCache, default_cache_dir

    try:
        cache: RequestCache | None = RequestCache(cache_dir or default_cache_dir())
    except OSError as exc:
        log.warning("request cache unavailable (%s): answers will not be cached", exc)
        cache = None
    if cache is not None:
        _clean_once(cache)
    limiter: Limiter | None = None
    if shared_dir is not None:
        limiter, file_pause = shared_limits(shared_dir, backend.describe(), rpm, tpm,
                                            rate_window_s)
        pause = pause or file_pause
    elif rpm is not None or tpm is not None:
        limiter = RateLimiter(rpm, tpm, rate_window_s)
    return JudgeClient(backend, cache,
                       retry=RetryPolicy(max_attempts=max_attempts, base_s=backoff_base_s,
                                         max_retry_after_s=max_retry_after_s),
                       rpm=rpm, tpm=tpm, concurrency=concurrency, progress=progress,
                       fingerprint=fingerprint, pause=pause, limiter=limiter)
