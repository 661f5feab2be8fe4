"""A prompt stop on SIGTERM/SIGINT for processes that run native engine threads.

A judge stage with llama.cpp's engine (or PyTorch) loaded did not stop on SIGTERM: Prefect's
handler turns the signal into an exception in the main thread, and unwinding it waits for the
task runner's worker threads, which go on asking the engine until their chunk is done
(minutes). :func:`exit_promptly_on_signals` keeps whatever handler was there (Prefect's, which
records the flow run's state, or Python's ``KeyboardInterrupt``) and adds a deadline: if the
process is still alive ``grace_s`` seconds after the signal, it exits at once with status
``128 + signal`` (the shell's convention for "killed by a signal"). Answers already received
are in the request cache, so a rerun asks only what was not answered.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

DEFAULT_GRACE_S = 3.0
"""Seconds the previous handler gets to wind the process down before it is ended."""

_MARK = "_capjudge_exit_promptly"


def _hard_exit(signum: int, grace_s: float) -> None:
    """End the process now (no thread joins, no atexit handlers)."""
    try:
        sys.stderr.write(f"capjudge: still running {grace_s:g} s after signal {signum}; "
                         "exiting\n")
        sys.stderr.flush()
    finally:
        os._exit(128 + signum)


def _handler(signum: int, previous: Any, grace_s: float
             ) -> Callable[[int, FrameType | None], None]:
    def handle(sig: int, frame: FrameType | None) -> None:
        timer = threading.Timer(grace_s, _hard_exit, args=(sig, grace_s))
        timer.daemon = True
        timer.start()
        if callable(previous):
            previous(sig, frame)  # Prefect's handler, Python's KeyboardInterrupt, ...
        else:  # SIG_DFL (or a handler set outside Python): the default ends the process
            os._exit(128 + sig)

    setattr(handle, _MARK, True)
    return handle


def exit_promptly_on_signals(grace_s: float = DEFAULT_GRACE_S,
                             signals: Iterable[int] = (signal.SIGTERM, signal.SIGINT)) -> bool:
    """Make SIGTERM/SIGINT end this process within ``grace_s`` seconds.

    The handler in place runs first (and may end the process cleanly); a timer then ends it
    if it is still alive. Signals that are ignored (``SIG_IGN``) stay ignored; calling this
    again does not stack handlers.

    Args:
        grace_s: seconds the previous handler gets before the process is ended.
        signals: the signals to handle.

    Returns:
        False outside the main thread (Python handles signals only there): nothing changed.
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    for signum in signals:
        previous = signal.getsignal(signum)
        if previous is signal.SIG_IGN or getattr(previous, _MARK, False):
            continue
        signal.signal(signum, _handler(signum, previous, grace_s))
    return True


__all__ = ["DEFAULT_GRACE_S", "exit_promptly_on_signals"]
