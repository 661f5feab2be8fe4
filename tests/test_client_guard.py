"""Unit tests of :mod:`capjudge.client.guard`: the client's rules for sending."""

from __future__ import annotations

import threading

from capjudge.client.guard import CONSERVATIVE_REQUEST_TOKENS, SendGuard
from capjudge.client.stats import ClientStats, RetryPolicy
from capjudge.protocol import BackendError, Decoding, JudgeRequest, Message
from capjudge.util.limits import RateLimiter, SharedPause


def _guard(max_attempts: int = 3, cap: float = 10.0) -> tuple[SendGuard, list[float]]:
    slept: list[float] = []
    guard = SendGuard(RetryPolicy(max_attempts=max_attempts, base_s=1.0, max_s=4.0,
                                  max_retry_after_s=cap),
                      RateLimiter(None, None), SharedPause(), slept.append, 0,
                      threading.Lock())
    return guard, slept


def test_a_transient_failure_is_retried_until_the_last_attempt() -> None:
    guard, _ = _guard(max_attempts=3)
    stats = ClientStats()
    error = BackendError("503 busy", transient=True)
    assert guard.failed(error, 1, stats) is None
    assert guard.failed(error, 2, stats) is None
    final = guard.failed(error, 3, stats)
    assert final is not None and final.status == "error" and final.attempts == 3
    assert final.reason == "503 busy (after 3 attempts)"


def test_a_permanent_failure_is_final_at_once() -> None:
    guard, _ = _guard()
    final = guard.failed(BackendError("400 bad request", transient=False), 1, ClientStats())
    assert final is not None and final.reason == "400 bad request (after 1 attempt)"
    assert guard.not_sent_reason() is None  # one bad request stops nothing else


def test_rejected_credentials_stop_every_later_send() -> None:
    guard, _ = _guard()
    stats = ClientStats()
    final = guard.failed(BackendError("401 invalid key", transient=True, auth=True), 1, stats)
    assert final is not None and final.reason == "authentication failed: 401 invalid key"
    assert stats.auth_failure == "401 invalid key"
    assert guard.not_sent_reason() == ("not sent: the server rejected the credentials "
                                       "(401 invalid key)")


def test_a_wrong_server_stops_every_later_send() -> None:
    guard, _ = _guard()
    stats = ClientStats()
    guard.failed(BackendError("not an OpenAI API: an HTML page", transient=False, fatal=True),
                 1, stats)
    assert stats.fatal_failure == "not an OpenAI API: an HTML page"
    assert guard.not_sent_reason() == "not sent: not an OpenAI API: an HTML page"


def test_a_retry_after_past_the_cap_fails_and_pauses_everyone() -> None:
    guard, _ = _guard(cap=10.0)
    final = guard.failed(BackendError("429", transient=True, retry_after=3600.0, status="error"),
                         1, ClientStats())
    assert final is not None and "over the 10 s cap" in (final.reason or "")
    # Every later send of every worker gives up with the window's reason instead of waiting.
    reason = guard.not_sent_reason()
    assert reason is not None and reason.startswith("rate limited:") and "not sent" in reason


def test_back_off_counts_retries_and_waits_at_least_the_retry_after() -> None:
    guard, slept = _guard()
    stats = ClientStats()
    guard.back_off(2, 1, 2.5, stats)
    assert stats.retries == 2
    # The window (2.5 s) is the pause every worker honours, and a floor for this wait.
    assert slept == [2.5]
    guard.back_off(1, 3, None, stats)
    assert stats.retries == 3 and 0.0 <= slept[-1] <= 4.0  # full jitter up to min(4, 1*2^2)


def test_a_stop_keeps_its_first_reason() -> None:
    guard, _ = _guard()
    assert not guard.stopped
    guard.stop("SIGTERM")
    guard.stop("interrupted")
    assert guard.stopped and guard.stop_reason == "SIGTERM"
    assert guard.not_sent_reason() == "not sent: the run was stopped (SIGTERM)"


def test_an_estimate_that_fails_is_charged_a_conservative_guess(monkeypatch) -> None:
    import capjudge.client.guard as client_guard

    def broken(request: JudgeRequest) -> tuple[int, int]:
        raise ValueError("no estimate")

    monkeypatch.setattr(client_guard, "request_tokens", broken)
    guard, _ = _guard()
    request = JudgeRequest(messages=(Message("user", ("Rate the caption.",)),), slots=(),
                           decoding=Decoding(max_tokens=7))
    assert guard.tokens(request) == CONSERVATIVE_REQUEST_TOKENS + 7
    guard.charge([request, request])  # an unlimited budget: returns at once, never raises
