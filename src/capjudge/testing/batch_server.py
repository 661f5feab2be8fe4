"""The protocol stand-in extended with the OpenAI Files and Batch APIs, for tests of batch mode.

:class:`MockBatchServer` is :class:`~capjudge.testing.openai_server.MockOpenAIServer` plus:

- ``POST /v1/files`` (multipart: ``purpose``, ``file``), ``GET /v1/files/{id}`` and
  ``GET /v1/files/{id}/content``: file objects as the API returns them;
- ``POST /v1/batches`` (``input_file_id``, ``endpoint``, ``completion_window``, ``metadata``),
  ``GET /v1/batches/{id}``, ``GET /v1/batches`` (newest first, ``limit``/``after``) and
  ``POST /v1/batches/{id}/cancel``: batch objects with the real statuses (``validating``,
  ``in_progress``, ``finalizing``, ``completed``, ``failed``, ``expired``, ``cancelling``,
  ``cancelled``), ``request_counts``, ``output_file_id`` and ``error_file_id``.

A batch moves one status per retrieve: ``validating`` checks the input file (one JSON object
per line with a unique ``custom_id``, ``method: POST``, the batch's ``url``, one model, at most
``max_batch_requests`` lines) and fails the batch with the API's ``errors`` list otherwise;
``in_progress`` waits until it has been polled ``batch_polls`` times and ``batch_delay_s`` have
passed (and :attr:`MockBatchServer.hold_batches` is off), then answers every line with the
server's own scripted chat answers (each line is POSTed to this server's
``/v1/chat/completions``, so scripts, fault injection and the per-prompt counters apply as to
synchronous requests); ``finalizing`` becomes ``completed``. Output lines are written in reverse
order, as the API does not promise the input order either.

Per-line errors: :attr:`MockBatchServer.line_fault` maps ``(custom_id, body)`` to None (answer
it), an HTTP status (the line goes to the error file with that status and an error body, as a
refused request does) or ``"expired"`` (the line is left unanswered with ``batch_expired``, and
the batch ends ``expired``).

Counters for tests: ``batch_creations``, ``submitted_lines`` (custom_id -> times it arrived in a
created batch), ``batch_retrievals``.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from email import policy
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler
from typing import Any, TypedDict
from urllib.parse import parse_qs, urlsplit

from capjudge.records import JSONValue
from capjudge.testing.openai_server import (
    ChatCompletion,
    ChatRequest,
    MockHandler,
    MockOpenAIServer,
    Script,
)

LineFault = Callable[[str, ChatRequest], "int | str | None"]


class ErrorDetail(TypedDict):
    """An OpenAI error body's ``error``."""

    message: str
    type: str
    param: None
    code: str


class ErrorBody(TypedDict):
    """An OpenAI error body."""

    error: ErrorDetail


class FileObject(TypedDict):
    """A file object as ``/v1/files`` returns it."""

    id: str
    object: str
    bytes: int
    created_at: int
    filename: str
    purpose: str
    status: str
    expires_at: int | None
    status_details: str | None


class BatchError(TypedDict):
    """One validation error of a batch's input file."""

    code: str
    message: str
    param: str | None
    line: int | None
    """The input line (from 1), or None for the whole file."""


class BatchErrors(TypedDict):
    """A failed batch's ``errors``."""

    object: str
    data: list[BatchError]


class RequestCounts(TypedDict):
    """A batch's ``request_counts``."""

    total: int
    completed: int
    failed: int


class Batch(TypedDict):
    """A batch object as ``/v1/batches`` returns it."""

    id: str
    object: str
    endpoint: str
    errors: BatchErrors | None
    input_file_id: str
    completion_window: str
    status: str
    output_file_id: str | None
    error_file_id: str | None
    created_at: int
    in_progress_at: int | None
    expires_at: int
    finalizing_at: int | None
    completed_at: int | None
    failed_at: int | None
    expired_at: int | None
    cancelling_at: int | None
    cancelled_at: int | None
    request_counts: RequestCounts
    metadata: dict[str, str] | None


class BatchList(TypedDict):
    """``GET /v1/batches``: a page of batches."""

    object: str
    data: list[Batch]
    first_id: str | None
    last_id: str | None
    has_more: bool


class BatchCreate(TypedDict, total=False):
    """A ``POST /v1/batches`` body."""

    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, str] | None


