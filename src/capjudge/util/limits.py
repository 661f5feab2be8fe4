"""Rate limits and ``Retry-After`` pauses shared by every worker of a judge, through files.

What the client (:class:`~capjudge.client.JudgeClient`) asks before every send: a
:class:`Limiter` and a :class:`Pause`. :class:`RateLimiter` and :class:`SharedPause` hold for
the threads of one process. When a runner spreads a judge over several processes (a Dask or Ray
cluster), each process would otherwise keep its own budget and the judge as a whole would send
``workers x rpm``. The classes here keep the budget and the pause in small files in a directory
every worker sees (by default next to the request cache, which must be shared anyway):

- :class:`FileRateLimiter`: the sliding window of recent sends, one file per server. A send
  takes an exclusive lock on a lock file, reads the window, admits the batch if it fits, writes
  the window back (temporary file + rename) and releases the lock; a send that does not fit
  sleeps outside the lock until the oldest entry leaves the window.
- :class:`FilePause`: the end of the current ``Retry-After`` window as a wall-clock time, raised
  (never lowered) under the same kind of lock and read without one (renames are atomic).

What holds where
    On one host (any number of processes): exactly, with ``fcntl`` locks. Across hosts on a
    shared filesystem: as far as the filesystem honours POSIX locks (NFSv4 and NFSv3 with
    ``lockd`` do; some FUSE and object-store mounts do not) and as far as the hosts' clocks
    agree (the window is in wall-clock time: run NTP; a skew of ``s`` seconds lets at most the
    sends of ``s`` seconds through early). A deployment without such a filesystem can implement
    :class:`Limiter` and :class:`Pause` on a key-value store.

Cost
    Nothing when no ``rpm``/``tpm`` is set (the limiter is not built). Otherwise one
    lock + read + write of a file of at most ~100 entries per batch sent: sends are grouped in
    buckets of 1/100 of the window, and an entry is kept until its bucket's end has left the
    window, so the limiter is conservative (it may admit up to 1 % fewer requests than the
    budget, never more).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from capjudge.util.atomic import write_text


class Limiter(Protocol):
    """What the client asks before every send.

    :class:`RateLimiter` for the threads of one process,
    :class:`FileRateLimiter` for workers in several processes or on several
    hosts.
    """

    def acquire(self, tokens: int = 0, requests: int = 1) -> float:
        """Block until ``requests`` requests carrying ``tokens`` tokens fit.

        Returns the seconds waited.
        """


def window_budget(per_minute: float | None, window_s: float) -> float | None:
    """A per-minute budget scaled to a window of ``window_s`` seconds (None: unlimited)."""
    return None if per_minute is None else per_minute * window_s / 60.0


class RateLimiter:
    """Sliding-window limiter on requests and tokens per minute (thread-safe).

    ``rpm`` and ``tpm`` are per-minute budgets, enforced over sliding windows of ``window_s``
    seconds with the budget scaled to the window (``rpm * window_s / 60`` requests per
    window): providers that enforce a minute's budget in shorter quanta are met by a shorter
    window. A batch counts as its number of requests, not as one.
    """

    def __init__(self, rpm: float | None = None, tpm: float | None = None,
                 window_s: float = 60.0, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.rpm, self.tpm, self.window = rpm, tpm, window_s
        self._max_requests = window_budget(rpm, window_s)
        self._max_tokens = window_budget(tpm, window_s)
        self._events: deque[tuple[float, int, int]] = deque()  # (time, requests, tokens)
        self._lock = threading.Lock()
        self._clock, self._sleep = clock, sleep

    def acquire(self, tokens: int = 0, requests: int = 1) -> float:
        """Block until ``requests`` requests of ``tokens`` tokens in all fit.

        Returns the time waited. A batch larger than the whole budget still goes, alone in its
        window.
        """
        if self.rpm is None and self.tpm is None:
            return 0.0
        waited = 0.0
        while True:
            with self._lock:
                now = self._clock()
                while self._events and self._events[0][0] <= now - self.window:
                    self._events.popleft()
                fits = not self._events or (
                    (self._max_requests is None
                     or sum(e[1] for e in self._events) + requests <= self._max_requests)
                    and (self._max_tokens is None
                         or sum(e[2] for e in self._events) + tokens <= self._max_tokens))
                if fits:
                    self._events.append((now, requests, tokens))
                    return waited
                delay = max(0.01, self._events[0][0] + self.window - now)
            self._sleep(delay)
            waited += delay


class Pause(Protocol):
    """A pause shared by every worker that calls one server: what a ``Retry-After`` sets.

    :class:`SharedPause` shares it between the threads of one client; a runner that spreads a
    judge over processes or hosts can pass its own implementation (a timestamp in a shared file
    or key-value store) as ``JudgeClient(pause=...)``.
    """

    def pause_for(self, seconds: float) -> None:
        """Ask every worker to send nothing for ``seconds`` from now (windows only extend)."""

    def remaining(self) -> float:
        """Seconds until the current window ends (0 when no pause is in force)."""


class SharedPause:
    """:class:`Pause` for the threads of one process (thread-safe)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._until = 0.0
        self._lock = threading.Lock()
        self._clock = clock

    def pause_for(self, seconds: float) -> None:
        """Ask every thread to send nothing for ``seconds`` from now (windows only extend)."""
        with self._lock:
            self._until = max(self._until, self._clock() + max(0.0, seconds))

    def remaining(self) -> float:
        """Seconds until the current window ends (0 when no pause is in force)."""
        with self._lock:
            return max(0.0, self._until - self._clock())

