"""Many threads' HTTP requests sent by one sending process (issue 42: a full pipe).

An API judge's client keeps ``concurrency`` requests in flight from threads that each send a
body, wait, and read the answer. With a fixed latency every answer of a wave arrives at once.
When the thread that received an answer also sent the next request, that request waited for
the reading of the answers before it (C answers read on one GIL), and the server's count of
requests in flight dropped at each wave. An event loop in a thread of this process did not
cure it: the loop waited for the GIL behind every thread reading an answer (10-90 ms at each
wave, measured). So:

- one **sending process** per process (``python -m capjudge.backends.http_worker``, started on
  first use, again after a fork or if it dies) does every exchange with aiohttp on its own
  loop and its own GIL;
- the gate of requests in flight (``limit`` per sender) lives there, around the exchange
  alone. The calling threads (more of them than the gate's size, see
  :attr:`capjudge.backends.base.Backend.gates_in_flight`) queue their bodies, already
  serialised, at the gate; the moment an answer is in, the next queued body goes out,
  however busy this process is reading answers;
- the JSON is written and read here, on the calling threads;
- what the parent's client would have stopped a thread from sending is not sent from the
  queue either: a reply with ``Retry-After`` holds the sender's queue until the window ends,
  a 401 holds it for good, and a stop drops it (:meth:`HTTPSender.drop`); each request held
  back fails as ``held``, and the client asks its guard again without counting an attempt.

Nothing here knows the OpenAI protocol: a :class:`Reply` is the status, the headers and the
bytes; :class:`TransportError` a request that got no reply (timeout, connection, the sending
process gone). Credentials travel in the headers over the pipe, never in argv or a file.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import queue
import struct
import subprocess
import sys
import threading
import weakref
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import IO, Any

HEAD = struct.Struct("!II")
"""A frame's head, both ways over the pipe: its JSON header's length, then its body's."""


@dataclass(frozen=True)
class Reply:
    """What the server sent back: the HTTP status, its headers (lower-case) and the bytes."""

    status: int
    headers: Mapping[str, str]
    content: bytes

    @property
    def text(self) -> str:
        """The body as text (undecodable bytes replaced)."""
        return self.content.decode("utf-8", "replace")


class TransportError(Exception):
    """No reply to a request: ``timeout``, ``connection`` or ``held``.

    ``held``: held back unsent, because the server had asked every request to wait
    (``retry_after`` seconds more) or rejected the key, or the queue was dropped
    (:meth:`HTTPSender.drop`).
    """

    def __init__(self, kind: str, message: str, retry_after: float | None = None) -> None:
        """``kind``: ``timeout``, ``connection`` or ``held``."""
        super().__init__(message)
        self.kind = kind
        self.retry_after = retry_after


def frame(header: dict[str, Any], body: bytes = b"") -> bytes:
    """One message over the pipe (either way): its head, its JSON header and its bytes."""
    raw = json.dumps(header).encode()
    return HEAD.pack(len(raw), len(body)) + raw + body


