"""Batch mode (``submit: batch``): the client that gets a judge's requests answered by batches.

The judge pipeline (:func:`capjudge.judge.judge_items`) does not change: it asks its client
for answers. In batch mode that client is a :class:`BatchClient`, which first gets every
request that is not in the request cache answered by batches, puts the answers in the cache,
and then answers the pipeline through the normal client path (cache lookups). A request that
a batch did not answer is returned as its own status with the reason; it is never sent
synchronously.

How a run goes (the state lives in ``batches.json`` in the state directory, which is the
stage's output directory unless ``batch_options.state_dir`` says otherwise):

1. Requests already cached are answered from the cache and never put in a batch.
2. Batches recorded in ``batches.json`` that are not yet collected and hold requests of this
   run are polled, not resubmitted: a crash, a ``kill -9`` or a stage that stopped waiting
   resumes them.
3. Whatever is neither cached nor in such a batch is written as JSONL (``batch_NNNN.jsonl``,
   one line per request, ``custom_id`` = the request's cache key, ``body`` = exactly the
   ``/v1/chat/completions`` body :class:`~capjudge.backends.openai_backend.OpenAIBackend`
   sends synchronously), split at ``max_requests`` lines and ``max_bytes`` bytes (the API's
   50,000 and 200 MB by default), uploaded with purpose ``batch`` and submitted. Each step is
   recorded in ``batches.json`` (written atomically) before the next one starts, and the
   batch id the moment the API returns it; a crash between the API creating a batch and that
   write is covered too: a batch whose creation was attempted is looked up among the
   account's batches by its input file before another one is created.
4. Polling (``poll_interval_s``) logs the batches' statuses and request counts. A batch that
   ends (``completed``, ``failed``, ``expired``, ``cancelled``) is collected: its output and
   error files are downloaded next to its input, every answer is read by the backend's own
   parser (:meth:`~capjudge.backends.openai_backend.OpenAIBackend.parse_completion`), finished
   with the backend's follow-ups (digit continuations, asked synchronously) and stored in the
   cache; every per-request error becomes that request's status with the reason (HTTP status
   and message, or the API's error code).
5. After ``max_wait_s`` the run stops waiting: requests still in running batches are
   ``error`` rows saying so, and their batch ids stay in ``batches.json`` for the next run.

Offline (``vllm run-batch``): with ``write_only: true`` the run writes the JSONL
(``batch_input_NNN.jsonl``) and submits nothing. ``vllm run-batch`` writes output lines in the
API's format; :func:`~capjudge.backends.openai_batch.import_results` (``capjudge batch
import``) records such a file in ``batches.json``, and the next run reads it into the cache
like a finished batch.

One process at a time runs a state directory's batches (an ``flock`` on ``batches.lock``,
released by the kernel even after ``kill -9``). The Batch API's files and ``batches.json`` are
:mod:`capjudge.backends.openai_batch`'s; this client sits above the backends, beside
:class:`~capjudge.client.JudgeClient`, which it extends.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from capjudge.backends.base import Backend
from capjudge.backends.openai_backend import NO_LOGPROBS_PREFIXES, OpenAIBackend
from capjudge.backends.openai_batch import (
    ENDPOINT,
    IMPORTED,
    TERMINAL,
    UPLOADED,
    WRITTEN,
    BatchEntry,
    BatchOptions,
    BatchState,
    read_result_lines,
    state_lock,
)
from capjudge.cache import RequestCache
from capjudge.client import ClientStats, JudgeClient, RetryPolicy
from capjudge.protocol import BackendError, JudgeRequest, JudgeResponse
from capjudge.records import JSONValue
from capjudge.util.atomic import atomic_path, fsync_file, write_bytes

log = logging.getLogger(__name__)


class BatchClient(JudgeClient):
    """A :class:`~capjudge.client.JudgeClient` that answers through the Batch API (module doc).

    Every answer still ends in the request cache and is read from there through
    :meth:`JudgeClient.run_with_stats`; the statistics count answers that this call's batches
    brought as model calls (not cache hits), and a request a batch did not answer gets its
    status without being sent.
    """

    def __init__(self, backend: Backend, cache: RequestCache | None, *,
                 state_dir: str | Path, options: BatchOptions | None = None,
                 clock: Callable[[], float] = time.monotonic, **kwargs: Any) -> None:
        """Wrap an ``openai/<model>`` backend.

        Args:
            backend: an :class:`~capjudge.backends.openai_backend.OpenAIBackend`.
            cache: the request cache (required: the answers travel through it).
            state_dir: where ``batches.json`` and the JSONL live (``options.state_dir`` wins).
            options: batch settings.
            clock: monotonic time (tests pass a fake).
            **kwargs: the :class:`JudgeClient` settings (retry, sleep, fingerprint, ...).

        Raises:
            ValueError: the backend is not an OpenAI-protocol one, or there is no cache.
        """
        if not isinstance(backend, OpenAIBackend):
            raise ValueError(f"submit: batch needs an openai/<model> backend (the OpenAI "
                             f"Batch API), not {backend.backend_id}")
        if cache is None:
            raise ValueError("submit: batch needs the request cache: batch answers reach the "
                             "judge through it")
        super().__init__(backend, cache, **kwargs)
        self.openai: OpenAIBackend = backend
        self.options = options or BatchOptions()
        self.state_dir = Path(self.options.state_dir or state_dir)
        self._clock = clock
        self._outcomes: dict[str, JudgeResponse] | None = None

    # -- the client interface --------------------------------------------------------------

    def run_with_stats(self, requests: Sequence[JudgeRequest]
                       ) -> tuple[list[JudgeResponse], ClientStats]:
        """Answer through batches, then read every answer through the normal client path."""
        keys = [self.key(r) for r in requests]
        extra = ClientStats()
        with state_lock(self.state_dir):
            fresh, outcomes = self._answer(requests, keys, extra)
        self._outcomes = outcomes
        try:
            answers, stats = super().run_with_stats(requests)
        finally:
            self._outcomes = None
        # Answers this call's batches brought were model calls, not cache hits (and they cost).
        delta = ClientStats()
        counted: set[str] = set()
        for answer in answers:
            key = answer.cache_key
            if key in fresh and key not in counted:
                counted.add(key)
                delta.calls += 1
                delta.prompt_tokens += answer.usage.prompt_tokens
                delta.completion_tokens += answer.usage.completion_tokens
                if answer.cached:
                    answer.cached = False
                    delta.cache_hits -= 1
        delta.merge(extra)
        stats.merge(delta)
        with self._lock:
            self.stats.merge(delta)
        return answers, stats

    def _run_batch(self, batch: list[JudgeRequest], keys: list[str], stats: ClientStats
                   ) -> list[JudgeResponse]:
        # While the pipeline reads (outcomes set), what it could not read from the cache is a
        # batch's error for the request, or its answer when the cache write failed; nothing is
        # sent. Otherwise (follow-ups of a batch answer) the request is asked as usual.
        outcomes = self._outcomes
        if outcomes is None:
            return super()._run_batch(batch, keys, stats)
        return [replace(outcomes[k]) if k in outcomes else JudgeResponse(
                    status="error", attempts=0,
                    reason="the answer left the request cache before it was read (not sent "
                           "synchronously in batch mode; the next run asks it again)")
                for k in keys]

    # -- batches ---------------------------------------------------------------------------

    def _answer(self, requests: Sequence[JudgeRequest], keys: Sequence[str],
                stats: ClientStats) -> tuple[set[str], dict[str, JudgeResponse]]:
        """Get every uncached request answered by a batch (or given its failure).

        Returns:
            The keys answered (and cached) in this call, and per key not served from the
            cache its answer or its failure.
        """
        assert self.cache is not None
        by_key: dict[str, JudgeRequest] = {}
        for request, key in zip(requests, keys, strict=True):
            by_key.setdefault(key, request)
        need = {k for k in by_key if self.cache.get(k) is None}
        if not need:
            return set(), {}
        state = BatchState(self.state_dir, self.backend.backend_id)
        run = _Run(need=need, by_key=by_key, stats=stats)
        relevant = [e for e in state.entries if not e.collected and state.ids(e) & need]
        in_flight = set().union(*(state.ids(e) for e in relevant)) if relevant else set()
        to_send = [k for k in by_key if k in need and k not in in_flight]
        if relevant:
            log.info("batch: resuming %d recorded batch(es) holding %d of the %d requests "
                     "to answer (not resubmitted)", len(relevant), len(need & in_flight),
                     len(need))
        if to_send and self.options.write_only:
            self._write_only(to_send, run)
        elif to_send:
            relevant += self._write_inputs(state, to_send, run)
        if relevant:
            self._wait(state, relevant, run)
        for key in need - run.fresh - run.outcomes.keys():
            run.fail(key, "no batch answered this request")
        return run.fresh, run.outcomes

    def _line(self, key: str, request: JudgeRequest) -> bytes:
        """One input line (the synchronous request's body).

        Raises:
            BackendError: the model cannot be asked (reasoning model, changed picture).
        """
        if self.openai.model.startswith(NO_LOGPROBS_PREFIXES):
            raise BackendError(f"{self.openai.model} does not return log-probabilities "
                               "(reasoning model)", transient=False)
        line = {"custom_id": key, "method": "POST", "url": ENDPOINT,
                "body": self.openai.request_body(request)}
        return (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode()

    def _parts(self, keys: Sequence[str], run: _Run) -> Iterator[tuple[list[str], Path]]:
        """Stream the lines into temporary part files within the size limits.

        Yields each closed part (its keys and temp path). A request whose body cannot be
        built, or is larger than a whole file may be, is failed with the reason.
        """
        opts = self.options
        self.state_dir.mkdir(parents=True, exist_ok=True)
        n = 0
        current: list[str] = []
        size = 0
        tmp = self.state_dir / f".part-{os.getpid()}-{n}.tmp"
        out = open(tmp, "wb")  # noqa: SIM115 - closed per part below
        try:
            for key in keys:
                try:
                    line = self._line(key, run.by_key[key])
                except (BackendError, OSError, ValueError) as exc:
                    run.fail(key, f"could not build the batch line: {exc}")
                    continue
                if len(line) > opts.max_bytes:
                    run.fail(key, f"the request is {len(line)} bytes, over a batch file's "
                                  f"limit (batch_options.max_bytes = {opts.max_bytes})")
                    continue
                if current and (len(current) >= opts.max_requests
                                or size + len(line) > opts.max_bytes):
                    out.close()
                    yield current, tmp
                    n += 1
                    current, size = [], 0
                    tmp = self.state_dir / f".part-{os.getpid()}-{n}.tmp"
                    out = open(tmp, "wb")  # noqa: SIM115
                out.write(line)
                current.append(key)
                size += len(line)
            out.close()
            if current:
                yield current, tmp
        finally:
            out.close()
            tmp.unlink(missing_ok=True)

    def _write_inputs(self, state: BatchState, keys: Sequence[str], run: _Run
                      ) -> list[BatchEntry]:
        """Write the input files and record them (status ``written``).

        The wait loop uploads and submits them.
        """
        entries: list[BatchEntry] = []
        for part_keys, tmp in self._parts(keys, run):
            name = state.next_name("batch")
            ids = "".join(k + "\n" for k in part_keys).encode()
            write_bytes(self.state_dir / f"{name}.ids", ids, durable=True)
            fsync_file(tmp)
            size = tmp.stat().st_size
            os.replace(tmp, self.state_dir / f"{name}.jsonl")
            entry = BatchEntry(name=name, requests=len(part_keys), bytes=size,
                               first_id=part_keys[0], last_id=part_keys[-1])
            state.add(entry, part_keys)
            entries.append(entry)
            log.info("batch: wrote %s.jsonl (%d request(s), %.1f MB)", name, len(part_keys),
                     size / 1e6)
        return entries

    def _write_only(self, keys: Sequence[str], run: _Run) -> None:
        """``write_only``: the JSONL for ``vllm run-batch``; nothing is submitted."""
        for old in self.state_dir.glob("batch_input_*.jsonl"):
            old.unlink()  # the previous run's files: this run's set replaces them
        written: list[str] = []
        for n, (part_keys, tmp) in enumerate(self._parts(keys, run)):
            path = self.state_dir / f"batch_input_{n:03d}.jsonl"
            os.replace(tmp, path)
            written.append(path.name)
            for key in part_keys:
                run.fail(key, f"not submitted (batch_options.write_only): written to "
                              f"{path}; run it through `vllm run-batch`, then `capjudge "
                              f"batch import` the output and run the stage again")
        log.info("batch: wrote %s in %s (write_only: nothing submitted)",
                 ", ".join(written) or "nothing", self.state_dir)

    def _wait(self, state: BatchState, entries: list[BatchEntry], run: _Run) -> None:
        """Submit, poll and collect until every entry is collected or ``max_wait_s`` passed."""
        started = self._clock()
        polls = 0
        last: tuple[Any, ...] | None = None
        while True:
            for entry in entries:
                if not entry.collected:
                    self._advance(state, entry, run)
            active = [e for e in entries if not e.collected]
            waited = self._clock() - started
            summary = _progress(entries)
            if summary != last or polls % 10 == 0:
                log.info("batch: %s; waited %.0f s (max %.0f s)", summary[1], waited,
                         self.options.max_wait_s)
                last = summary
            polls += 1
            if not active or waited >= self.options.max_wait_s:
                break
            self._sleep(min(self.options.poll_interval_s,
                            max(0.0, self.options.max_wait_s - waited)))
        for entry in active:
            counts = entry.request_counts or {}
            progress = (f", {counts.get('completed', 0)}/{counts.get('total', 0)} done"
                        if counts else "")
            why = (f"not answered yet: {entry.label} is {entry.status}{progress} after "
                   f"waiting {waited:.0f} s (batch_options.max_wait_s); it stays recorded in "
                   f"{state.path}: run the stage again to collect it")
            for key in state.ids(entry) & run.need:
                if key not in run.fresh:
                    run.fail(key, why)

    def _advance(self, state: BatchState, entry: BatchEntry, run: _Run) -> None:
        """One step for an entry: upload, create, poll or collect.

        A transient API failure is logged and retried at the next poll; a permanent one fails
        the entry.
        """
        import openai

        api = self.openai.api
        try:
            if entry.status == WRITTEN:
                with open(self.state_dir / f"{entry.name}.jsonl", "rb") as f:
                    uploaded = api.files.create(file=(f"{entry.name}.jsonl", f),
                                                purpose="batch")
                entry.input_file_id, entry.status = uploaded.id, UPLOADED
                state.save()
            if entry.status == UPLOADED:
                found = self._find_created(entry) if entry.create_attempted else None
                if found is None:
                    entry.create_attempted = True
                    state.save()  # before the call: a crash after it is then looked up
                    found = api.batches.create(
                        input_file_id=entry.input_file_id, endpoint=ENDPOINT,
                        completion_window=self.options.completion_window,
                        metadata={"capjudge": entry.name})
                self._update(entry, found)
                state.save()
                log.info("batch: submitted %s as %s (%d request(s))", entry.name, entry.id,
                         entry.requests)
            elif entry.id is not None and entry.status not in TERMINAL:
                before = (entry.status, entry.request_counts)
                self._update(entry, api.batches.retrieve(entry.id))
                if (entry.status, entry.request_counts) != before:
                    state.save()
            if entry.status in TERMINAL or entry.status == IMPORTED:
                self._collect(state, entry, run)
        except (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError,
                openai.InternalServerError) as exc:
            log.warning("batch: %s: %s: %s (trying again at the next poll)", entry.label,
                        type(exc).__name__, exc)
        except openai.APIStatusError as exc:
            if exc.status_code in (408, 409) or exc.status_code >= 500:
                log.warning("batch: %s: HTTP %d (trying again at the next poll)",
                            entry.label, exc.status_code)
                return
            # Permanent (a refused upload or batch, a result file that is gone): the entry's
            # requests fail with the reason and the next run submits them again.
            entry.errors.append(f"HTTP {exc.status_code}: {exc.message}")
            entry.status = "failed"
            entry.output_file_id = entry.error_file_id = None
            state.save()
            self._collect(state, entry, run)

    def _find_created(self, entry: BatchEntry) -> Any | None:
        """The batch created from this entry's input file by a run that died before recording it.

        Used when that run did not record the batch id; the newest 1,000 batches of the account
        are searched.
        """
        page = self.openai.api.batches.list(limit=100)
        for n, batch in enumerate(page):
            if batch.input_file_id == entry.input_file_id:
                log.info("batch: %s was created before the last run stopped: %s adopted, "
                         "not resubmitted", entry.name, batch.id)
                return batch
            if n >= 1000:
                break
        return None

    @staticmethod
    def _update(entry: BatchEntry, batch: Any) -> None:
        entry.id = batch.id
        entry.status = batch.status
        entry.output_file_id = batch.output_file_id
        entry.error_file_id = batch.error_file_id
        entry.created_at = batch.created_at
        entry.ended_at = (batch.completed_at or batch.failed_at or batch.expired_at
                          or batch.cancelled_at)
        if batch.request_counts is not None:
            entry.request_counts = {"total": batch.request_counts.total,
                                    "completed": batch.request_counts.completed,
                                    "failed": batch.request_counts.failed}
        if batch.errors is not None and batch.errors.data:
            entry.errors = [f"{e.code}: {e.message}" + (f" (line {e.line})" if e.line else "")
                            for e in batch.errors.data]

    def _collect(self, state: BatchState, entry: BatchEntry, run: _Run) -> None:
        """Read an ended batch's results into the cache; its failures become statuses."""
        if entry.source == "api":
            api = self.openai.api
            outputs = []
            for file_id, suffix in ((entry.output_file_id, "output"),
                                    (entry.error_file_id, "errors")):
                if file_id:
                    path = self.state_dir / f"{entry.name}.{suffix}.jsonl"
                    with atomic_path(path) as tmp, \
                            api.files.with_streaming_response.content(file_id) as response:
                        response.stream_to_file(tmp)
                    outputs.append(path.name)
            entry.outputs = outputs
        answered: set[str] = set()
        ignored = 0
        latency = float(entry.ended_at - entry.created_at) \
            if entry.ended_at and entry.created_at else 0.0
        for name in entry.outputs:
            for line in read_result_lines(self.state_dir / name):
                key = str(line.get("custom_id"))
                if key not in run.need or key in run.fresh:
                    ignored += key not in run.by_key
                    continue
                answered.add(key)
                self._read_line(entry, key, line, latency, run)
        why = "; ".join(entry.errors) or "no result line for this request"
        for key in (state.ids(entry) & run.need) - answered - run.fresh:
            run.fail(key, f"{entry.label} ended {entry.status}: {why}")
        if ignored:
            log.info("batch: %s: %d result(s) for requests this run does not ask were not "
                     "read (an answer is read with its request)", entry.label, ignored)
        entry.collected = True
        state.save()
        log.info("batch: collected %s (%s): %d answered, %d failed", entry.label,
                 entry.status, len(answered & run.fresh), len(answered - run.fresh))

    def _read_line(self, entry: BatchEntry, key: str, line: Mapping[str, JSONValue],
                   latency: float, run: _Run) -> None:
        """One result line: an answer (finished, cached) or the request's failure."""
        request = run.by_key[key]
        response = line.get("response")
        if not isinstance(response, dict):  # absent or null (an error line); not an answer
            response = {}
        error = line.get("error")
        code = response.get("status_code")
        body = response.get("body")
        if error or code != 200 or not isinstance(body, dict):
            run.fail(key, f"{entry.label}: {_line_error(error, code, body)}",
                     "refused" if code == 403 else "error")
            return
        try:
            answer = self.openai.parse_completion(request, body, latency)
        except Exception as exc:  # noqa: BLE001 - one unreadable line must not lose the rest
            answer = BackendError(f"unreadable answer ({type(exc).__name__}: {exc})",
                                  transient=False)
        if isinstance(answer, BackendError):
            run.fail(key, f"{entry.label}: {answer}", answer.status)
            return
        answer = self._follow_up(request, answer, run.stats)
        answer.attempts = 1
        answer.latency_s = latency
        self._store(key, answer, request, run.stats)
        run.fresh.add(key)
        run.outcomes[key] = answer  # served from here if the cache write failed


@dataclass
class _Run:
    """One call's bookkeeping: what is needed, what came back, what failed."""

    need: set[str]
    by_key: dict[str, JudgeRequest]
    stats: ClientStats
    fresh: set[str] = field(default_factory=set)
    outcomes: dict[str, JudgeResponse] = field(default_factory=dict)

    def fail(self, key: str, reason: str, status: str = "error") -> None:
        self.outcomes[key] = JudgeResponse(status=status, reason=reason,  # type: ignore[arg-type]
                                           attempts=0)


def _line_error(error: Any, code: Any, body: Any) -> str:
    """A result line's failure as a reason."""
    if isinstance(error, dict):
        return f"{error.get('code') or 'error'}: {error.get('message') or error}"
    message = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = body["error"].get("message")
    if code is not None and code != 200:
        return f"HTTP {code}: {message or 'no message'}"
    return f"no answer in the result line ({message or 'empty body'})"


def _progress(entries: Iterable[BatchEntry]) -> tuple[Any, str]:
    """A poll's progress: a comparable key and the log text (counts per status)."""
    entries = list(entries)
    by_status = Counter(e.status for e in entries)
    total = sum(e.requests for e in entries)
    done = sum((e.request_counts or {}).get("completed", 0) for e in entries)
    failed = sum((e.request_counts or {}).get("failed", 0) for e in entries)
    collected = sum(e.collected for e in entries)
    statuses = ", ".join(f"{s} {n}" for s, n in sorted(by_status.items()))
    text = (f"{len(entries)} batch(es) [{statuses}], {collected} collected; requests "
            f"{done}/{total} completed, {failed} failed")
    return (tuple(sorted(by_status.items())), done, failed, collected), text


def make_batch_client(config: Any, backend: Backend, out_dir: str | Path,
                      progress: Callable[[int, int], None] | None = None) -> BatchClient:
    """The batch client for a judge config (``submit: batch``), as the judge stage builds it.

    Args:
        config: a :class:`~capjudge.judge.JudgeConfig`.
        backend: its backend.
        out_dir: the stage's output directory (the default state directory).
        progress: called with (done, total) while the answers are read.
    """
    from capjudge.cache import default_cache_dir

    return BatchClient(backend, RequestCache(config.cache_dir or default_cache_dir()),
                       state_dir=out_dir, options=BatchOptions.from_dict(config.batch_options),
                       retry=RetryPolicy(max_attempts=config.max_attempts,
                                         base_s=config.backoff_base_s,
                                         max_retry_after_s=config.max_retry_after_s),
                       rpm=config.rpm, tpm=config.tpm, concurrency=config.concurrency,
                       progress=progress, fingerprint=config.fingerprint)


__all__ = ["BatchClient", "make_batch_client"]