# Buckets per window: bounds the state file at ~100 entries whatever the rpm.
_BUCKETS = 100

# POSIX (fcntl) locks belong to the process, not to the thread: two threads of one process
# would both "hold" the file lock. A process-wide lock per path serialises them first.
_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


def _thread_lock(path: str) -> threading.Lock:
    with _THREAD_LOCKS_GUARD:
        return _THREAD_LOCKS.setdefault(path, threading.Lock())


@contextlib.contextmanager
def locked(path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if needed).

    The lock holds against every thread of this process and every other process that locks
    it the same way.

    ``lockf`` (POSIX record locks) rather than ``flock``: NFS clients implement those across
    hosts, while ``flock`` on NFS is an emulation with the same per-process semantics anyway.
    """
    key = os.path.abspath(path)
    with _thread_lock(key):
        fd = os.open(key, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.lockf(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        return default
    except (OSError, ValueError):
        # A damaged state file must not stop a judge: start from an empty window (the worst
        # case is one window's worth of sends over the budget, which the server's 429 and the
        # retries absorb).
        return default


def _write_json(path: Path, data: Any) -> None:
    write_text(path, json.dumps(data, separators=(",", ":")))


def scope_key(facts: Mapping[str, object]) -> str:
    """A file-name-safe key for the server a budget belongs to (backend id and base URL).

    Two judges on one endpoint share its budget and its pauses.
    """
    payload = json.dumps({"backend": facts.get("backend"), "base_url": facts.get("base_url")},
                         sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


class FileRateLimiter:
    """Sliding-window rpm/tpm limiter whose window lives in a file shared by every worker.

    The same interface and budget rules as :class:`RateLimiter`: ``rpm`` and
    ``tpm`` per minute, enforced over windows of ``window_s`` seconds with the budget scaled to
    the window; a batch counts as its number of requests; a batch larger than the whole budget
    goes alone.

    A send stays in the window ``arrival_margin_s`` longer than the window itself: the limiter
    admits a request, the server counts it when it arrives, and a worker process's first
    requests can take a second to get there (its HTTP set-up, on busy cores). Without the margin
    a late first window and an on-time second one reach the server closer together than the
    window (measured in CI: 7 arrivals within 2.25 s under a budget of 4 per 3 s). The margin
    costs ``window / (window + margin)`` of the budget's throughput: 1.6 % at 60 s.
    """

    def __init__(self, path: str | Path, rpm: float | None = None, tpm: float | None = None,
                 window_s: float = 60.0, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep,
                 arrival_margin_s: float | None = None) -> None:
        """Share the window stored at ``path`` (its folder is created).

        Args:
            path: the state file (a ``.lock`` file is made next to it).
            rpm: requests per minute (None: unlimited).
            tpm: tokens per minute (None: unlimited).
            window_s: the sliding window's length in seconds.
            clock: wall-clock time (shared between processes and, with NTP, hosts).
            sleep: how to wait (tests pass a fake).
            arrival_margin_s: how much longer than the window a send is counted (None: one
                second, at most half the window).
        """
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.rpm, self.tpm, self.window = rpm, tpm, float(window_s)
        self._max_requests = window_budget(rpm, window_s)
        self._max_tokens = window_budget(tpm, window_s)
        self._width = self.window / _BUCKETS
        self._margin = min(1.0, self.window / 2) if arrival_margin_s is None \
            else max(0.0, float(arrival_margin_s))
        self._clock, self._sleep = clock, sleep

    def acquire(self, tokens: int = 0, requests: int = 1) -> float:
        """Block until ``requests`` requests of ``tokens`` tokens in all fit in the shared window.

        Returns the seconds waited.
        """
        if self.rpm is None and self.tpm is None:
            return 0.0
        waited = 0.0
        while True:
            with locked(self.lock_path):
                now = self._clock()
                # [bucket, requests, tokens]; a bucket counts until its *end* leaves the
                # window, so a send is never forgotten early.
                span = self.window + self._margin  # counted until it has surely arrived
                entries = [e for e in _read_json(self.path, [])
                           if (e[0] + 1) * self._width > now - span]
                fits = not entries or (
                    (self._max_requests is None
                     or sum(e[1] for e in entries) + requests <= self._max_requests)
                    and (self._max_tokens is None
                         or sum(e[2] for e in entries) + tokens <= self._max_tokens))
                if fits:
                    bucket = math.floor(now / self._width)
                    if entries and entries[-1][0] == bucket:
                        entries[-1] = [bucket, entries[-1][1] + requests,
                                       entries[-1][2] + tokens]
                    else:
                        entries.append([bucket, requests, tokens])
                    _write_json(self.path, entries)
                    return waited
                delay = max(0.01, (entries[0][0] + 1) * self._width + span - now)
            self._sleep(delay)
            waited += delay


class FilePause:
    """:class:`Pause` in a file.

    A ``Retry-After`` seen by one worker makes every worker of every process that shares the
    file wait.
    """

    def __init__(self, path: str | Path, clock: Callable[[], float] = time.time) -> None:
        """Share the pause stored at ``path`` (its folder is created)."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self._clock = clock

    def pause_for(self, seconds: float) -> None:
        """Ask every worker to send nothing for ``seconds`` from now (windows only extend)."""
        with locked(self.lock_path):
            until = max(float(_read_json(self.path, {}).get("until", 0.0)),
                        self._clock() + max(0.0, seconds))
            _write_json(self.path, {"until": until})

    def remaining(self) -> float:
        """Seconds until the current window ends (0 when no pause is in force)."""
        until = float(_read_json(self.path, {}).get("until", 0.0))
        return max(0.0, until - self._clock())


def shared_limits(directory: str | Path, facts: Mapping[str, object], rpm: float | None,
                  tpm: float | None, window_s: float = 60.0
                  ) -> tuple[FileRateLimiter | None, FilePause]:
    """The limiter (None without rpm/tpm) and pause shared by every worker calling one server.

    The server is the one described by ``facts`` (a backend's :meth:`describe`); the shared
    state is kept under ``directory``.
    """
    base = Path(directory) / scope_key(facts)
    limiter = FileRateLimiter(f"{base}.window.json", rpm, tpm, window_s) \
        if rpm is not None or tpm is not None else None
    return limiter, FilePause(f"{base}.pause.json")


__all__ = ["FilePause", "FileRateLimiter", "locked", "scope_key", "shared_limits"]
