"""The OpenAI Batch API's files and their record: a judge's requests answered by batches.

``submit: batch`` runs a judge through :class:`capjudge.client.batch.BatchClient` (the client
that submits, polls and collects; its module doc tells how a run goes). This module holds what
is about the Batch API itself and the state directory it leaves: the settings
(:class:`BatchOptions`), one batch's record (:class:`BatchEntry`), ``batches.json``
(:class:`BatchState`), the result lines' format (:func:`read_result_lines`) and the import of
a results file written offline (:func:`import_results`, ``capjudge batch import``: ``vllm
run-batch`` writes output lines in the API's format; the next run reads them into the cache
like a finished batch).

One process at a time runs a state directory's batches (an ``flock`` on ``batches.lock``,
released by the kernel even after ``kill -9``: :func:`state_lock`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from capjudge.records import JSONValue
from capjudge.util.atomic import atomic_path, write_bytes

SUBMIT_MODES = ("sync", "batch")
"""Values of ``JudgeConfig.submit``: one request at a time, or through the Batch API."""

STATE_FILE = "batches.json"
LOCK_FILE = "batches.lock"
ENDPOINT = "/v1/chat/completions"
STATE_VERSION = 1

# API statuses after which a batch changes no more.
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
# Local statuses: the input is written but not uploaded; uploaded but no batch created yet; a
# results file imported from disk (vllm run-batch), to be read like a finished batch.
WRITTEN, UPLOADED, IMPORTED = "written", "uploaded", "imported"


@dataclass(frozen=True)
class BatchOptions:
    """``batch_options`` of a judge (``params.yaml``), used when ``submit: batch``.

    Attributes:
        poll_interval_s: seconds between two polls of the running batches.
        max_wait_s: how long a run waits for its batches; then the unanswered requests are
            rows with the reason and the batch ids stay for the next run (0: submit, record
            and end at once; a later run collects).
        max_requests: lines per input file (the API allows 50,000).
        max_bytes: bytes per input file (the API allows 200 MB).
        completion_window: the API's completion window (only ``24h`` exists).
        state_dir: where ``batches.json`` and the JSONL files live (default: the stage's
            output directory).
        write_only: write the JSONL (``batch_input_NNN.jsonl``, for ``vllm run-batch``) and
            submit nothing; the requests are rows saying so.
    """

    poll_interval_s: float = 30.0
    max_wait_s: float = 25 * 3600.0
    max_requests: int = 50_000
    max_bytes: int = 200 * 1024 * 1024
    completion_window: str = "24h"
    state_dir: str | None = None
    write_only: bool = False

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> BatchOptions:
        """Options from ``batch_options`` (unknown keys and impossible values are errors).

        Raises:
            ValueError: an unknown key, a non-positive limit or a negative time.
        """
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown batch_options: {', '.join(unknown)} "
                             f"(known: {', '.join(sorted(known))})")
        options = cls(**data)
        if options.max_requests < 1 or options.max_bytes < 1:
            raise ValueError("batch_options: max_requests and max_bytes must be positive")
        if options.poll_interval_s < 0 or options.max_wait_s < 0:
            raise ValueError("batch_options: poll_interval_s and max_wait_s must be >= 0")
        return options


@dataclass
class BatchEntry:
    """One batch (or imported results file) in ``batches.json``.

    Attributes:
        name: the stem of its files in the state directory (``<name>.jsonl`` input,
            ``<name>.ids`` its custom_ids one per line, ``<name>.output.jsonl`` /
            ``<name>.errors.jsonl`` what the API returned).
        requests: lines in the input.
        bytes: size of the input.
        first_id: the first custom_id (with ``last_id``: the range; all are in ``.ids``).
        last_id: the last custom_id.
        status: ``written``, ``uploaded``, ``imported`` or the API's batch status.
        source: ``api`` (submitted) or ``file`` (imported results).
        input_file_id: the uploaded input's file id.
        id: the batch id.
        create_attempted: a ``POST /v1/batches`` was sent for this input (on resume without
            an id, the batch is looked up by its input file before creating another).
        output_file_id: the API's output file.
        error_file_id: the API's error file.
        request_counts: the API's counts (total, completed, failed).
        errors: the batch's own errors (a failed validation, a refused upload).
        outputs: result files on disk (downloaded or imported), relative to the state dir.
        created_at: when the API created the batch (epoch seconds).
        ended_at: when it completed / failed / expired / was cancelled (epoch seconds).
        collected: its results are in the cache and its failures were reported.
    """

    name: str
    requests: int
    bytes: int
    first_id: str
    last_id: str
    status: str = WRITTEN
    source: str = "api"
    input_file_id: str | None = None
    id: str | None = None
    create_attempted: bool = False
    output_file_id: str | None = None
    error_file_id: str | None = None
    request_counts: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    created_at: int | None = None
    ended_at: int | None = None
    collected: bool = False

    @property
    def label(self) -> str:
        """How the logs and reasons name it."""
        return f"batch {self.id}" if self.id else f"{self.name} ({self.status})"


class BatchState:
    """``batches.json`` of one state directory: the entries, saved atomically on each change."""

    def __init__(self, directory: str | Path, backend: str = "") -> None:
        """Load the state (an empty one when there is no file yet).

        Raises:
            ValueError: ``batches.json`` exists but cannot be read (never silently replaced:
                that would resubmit batches that are running).
        """
        self.dir = Path(directory)
        self.path = self.dir / STATE_FILE
        self.backend = backend
        self.entries: list[BatchEntry] = []
        self._ids: dict[str, frozenset[str]] = {}
        if self.path.is_file():
            try:
                data = json.loads(self.path.read_text())
                self.entries = [BatchEntry(**e) for e in data["batches"]]
                self.backend = backend or data.get("backend", "")
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{self.path} cannot be read ({type(exc).__name__}: {exc}); "
                                 "it records batches that may still be running: fix or "
                                 "remove it by hand") from None

    def save(self) -> None:
        """Write ``batches.json`` atomically (temp file, fsync, rename)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        data = {"version": STATE_VERSION, "backend": self.backend, "endpoint": ENDPOINT,
                "updated": now_iso(), "batches": [asdict(e) for e in self.entries]}
        write_bytes(self.path, (json.dumps(data, indent=1) + "\n").encode(), durable=True)

    def ids(self, entry: BatchEntry) -> frozenset[str]:
        """The custom_ids of an entry (read once from its ``.ids`` file)."""
        if entry.name not in self._ids:
            path = self.dir / f"{entry.name}.ids"
            try:
                self._ids[entry.name] = frozenset(path.read_text().split())
            except OSError as exc:
                raise ValueError(f"{path}: the custom_ids of {entry.label} cannot be read "
                                 f"({exc})") from None
        return self._ids[entry.name]

    def next_name(self, prefix: str) -> str:
        """A fresh entry name (``<prefix>_NNNN``)."""
        taken = {e.name for e in self.entries}
        n = len(self.entries)
        while f"{prefix}_{n:04d}" in taken:
            n += 1
        return f"{prefix}_{n:04d}"

    def add(self, entry: BatchEntry, ids: Sequence[str]) -> None:
        """Record a new entry whose ``.ids`` file has been written."""
        self.entries.append(entry)
        self._ids[entry.name] = frozenset(ids)
        self.save()


