"""The client's sending threads: one pool, earlier calls first (issue 42).

A flow runs several chunk tasks on one client at once. With a first-in-first-out pool their
requests mixed, so every chunk running ended within the same wave, and the pipe drained while
the next chunks were planned. Here a call's work is queued at once (:meth:`SendPool.submit_all`)
and the threads take the oldest call's work first: the first chunk ends first, and the flow
plans the next one while the later chunks' requests are still going out. Work of one call
keeps its order; a follow-up (sent from inside its parent's thread) does not pass through.
"""

from __future__ import annotations

import itertools
import queue
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


_POOLS: weakref.WeakSet[SendPool] = weakref.WeakSet()
_STOP = -1  # sorts before every call: a thread takes it next, after the work in its hands


def _end_all() -> None:
    """At exit: each thread finishes the request in its hands (its answer is cached), then ends.

    Called when the interpreter is about to join its threads (as concurrent.futures' pools
    are ended); work still queued is not started.
    """
    for pool in list(_POOLS):
        pool.end()


_register = getattr(threading, "_register_atexit", None)
if _register is not None:
    _register(_end_all)


def _close(shared: _Shared) -> None:
    """A pool nobody holds: its idle threads end within a second (safe in a finalizer)."""
    shared.closed = True


class _Shared:
    """What a pool's threads share with it (never the pool: a pool nobody holds is ended)."""

    def __init__(self) -> None:
        self.work: queue.PriorityQueue[tuple[int, int, Any]] = queue.PriorityQueue()
        self.order = itertools.count()
        self.threads = 0
        self.waiting = 0  # threads started or done, not yet holding work
        self.lock = threading.Lock()
        self.closed = False  # the pool is gone: idle threads end

    def end(self) -> None:
        """End every thread once it has finished the work in its hands."""
        with self.lock:
            for _ in range(self.threads):
                self.work.put((_STOP, next(self.order), None))

    def serve(self) -> None:
        while True:
            try:
                # A timeout, to see that the pool is gone: its finalizer only sets `closed`
                # (taking the queue's lock there could deadlock a thread that holds it).
                call, _, work = self.work.get(timeout=1.0)
            except queue.Empty:
                if self.closed:
                    return
                continue
            if call == _STOP:
                return
            future, fn, args = work
            with self.lock:
                self.waiting -= 1
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # noqa: BLE001 - the caller reads it
                    future.set_exception(exc)
            del work, future, fn, args  # nothing of a finished call kept alive while waiting
            with self.lock:
                self.waiting += 1


class SendPool:
    """Up to ``size`` threads (started as work comes) taking the oldest call's work first.

    Its threads end when the pool is no longer held (its client is gone: within a second)
    or the interpreter exits, each after the request in its hands.

    Args:
        size: the most threads.
        name: their name's prefix.
    """

    def __init__(self, size: int, name: str = "capjudge-send") -> None:
        self.size = max(1, size)
        self.name = name
        self._shared = _Shared()
        self._calls = itertools.count()
        _POOLS.add(self)
        weakref.finalize(self, _close, self._shared)

    def submit_all(self, fn: Callable[..., T], arguments: Sequence[tuple[Any, ...]]
                   ) -> list[Future[T]]:
        """Run ``fn(*args)`` for each of ``arguments`` on the threads, as one call.

        Its work is queued at once, after every earlier call's and before every later one's.
        """
        futures: list[Future[T]] = [Future() for _ in arguments]
        shared = self._shared
        with shared.lock:
            call = next(self._calls)
            for future, args in zip(futures, arguments, strict=True):
                shared.work.put((call, next(shared.order), (future, fn, args)))
            # Threads more while work waits that no waiting thread will take.
            wanted = min(self.size - shared.threads, shared.work.qsize() - shared.waiting)
            for _ in range(max(0, wanted)):
                # Not daemons (a request in flight is answered and cached before the
                # process ends), so ended at exit by _end_all where the interpreter allows.
                thread = threading.Thread(target=shared.serve, daemon=_register is None,
                                          name=f"{self.name}-{shared.threads}")
                shared.threads += 1
                shared.waiting += 1
                thread.start()
        return futures

    def end(self) -> None:
        """End every thread once it has finished the work in its hands."""
        self._shared.end()