def _read_exactly(stream: IO[bytes], n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _read_frame(stream: IO[bytes]) -> tuple[dict[str, Any], bytes] | None:
    """The next message from the sending process (None: its stdout ended)."""
    head = _read_exactly(stream, HEAD.size)
    if head is None:
        return None
    size, length = HEAD.unpack(head)
    raw = _read_exactly(stream, size)
    content = _read_exactly(stream, length) if length else b""
    if raw is None or content is None:
        return None
    return json.loads(raw), content


class _Process:
    """The sending process and the thread that hands its replies to the waiting callers."""

    def __init__(self) -> None:
        self.proc = _spawn([sys.executable, "-m", "capjudge.backends.http_worker", "--parent",
                            str(os.getpid())])
        self.pid = os.getpid()
        self.waiting: dict[int, Future[Reply]] = {}
        self.configured: dict[str, tuple[Any, ...]] = {}
        self.lock = threading.Lock()
        self.ids = itertools.count()
        # Ready (its imports done, its loop reading): the first request then costs what the
        # others do (a rate budget counts requests when they leave, not when they arrive).
        stream = self.proc.stdout
        assert stream is not None
        self.alive = _read_frame(stream) is not None
        if self.alive:
            threading.Thread(target=self._read, name="capjudge-http-replies",
                             daemon=True).start()

    def send(self, header: dict[str, Any], body: bytes = b"") -> None:
        """Write one frame (under the lock: frames of several threads never interleave).

        Never called from a finalizer (a garbage collection inside the locked write would
        run it on this thread, which already holds the lock): see :func:`_forget`.
        """
        stream = self.proc.stdin
        assert stream is not None
        data = memoryview(frame(header, body))  # made before the lock is taken
        with self.lock:
            if not self.alive:
                raise BrokenPipeError("the sending process has ended")
            while data:  # a raw pipe may take a large body in parts
                written = stream.write(data)
                data = data[written or 0:]

    def _read(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        while (message := _read_frame(stream)) is not None:
            header, content = message
            with self.lock:
                future = self.waiting.pop(header["id"], None)
            if future is None:
                continue
            if header["kind"] == "reply":
                future.set_result(Reply(int(header["status"]), header["headers"], content))
            else:
                future.set_exception(TransportError(header["why"], header["message"],
                                                    header.get("retry_after")))
        # The process ended (killed, crashed): what was waiting gets no answer; a later
        # request starts a new one.
        with self.lock:
            self.alive = False
            waiting, self.waiting = self.waiting, {}
        for future in waiting.values():
            future.set_exception(TransportError("connection", "the sending process ended"))

    def close(self) -> None:
        with self.lock:
            self.alive = False
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


_LOCK = threading.Lock()
_PROCESS: _Process | None = None
_SPAWNER: tuple[int, queue.SimpleQueue[tuple[list[str], Future[Any]]]] | None = None


def _spawner_loop(requests: queue.SimpleQueue[tuple[list[str], Future[Any]]]) -> None:
    while True:
        argv, future = requests.get()
        try:
            future.set_result(subprocess.Popen(argv, stdin=subprocess.PIPE,
                                               stdout=subprocess.PIPE, bufsize=0))
        except BaseException as exc:  # noqa: BLE001 - the caller reads it
            future.set_exception(exc)


def _spawn(argv: list[str]) -> subprocess.Popen[bytes]:
    """Start the sending process from a thread that lives as long as this process.

    The sending process dies with the thread that started it (``PR_SET_PDEATHSIG``, see
    :func:`capjudge.backends.http_worker._die_with`): not a sending thread of a client, which
    ends when its client is gone, but this one, which ends only with the process.
    """
    global _SPAWNER
    if _SPAWNER is None or _SPAWNER[0] != os.getpid():
        requests: queue.SimpleQueue[tuple[list[str], Future[Any]]] = queue.SimpleQueue()
        threading.Thread(target=_spawner_loop, args=(requests,), daemon=True,
                         name="capjudge-http-spawner").start()
        _SPAWNER = (os.getpid(), requests)
    future: Future[subprocess.Popen[bytes]] = Future()
    _SPAWNER[1].put((argv, future))
    return future.result()


def sending_process() -> _Process:
    """This process's sending process (started on first use, after a fork, after its end)."""
    global _PROCESS
    with _LOCK:
        if _PROCESS is None or _PROCESS.pid != os.getpid() or not _PROCESS.alive:
            _PROCESS = _Process()
        return _PROCESS


@atexit.register
def _close_at_exit() -> None:
    if _PROCESS is not None and _PROCESS.pid == os.getpid():
        _PROCESS.close()


_SENDERS = itertools.count()


# Senders gone whose sessions are still to be closed. A finalizer only puts a name here
# (SimpleQueue.put is safe in finalizers); the next post sends the closes. A finalizer that
# wrote to the pipe itself deadlocked when a collection ran inside a write that held the lock.
_GONE: queue.SimpleQueue[str] = queue.SimpleQueue()


def _forget(name: str) -> None:
    """A sender is gone: its session is closed with the next request sent."""
    _GONE.put(name)


def _close_gone(process: _Process) -> None:
    """Send the closes of the senders gone since the last request."""
    while True:
        try:
            name = _GONE.get_nowait()
        except queue.Empty:
            return
        if process.configured.pop(name, None) is not None:
            process.send({"kind": "close", "sender": name})


class HTTPSender:
    """POSTs to one server through the sending process, at most ``limit`` at a time.

    Args:
        base_url: the server's URL; paths are appended to it.
        headers: sent with every request (authorization, content type).
        timeout_s: the whole exchange's limit.
        limit: requests in flight at once (:meth:`set_limit` changes it).
    """

    def __init__(self, base_url: str, headers: Mapping[str, str], timeout_s: float,
                 limit: int = 8) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = dict(headers)
        self.timeout_s = timeout_s
        self._limit = max(1, limit)
        self._name = f"{os.getpid()}-{next(_SENDERS)}"
        # A sender nobody holds any more has its session closed there (its connections).
        weakref.finalize(self, _forget, self._name)

    def set_limit(self, limit: int) -> None:
        """Bound the requests in flight at ``limit`` from the next request on."""
        self._limit = max(1, limit)

    def _config(self) -> tuple[Any, ...]:
        return (self.base_url, tuple(self._headers.items()), self.timeout_s, self._limit)

    def post(self, path: str, body: bytes) -> Reply:
        """Send ``body`` to ``base_url + path`` and wait for the reply (from any thread).

        Raises:
            TransportError: no reply (timeout, refused connection, unknown host, reset, the
                sending process gone).
        """
        process = sending_process()
        future: Future[Reply] = Future()
        number = -1
        try:
            _close_gone(process)
            config = self._config()
            if process.configured.get(self._name) != config:
                process.send({"kind": "config", "sender": self._name,
                              "base_url": self.base_url, "headers": self._headers,
                              "timeout_s": self.timeout_s, "limit": self._limit})
                process.configured[self._name] = config
            with process.lock:
                number = next(process.ids)
                process.waiting[number] = future
            process.send({"kind": "post", "sender": self._name, "id": number, "path": path},
                         body)
        except OSError as exc:
            with process.lock:
                process.waiting.pop(number, None)
            raise TransportError("connection", f"the sending process is gone ({exc})"
                                 ) from exc
        return future.result()

    def drop(self) -> None:
        """Fail every request queued at the gate, not yet sent, as ``held`` (a stop)."""
        process = _PROCESS
        if process is not None and process.alive and process.pid == os.getpid():
            try:
                process.send({"kind": "drop", "sender": self._name})
            except OSError:
                pass
