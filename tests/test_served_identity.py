"""Which weights a judge server serves: asked of the server, in the snapshot, the cache key and
the watch flow (capjudge.backends.served_identity).

The real-server tests run llama.cpp's own server (``capjudge serve``, and the same engine
without the weights tag, as a plain llama.cpp server is), and change the weights behind the
same path and served name. The other servers' identity endpoints (Ollama, TGI, vLLM) are
answered by a small stdlib server in their documented shapes: none of them runs here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from capjudge.backends import create_backend
from capjudge.backends.openai_backend import OpenAIBackend, error_from_body
from capjudge.backends.served_identity import ServedModel, probe_identity, server_root
from capjudge.client import build_client
from capjudge.protocol import BackendError, Decoding, JudgeRequest, Message
from capjudge.testing.openai_server import MockOpenAIServer
from capjudge.watch import classify, fingerprint

# -- emulated identity endpoints (servers that do not run here) -------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def routes(answers: dict[str, Any]) -> Iterator[str]:
    """A server answering GET ``path`` with ``answers[path]`` as JSON (404 otherwise)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = answers.get(self.path.rstrip("/"))
            data = json.dumps(body if body is not None else {"error": "no route"}).encode()
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _models(model: str, **entry: Any) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": model, "object": "model", **entry}]}


COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(("answers", "weights", "server"), [
    pytest.param({"/v1/models": _models("llama3"), "/api/tags": {"models": [
        {"name": "llama3:latest", "model": "llama3:latest", "digest": "ab" * 32}]}},
        f"ollama-digest:{'ab' * 32}", "ollama", id="ollama-digest"),
    pytest.param({"/v1/models": _models("m"), "/info": {"model_id": "org/m",
                                                         "model_sha": "c0ffee"}},
                 "tgi-sha:c0ffee", "tgi", id="tgi-model-sha"),
    pytest.param({"/v1/models": _models("m", owned_by="vllm", root=(
        f"/hf/hub/models--org--m/snapshots/{COMMIT}"))},
        f"hf-revision:{COMMIT}", "vllm", id="vllm-hf-snapshot-root"),
    pytest.param({"/v1/models": _models("m", owned_by="vllm", root="org/m")},
                 None, "vllm", id="vllm-repo-id-unpinned"),
    pytest.param({"/v1/models": _models("m", owned_by="llamacpp", tags=[f"sha256:{'1' * 64}"],
                                        meta={"size": 5, "n_params": 7})},
                 f"gguf-sha256:{'1' * 64}", "llama.cpp", id="capjudge-serve-tag"),
    pytest.param({"/v1/models": _models("m")}, None, None, id="unknown-unpinned"),
])
def test_each_servers_own_report_of_its_weights(answers: dict[str, Any], weights: str | None,
                                                server: str | None) -> None:
    model = "llama3" if "/api/tags" in answers else "m"
    with routes(answers) as url:
        identity = probe_identity(url, model)
        served = ServedModel(model, url)
        snapshot, (pinned, how) = served.snapshot(), served.pinning()
    assert identity.weights == weights and identity.server == server
    assert pinned is (weights is not None)
    if weights:
        assert snapshot.startswith(f"{model}@{weights.split(':')[0]}:") and weights in how
    else:
        assert "pin it with backend_options.snapshot" in how


def test_a_server_that_says_text_only_turns_vision_off_before_any_request() -> None:
    answers = {"/v1/models": _models("m", architecture={"input_modalities": ["text"]})}
    with routes(answers) as url:
        backend = create_backend("openai/m", base_url=url)
        assert backend.capabilities.vision  # nothing asked yet
        backend.connect()
        assert not backend.capabilities.vision


def test_a_user_pin_pins_an_unpinned_server_and_joins_its_snapshot() -> None:
    with routes({"/v1/models": _models("m")}) as url:
        pinned = ServedModel("m", url, configured="m-2026-11-01")
        bare = ServedModel("m", url)
        assert pinned.pinning()[0] and pinned.snapshot() == "m-2026-11-01"
        assert not bare.pinning()[0] and bare.snapshot() == "m"


def test_openai_api_pinning_follows_the_dated_snapshot_name() -> None:
    assert ServedModel("gpt-4o-2024-08-06", None).pinning()[0]
    pinned, why = ServedModel("gpt-4o", None).pinning()
    assert not pinned and "alias" in why


