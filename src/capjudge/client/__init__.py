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
  (:class:`~capjudge.util.limits.SharedPause`), so the others do not keep sending into a window the
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
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future, as_completed
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from capjudge.backends.base import Backend
from capjudge.cache import RequestCache
from capjudge.client.answers import CachedAnswers
from capjudge.client.guard import CONSERVATIVE_REQUEST_TOKENS, SendGuard
from capjudge.client.pool import SendPool
from capjudge.client.stats import (
    DEFAULT_MAX_RETRY_AFTER_S,
    AuthError,
    ClientStats,
    ClientStatsDict,
    RetryPolicy,
    WrongServerError,
    raise_if_stopped,
)
from capjudge.protocol import BackendError, JudgeRequest, JudgeResponse
from capjudge.util.credentials import redact
from capjudge.util.limits import Limiter, Pause, RateLimiter, SharedPause, shared_limits
from capjudge.util.stopping import on_stop

log = logging.getLogger(__name__)

# Re-exported: the statistics, the retry policy and the errors live in capjudge.client.stats,
# the sending rules in capjudge.client.guard.
__all__ = ["CONSERVATIVE_REQUEST_TOKENS", "DEFAULT_LEASE_S", "DEFAULT_MAX_RETRY_AFTER_S",
           "MAX_FOLLOW_UP_ROUNDS", "AuthError", "ClientStats", "ClientStatsDict", "JudgeClient",
           "RetryPolicy", "SendGuard", "WrongServerError", "build_client", "raise_if_stopped",
           "stop_all", "warn_unpinned"]

# Every client alive in this process: a SIGINT/SIGTERM stops them all (capjudge.util.stopping).
_LIVE: weakref.WeakSet[JudgeClient] = weakref.WeakSet()


def stop_all(reason: str = "interrupted") -> None:
    """Stop every live client of this process: nothing new is sent after this returns."""
    for client in list(_LIVE):
        client.stop(reason)


on_stop(stop_all)

# Rounds of follow-ups an answer may take (a 0-100 score needs at most two: the leading digits,
# then "10" on the way to "100").
MAX_FOLLOW_UP_ROUNDS = 4


# How long a claim on a request (a cache lease, see RequestCache.claim) may stand before
# another process asks the question itself: longer than any one call with its retries.
DEFAULT_LEASE_S = 900.0


_WARNED_UNPINNED: set[tuple[str, str]] = set()


