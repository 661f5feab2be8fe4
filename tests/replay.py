"""Replay a judge-answer corpus entry through ``capjudge score --json`` (issue 30).

An entry (``tests/data/*_answers.json``) is what the judge's API returned: its ``text`` (or
its ``tokens`` with alternatives), optionally the message's ``reasoning_content`` and the
``finish_reason``. The stand-in OpenAI-protocol server answers the method's scoring request
with exactly that; the other requests of the method (VisCE²'s context extraction, HarmonicEval's
other criteria) get ordinary answers. An entry may name the prompt it answers: HarmonicEval's
``criterion`` (default correctness), G-VEval's ``mode`` (default ref-only) and ``media``
(``video``: a short clip whose sampled frames the prompt shows; default an image). What
``capjudge score`` prints is then compared with the entry's hand-worked reading.
"""

from __future__ import annotations

import io
import json
import tempfile
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from capjudge.cli import main as cli_main
from capjudge.testing.openai_server import MockOpenAIServer, Scripted, default_script, prompt_text
from helpers import grey_video

MODES = ("gveval", "gveval-accr")
"""The methods whose entries may name a ``mode`` (default ref-only) and ``media``."""
MEDIA = {"visce2": "image", "harmoniceval": "image", "cap3d": "views"}
VALID = ("ok", "low_mass", "text_only", "partial")


def scripted(entry: dict[str, Any]) -> Scripted:
    """The entry's answer as the stand-in server's script."""
    tokens = None
    if "tokens" in entry:
        tokens = [(t, {}) if isinstance(t, str) else (t[0], dict(t[1]))
                  for t in entry["tokens"]]
    return Scripted(text=entry.get("text", ""), tokens=tokens,
                    logprobs=tokens is not None,
                    reasoning_content=entry.get("reasoning_content"),
                    finish_reason=entry.get("finish_reason"))


def criterion(entry: dict[str, Any]) -> str:
    """The HarmonicEval criterion whose prompt the entry answers."""
    return str(entry.get("criterion") or "correctness")


def is_scoring_request(entry: dict[str, Any], text: str) -> bool:
    method = entry["method"]
    if method == "visce2":
        return not ("Analyze the uploaded image" in text
                    or "Generate a detailed description" in text)
    if method == "harmoniceval":
        label = f"- {criterion(entry).capitalize()}:"
        return label in text and not text.strip().endswith("Why? Tell me the reason.")
    return True


def score_args(entry: dict[str, Any], work: Path) -> list[str]:
    """``capjudge score``'s arguments for the entry: method, mode, caption, references, media."""
    method = entry["method"]
    args = ["--method", method, "--caption", entry.get("candidate") or "A caption."]
    if method in MODES:
        args += ["--mode", entry.get("mode") or "ref-only"]
    for ref in entry.get("references") or ["A reference caption."]:
        args += ["--ref", ref]
    return args + _media_args(entry, work)


def _media_args(entry: dict[str, Any], work: Path) -> list[str]:
    method = entry["method"]
    if method in MODES:  # the reference-only prompt needs no picture, the others do
        media = entry.get("media") or (None if (entry.get("mode") or "ref-only") == "ref-only"
                                       else "image")
    else:
        media = MEDIA.get(method)
    if media is None:
        return []
    picture = work / "img.png"
    Image.new("RGB", (64, 48), (200, 40, 40)).save(picture)
    if media == "image":
        return ["--image", str(picture)]
    if media == "video":
        clip = work / "clip.mp4"
        grey_video(clip, n_frames=12, size=(64, 48), fps=6)
        return ["--video", str(clip)]
    other = work / "img2.png"
    Image.new("RGB", (64, 48), (40, 40, 200)).save(other)
    return ["--views", str(picture), str(other)]


def _is_question(body: dict[str, Any]) -> bool:
    """The follow-up question ``confirm: follow_up`` asks (capjudge.reading.confirm)."""
    last = body["messages"][-1]
    return last.get("role") == "user" and "State only your final score" in str(last["content"])


def replay(entry: dict[str, Any], workdir: Path | None = None, *,
           confirm: bool = False) -> dict[str, Any]:
    """``capjudge score --json``'s output for one corpus entry.

    With ``confirm`` the backend asks its follow-up question (``confirm: follow_up``) after
    an off-contract answer, and the entry's ``follow_up`` is the judge's reply (an entry
    without one gets an empty answer: no confirmation).
    """
    work = Path(workdir or tempfile.mkdtemp(prefix="capjudge-replay-"))
    answer = scripted(entry)
    sent = {"requests": 0, "questions": 0}

    def script(body: dict[str, Any]) -> Scripted:
        sent["requests"] += 1
        if confirm and _is_question(body):
            sent["questions"] += 1
            return Scripted(text=entry.get("follow_up") or "", logprobs=False)
        if is_scoring_request(entry, prompt_text(body)):
            return answer
        return default_script(body)

    args = score_args(entry, work)
    if confirm:
        args += ["--backend-option", "confirm=follow_up"]
    with MockOpenAIServer(script) as server:
        buffer = io.StringIO()
        with redirect_stdout(buffer):
            cli_main(["score", "--backend", "openai/gpt-4o-2024-08-06", "--base-url",
                      server.url, "--cache-dir", str(work / "cache"), "--json", *args])
    out: dict[str, Any] = json.loads(buffer.getvalue())
    out["replayed"] = sent  # what the stand-in server was asked (bench_reader's cost figure)
    return out


@dataclass(frozen=True)
class Outcome:
    """How one entry was read against its hand-worked reading."""

    id: str
    right: bool
    wrong_valid: bool
    """A value returned as valid where the hand reading differs (the worst failure)."""
    got_status: str
    got_score: float | None
    want_status: str
    want_score: float | None
    reason: str | None


def judged(entry: dict[str, Any], out: dict[str, Any]) -> Outcome:
    """Compare ``replay``'s output with the entry's ``expect``.

    HarmonicEval entries answer one criterion's prompt (``criterion``, default correctness):
    that criterion is compared.
    """
    want = entry["expect"]
    if entry["method"] == "harmoniceval":
        crit = out["criteria"].get(criterion(entry)) or {}
        status, score, reason = crit.get("status"), crit.get("score"), crit.get("reason")
    else:
        status, score, reason = out["status"], out["score"], out.get("reason")
    want_score = want.get("score")
    same_score = (score is None and want_score is None) or (
        score is not None and want_score is not None and abs(score - want_score) <= 1e-3)
    right = status == want["status"] and same_score
    wrong_valid = status in VALID and score is not None and not (
        want_score is not None and abs(score - want_score) <= 1e-3)
    return Outcome(entry["id"], right, wrong_valid, str(status), score, want["status"],
                   want_score, reason)


def load(path: Path) -> list[dict[str, Any]]:
    """A corpus file's entries."""
    entries: list[dict[str, Any]] = json.loads(path.read_text())["answers"]
    return entries
