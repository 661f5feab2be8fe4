"""A prompt stop on SIGTERM/SIGINT for processes that run native engine threads.

A judge stage with llama.cpp's engine (or PyTorch) loaded did not stop on SIGTERM: Prefect's
handler turns the signal into an exception in the main thread, and unwinding it waits for the
task runner's worker threads, which go on asking the engine until their chunk is done
(minutes). :func:`exit_promptly_on_signals` keeps whatever handler was there (Prefect's, which
records the flow run's state, or Python's ``KeyboardInterrupt``) and adds a deadline: if the
process is still alive ``grace_s`` seconds after the signal, it exits at once with status
``128 + signal`` (the shell's convention for "killed by a signal"). Answers already received
are in the request cache, so a rerun asks only what was not answered.

Before the previous handler runs, the callbacks registered with :func:`on_stop` run (the
request clients stop sending: no new request leaves after the signal). A second signal ends
the process at once. Before the process ends itself, it ends its own child processes (an
ephemeral Prefect server, worker processes): nothing it started outlives it.
"""

from __future__ import annotations

import contextlib
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


_CALLBACKS: list[Callable[[str], None]] = []
_SIGNALLED: list[int] = []


def on_stop(callback: Callable[[str], None]) -> None:
    """Run ``callback(reason)`` as soon as a handled signal arrives (once per callback)."""
    if callback not in _CALLBACKS:
        _CALLBACKS.append(callback)


def stop_requested() -> bool:
    """Whether a handled signal has arrived in this process."""
    return bool(_SIGNALLED)


def descendants(pid: int) -> list[int]:
    """The process's children, grandchildren ... (Linux /proc; empty elsewhere)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                children = [int(c) for c in handle.read().split()]
        except (OSError, ValueError):
            continue
        for child in children:
            out += [child, *descendants(child)]
    return out


def terminate_children(timeout_s: float = 1.0) -> None:
    """SIGTERM every descendant of this process, then SIGKILL what is left after a moment."""
    import time

    pids = descendants(os.getpid())
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if alive(p)]
        time.sleep(0.05)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def alive(pid: int) -> bool:
    """Whether a process exists and has not exited (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie (exited, not yet reaped) is gone
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _hard_exit(signum: int, grace_s: float) -> None:
    """End the process now (no thread joins, no atexit handlers), its children first."""
    try:
        sys.stderr.write(f"capjudge: still running {grace_s:g} s after signal {signum}; "
                         "exiting\n")
        sys.stderr.flush()
        terminate_children()
    finally:
        os._exit(128 + signum)


def _handler(signum: int, previous: Any, grace_s: float
             ) -> Callable[[int, FrameType | None], None]:
    def handle(sig: int, frame: FrameType | None) -> None:
        if _SIGNALLED:  # a second signal: the user means it
            _hard_exit(sig, 0.0)
        _SIGNALLED.append(sig)
        for callback in list(_CALLBACKS):
            try:
                callback(f"signal {signal.Signals(sig).name}")
            except Exception:  # noqa: BLE001 - a callback must not keep the process alive
                pass
        timer = threading.Timer(grace_s, _hard_exit, args=(sig, grace_s))
        timer.daemon = True
        timer.start()
        if callable(previous):
            previous(sig, frame)  # Prefect's handler, Python's KeyboardInterrupt, ...
        else:  # SIG_DFL (or a handler set outside Python): the default ends the process,
            # and what it started ends first (an ephemeral Prefect server would outlive it).
            terminate_children()
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


__all__ = ["DEFAULT_GRACE_S", "alive", "descendants", "exit_promptly_on_signals", "on_stop",
           "stop_requested", "terminate_children"]