class BatchLine(TypedDict):
    """One line of a (validated) batch input file."""

    custom_id: str
    method: str
    url: str
    body: ChatRequest


class LineResponse(TypedDict):
    """An output line's ``response``: the answer to the line's request."""

    status_code: int
    request_id: str
    body: ChatCompletion | ErrorBody


class LineError(TypedDict):
    """An output line's ``error`` (a line the batch did not run)."""

    code: str
    message: str


class OutputLine(TypedDict):
    """One line of a batch's output or error file."""

    id: str
    custom_id: str
    response: LineResponse | None
    error: LineError | None


@dataclass
class _BatchState:
    """A batch as the server keeps it: its public object and the bookkeeping behind it."""

    public: Batch
    created: float
    """``time.monotonic()`` at creation."""
    polls: int = 0
    expired: bool = False
    """Some line was left unanswered: the batch ends ``expired``."""

TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})


class MockBatchServer(MockOpenAIServer):
    """:class:`MockOpenAIServer` with ``/v1/files`` and ``/v1/batches`` (see the module doc).

    Attributes:
        batch_polls: retrieves a batch must see in ``in_progress`` before it is answered.
        batch_delay_s: seconds after creation before a batch is answered.
        hold_batches: while True, no batch leaves ``in_progress`` (a test kills its client
            meanwhile).
        line_fault: per-line error injection (see the module doc).
        max_batch_requests: lines allowed in one input file (the API's 50,000).
        max_file_bytes: bytes allowed in one uploaded file (the API's 200 MB).
        files: file id -> (object, bytes).
        batches: batch id -> the batch (its public object and the server's bookkeeping).
        batch_creations: ``POST /v1/batches`` that created a batch.
        submitted_lines: custom_id -> times it arrived in a created batch.
        batch_retrievals: ``GET /v1/batches/{id}`` calls.
    """

    def __init__(self, script: Script | None = None, *, batch_polls: int = 1,
                 batch_delay_s: float = 0.0, max_batch_requests: int = 50_000,
                 max_file_bytes: int = 200 * 1024 * 1024, **kwargs: Any) -> None:
        self.batch_polls = batch_polls
        self.batch_delay_s = batch_delay_s
        self.hold_batches = False
        self.line_fault: LineFault | None = None
        self.max_batch_requests = max_batch_requests
        self.max_file_bytes = max_file_bytes
        self.files: dict[str, tuple[FileObject, bytes]] = {}
        self.batches: dict[str, _BatchState] = {}
        self.batch_creations = 0
        self.submitted_lines: Counter[str] = Counter()
        self.batch_retrievals = 0
        self._batch_lock = threading.RLock()
        super().__init__(script, **kwargs)

    # -- files ---------------------------------------------------------------------------

    def add_file(self, data: bytes, purpose: str, filename: str) -> FileObject:
        """Store a file as the API would; returns its file object."""
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        obj: FileObject = {
            "id": file_id, "object": "file", "bytes": len(data),
            "created_at": int(time.time()), "filename": filename, "purpose": purpose,
            "status": "processed", "expires_at": None, "status_details": None}
        with self._batch_lock:
            self.files[file_id] = (obj, data)
        return obj

    def __enter__(self) -> MockBatchServer:
        super().__enter__()
        return self

    # -- batches -------------------------------------------------------------------------

    def create_batch(self, request: BatchCreate) -> tuple[int, Batch | ErrorBody]:
        """``POST /v1/batches``: (HTTP status, batch object or error body)."""
        file_id = str(request.get("input_file_id"))
        if request.get("completion_window") != "24h":
            return 400, _error_body("completion_window must be '24h'", "invalid_request_error")
        if request.get("endpoint") not in ("/v1/chat/completions", "/v1/completions",
                                           "/v1/embeddings", "/v1/responses"):
            return 400, _error_body(f"unsupported endpoint {request.get('endpoint')!r}",
                                    "invalid_request_error")
        with self._batch_lock:
            if file_id not in self.files:
                return 404, _error_body(f"No such File object: {file_id}",
                                        "invalid_request_error")
            if self.files[file_id][0]["purpose"] != "batch":
                return 400, _error_body("the input file's purpose must be 'batch'",
                                        "invalid_request_error")
            now = int(time.time())
            batch: Batch = {
                "id": f"batch_{uuid.uuid4().hex[:24]}", "object": "batch",
                "endpoint": request["endpoint"], "errors": None, "input_file_id": file_id,
                "completion_window": "24h", "status": "validating", "output_file_id": None,
                "error_file_id": None, "created_at": now, "in_progress_at": None,
                "expires_at": now + 24 * 3600, "finalizing_at": None, "completed_at": None,
                "failed_at": None, "expired_at": None, "cancelling_at": None,
                "cancelled_at": None,
                "request_counts": {"total": 0, "completed": 0, "failed": 0},
                "metadata": request.get("metadata") or None}
            self.batches[batch["id"]] = _BatchState(batch, created=time.monotonic())
            self.batch_creations += 1
            for line in self.files[file_id][1].splitlines():
                try:
                    self.submitted_lines[str(json.loads(line).get("custom_id"))] += 1
                except (ValueError, AttributeError):
                    continue  # validation reports it
        return 200, batch.copy()

    def retrieve_batch(self, batch_id: str) -> Batch | None:
        """``GET /v1/batches/{id}``: moves the batch on by one status (see the module doc)."""
        with self._batch_lock:
            state = self.batches.get(batch_id)
            if state is None:
                return None
            batch = state.public
            self.batch_retrievals += 1
            state.polls += 1
            status = batch["status"]
            now = int(time.time())
            if status == "validating":
                errors = self._validate(batch)
                if errors:
                    batch.update({"status": "failed", "failed_at": now,
                                  "errors": {"object": "list", "data": errors}})
                else:
                    lines = [x for x in self.files[batch["input_file_id"]][1].splitlines()
                             if x.strip()]
                    batch.update({"status": "in_progress", "in_progress_at": now})
                    batch["request_counts"] = {"total": len(lines), "completed": 0,
                                               "failed": 0}
            elif status == "in_progress":
                ready = (not self.hold_batches and state.polls >= self.batch_polls
                         and time.monotonic() - state.created >= self.batch_delay_s)
                if ready:
                    state.expired = self._run(batch)
                    batch.update({"status": "finalizing", "finalizing_at": now})
            elif status == "finalizing":
                expired, state.expired = state.expired, False
                batch["status"] = "expired" if expired else "completed"
                if expired:
                    batch["expired_at"] = now
                else:
                    batch["completed_at"] = now
            elif status == "cancelling":
                batch.update({"status": "cancelled", "cancelled_at": now})
            return batch.copy()

    def cancel_batch(self, batch_id: str) -> Batch | None:
        """``POST /v1/batches/{id}/cancel``."""
        with self._batch_lock:
            state = self.batches.get(batch_id)
            if state is None:
                return None
            if state.public["status"] not in TERMINAL:
                state.public.update({"status": "cancelling", "cancelling_at": int(time.time())})
            return state.public.copy()

    def list_batches(self, limit: int = 20, after: str | None = None) -> BatchList:
        """``GET /v1/batches``: newest first, cursor ``after`` a batch id."""
        with self._batch_lock:
            ordered = sorted(self.batches.values(), key=lambda b: -b.created)
        ids = [b.public["id"] for b in ordered]
        start = ids.index(after) + 1 if after in ids else 0
        page = [b.public.copy() for b in ordered[start:start + limit]]
        return {"object": "list", "data": page,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": start + limit < len(ordered)}

    def _validate(self, batch: Batch) -> list[BatchError]:
        """The API's validation errors for a batch's input file (empty: valid)."""
        data = self.files[batch["input_file_id"]][1]
        lines = [line for line in data.splitlines() if line.strip()]
        errors: list[BatchError] = []
        if not lines:
            return [{"code": "empty_file", "message": "The input file is empty.",
                     "param": None, "line": None}]
        if len(lines) > self.max_batch_requests:
            return [{"code": "too_many_requests",
                     "message": f"The input file has {len(lines)} requests; the limit is "
                                f"{self.max_batch_requests}.", "param": None, "line": None}]
        seen: set[str] = set()
        models: set[str] = set()
        for n, line in enumerate(lines, start=1):
            try:
                parsed: JSONValue = json.loads(line)
            except ValueError:
                errors.append({"code": "invalid_json_line", "message": "not valid JSON",
                               "param": None, "line": n})
                continue
            # A line that is JSON but not an object has none of the fields.
            obj: dict[str, JSONValue] = parsed if isinstance(parsed, dict) else {}
            custom_id = obj.get("custom_id")
            if not isinstance(custom_id, str) or not custom_id:
                errors.append({"code": "missing_required_parameter",
                               "message": "custom_id is required", "param": "custom_id",
                               "line": n})
            elif custom_id in seen:
                errors.append({"code": "duplicate_custom_id",
                               "message": f"duplicate custom_id {custom_id!r}",
                               "param": "custom_id", "line": n})
            seen.add(str(custom_id))
            if obj.get("method") != "POST" or obj.get("url") != batch["endpoint"]:
                errors.append({"code": "invalid_request",
                               "message": "method must be POST and url the batch's endpoint",
                               "param": "url", "line": n})
            body = obj.get("body")
            if not isinstance(body, dict):
                errors.append({"code": "missing_required_parameter",
                               "message": "body is required", "param": "body", "line": n})
            else:
                models.add(str(body.get("model")))
        if len(models) > 1:
            errors.append({"code": "mismatched_model",
                           "message": "all requests of a batch must use the same model",
                           "param": "model", "line": None})
        return errors

    def _run(self, batch: Batch) -> bool:
        """Answer every line of a batch; write its output and error files.

        Returns:
            Whether a line was left unanswered (the batch ends ``expired``).
        """
        outputs: list[OutputLine] = []
        errors: list[OutputLine] = []
        expired = False
        for line in self.files[batch["input_file_id"]][1].splitlines():
            if not line.strip():
                continue
            obj: BatchLine = json.loads(line)  # validated when the batch left ``validating``
            custom_id, body = obj["custom_id"], obj["body"]
            line_id = f"batch_req_{uuid.uuid4().hex[:24]}"
            request_id = f"req_{uuid.uuid4().hex[:24]}"
            fault = self.line_fault(custom_id, body) if self.line_fault else None
            if fault == "expired":
                expired = True
                errors.append({"id": line_id, "custom_id": custom_id, "response": None,
                               "error": {"code": "batch_expired", "message": "This request "
                                         "could not be executed before the completion window "
                                         "expired."}})
                continue
            answer: ChatCompletion | ErrorBody
            if isinstance(fault, int):
                code, answer = fault, _error_body(f"injected batch line error {fault}",
                                                  "invalid_request_error" if fault < 500
                                                  else "server_error")
            else:
                code, answer = self._chat(body)
            result: OutputLine = {"id": line_id, "custom_id": custom_id,
                                  "response": {"status_code": code,
                                               "request_id": request_id, "body": answer},
                                  "error": None}
            (outputs if code == 200 else errors).append(result)
        batch["request_counts"] = {"total": len(outputs) + len(errors),
                                   "completed": len(outputs), "failed": len(errors)}
        if outputs:
            batch["output_file_id"] = self._write_lines(batch, "output", outputs)
        if errors:
            batch["error_file_id"] = self._write_lines(batch, "error", errors)
        return expired

    def _write_lines(self, batch: Batch, kind: str, rows: list[OutputLine]) -> str:
        """Store a batch's output (or error) file, its lines in reverse order; its id."""
        data = "".join(json.dumps(r) + "\n" for r in reversed(rows)).encode()
        return self.add_file(data, "batch_output", f"{batch['id']}_{kind}.jsonl")["id"]

    def _chat(self, body: ChatRequest) -> tuple[int, ChatCompletion | ErrorBody]:
        """One line answered by this server's own ``/v1/chat/completions``."""
        request = urllib.request.Request(
            f"{self.url}/chat/completions", data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json", "Authorization": "Bearer batch"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - ours
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            try:
                return exc.code, json.loads(exc.read())
            except ValueError:
                return exc.code, _error_body("unreadable error body", "server_error")
        except (OSError, ValueError) as exc:
            return 500, _error_body(f"the line could not be answered: {exc}", "server_error")

    # -- HTTP ----------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class, bound to this server (http.server builds one per call)."""
        return type("BatchHandler", (BatchHandler,), {"mock": self})



class BatchHandler(MockHandler):
    """The HTTP side of :class:`MockBatchServer`: files and batches, then chat completions."""

    @property
    def batch(self) -> MockBatchServer:
        """The server this handler answers for."""
        assert isinstance(self.mock, MockBatchServer)
        return self.mock

    def _raw(self, code: int, data: bytes, kind: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _json(self, code: int, obj: FileObject | Batch | BatchList | ErrorBody) -> None:
        self._raw(code, json.dumps(obj).encode(), "application/json")

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        """Files, their content and batches; anything else as the chat server answers it."""
        url = urlsplit(self.path)
        parts = _route(url.path)
        if parts is None:
            super().do_GET()
            return
        if parts[0] == "files" and len(parts) in (2, 3):
            stored = self.batch.files.get(parts[1])
            if stored is None:
                self._json(404, _error_body(f"No such File object: {parts[1]}",
                                            "invalid_request_error"))
            elif len(parts) == 3 and parts[2] == "content":
                self._raw(200, stored[1], "application/octet-stream")
            else:
                self._json(200, stored[0])
        elif parts == ["batches"]:
            query = parse_qs(url.query)
            limit = int(query.get("limit", ["20"])[0])
            after = query.get("after", [None])[0]
            self._json(200, self.batch.list_batches(limit, after))
        elif parts[0] == "batches" and len(parts) == 2:
            self._batch(parts[1], self.batch.retrieve_batch(parts[1]))
        else:
            self._json(404, _error_body(f"no route {self.path}",
                                        "invalid_request_error"))

    def do_POST(self) -> None:  # noqa: N802
        """Uploads, batch creation and cancellation; anything else as chat completions."""
        parts = _route(urlsplit(self.path).path)
        if parts is None:
            super().do_POST()
            return
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if parts == ["files"]:
            self._upload(raw)
        elif parts == ["batches"]:
            try:
                request: BatchCreate = json.loads(raw)  # the client's body, checked below
            except ValueError:
                self._json(400, _error_body("could not parse the JSON body",
                                            "invalid_request_error"))
                return
            self._json(*self.batch.create_batch(request))
        elif parts[0] == "batches" and parts[2:] == ["cancel"]:
            self._batch(parts[1], self.batch.cancel_batch(parts[1]))
        else:
            self._json(404, _error_body(f"no route {self.path}",
                                        "invalid_request_error"))

    def _batch(self, batch_id: str, batch: Batch | None) -> None:
        """The batch object, or OpenAI's 404 for an unknown id."""
        if batch is None:
            self._json(404, _error_body(f"No such Batch: {batch_id}",
                                        "invalid_request_error"))
        else:
            self._json(200, batch)

    def _upload(self, raw: bytes) -> None:
        fields = _multipart(self.headers.get("Content-Type", ""), raw)
        if "file" not in fields or "purpose" not in fields:
            self._json(400, _error_body("file and purpose are required",
                                        "invalid_request_error"))
            return
        data, filename = fields["file"]
        if len(data) > self.batch.max_file_bytes:
            self._json(400, _error_body(
                f"File is too large ({len(data)} bytes; the limit is "
                f"{self.batch.max_file_bytes})", "invalid_request_error"))
            return
        purpose = fields["purpose"][0].decode()
        self._json(200, self.batch.add_file(data, purpose, filename or "upload"))


def _route(path: str) -> list[str] | None:
    """``/v1/files/...`` and ``/v1/batches/...`` as path segments after ``v1``.

    None for the base server's routes.
    """
    segments = [s for s in path.split("/") if s]
    if segments[:1] == ["v1"]:
        segments = segments[1:]
    return segments if segments[:1] in (["files"], ["batches"]) else None


def _multipart(content_type: str, raw: bytes) -> dict[str, tuple[bytes, str | None]]:
    """A multipart/form-data body as name -> (bytes, filename)."""
    message = BytesParser(policy=policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + raw)
    out: dict[str, tuple[bytes, str | None]] = {}
    if not message.is_multipart():
        return out
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            out[name] = (payload, part.get_filename())
    return out


def _error_body(message: str, kind: str) -> ErrorBody:
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def main(argv: list[str] | None = None) -> None:  # pragma: no cover - manual use
    """Run the stand-in with the Batch API in the foreground.

    Usage: ``python -m capjudge.testing.batch_server`` (prints the base URL first).
    """
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--batch-polls", type=int, default=1)
    parser.add_argument("--batch-delay", type=float, default=0.0)
    args = parser.parse_args(argv)
    server = MockBatchServer(batch_polls=args.batch_polls, batch_delay_s=args.batch_delay)
    print(server.url, flush=True)
    server._httpd.serve_forever()


if __name__ == "__main__":  # pragma: no cover
    main()
