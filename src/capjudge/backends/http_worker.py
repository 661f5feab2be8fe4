"""The sending process of :mod:`capjudge.backends.http_loop`: HTTP exchanges on an asyncio loop.

Run as ``python -m capjudge.backends.http_worker``; it speaks frames on stdin and stdout
(:func:`capjudge.backends.http_loop.frame`, read here by :func:`read_frame`). In: ``config``
(a sender's URL, headers, timeout and gate size), ``post`` (a body to send), ``drop`` (fail
what is queued at a sender's gate) and ``close`` (a sender is gone). Out: ``ready`` once, then
``reply`` (status, headers, body) or ``failed`` (``timeout``, ``connection``, ``held``), each
tagged with the request's id. Nothing else is written to stdout. It ends when its stdin closes
(the parent is gone: nobody would read the answers), and ignores SIGINT: a Ctrl-C in the
terminal stops the parent's client from sending, and what is in flight is answered.

The process has nothing else to do, so the moment an answer frees a place at a sender's gate
the next queued body goes out, however busy the parent's threads are reading answers. What
the parent's client would not have sent is held back here too: after a reply with
``Retry-After`` the sender's queue waits out the window (each request queued fails as
``held``, with the time left, for the client to wait or give up by its own rules), after a
401 it sends nothing more.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import ssl
import sys
from typing import Any

from capjudge.backends.http_loop import HEAD, frame
from capjudge.backends.openai_wire import retry_after_s


async def read_frame(reader: asyncio.StreamReader) -> tuple[dict[str, Any], bytes] | None:
    """The next message (None at the end of the stream)."""
    try:
        head = await reader.readexactly(HEAD.size)
        size, length = HEAD.unpack(head)
        header = json.loads(await reader.readexactly(size))
        return header, await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        return None


def _ssl_context(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    """Verification as the parent's OpenAI client does it (its CA bundle, SSL_CERT_*)."""
    try:
        import httpx2

        return httpx2.create_ssl_context()
    except ImportError:  # pragma: no cover - httpx2 comes with openai
        return ssl.create_default_context(cafile=cafile, capath=capath)


class _Sender:
    """One server's session and gate, and whether its queue is held back."""

    def __init__(self, config: dict[str, Any], tls: ssl.SSLContext) -> None:
        import aiohttp

        self.url = str(config["base_url"]).rstrip("/")
        self.headers = dict(config["headers"])
        self.limit = max(1, int(config["limit"]))
        self.gate = asyncio.Semaphore(self.limit)
        self.timeout = float(config["timeout_s"])
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, ssl=tls),
            timeout=aiohttp.ClientTimeout(total=self.timeout), trust_env=True)
        # Requests queued at the gate (a hold fails them as not sent).
        self.waiting: set[asyncio.Task[None]] = set()
        # The server asked every request to wait (Retry-After) until then (loop time), or
        # rejected the key (401): nothing queued goes out; the parent's client decides.
        self.paused_until = 0.0
        self.refused: str | None = None

    def held(self) -> tuple[str, float | None] | None:
        """Why a request must not go out now (and the pause left), or None."""
        if self.refused is not None:
            return f"the server rejected the key ({self.refused})", None
        left = self.paused_until - asyncio.get_running_loop().time()
        if left > 0:
            return f"the server asked every request to wait {left:.1f} s (Retry-After)", left
        return None

    def hold(self, reply_status: int, headers: Any) -> None:
        """After a reply: hold the queue back if it says so (Retry-After, a rejected key)."""
        if reply_status < 400:
            return
        wait = retry_after_s(headers)
        if wait is not None and wait > 0:
            self.paused_until = max(self.paused_until,
                                    asyncio.get_running_loop().time() + wait)
        elif reply_status == 401:
            self.refused = "HTTP 401"
        else:
            return
        self.drop()

    def drop(self) -> None:
        """Fail every request queued at the gate as not sent."""
        for task in list(self.waiting):
            task.cancel()


