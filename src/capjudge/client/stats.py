"""What a client run reports, and how it retries.

The statistics a task returns to its flow, the retry policy, and the errors that stop a run
(credentials rejected, not the API).

Kept apart from :mod:`capjudge.client` so that what travels between processes (a chunk's
:class:`ClientStatsDict`) has a small home of its own; every name is re-exported there.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TypedDict

# The longest ``Retry-After`` a client waits by default (RetryPolicy.max_retry_after_s).
DEFAULT_MAX_RETRY_AFTER_S = 120.0


class AuthError(RuntimeError):
    """The server rejected the credentials (401, or 403 about the key): the run stopped.

    The message is the server's, redacted of credentials.
    """


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