def test_server_root_strips_the_api_path() -> None:
    assert server_root("http://h:8080/v1") == "http://h:8080"
    assert server_root("http://h:8080/v1/") == "http://h:8080"
    assert server_root("http://h/proxy/v1") == "http://h/proxy"


# -- a wrong address never "succeeds" from the cache ------------------------------------------


def _request(text: str = "Reply with one word.") -> JudgeRequest:
    return JudgeRequest(messages=(Message("user", (text,)),), slots=(),
                        decoding=Decoding(max_tokens=2, top_logprobs=2), template="t@1")


def test_an_unreachable_server_stops_the_client_naming_the_url_even_with_a_warm_cache(
        tmp_path: Path) -> None:
    with MockOpenAIServer() as server:
        url = server.url
        backend = create_backend("openai/gpt-4o-2024-08-06", base_url=url)
        answer = build_client(backend, cache_dir=tmp_path).run([_request()])[0]
        assert answer.status == "ok"
    # The same URL, nothing listening now: the cached answer must not stand in for the server.
    again = create_backend("openai/gpt-4o-2024-08-06", base_url=url)
    with pytest.raises(BackendError, match="cannot reach the judge server at "
                       + url.replace(".", r"\.")) as raised:
        build_client(again, cache_dir=tmp_path)
    assert not raised.value.transient