class _Worker:
    def __init__(self, out: asyncio.StreamWriter) -> None:
        self.out = out
        self.senders: dict[str, _Sender] = {}
        self._tls: ssl.SSLContext | None = None

    def configure(self, header: dict[str, Any]) -> None:
        old = self.senders.get(header["sender"])
        if old is not None and old.url == str(header["base_url"]).rstrip("/"):
            limit = max(1, int(header["limit"]))
            if limit != old.limit:
                # A new gate size (the client's concurrency): requests already waiting keep
                # the old gate.
                old.gate, old.limit = asyncio.Semaphore(limit), limit
            old.headers = dict(header["headers"])
            return
        self.senders[header["sender"]] = _Sender(header, self.tls())

    def tls(self) -> ssl.SSLContext:
        """The TLS context every sender shares (built once)."""
        if self._tls is None:
            self._tls = _ssl_context(os.environ.get("SSL_CERT_FILE"),
                                     os.environ.get("SSL_CERT_DIR"))
        return self._tls

    def drop(self, header: dict[str, Any]) -> None:
        sender = self.senders.get(header["sender"])
        if sender is not None:
            sender.drop()

    async def close(self, header: dict[str, Any]) -> None:
        """The parent's sender is gone: its queue dropped, its connections closed."""
        sender = self.senders.pop(header["sender"], None)
        if sender is not None:
            sender.drop()
            await sender.session.close()

    async def post(self, header: dict[str, Any], body: bytes) -> None:
        out: dict[str, Any] = {"id": header["id"]}
        sender = self.senders.get(header["sender"])
        if sender is None:  # never configured, or closed: an answer all the same
            out.update(kind="failed", why="connection", message="unknown sender")
            self.out.write(frame(out))
            return
        gate = sender.gate
        task = asyncio.current_task()
        assert task is not None
        sender.waiting.add(task)
        try:
            await gate.acquire()
        except asyncio.CancelledError:
            held = sender.held()
            out.update(kind="failed", why="held", retry_after=held[1] if held else None,
                       message=held[0] if held else "the run was stopped")
            self.out.write(frame(out))
            return
        finally:
            sender.waiting.discard(task)
        try:
            held = sender.held()
            if held is not None:
                out.update(kind="failed", why="held", message=held[0], retry_after=held[1])
                self.out.write(frame(out))
                return
            content = await self._exchange(sender, header["path"], body, out)
        finally:
            gate.release()
        self.out.write(frame(out, content))

    async def _exchange(self, sender: _Sender, path: str, body: bytes,
                        out: dict[str, Any]) -> bytes:
        import aiohttp

        try:
            async with sender.session.post(sender.url + path, data=body,
                                           headers=sender.headers) as response:
                content = await response.read()
                headers = {k.lower(): v for k, v in response.headers.items()}
                out.update(kind="reply", status=response.status, headers=headers)
                sender.hold(response.status, headers)
                return content
        except TimeoutError:
            out.update(kind="failed", why="timeout",
                       message=f"no answer within {sender.timeout:g} s")
        except aiohttp.ClientError as exc:
            # ClientPayloadError (a body cut off) included: the server may be restarting.
            out.update(kind="failed", why="connection", message=f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - one request fails, never the process
            out.update(kind="failed", why="connection", message=f"{type(exc).__name__}: {exc}")
        return b""


async def _serve() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**31)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                 os.fdopen(sys.stdin.fileno(), "rb", buffering=0))
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(sys.stdout.fileno(), "wb", buffering=0))
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    worker = _Worker(writer)
    # Everything the first request would otherwise do first, done before "ready": importing
    # aiohttp and building the TLS context take ~1.3 s on an idle core and several seconds on
    # busy ones, and a request is charged to the rate budget when it leaves the parent. Done
    # after, the first window's requests reached the server late, close to the next window's
    # (CI: 6 arrivals within 2.25 s under a budget of 4 per 3 s).
    import aiohttp  # noqa: F401 - imported for its cost, used by _Sender

    worker.tls()
    writer.write(frame({"kind": "ready"}))  # the parent waits for it before its first post
    tasks: set[asyncio.Task[None]] = set()
    while (message := await read_frame(reader)) is not None:
        header, body = message
        if header["kind"] == "config":
            worker.configure(header)
        elif header["kind"] == "drop":
            worker.drop(header)
        elif header["kind"] in ("close", "post"):
            # A task each, held until it ends (the loop keeps only weak references).
            task = asyncio.create_task(worker.close(header) if header["kind"] == "close"
                                       else worker.post(header, body))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    # stdin closed: the parent is gone or done; nothing in flight would be read, and nothing
    # queued may go out. Ended at once: the kernel closes every connection now (a request
    # answered after its parent died would be work nobody stores).
    os._exit(0)


def _die_with(parent: int) -> None:
    """Be killed the moment the thread that started this process ends (Linux).

    A parent killed with SIGKILL closes this process's stdin too, but the EOF is read only
    when this process is next scheduled; meanwhile a held request could be answered, or a
    queued one sent, for nobody. The parent starts this process from a thread that lives as
    long as it does (:mod:`capjudge.backends.http_loop`).
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the EOF of stdin ends it
        pass
    if os.getppid() != parent:  # the parent died before the call above
        os._exit(0)


def main() -> None:
    """Serve frames until stdin closes (``--parent PID``: die with that process)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if len(sys.argv) == 3 and sys.argv[1] == "--parent":
        _die_with(int(sys.argv[2]))
    asyncio.run(_serve())


if __name__ == "__main__":
    main()
