"""The sending process (capjudge.backends.http_loop, http_worker) and the client's pool."""

from __future__ import annotations

import gc
import json
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from capjudge.backends import create_backend
from capjudge.backends.http_loop import HTTPSender, Reply, TransportError, sending_process
from capjudge.client import JudgeClient
from capjudge.client.pool import SendPool
from capjudge.methods.gveval import score_slot
from capjudge.protocol import Decoding, JudgeRequest, Message
from capjudge.testing.openai_server import MockOpenAIServer

HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer EMPTY"}


def body(text: str) -> bytes:
    return json.dumps({"model": "gpt-4o-2024-08-06", "max_tokens": 8, "logprobs": True,
                       "top_logprobs": 5,
                       "messages": [{"role": "user", "content": text}]}).encode()


def request(text: str) -> JudgeRequest:
    return JudgeRequest(messages=(Message("user", (text,)),), slots=(score_slot(),),
                        decoding=Decoding(max_tokens=64), template="test@1")


def post_all(sender: HTTPSender, n: int, threads: int) -> list[Reply | TransportError]:
    def one(i: int) -> Reply | TransportError:
        try:
            return sender.post("/chat/completions", body(f"caption {i}"))
        except TransportError as exc:
            return exc

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, range(n)))


def test_a_reply_is_the_status_headers_and_bytes() -> None:
    with MockOpenAIServer() as server:
        sender = HTTPSender(server.url, HEADERS, 10.0, limit=2)
        reply = sender.post("/chat/completions", body("a dog"))
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("application/json")
    assert json.loads(reply.content)["choices"][0]["message"]["content"]
    assert server.authorization["Bearer EMPTY"] == 1


def test_the_gate_bounds_the_requests_in_flight() -> None:
    with MockOpenAIServer(latency_s=0.1) as server:
        sender = HTTPSender(server.url, HEADERS, 10.0, limit=3)
        replies = post_all(sender, 12, threads=8)
        peak = server.in_flight.peak
    assert all(isinstance(r, Reply) and r.status == 200 for r in replies)
    assert peak == 3
    sender.set_limit(5)
    with MockOpenAIServer(latency_s=0.1) as server:
        sender = HTTPSender(server.url, HEADERS, 10.0, limit=5)
        post_all(sender, 15, threads=10)
        assert server.in_flight.peak == 5


def test_an_error_status_is_a_reply_and_a_dead_port_is_a_connection_failure() -> None:
    with MockOpenAIServer() as server:
        server.inject("500")
        sender = HTTPSender(server.url, HEADERS, 10.0)
        reply = sender.post("/chat/completions", body("x"))
        url = server.url
    assert reply.status == 500 and b"error" in reply.content
    with pytest.raises(TransportError) as failure:
        HTTPSender(url, HEADERS, 2.0).post("/chat/completions", body("x"))
    assert failure.value.kind == "connection"


def test_a_timeout_is_its_own_kind() -> None:
    with MockOpenAIServer(latency_s=2.0) as server:
        with pytest.raises(TransportError) as failure:
            HTTPSender(server.url, HEADERS, 0.3).post("/chat/completions", body("x"))
    assert failure.value.kind == "timeout"


def test_retry_after_holds_the_queue_back_unsent() -> None:
    """Requests queued at the gate when an answer says "retry after 30 s" are not sent."""
    with MockOpenAIServer(latency_s=0.2) as server:
        server.inject("429", retry_after=30)
        sender = HTTPSender(server.url, HEADERS, 10.0, limit=1)
        outcomes = post_all(sender, 4, threads=4)
        received = server.total_received
    assert received == 1
    replies = [o for o in outcomes if isinstance(o, Reply)]
    held = [o for o in outcomes if isinstance(o, TransportError)]
    assert [r.status for r in replies] == [429]
    assert len(held) == 3 and all(h.kind == "held" for h in held)
    assert all(h.retry_after is not None and 25 < h.retry_after <= 30 for h in held)


def test_drop_fails_the_queued_requests_and_lets_the_one_in_flight_finish() -> None:
    with MockOpenAIServer(latency_s=0.5) as server:
        sender = HTTPSender(server.url, HEADERS, 10.0, limit=1)
        timer = threading.Timer(0.25, sender.drop)
        timer.start()
        outcomes = post_all(sender, 3, threads=3)
        timer.join()
        received = server.total_received
    assert received == 1
    assert sum(isinstance(o, Reply) and o.status == 200 for o in outcomes) == 1
    assert sum(isinstance(o, TransportError) and o.kind == "held" for o in outcomes) == 2


def test_the_sending_process_is_ready_with_its_http_stack_loaded() -> None:
    """'ready' comes after aiohttp (and the TLS context) are loaded, not on the first request.

    A request is charged to the rate budget when it leaves the parent: work the sending
    process did only on the first post made the first window's requests reach the server
    seconds late on busy cores, close to the next window's. Read from the process's mapped
    files: aiohttp's compiled HTTP parser is there before any post.
    """
    process = sending_process()
    maps = Path(f"/proc/{process.proc.pid}/maps")
    if not maps.exists():
        pytest.skip("no /proc on this system")
    assert process.alive
    assert "aiohttp/_http_parser" in maps.read_text()