def test_judge_and_score_against_a_wrong_url_fail_with_one_line_naming_it(
        ingested: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from capjudge.cli import main as cli_main

    items = ingested / "items.parquet"
    with MockOpenAIServer() as server:
        url = server.url
        assert cli_main(["judge", "--items", str(items), "--method", "gveval", "--modes",
                         "ref-only", "--backend", "openai/gpt-4o-2024-08-06", "--base-url",
                         url, "--cache-dir", str(tmp_path / "c"), "--limit", "3", "--out",
                         str(tmp_path / "a")]) == 0
    capsys.readouterr()
    # Every answer is in the cache now; the server is gone.
    code = cli_main(["judge", "--items", str(items), "--method", "gveval", "--modes",
                     "ref-only", "--backend", "openai/gpt-4o-2024-08-06", "--base-url", url,
                     "--cache-dir", str(tmp_path / "c"), "--limit", "3", "--out",
                     str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert code == 2 and url in err and "cannot reach" in err
    assert not (tmp_path / "b" / "judgements.parquet").exists()
    code = cli_main(["score", "--method", "gveval", "--mode", "ref-only", "--backend",
                     "openai/gpt-4o-2024-08-06", "--base-url", url, "--caption", "a dog",
                     "--ref", "a dog running", "--cache-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert code != 0 and url in err


# -- no image to a server that takes none -----------------------------------------------------


def test_a_no_image_input_error_is_permanent_whatever_its_status() -> None:
    message = ("image input is not supported - hint: if this is unexpected, you may need to "
               "provide the mmproj")
    error = error_from_body(500, {"error": {"code": 500, "message": message,
                                            "type": "server_error"}})
    assert not error.transient and "takes no images" in str(error)
    assert error_from_body(500, {"error": {"message": "internal error"}}).transient


# -- the real llama.cpp server: a weight change behind the same name --------------------------


def _embedded_gguf() -> Path:
    from capjudge.backends.llamacpp import resolve_model

    return resolve_model("embedded/gemma-3-270m")[0]


def _change_weights(gguf: Path) -> None:
    """Halve the last block's post-feed-forward norm: same file, same size, other weights."""
    import gguf as gguf_lib

    tensor = next(t for t in gguf_lib.GGUFReader(str(gguf)).tensors
                  if t.name == "blk.17.post_ffw_norm.weight")
    offset, size = int(tensor.data_offset), int(tensor.n_bytes)
    with gguf.open("r+b") as handle:
        handle.seek(offset)
        values = np.frombuffer(handle.read(size), dtype=np.float32) * 0.5
        handle.seek(offset)
        handle.write(values.astype(np.float32).tobytes())


_PLAIN_SERVER = """
import signal, sys
from capjudge.backends.llamacpp import server_params, start_engine
params = server_params(__import__("pathlib").Path(sys.argv[1]), alias=sys.argv[2], threads=1,
                       parallel=1, poll=0, port=int(sys.argv[3]), host="127.0.0.1")
engine = start_engine(params)
print("ready", flush=True)
signal.sigwait({signal.SIGTERM})
import os; os._exit(0)
"""


@contextlib.contextmanager
def serving(gguf: Path, *, plain: bool = False) -> Iterator[str]:
    """``capjudge serve`` on ``gguf`` (``plain``: the engine without the weights tag)."""
    port = _free_port()
    if plain:
        cmd = [sys.executable, "-c", _PLAIN_SERVER, str(gguf), gguf.stem, str(port)]
    else:
        cmd = [sys.executable, "-m", "capjudge.cli", "serve", str(gguf), "--port", str(port),
               "--threads", "1", "--parallel", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline().strip()
    if not first:
        proc.kill()
        pytest.fail(f"the server did not start: {proc.stderr.read() if proc.stderr else ''}")
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.mark.heavy(seconds=19)
@pytest.mark.slow
def test_a_weight_change_behind_the_same_served_name_is_seen_and_never_cached(
        tmp_path: Path) -> None:
    gguf = tmp_path / "judge.gguf"
    shutil.copy(_embedded_gguf(), gguf)
    request = _request("The capital of France is")
    runs: list[dict[str, Any]] = []
    for change in (False, True):
        if change:
            _change_weights(gguf)
        with serving(gguf) as url:
            backend = create_backend("openai/judge", base_url=url)
            answer = build_client(backend, cache_dir=tmp_path / "cache").run([request])[0]
            runs.append({"snapshot": backend.snapshot(), "answer": answer,
                         "watch": fingerprint("j", "openai/judge", {"base_url": url},
                                              probe=False)})
    before, after = runs
    assert before["answer"].status == after["answer"].status == "ok"
    assert "@gguf-sha256:" in before["snapshot"] and before["snapshot"] != after["snapshot"]
    # The new weights were asked: not the old answer from the cache.
    assert not after["answer"].cached and after["answer"].cache_key != before["answer"].cache_key
    assert after["answer"].raw != before["answer"].raw
    # The watch flow sees it.
    assert before["watch"]["watchable"] and after["watch"]["watchable"]
    groups = classify({"j": after["watch"]}, {"j": before["watch"]})
    assert groups["changed"] == ["j"]


@pytest.mark.slow
def test_a_plain_llamacpp_server_is_unpinned_said_once_and_unwatchable(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    gguf = tmp_path / "plain.gguf"
    shutil.copy(_embedded_gguf(), gguf)
    with serving(gguf, plain=True) as url:
        backend = create_backend("openai/plain", base_url=url)
        assert isinstance(backend, OpenAIBackend)
        with caplog.at_level(logging.WARNING):
            build_client(backend, cache_dir=tmp_path / "cache")
        pinned, why = backend.pinning()
        entry = fingerprint("j", "openai/plain", {"base_url": url}, probe=True)
        pinned_by_user = create_backend("openai/plain", base_url=url, snapshot="plain-v1")
        assert pinned_by_user.pinning()[0]
        facts = backend.describe()
    assert not pinned and "llama.cpp" in why and "backend_options.snapshot" in why
    assert sum("unpinned snapshot: openai/plain" in r.getMessage()
               for r in caplog.records) == 1
    # The path and shape it did report still key the cache: another file is another key.
    assert backend.snapshot().startswith("plain~facts:")
    assert facts["pinned"] is False and facts["served_by"] == "llama.cpp"
    assert entry["watchable"] is False and "build" in str(entry["unwatchable"])
    assert not backend.capabilities.vision  # /props: text only


def test_the_judge_stage_against_a_wrong_url_stops_before_any_task(tmp_path: Path) -> None:
    import yaml

    root = Path(__file__).parents[1]
    params = yaml.safe_load((root / "params.yaml").read_text())
    url = f"http://127.0.0.1:{_free_port()}/v1"  # nothing listens there
    params["judges"] = {"mine": {"method": "gveval", "backend": "openai/judge",
                                 "backend_options": {"base_url": url}}}
    params["context_judges"] = {}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    # The stage's own entry point, in a process of its own (as dvc runs it).
    done = subprocess.run([sys.executable, "-m", "flows.judge", "--name", "mine", "--params",
                           str(path)], cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("judge mine: error: cannot reach the judge server at " + url)
    assert "Traceback" not in done.stderr
