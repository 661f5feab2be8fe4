"""One thread for every local model's tensor work in the process.

PyTorch's CPU kernels run their parallel regions on an OpenMP team that belongs to the calling
thread (GNU libgomp in PyTorch's wheels). A model loaded on one thread and run on another (the
client's worker threads, Prefect's task threads) gives the process two teams, and once libgomp
manages more threads than there are cores it stops spin-waiting between parallel regions: its
threads sleep on a futex after each one and are woken for the next, and a decoder pass has
thousands of them. Measured on the 2-core machine, the likelihood judge on 120 Flickr8k-Expert
candidates: 0.313 s per candidate called from the thread that loaded the model, 0.35-0.37
from a worker thread (twice the futex calls, 2.4x the kernel time), 0.316 with loading and
calls on one worker thread. So every local backend loads and runs on this one thread; calls
from other threads wait for it (a local model uses every core anyway, so they would only
contend).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_LOCK = threading.Lock()
_EXECUTOR: ThreadPoolExecutor | None = None
_PID = 0  # the process the executor's thread lives in (a forked child must make its own)
_MINE = threading.local()


def _mark() -> None:
    _MINE.compute = True


def _executor() -> ThreadPoolExecutor:
    global _EXECUTOR, _PID
    with _LOCK:
        if _EXECUTOR is None or _PID != os.getpid():
            _EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="capjudge-compute",
                                           initializer=_mark)
            _PID = os.getpid()
        return _EXECUTOR


def on_compute_thread() -> bool:
    """Whether the caller is the compute thread."""
    return bool(getattr(_MINE, "compute", False))


def run(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """``fn(*args, **kwargs)`` on the compute thread; its result, or its exception re-raised.

    Called from the compute thread itself (a backend method calling another), ``fn`` runs
    directly.
    """
    if on_compute_thread():
        return fn(*args, **kwargs)
    return _executor().submit(fn, *args, **kwargs).result()


def computes(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorator: the function always runs on the compute thread (see :func:`run`)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        return run(fn, *args, **kwargs)

    return wrapper
