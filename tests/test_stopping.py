"""capjudge.util.stopping: SIGTERM/SIGINT end a process whose threads would keep it alive."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from capjudge.util.stopping import exit_promptly_on_signals

# A process like a judge stage under Prefect: the handler in place turns SIGTERM into an
# exception, and unwinding it waits for a busy non-daemon worker thread (forever here).
SCRIPT = textwrap.dedent("""
    import signal, sys, threading, time
    def previous(signum, frame):
        raise SystemExit("terminated")
    signal.signal(signal.SIGTERM, previous)
    if sys.argv[1] == "on":
        from capjudge.util.stopping import exit_promptly_on_signals
        exit_promptly_on_signals(grace_s=1.0)
    worker = threading.Thread(target=lambda: time.sleep(3600))
    worker.start()
    print("ready", flush=True)
    while True:  # the exception lands here; the interpreter's exit then waits for the worker
        time.sleep(0.1)
""")


def _start(mode: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, mode], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_a_busy_thread_no_longer_keeps_the_process_alive() -> None:
    stuck = _start("off")
    stuck.send_signal(signal.SIGTERM)
    with pytest.raises(subprocess.TimeoutExpired):
        stuck.wait(timeout=3)  # the previous handler ran, the thread keeps the process
    stuck.kill()
    stuck.communicate()
    proc = _start("on")
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 128 + signal.SIGTERM
    assert time.monotonic() - t0 < 5
    assert "still running 1 s after signal 15" in (proc.stderr.read() if proc.stderr else "")


def test_not_in_the_main_thread_and_not_stacked() -> None:
    import threading

    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(exit_promptly_on_signals()))
    thread.start()
    thread.join()
    assert result == [False]
    before = signal.getsignal(signal.SIGTERM)
    before_int = signal.getsignal(signal.SIGINT)
    def plain(signum: int, frame: object) -> None:
        pass

    try:
        signal.signal(signal.SIGTERM, plain)  # whatever an earlier test left installed
        assert exit_promptly_on_signals()
        installed = signal.getsignal(signal.SIGTERM)
        assert installed is not plain
        assert exit_promptly_on_signals()
        assert signal.getsignal(signal.SIGTERM) is installed  # not wrapped twice
    finally:
        signal.signal(signal.SIGTERM, before)
        signal.signal(signal.SIGINT, before_int)