def warn_unpinned(backend_id: str, why: str) -> None:
    """Say once per process that ``backend_id``'s snapshot does not identify its weights."""
    if (backend_id, why) not in _WARNED_UNPINNED:
        _WARNED_UNPINNED.add((backend_id, why))
        log.warning("unpinned snapshot: %s: %s", backend_id, why)


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
                shared one, :class:`capjudge.util.limits.FileRateLimiter`).
        """
        self.backend = backend
        self.cache = cache
        self._sleep = sleep
        self.concurrency = max(1, concurrency or backend.capabilities.concurrency)
        # Bounds the backend calls in flight across *every* run of this client: a flow runs
        # several chunk tasks on one shared client, each with its own thread pool, and without
        # this they would make up to concurrency x tasks calls at once.
        self._slots: AbstractContextManager[object] = threading.BoundedSemaphore(
            self.concurrency)
        # A backend that gates its own exchanges is bounded there instead (_use_backend_gate).
        self.progress = progress
        self.stats = ClientStats()
        self._lock = threading.Lock()
        # One pool of sending threads for every call of this client (issue 42): chunks run on
        # threads of one process share it, the oldest call's requests first
        # (capjudge.client.pool), so one chunk ends while the next ones' requests are already
        # going out: no drain between chunks.
        self._pool: SendPool | None = None
        # Stop, credentials, Retry-After, rpm/tpm and backoff: capjudge.client.guard.
        self.guard = SendGuard(retry or RetryPolicy(), limiter or RateLimiter(rpm, tpm),
                               pause or SharedPause(), sleep, seed, self._lock)
        self._threads = self._use_backend_gate(backend)
        # Asks a remote server what it serves (a server that cannot be reached stops the run
        # here, before any cache look-up could answer for it).
        snapshot = backend.snapshot() + (f"+{fingerprint}" if fingerprint else "")
        # Keys, look-ups (re-read under the current settings) and writes: capjudge.client.answers.
        self.answers = CachedAnswers(backend, cache, snapshot)
        verified = backend.verified()
        pinned, how = backend.pinning()
        # Not for a server that did not even list its models: the first request stops the
        # run with what it is instead (one line, not a warning about weights besides it).
        if not pinned and verified:
            warn_unpinned(backend.backend_id, how)
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

    def _use_backend_gate(self, backend: Backend) -> int:
        """Hand the bound on requests in flight to a backend that gates its own exchanges.

        Where :attr:`Backend.gates_in_flight`: the backend keeps ``concurrency`` in flight,
        the client holds no slot around the call, and a stop drops what is queued at the gate.
        Returns how many sending threads to run: twice the concurrency, so the next requests
        wait at the gate while answers are read, unless an rpm/tpm budget is set (a request is
        charged when it leaves for the gate, and one that waited there would reach the server
        in a later window than the one it was charged to).
        """
        if not backend.gates_in_flight:
            return self.concurrency
        backend.limit_in_flight(self.concurrency)
        self._slots = nullcontext()
        self.guard.on_halt = backend.drop_queued
        unlimited = (getattr(self.guard.limiter, "rpm", 0) is None
                     and getattr(self.guard.limiter, "tpm", 0) is None)
        return 2 * self.concurrency if unlimited else self.concurrency

    def stop(self, reason: str = "interrupted") -> None:
        """Send nothing more.

        Requests not yet sent fail as not sent; those in flight finish (their answers are
        cached). Called on SIGINT/SIGTERM for every live client.
        """
        self.guard.stop(reason)

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self.guard.stopped

    @property
    def stop_reason(self) -> str | None:
        """Why the client was stopped (None: it was not)."""
        return self.guard.stop_reason

    @property
    def retry(self) -> RetryPolicy:
        """The retry policy."""
        return self.guard.retry

    @property
    def limiter(self) -> Limiter:
        """The rpm/tpm limiter every request is charged against."""
        return self.guard.limiter

    @property
    def pause(self) -> Pause:
        """The ``Retry-After`` window every worker honours."""
        return self.guard.pause

    def lookup(self, request: JudgeRequest, key: str) -> JudgeResponse | None:
        """The cached answer to ``request``, re-read under the current settings, or None.

        See :meth:`capjudge.client.answers.CachedAnswers.lookup`.
        """
        return self.answers.lookup(request, key)

    def key(self, request: JudgeRequest) -> str:
        """The request's cache key under this backend and model snapshot."""
        return self.answers.key(request)

    def _store(self, key: str, answer: JudgeResponse, request: JudgeRequest,
               stats: ClientStats) -> None:
        """Cache a finished answer; a failed write is counted in ``stats``."""
        if not self.answers.store(key, answer, request):
            with self._lock:
                stats.cache_write_failures += 1

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
        unanswered = self.guard.stopped_reason() if self.stopped else "not answered"
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
            stats.auth_failure = stats.auth_failure or self.guard.auth_failure
            stats.fatal_failure = stats.fatal_failure or self.guard.fatal_failure
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
        """The batches on the client's ``concurrency`` threads (Ctrl-C drops the queued ones)."""
        with self._lock:
            if self._pool is None:
                self._pool = SendPool(self._threads)
            pool = self._pool
        futures: dict[Future[list[JudgeResponse]], list[int]] = {}
        try:
            submitted = pool.submit_all(self._batch_of,
                                        [(requests, keys, b, stats) for b in batches])
            futures = dict(zip(submitted, batches, strict=True))
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
            for future in futures:
                future.cancel()
            raise
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
            not_sent = self.guard.not_sent_reason()
            if not_sent is not None:
                for i in todo:
                    out[i] = JudgeResponse(status="error", reason=not_sent, attempts=attempt - 1)
                break
            self.guard.charge([batch[i] for i in todo])
            answers, elapsed = self._generate([batch[i] for i in todo])
            held = [i for i, a in zip(todo, answers, strict=True)
                    if isinstance(a, BackendError) and a.not_sent]
            with self._lock:
                stats.calls += len(todo) - len(held)
            if held and len(held) == len(todo):
                # Held back unsent (a stop, a Retry-After window, a rejected key): the guard
                # is asked again, and no attempt is counted.
                attempt -= 1
                self._held(answers)
                continue
            retry_later: list[int] = []
            retry_after: float | None = None
            self._depth.value = getattr(self._depth, "value", 0) + 1
            try:
                for i, answer in zip(todo, answers, strict=True):
                    if isinstance(answer, JudgeResponse):
                        out[i] = self._accept(batch[i], keys[i], answer, attempt,
                                              elapsed / len(todo), stats)
                        continue
                    final = self.guard.failed(answer, attempt, stats)
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
                self.guard.back_off(len(todo), attempt, retry_after, stats)
        return [o if o is not None else JudgeResponse(status="error", reason="not answered")
                for o in out]

    def _held(self, answers: Sequence[JudgeResponse | BackendError]) -> None:
        """Before asking the guard again about requests held back unsent.

        A ``Retry-After`` window they were held for becomes the client's pause (the thread
        that got the answer saying so may not have set it yet); otherwise a short wait, while
        that thread records why (a rejected key) or the stop is seen.
        """
        waits = [a.retry_after for a in answers
                 if isinstance(a, BackendError) and a.retry_after is not None]
        if waits:
            self.guard.pause.pause_for(max(waits))
        elif not self.stopped:
            time.sleep(0.005)

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
            self._store(key, answer, request, stats)
        return answer

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
    is the window rpm/tpm are enforced over (:class:`~capjudge.util.limits.RateLimiter`). With
    ``shared_dir`` the rpm/tpm window and the ``Retry-After`` pause live in files there
    (:func:`capjudge.util.limits.shared_limits`), so they hold across every process and host that
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
