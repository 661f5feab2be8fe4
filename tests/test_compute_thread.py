"""Local models load and run on one thread (``capjudge.backends.compute_thread``)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from capjudge.backends import compute_thread


def test_calls_from_any_thread_run_on_the_one_compute_thread() -> None:
    seen = set()

    def where(tag: str) -> str:
        seen.add(threading.get_ident())
        assert compute_thread.on_compute_thread()
        return tag

    assert not compute_thread.on_compute_thread()
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda k: compute_thread.run(where, f"call {k}"), range(8)))
    assert got == [f"call {k}" for k in range(8)]
    assert compute_thread.run(where, "main") == "main"
    assert len(seen) == 1 and threading.get_ident() not in seen


def test_a_nested_call_runs_directly_and_exceptions_reach_the_caller() -> None:
    @compute_thread.computes
    def inner(x: int) -> int:
        return x + 1

    @compute_thread.computes
    def outer(x: int) -> int:
        return inner(x) * 10  # already on the compute thread: no deadlock

    assert outer(1) == 20

    @compute_thread.computes
    def fails() -> None:
        raise ValueError("from the compute thread")

    with pytest.raises(ValueError, match="from the compute thread"):
        fails()


@pytest.mark.slow
def test_the_embedded_model_loads_and_runs_on_the_compute_thread() -> None:
    from capjudge.backends import create_backend

    backend = create_backend("embedded/gemma-3-270m", batch_size=4)
    threads = set()
    model = backend.model  # type: ignore[attr-defined]
    handle = model.get_decoder().register_forward_pre_hook(
        lambda *_: threads.add(threading.current_thread().name))
    try:
        backend.clear_memo()  # type: ignore[attr-defined]
        with ThreadPoolExecutor(2) as pool:
            scores = list(pool.map(backend.loglikelihoods,  # type: ignore[attr-defined]
                                   [[("A caption:", " a dog runs")],
                                    [("A caption:", " two cats sleep")]]))
    finally:
        handle.remove()
    assert all(len(s) == 1 and s[0][0] < 0 for s in scores)
    assert threads and all(name.startswith("capjudge-compute") for name in threads)