def test_a_killed_sending_process_fails_what_waits_and_is_started_again() -> None:
    with MockOpenAIServer(latency_s=1.0) as server:
        sender = HTTPSender(server.url, HEADERS, 10.0, limit=2)
        process = sending_process()
        killer = threading.Timer(0.3, process.proc.kill)
        killer.start()
        outcomes = post_all(sender, 2, threads=2)
        killer.join()
        assert all(isinstance(o, TransportError) and o.kind == "connection"
                   for o in outcomes)
        again = sender.post("/chat/completions", body("after"))
        assert sending_process() is not process
    assert again.status == 200


def test_the_client_sends_nothing_queued_after_a_stop() -> None:
    """Ctrl-C: requests in flight finish; none waiting at the gate goes out."""
    with MockOpenAIServer(latency_s=0.6) as server:
        backend = create_backend("openai/gpt-4o-2024-08-06", base_url=server.url)
        client = JudgeClient(backend, None, concurrency=2)
        timer = threading.Timer(0.3, client.stop)
        timer.start()
        responses = client.run([request(f"caption {i}") for i in range(8)])
        timer.join()
        received = server.total_received
    assert received == 2
    assert sum(r.status == "ok" for r in responses) == 2
    stopped = [r for r in responses if r.status != "ok"]
    assert len(stopped) == 6 and all("stopped" in (r.reason or "") for r in stopped)
    assert client.stats.calls == 2  # held requests were never calls


def test_a_short_retry_after_is_waited_out_and_every_request_answered() -> None:
    with MockOpenAIServer(latency_s=0.05) as server:
        server.inject("429", retry_after=0.3)
        backend = create_backend("openai/gpt-4o-2024-08-06", base_url=server.url)
        client = JudgeClient(backend, None, concurrency=2)
        started = time.perf_counter()
        responses = client.run([request(f"caption {i}") for i in range(6)])
        elapsed = time.perf_counter() - started
        received = server.total_received
    assert all(r.status == "ok" for r in responses)
    assert elapsed >= 0.3
    assert received == 7  # the 429 once more, nothing sent into the window twice
    assert client.stats.retries == 1


def test_the_pool_runs_the_oldest_calls_work_first() -> None:
    pool = SendPool(1)
    release = threading.Event()
    order: list[str] = []
    first = pool.submit_all(lambda: release.wait(5), [()])
    later = pool.submit_all(order.append, [("b1",), ("b2",)])
    earlier_done = pool.submit_all(order.append, [("c1",)])
    release.set()
    for f in first + later + earlier_done:
        f.result(timeout=5)
    assert order == ["b1", "b2", "c1"]


def test_the_pools_threads_end_when_nobody_holds_it() -> None:
    def mine() -> int:
        return sum(t.name.startswith("pool-test-") for t in threading.enumerate())

    pool = SendPool(4, name="pool-test")
    futures = pool.submit_all(time.sleep, [(0.05,)] * 8)
    for f in futures:
        f.result(timeout=5)
    assert mine() == 4
    del pool, futures
    gc.collect()
    deadline = time.monotonic() + 5
    while mine() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert mine() == 0


def test_a_sender_nobody_holds_is_closed_in_the_sending_process() -> None:
    with MockOpenAIServer() as server:
        sender = HTTPSender(server.url, HEADERS, 10.0)
        assert sender.post("/chat/completions", body("x")).status == 200
        name = sender._name
        process = sending_process()
        assert name in process.configured
        del sender
        gc.collect()
        # Closed with the next request sent (the process still serves the others).
        assert HTTPSender(server.url, HEADERS, 10.0).post("/chat/completions",
                                                          body("y")).status == 200
        assert name not in process.configured


def test_a_sender_collected_while_a_frame_is_written_does_not_deadlock() -> None:
    """The finalizer may run on a thread that holds the pipe's lock (a collection inside a
    write): it only notes the name (a CI run hung here when it wrote to the pipe itself)."""
    from capjudge.backends import http_loop

    process = sending_process()
    done = threading.Event()

    def collect_under_the_lock() -> None:
        with process.lock:
            http_loop._forget("gone-while-writing")
        done.set()

    threading.Thread(target=collect_under_the_lock, daemon=True).start()
    assert done.wait(5)


def _gone(pid: int) -> bool:
    """The process has ended (a zombie waiting for a reaper counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
def test_the_sending_process_dies_with_a_parent_killed_with_sigkill(tmp_path: Path) -> None:
    """kill -9 of the judge leaves no sending process answering (or sending) for nobody."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import sys, threading\n"
        "from capjudge.backends.http_loop import HTTPSender, sending_process\n"
        f"sender = HTTPSender(sys.argv[1], {HEADERS!r}, 60.0)\n"
        "print(sending_process().proc.pid, flush=True)\n"
        "sender.post('/chat/completions', b'{}')\n")
    with MockOpenAIServer(latency_s=30) as server:
        parent = subprocess.Popen([sys.executable, str(script), server.url],
                                  stdout=subprocess.PIPE, text=True)
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        deadline = time.monotonic() + 10
        while not server.total_received and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _gone(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 5
        while not _gone(child) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _gone(child)


def test_a_body_larger_than_the_pipe_goes_whole() -> None:
    """A picture's data URL is megabytes: the frame is written whole, in parts if need be."""
    with MockOpenAIServer() as server:
        sender = HTTPSender(server.url, HEADERS, 30.0)
        big = body("x" * 3_000_000)
        reply = sender.post("/chat/completions", big)
        received = server.requests[-1]
    assert reply.status == 200
    assert received["messages"][0]["content"] == "x" * 3_000_000
