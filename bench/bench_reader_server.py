"""The reader's figure on a corpus with the llama.cpp server's forced anchor as second channel.

A corpus answer was written by hand, so no server can generate it; but the second channel a
llama.cpp server gives (issue 40) is a *continuation* of the answer: the method's verdict
prefix appended to it, the distribution read there. This benchmark puts a proxy in front of
the real server (``capjudge serve``, the embedded judge unless ``--gguf``):

- the scoring request is answered with the corpus answer, as tokens with log-probabilities (each
  digit its own token, as Gemma's tokenizer writes numbers; each token certain, so an on-contract
  reading is read as written);
- every continuation request (``continue_final_message``: a forced anchor, a digit follow-up) is
  forwarded to the real server, which continues the corpus answer with its own distribution;
- the method's other requests (VisCE²'s context, HarmonicEval's other criteria) get the
  stand-in's ordinary answers. The proxy says the server takes pictures (the picture methods'
  requests are answered here); what it forwards keeps only the conversation's text, since
  the embedded judge reads no pictures.

So an off-contract reading is confirmed or contradicted by what the real model puts after its
verdict prefix. Prints, per corpus: text entries read right (the value, or the abstention, as
worked out by hand: a valid status counts whatever its name, since the proxy's certain tokens
make ``ok`` of what a text answer reads as ``text_only``), wrong values returned as valid, how
many readings needed the second channel and what it said.

    python bench/bench_reader_server.py tests/data/blind_answers_j.json
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from replay import criterion, is_scoring_request, load, score_args  # noqa: E402

from capjudge.cli import main as cli_main  # noqa: E402
from capjudge.testing.openai_server import (  # noqa: E402
    MockHandler,
    MockOpenAIServer,
    Scripted,
    default_script,
    is_continuation,
    prompt_text,
)

VALID = ("ok", "low_mass", "text_only", "partial")


def _tokens(text: str) -> list[tuple[str, dict[str, float]]]:
    """The answer as certain tokens: each digit its own, the text between as it stands."""
    return [(t, {}) for t in re.findall(r"\d|[^\d]+", text)]


class _Proxy(MockOpenAIServer):
    """The stand-in, with continuations and GETs forwarded to the real server."""

    real: str = ""

    def _handler(self) -> type[MockHandler]:
        return type("Handler", (_ProxyHandler,), {"mock": self})


class _ProxyHandler(MockHandler):
    mock: ClassVar[_Proxy]

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        """Forwarded: the client recognises the real server (llama.cpp) and its weights."""
        base = self.mock.real.removesuffix("/v1")
        try:
            with urllib.request.urlopen(base + self.path, timeout=30) as r:  # noqa: S310
                body = r.read()
                if self.path.rstrip("/").endswith("/props"):
                    # The corpus's picture methods are answered here: the client may send
                    # pictures (the real server, text-only, gets the text of each request).
                    props = json.loads(body)
                    props["modalities"] = {**(props.get("modalities") or {}), "vision": True}
                    body = json.dumps(props).encode()
                self._send(r.status, body)
        except urllib.error.HTTPError as exc:  # the real server's own answer, passed on
            self._send(exc.code, exc.read())

    def _completion(self, body: Any, key: str) -> Any:  # noqa: ANN401
        messages = body.get("messages") or []
        if not (is_continuation(body) or messages and messages[-1].get("role") == "assistant"):
            return super()._completion(body, key)  # (llama.cpp: a last assistant message)
        for message in body.get("messages") or []:
            if isinstance(message.get("content"), list):  # pictures: the real server has none
                message["content"] = [p for p in message["content"] if p.get("type") == "text"]
        request = urllib.request.Request(  # noqa: S310
            self.mock.real + "/chat/completions", data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as r:  # noqa: S310
            self.mock.forwarded += 1
            return json.loads(r.read())


def _serve(gguf: str | None, port: int) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-c", "from capjudge.cli import main; main()", "serve", "--port",
           str(port)]
    if gguf:
        cmd += ["--gguf", gguf]
    # The server's log goes to a file: a pipe nobody reads would fill and stall it, and a
    # server that does not start must say why (a port in use, a missing GGUF).
    log = tempfile.NamedTemporaryFile("w+", prefix="capjudge-serve-", suffix=".log",  # noqa: SIM115
                                      delete=False)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.terminate()
        proc.wait(timeout=30)
        log.seek(0)
        tail = "".join(log.readlines()[-15:])
        raise SystemExit(f"capjudge serve did not start: {url!r}; its log ({log.name}) ends:\n"
                         f"{tail}")
    return proc, url.rstrip("/") if url.rstrip("/").endswith("/v1") else url.rstrip("/") + "/v1"


def _score(entry: dict[str, Any], proxy: _Proxy, work: Path) -> dict[str, Any]:
    answer = Scripted(text=entry["text"], tokens=_tokens(entry["text"]), logprobs=True,
                      reasoning_content=entry.get("reasoning_content"),
                      finish_reason=entry.get("finish_reason"))

    def script(body: Any) -> Scripted:  # noqa: ANN401
        return answer if is_scoring_request(entry, prompt_text(body)) else default_script(body)

    proxy.script = script
    args = score_args(entry, work)
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        cli_main(["score", "--backend", "openai/gemma-3-270m", "--base-url", proxy.url,
                  "--cache-dir", str(work / "cache"), "--json", *args])
    try:
        out: dict[str, Any] = json.loads(buffer.getvalue())
    except json.JSONDecodeError as exc:
        raise SystemExit(f"capjudge score printed no JSON for {entry['id']}: "
                         f"{buffer.getvalue()[:300]!r}") from exc
    return out


def _judged(entry: dict[str, Any], out: dict[str, Any]) -> tuple[bool, bool, list[str]]:
    """Right, wrong-valid, and each criterion's confirmation."""
    want = entry["expect"]
    if entry["method"] == "harmoniceval":
        crit = out["criteria"].get(criterion(entry)) or {}
        status, score = crit.get("status"), crit.get("printed")
        confirmations = [str(crit.get("confirmation"))]
    else:
        # The value the judge stated (printed): where a word verdict takes the forced anchor's
        # distribution (capjudge.reading.confirm), its expectation is the model's, by design.
        status = out["status"]
        score = out["score"] if entry["method"] in ("cap3d", "gveval-accr") else (
            out.get("printed") if out.get("printed") is not None else out["score"])
        confirmations = [str(c.get("confirmation")) for c in out["criteria"].values()
                         if isinstance(c, dict)]
    want_score = want.get("score")
    valid, want_valid = status in VALID and score is not None, want["status"] in VALID + (
        "ok",)
    if want["status"] == "undefined":
        right = status == "undefined"
    elif valid and want_valid and want_score is not None:
        right = abs(score - want_score) <= 0.5  # the proxy's certain tokens: the printed value
    else:
        right = not valid and not want_valid
    wrong = valid and not (want_score is not None and abs(score - want_score) <= 0.5)
    return right, wrong, confirmations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="+", type=Path)
    parser.add_argument("--gguf", help="the judge's GGUF (default: the embedded one)")
    parser.add_argument("--port", type=int, default=8747)
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--debug", action="store_true", help="print each score's JSON")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    server, real = _serve(args.gguf, args.port)
    try:
        with _Proxy(model="gemma-3-270m") as proxy:
            proxy.real, proxy.forwarded, proxy.max_top_logprobs = real, 0, 1000
            for path in args.corpora:
                entries = [e for e in load(path) if "text" in e]
                started, seen = time.perf_counter(), []
                with tempfile.TemporaryDirectory() as tmp:
                    for k, entry in enumerate(entries):
                        work = Path(tmp) / str(k)
                        work.mkdir()
                        out = _score(entry, proxy, work)
                        if args.debug:
                            print(entry["id"], json.dumps(out.get("criteria"))[:700])
                        seen.append((entry, *_judged(entry, out)))
                right = sum(r for _, r, _, _ in seen)
                wrong = [e["id"] for e, _, w, _ in seen if w]
                channel = Counter(c for _, _, _, cs in seen for c in cs)
                print(f"{path.name}: {right}/{len(seen)} text entries read right; {len(wrong)} "
                      f"wrong value(s) returned as valid; confirmations {dict(channel)}; "
                      f"{proxy.forwarded} requests continued by the real server; "
                      f"{time.perf_counter() - started:.0f} s")
                proxy.forwarded = 0
                if not args.quiet:
                    for e, r, w, cs in seen:
                        if not r:
                            print(f"  {'WRONG-VALID' if w else 'miss':<11} {e['id']} "
                                  f"{'/'.join(cs)}")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
