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
from email import policy
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from capjudge.testing.openai_server import MockHandler, MockOpenAIServer, Script

LineFault = Callable[[str, dict[str, Any]], "int | str | None"]

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
        batches: batch id -> batch object (plus private bookkeeping under ``_``-keys).
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
        self.files: dict[str, tuple[dict[str, Any], bytes]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.batch_creations = 0
        self.submitted_lines: Counter[str] = Counter()
        self.batch_retrievals = 0
        self._batch_lock = threading.RLock()
        super().__init__(script, **kwargs)

    # -- files ---------------------------------------------------------------------------

    def add_file(self, data: bytes, purpose: str, filename: str) -> dict[str, Any]:
        """Store a file as the API would; returns its file object."""
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        obj: dict[str, Any] = {
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

    def create_batch(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
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
            batch: dict[str, Any] = {
                "id": f"batch_{uuid.uuid4().hex[:24]}", "object": "batch",
                "endpoint": request["endpoint"], "errors": None, "input_file_id": file_id,
                "completion_window": "24h", "status": "validating", "output_file_id": None,
                "error_file_id": None, "created_at": now, "in_progress_at": None,
                "expires_at": now + 24 * 3600, "finalizing_at": None, "completed_at": None,
                "failed_at": None, "expired_at": None, "cancelling_at": None,
                "cancelled_at": None,
                "request_counts": {"total": 0, "completed": 0, "failed": 0},
                "metadata": request.get("metadata") or None,
                "_polls": 0, "_created": time.monotonic()}
            self.batches[batch["id"]] = batch
            self.batch_creations += 1
            for line in self.files[file_id][1].splitlines():
                try:
                    self.submitted_lines[str(json.loads(line).get("custom_id"))] += 1
                except (ValueError, AttributeError):
                    continue  # validation reports it
        return 200, _public(batch)

    def retrieve_batch(self, batch_id: str) -> dict[str, Any] | None:
        """``GET /v1/batches/{id}``: moves the batch on by one status (see the module doc)."""
        with self._batch_lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return None
            self.batch_retrievals += 1
            batch["_polls"] += 1
            status = batch["status"]
            now = int(time.time())
            if status == "validating":
                errors = self._validate(batch)
                if errors:
                    batch.update(status="failed", failed_at=now,
                                 errors={"object": "list", "data": errors})
                else:
                    lines = [x for x in self.files[batch["input_file_id"]][1].splitlines()
                             if x.strip()]
                    batch.update(status="in_progress", in_progress_at=now)
                    batch["request_counts"] = {"total": len(lines), "completed": 0,
                                               "failed": 0}
            elif status == "in_progress":
                ready = (not self.hold_batches and batch["_polls"] >= self.batch_polls
                         and time.monotonic() - batch["_created"] >= self.batch_delay_s)
                if ready:
                    self._run(batch)
                    batch.update(status="finalizing", finalizing_at=now)
            elif status == "finalizing":
                expired = batch.pop("_expired", False)
                batch.update(status="expired" if expired else "completed")
                batch["expired_at" if expired else "completed_at"] = now
            elif status == "cancelling":
                batch.update(status="cancelled", cancelled_at=now)
            return _public(batch)

    def cancel_batch(self, batch_id: str) -> dict[str, Any] | None:
        """``POST /v1/batches/{id}/cancel``."""
        with self._batch_lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return None
            if batch["status"] not in TERMINAL:
                batch.update(status="cancelling", cancelling_at=int(time.time()))
            return _public(batch)

    def list_batches(self, limit: int = 20, after: str | None = None) -> dict[str, Any]:
        """``GET /v1/batches``: newest first, cursor ``after`` a batch id."""
        with self._batch_lock:
            ordered = sorted(self.batches.values(), key=lambda b: -b["_created"])
        ids = [b["id"] for b in ordered]
        start = ids.index(after) + 1 if after in ids else 0
        page = [_public(b) for b in ordered[start:start + limit]]
        return {"object": "list", "data": page,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": start + limit < len(ordered)}

    def _validate(self, batch: dict[str, Any]) -> list[dict[str, Any]]:
        """The API's validation errors for a batch's input file (empty: valid)."""
        data = self.files[batch["input_file_id"]][1]
        lines = [line for line in data.splitlines() if line.strip()]
        errors: list[dict[str, Any]] = []
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
                obj = json.loads(line)
            except ValueError:
                errors.append({"code": "invalid_json_line", "message": "not valid JSON",
                               "param": None, "line": n})
                continue
            custom_id = obj.get("custom_id") if isinstance(obj, dict) else None
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

    def _run(self, batch: dict[str, Any]) -> None:
        """Answer every line of a batch; write its output and error files."""
        outputs: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        expired = False
        for line in self.files[batch["input_file_id"]][1].splitlines():
            if not line.strip():
                continue
            obj = json.loads(line)
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
            if isinstance(fault, int):
                code, answer = fault, _error_body(f"injected batch line error {fault}",
                                                  "invalid_request_error" if fault < 500
                                                  else "server_error")
            else:
                code, answer = self._chat(body)
            result = {"id": line_id, "custom_id": custom_id,
                      "response": {"status_code": code, "request_id": request_id,
                                   "body": answer}, "error": None}
            (outputs if code == 200 else errors).append(result)
        counts = {"total": len(outputs) + len(errors), "completed": len(outputs),
                  "failed": len(errors)}
        batch["request_counts"] = counts
        for kind, rows in (("output_file_id", outputs), ("error_file_id", errors)):
            if rows:
                data = "".join(json.dumps(r) + "\n" for r in reversed(rows)).encode()
                purpose = "batch_output"
                batch[kind] = self.add_file(data, purpose, f"{batch['id']}_{kind[:-8]}.jsonl")["id"]
        if expired:
            batch["_expired"] = True

    def _chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
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

    def _json(self, code: int, obj: dict[str, Any]) -> None:
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
                request = json.loads(raw)
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

    def _batch(self, batch_id: str, batch: dict[str, Any] | None) -> None:
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


def _error_body(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def _public(batch: dict[str, Any]) -> dict[str, Any]:
    """A batch object without the server's bookkeeping."""
    return {k: v for k, v in batch.items() if not k.startswith("_")}


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
