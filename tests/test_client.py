"""Unit tests of :mod:`capjudge.client`, :mod:`capjudge.client.answers` and
:mod:`capjudge.client.stats`: one client around a backend (the exact fake, no server)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from capjudge.backends.fake import FakeBackend
from capjudge.cache import RequestCache
from capjudge.client import JudgeClient
from capjudge.client.answers import CachedAnswers
from capjudge.client.stats import (
    AuthError,
    ClientStats,
    RetryPolicy,
    WrongServerError,
    raise_if_stopped,
)
from capjudge.methods.gveval import score_slot
from capjudge.protocol import Decoding, JudgeRequest, Message
from capjudge.reading import READING_RULES_VERSION


def request(text: str) -> JudgeRequest:
    return JudgeRequest(messages=(Message("user", (text,)),), slots=(score_slot(),),
                        decoding=Decoding(max_tokens=64), template="test@1")


# -- capjudge.client.stats -------------------------------------------------------------------------

def test_stats_merge_and_round_trip_through_json() -> None:
    a = ClientStats(requests=3, cache_hits=1, calls=2, statuses={"ok": 2, "error": 1})
    b = ClientStats(requests=2, calls=2, retries=1, statuses={"ok": 2}, auth_failure="401")
    a.merge(b)
    assert (a.requests, a.cache_hits, a.calls, a.retries) == (5, 1, 4, 1)
    assert a.statuses == {"ok": 4, "error": 1} and a.auth_failure == "401"
    assert ClientStats.from_dict(a.to_dict()) == a


def test_backoff_is_full_jitter_capped_and_floored_by_retry_after() -> None:
    policy = RetryPolicy(base_s=0.5, max_s=4.0)
    rng = random.Random(0)
    assert all(0 <= policy.delay(attempt, None, rng) <= min(4.0, 0.5 * 2 ** (attempt - 1))
               for attempt in range(1, 9) for _ in range(20))
    assert policy.delay(1, 7.0, rng) == 7.0  # the server's window is a floor


def test_a_stopped_run_raises_the_reason() -> None:
    raise_if_stopped(ClientStats())  # nothing stopped: no error
    with pytest.raises(AuthError, match="rejected the credentials"):
        raise_if_stopped(ClientStats(auth_failure="401 bad key"))
    with pytest.raises(WrongServerError, match="an HTML page"):
        raise_if_stopped(ClientStats(fatal_failure="an HTML page"))


# -- capjudge.client.answers -----------------------------------------------------------------------

def test_cached_answers_store_and_look_up_under_the_current_settings(tmp_path: Path) -> None:
    backend = FakeBackend("hash")
    answers = CachedAnswers(backend, RequestCache(tmp_path / "cache"), "snap-1")
    r = request("Rate: a dog on a sofa.")
    key = answers.key(r)
    assert key == CachedAnswers(backend, None, "snap-1").key(r)  # the key ignores the store
    assert key != CachedAnswers(backend, None, "snap-2").key(r)  # the snapshot joins it
    assert answers.lookup(r, key) is None
    (answer,) = backend.generate([r])
    assert not isinstance(answer, Exception)
    assert answers.store(key, answer, r)
    assert answer.read_with["reading_rules"] == READING_RULES_VERSION
    hit = answers.lookup(r, key)
    assert hit is not None and hit.cached and hit.cache_key == key
    assert [s.probs for s in hit.slots] == [s.probs for s in answer.slots]


def test_without_a_cache_nothing_is_kept_and_nothing_fails() -> None:
    answers = CachedAnswers(FakeBackend("hash"), None, "snap")
    r = request("x")
    (answer,) = FakeBackend("hash").generate([r])
    assert not isinstance(answer, Exception)
    assert answers.lookup(r, answers.key(r)) is None and answers.store("k", answer, r)


# -- client --------------------------------------------------------------------------------------

def test_the_client_asks_once_per_question_and_answers_again_from_the_cache(
        tmp_path: Path) -> None:
    cache = RequestCache(tmp_path / "cache")
    client = JudgeClient(FakeBackend("hash"), cache)
    same, other = request("a cat"), request("a dog")
    out, stats = client.run_with_stats([same, other, same])
    assert [r.status for r in out] == ["ok", "ok", "ok"]
    assert stats.requests == 3 and stats.calls == 2 and stats.cache_hits == 0
    assert out[0].cache_key == out[2].cache_key != out[1].cache_key
    again, stats = JudgeClient(FakeBackend("hash"), cache).run_with_stats([same, other])
    assert stats.calls == 0 and stats.cache_hits == 2 and all(r.cached for r in again)


def test_a_stopped_client_sends_nothing_and_says_why() -> None:
    client = JudgeClient(FakeBackend("hash"), None)
    client.stop("SIGTERM")
    (out,), stats = client.run_with_stats([request("a cat")])
    assert out.status == "error" and out.reason == "not sent: the run was stopped (SIGTERM)"
    assert stats.calls == 0 and stats.interrupted and client.stop_reason == "SIGTERM"