def read_result_lines(path: str | Path) -> Iterator[dict[str, JSONValue]]:
    """The lines of a Batch API (or ``vllm run-batch``) output or error file.

    Raises:
        ValueError: a line is not a JSON object with a ``custom_id`` (named by number).
    """
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError as exc:
                raise ValueError(f"{path}:{n}: not JSON ({exc})") from None
            if (not isinstance(line, dict) or not isinstance(line.get("custom_id"), str)
                    or not ("response" in line or "error" in line)):
                # An input line (custom_id, method, url, body) is the usual mistake.
                raise ValueError(f"{path}:{n}: not a batch result line (it needs custom_id "
                                 "and response or error)")
            yield line


def import_results(results: str | Path, state_dir: str | Path) -> BatchEntry:
    """Record a results file in a state directory; the stage's next run reads it into the cache.

    The file is ``vllm run-batch`` output, or a Batch API output or error file fetched by
    hand.

    The file is copied into the state directory, so the record does not depend on it staying
    where it is.

    Args:
        results: the output JSONL (lines ``{"custom_id", "response": {"status_code",
            "body"}, "error"}``).
        state_dir: the judge's batch state directory (its output directory by default).

    Returns:
        The recorded entry.

    Raises:
        ValueError: the file is not a batch results file.
        OSError: it cannot be read, or the state directory cannot be written.
    """
    results = Path(results)
    ids = [str(line["custom_id"]) for line in read_result_lines(results)]  # str: checked
    if not ids:
        raise ValueError(f"{results}: no result lines")
    directory = Path(state_dir)
    directory.mkdir(parents=True, exist_ok=True)
    with state_lock(directory):
        state = BatchState(directory)
        name = state.next_name("import")
        with atomic_path(directory / f"{name}.output.jsonl") as tmp:
            shutil.copyfile(results, tmp)
        write_bytes(directory / f"{name}.ids", "".join(i + "\n" for i in ids).encode(),
                durable=True)
        entry = BatchEntry(name=name, requests=len(ids), bytes=results.stat().st_size,
                           first_id=ids[0], last_id=ids[-1], status=IMPORTED, source="file",
                           outputs=[f"{name}.output.jsonl"])
        state.add(entry, ids)
    return entry


@contextmanager
def state_lock(directory: Path) -> Iterator[None]:
    """Hold ``batches.lock`` (one process per state directory).

    The kernel releases it when the process dies, ``kill -9`` included.
    """
    import fcntl

    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / LOCK_FILE, "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"another process is running the batches of {directory} "
                             f"({LOCK_FILE} is locked)") from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def now_iso() -> str:
    """The time now, UTC, ISO 8601 to the second (recorded in ``batches.json``)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


__all__ = ["ENDPOINT", "STATE_FILE", "SUBMIT_MODES", "BatchEntry", "BatchOptions", "BatchState",
           "import_results", "read_result_lines", "state_lock"]
