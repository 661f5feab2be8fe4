"""Whether, when and how much a client may send.

A stop, rejected credentials, a wrong server, the ``Retry-After`` window, the rpm/tpm budget
and the backoff between retries.

One :class:`SendGuard` per :class:`~capjudge.client.JudgeClient`, shared by its worker threads.
The client asks it before every send (:meth:`SendGuard.not_sent_reason`,
:meth:`SendGuard.charge`) and after every failure (:meth:`SendGuard.failed`,
:meth:`SendGuard.back_off`); answering, caching and fanning out stay in the client.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence

from capjudge.client.stats import ClientStats, RetryPolicy
from capjudge.cost import request_tokens
from capjudge.protocol import BackendError, JudgeRequest, JudgeResponse
from capjudge.util.limits import Limiter, Pause

log = logging.getLogger(__name__)

# What the limiter charges for a request whose estimate failed: a high-detail image at the
# largest tile count (1445) plus a long prompt, so the budget errs on the safe side.
CONSERVATIVE_REQUEST_TOKENS = 4000


def _nothing() -> None:
    """No backend queue to drop."""


class SendGuard:
    """The client's rules for sending (module doc).

    Args:
        retry: attempts, backoff and the ``Retry-After`` cap.
        limiter: the rpm/tpm budget every request is charged against.
        pause: the ``Retry-After`` window every worker honours.
        sleep: how to wait (tests pass a fake).
        seed: seeds the backoff jitter.
        lock: the client's lock (the statistics a run counts into are shared with it).
    """

    def __init__(self, retry: RetryPolicy, limiter: Limiter, pause: Pause,
                 sleep: Callable[[float], None], seed: int, lock: threading.Lock) -> None:
        self.retry = retry
        self.limiter = limiter
        self.pause = pause
        self.sleep = sleep
        self._rng = random.Random(seed)
        self._lock = lock
        # Set by stop() (a signal): nothing new is sent; requests in flight finish.
        self._stop = threading.Event()
        self.stop_reason: str | None = None
        # Set by the first authentication failure: nothing more is sent.
        self.auth_failure: str | None = None
        # Set by an answer showing the server is not the API asked for: nothing more is sent.
        self.fatal_failure: str | None = None
        # Called when nothing more may be sent (a stop, a rejected key, the wrong server): a
        # backend that queues requests at its own gate drops them (Backend.drop_queued).
        self.on_halt: Callable[[], None] = _nothing

    def stop(self, reason: str = "interrupted") -> None:
        """Send nothing more (the first reason given is kept)."""
        self.stop_reason = self.stop_reason or reason
        self._stop.set()
        self.on_halt()

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stop.is_set()

    def stopped_reason(self) -> str:
        """What a request not sent because of a stop says."""
        return "not sent: the run was stopped" + (f" ({self.stop_reason})"
                                                   if self.stop_reason else "")

    def not_sent_reason(self) -> str | None:
        """Why nothing more may be sent, or None.

        Stopped, credentials rejected, not the API asked for, or a pause past the cap.
        """
        if self.stopped:
            return self.stopped_reason()
        if self.auth_failure is not None:
            return f"not sent: the server rejected the credentials ({self.auth_failure})"
        if self.fatal_failure is not None:
            return f"not sent: {self.fatal_failure}"
        # The server asked every worker to stay away longer than we may wait: fail what is
        # left with that reason rather than send into the window.
        return self.wait_for_pause()

    def wait_for_pause(self) -> str | None:
        """Wait until the shared ``Retry-After`` window ends.

        Returns None, or the reason to give up when what is left of the window is longer than
        the cap.
        """
        while (left := self.pause.remaining()) > 0:
            if left > self.retry.max_retry_after_s:
                return (f"rate limited: the server asked every request to wait {left:.0f} s "
                        f"more (Retry-After), over the {self.retry.max_retry_after_s:g} s cap "
                        "(max_retry_after_s); not sent")
            self.sleep(left)
        return None

    def charge(self, requests: Sequence[JudgeRequest]) -> None:
        """Wait for the rpm/tpm budget of ``requests`` (a batch of 16 is 16 requests)."""
        self.limiter.acquire(sum(self.tokens(r) for r in requests), len(requests))

    def tokens(self, request: JudgeRequest) -> int:
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

    def failed(self, error: BackendError, attempt: int, stats: ClientStats
               ) -> JudgeResponse | None:
        """A failed request's final response, or None when it is to be retried."""
        if getattr(error, "auth", False):
            # Stop at once: every further request would be rejected the same way.
            with self._lock:
                self.auth_failure = self.auth_failure or str(error)
                stats.auth_failure = stats.auth_failure or str(error)
            self.on_halt()
            return JudgeResponse(status="error", attempts=attempt, reason=(
                f"authentication failed: {error}"))
        if getattr(error, "fatal", False):
            # The server is not what was asked for: every request would get the same.
            with self._lock:
                self.fatal_failure = self.fatal_failure or str(error)
                stats.fatal_failure = stats.fatal_failure or str(error)
            self.on_halt()
            return JudgeResponse(status="error", attempts=attempt, reason=str(error))
        if (error.transient and error.retry_after is not None
                and error.retry_after > self.retry.max_retry_after_s):
            # Everyone else stays away too (see wait_for_pause).
            self.pause.pause_for(error.retry_after)
            return JudgeResponse(status=error.status, attempts=attempt, reason=(
                f"{error} (the server asked to retry after {error.retry_after:g} s, "
                f"over the {self.retry.max_retry_after_s:g} s cap, max_retry_after_s; "
                f"not retried; after {attempt} attempt{'s' if attempt > 1 else ''})"))
        if error.transient and attempt < self.retry.max_attempts:
            return None
        why = f"{error} (after {attempt} attempt{'s' if attempt > 1 else ''})"
        return JudgeResponse(status=error.status, reason=why, attempts=attempt)

    def back_off(self, n: int, attempt: int, retry_after: float | None,
                 stats: ClientStats) -> None:
        """Wait before retrying ``n`` requests (a ``Retry-After`` pauses every worker)."""
        if retry_after is not None:
            # The window is the server's, not this worker's: every worker waits it out.
            self.pause.pause_for(retry_after)
        with self._lock:
            stats.retries += n
            delay = self.retry.delay(attempt, retry_after, self._rng)
        log.info("retrying %d request(s) in %.2f s (attempt %d)", n, delay, attempt + 1)
        if self.sleep is time.sleep:
            self._stop.wait(delay)  # a stop wakes the wait: nothing is retried after it
        else:
            self.sleep(delay)
