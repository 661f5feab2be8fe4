"""Task wrappers for the judge stage: plan, judge a chunk (retried), write."""

from __future__ import annotations

import threading
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from capjudge.backends.base import Backend, JudgeRequest, JudgeResponse
from capjudge.client import JudgeClient
from capjudge.judge import JudgeConfig, make_backend, make_client

_CLIENTS: dict[int, tuple[Backend, JudgeClient]] = {}
_LOCK = threading.Lock()


def shared_client(config: JudgeConfig) -> tuple[Backend, JudgeClient]:
    """One backend and client per judge config per process: chunks running in parallel share
    the model, the cache and, above all, the rate limiter."""
    key = id(config)
    with _LOCK:
        if key not in _CLIENTS:
            backend = make_backend(config)
            _CLIENTS[key] = (backend, make_client(config, backend))
        return _CLIENTS[key]


@task(name="judge-chunk", retries=2, retry_delay_seconds=5, cache_policy=NO_CACHE)
def judge_chunk(config: JudgeConfig, requests: list[JudgeRequest]) -> list[JudgeResponse]:
    """Answer a chunk of requests. Per-request failures are statuses, not exceptions; a retry
    here covers a crash of the whole chunk, and answered requests come from the cache."""
    _, client = shared_client(config)
    return client.run(requests)


@task(name="write-judgements", cache_policy=NO_CACHE)
def write_task(out_dir: str, rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    from pathlib import Path

    from capjudge.judge import write_outputs

    write_outputs(Path(out_dir), rows, summary)
