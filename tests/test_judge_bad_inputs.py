"""Every bad thing the judge-stage probes found, one table row each, through ``capjudge judge``.

Each case ingests four small pictures (relative paths, as the DVC pipeline does), then breaks
one thing (a picture retargeted, replaced or removed after ingest; the working directory; the
request cache's disk; the server's Retry-After; credentials in the base URL) and runs the CLI
against the local OpenAI-protocol server. Nothing may crash the stage: a broken picture is that
item's ``error`` row with the reason, the other items are judged, and what was answered is
written out. Ingest-time bad rows are the table in ``test_bad_inputs.py``; seeded faults, the
shared Retry-After pause and kill -9 are in ``test_faults.py``; the secret canary in
``test_security.py``.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from capjudge.cli import main as cli_main
from capjudge.ingest import ingest
from capjudge.testing.openai_server import MockOpenAIServer

IDS = ("a", "link", "c", "d")
CANARY = "canary-Zq8xW3pT"


@dataclass
class Project:
    """A small ingested project and the run about to be made on it."""

    root: Path  # the project folder (ingest ran from here, with relative paths)
    server: MockOpenAIServer
    monkeypatch: pytest.MonkeyPatch
    args: list[str] = field(default_factory=list)  # extra CLI arguments
    cwd: Path | None = None  # where `capjudge judge` runs (default: the project)
    started: float = 0.0

    @property
    def media(self) -> Path:
        return self.root / "media"

    @property
    def items(self) -> Path:
        return self.root / "data" / "ingest" / "items.parquet"

    @property
    def out(self) -> Path:
        return self.root / "data" / "judge"

    @property
    def cache(self) -> Path:
        return self.root / "cache"


def _project(base: Path, server: MockOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> Project:
    root = base / "project"
    media = root / "media"
    media.mkdir(parents=True)
    colours = {"a": (200, 10, 10), "b": (10, 200, 10), "c": (10, 10, 200), "d": (90, 90, 90)}
    for name, colour in colours.items():
        Image.new("RGB", (32, 24), colour).save(media / f"{name}.png")
    (media / "link.png").symlink_to("b.png")  # a symlink inside the root, legal at ingest
    (media / "notes.txt").write_text("not an image\n" * 10)
    Image.new("RGB", (32, 24), (250, 250, 0)).save(base / "outside.png")
    rows = [{"id": i, "image": f"{'link' if i == 'link' else i}.png",
             "candidate": f"A square ({i}).", "references": ["A coloured square."]} for i in IDS]
    (root / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.chdir(root)
    result = ingest("manifest.jsonl", "media", "data/ingest")
    assert result.n_items == len(IDS)
    (base / "elsewhere").mkdir()
    return Project(root, server, monkeypatch)


def _run(p: Project) -> tuple[int, dict[str, dict[str, Any]], dict[str, Any]]:
    """Run `capjudge judge`; returns (exit code, rows by item id, summary)."""
    p.monkeypatch.chdir(p.cwd or p.root)
    args = ["judge", "--items", str(p.items), "--out", str(p.out), "--method", "gveval",
            "--modes", "ref-free", "--backend", "openai/gpt-4o-2024-08-06",
            "--cache-dir", str(p.cache), *p.args]
    if not any(a == "--base-url" for a in p.args):
        args += ["--base-url", p.server.url]
    p.started = time.perf_counter()
    code = cli_main(args)
    if not (p.out / "judgements.parquet").exists():
        return code, {}, {}
    rows = {r["item_id"]: r for r in pq.read_table(p.out / "judgements.parquet").to_pylist()}
    return code, rows, json.loads((p.out / "summary.json").read_text())


def _sent_bytes(server: MockOpenAIServer) -> list[bytes]:
    """Every picture the server received, decoded."""
    out = []
    for body in server.requests:
        for message in body["messages"]:
            for part in message["content"] if isinstance(message["content"], list) else []:
                if part.get("type") == "image_url":
                    out.append(base64.b64decode(part["image_url"]["url"].split(",", 1)[1]))
    return out


# --------------------------------------------------------------------------------------------
# The cases: (what to break, what must hold)

Setup = Callable[[Project], None]
Check = Callable[[Project, int, dict[str, dict[str, Any]], dict[str, Any]], None]


def only_error(item: str, words: str) -> Check:
    """``item`` is an error with ``words`` in its reason; every other item is ok."""
    def check(p: Project, code: int, rows: dict[str, dict[str, Any]],
              summary: dict[str, Any]) -> None:
        assert code == 0 and set(rows) == set(IDS)
        assert rows[item]["status"] == "error", rows[item]
        assert words in (rows[item]["reason"] or ""), rows[item]["reason"]
        assert rows[item]["score"] is None
        assert all(r["status"] == "ok" for i, r in rows.items() if i != item), rows
        assert summary["by_status"] == {"error": 1, "ok": len(IDS) - 1}
        assert p.server.total_received == len(IDS) - 1  # the bad picture was never sent
    return check


def all_ok(p: Project, code: int, rows: dict[str, dict[str, Any]],
           summary: dict[str, Any]) -> None:
    assert code == 0 and {i: r["status"] for i, r in rows.items()} == dict.fromkeys(IDS, "ok")


def retarget(target: str) -> Setup:
    def setup(p: Project) -> None:
        (p.media / "link.png").unlink()
        (p.media / "link.png").symlink_to(target)
    return setup


def outside_never_sent(p: Project, code: int, rows: dict[str, dict[str, Any]],
                       summary: dict[str, Any]) -> None:
    only_error("link", "outside the media root")(p, code, rows, summary)
    outside = (p.root.parent / "outside.png").read_bytes()
    assert outside not in _sent_bytes(p.server)


def overwrite(p: Project) -> None:
    Image.new("RGB", (32, 24), (1, 2, 3)).save(p.media / "a.png")


def changed_never_sent(p: Project, code: int, rows: dict[str, dict[str, Any]],
                       summary: dict[str, Any]) -> None:
    only_error("a", "changed since ingest")(p, code, rows, summary)
    assert (p.media / "a.png").read_bytes() not in _sent_bytes(p.server)
    # Nothing was cached under the ingest-time hash either: a fixed file is judged next time.
    overwrite_back = Image.new("RGB", (32, 24), (200, 10, 10))
    overwrite_back.save(p.media / "a.png")
    code, rows, _ = _run(p)
    assert code == 0 and rows["a"]["status"] == "ok" and not rows["a"]["cached"]


def swap_after_the_check(p: Project) -> None:
    """The file changes between the judge-time check and the upload (a race): the backend's
    send-time check must catch it."""
    import capjudge.judge.run as judge_module

    real = judge_module.verify_request

    def verify_then_swap(request: Any, item: Any) -> Any:
        checked = real(request, item)
        if item.id == "c":
            Image.new("RGB", (32, 24), (7, 7, 7)).save(p.media / "c.png")
        return checked

    p.monkeypatch.setattr(judge_module, "verify_request", verify_then_swap)


def old_items_file(p: Project) -> None:
    """items.parquet as ingest wrote it before paths were relative to its folder: relative to
    ingest's working directory (the project)."""
    table = pq.read_table(p.items)
    rows = table.to_pylist()
    for r in rows:
        r["media_root"] = "media"
        r["judge_path"] = f"media/{r['media_path']}"
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), p.items)


def from_elsewhere(setup: Setup | None = None) -> Setup:
    def go(p: Project) -> None:
        if setup is not None:
            setup(p)
        p.cwd = p.root.parent / "elsewhere"
    return go


def block_every_shard(p: Project) -> None:
    shards = p.cache / "requests"
    shards.mkdir(parents=True)
    for k in range(256):
        (shards / f"{k:02x}").write_text("a file where a shard directory should be")


def disk_full(p: Project) -> None:
    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    p.monkeypatch.setattr(os, "fsync", full)


def answered_but_not_cached(p: Project, code: int, rows: dict[str, dict[str, Any]],
                            summary: dict[str, Any]) -> None:
    all_ok(p, code, rows, summary)
    assert summary["cache_write_failures"] == len(IDS)
    assert p.server.total_received == len(IDS)


def credentials(env: bool) -> Setup:
    def setup(p: Project) -> None:
        url = p.server.url.replace("http://", f"http://judge:{CANARY}@")
        if env:
            p.monkeypatch.setenv("OPENAI_BASE_URL", url)
            p.args = ["--base-url", ""]  # no --base-url: the environment's is used
        else:
            p.args = ["--base-url", url]
    return setup


def refused_without_leaking(p: Project, code: int, rows: dict[str, dict[str, Any]],
                            summary: dict[str, Any]) -> None:
    assert code == 2 and not rows  # refused before anything ran or was written
    assert p.server.total_received == 0
    for path in p.root.parent.rglob("*"):  # the project, its cache and outputs
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path


def retry_after(seconds: float, cap: float | None = None) -> Setup:
    def setup(p: Project) -> None:
        p.server.inject("429", retry_after=seconds)
        p.args = ["--max-retry-after", str(cap)] if cap is not None else []
    return setup


def gives_up_at_the_cap(p: Project, code: int, rows: dict[str, dict[str, Any]],
                        summary: dict[str, Any]) -> None:
    assert code == 0 and set(rows) == set(IDS)
    assert time.perf_counter() - p.started < 20  # not a day
    failed = [r for r in rows.values() if r["status"] != "ok"]
    assert failed and all("max_retry_after_s" in (r["reason"] or "") for r in failed)
    assert p.server.total_received <= len(IDS)  # nobody sent into the window


def honoured(p: Project, code: int, rows: dict[str, dict[str, Any]],
             summary: dict[str, Any]) -> None:
    all_ok(p, code, rows, summary)
    assert time.perf_counter() - p.started >= 0.5  # the 0.5 s window was waited out
    assert summary["retries"] == 1


CASES = [
    pytest.param(None, all_ok, id="nothing-broken"),
    pytest.param(retarget("../../outside.png"), outside_never_sent,
                 id="symlink-retargeted-outside-the-root"),
    pytest.param(retarget("notes.txt"), only_error("link", "changed since ingest"),
                 id="symlink-retargeted-to-a-non-image"),
    pytest.param(retarget("missing.png"), only_error("link", "missing"),
                 id="symlink-retargeted-to-nothing"),
    pytest.param(overwrite, changed_never_sent, id="content-changed-after-ingest"),
    pytest.param(lambda p: (p.media / "c.png").unlink(), only_error("c", "missing"),
                 id="file-deleted-after-ingest"),
    pytest.param(lambda p: ((p.media / "c.png").unlink(), (p.media / "c.png").mkdir()),
                 only_error("c", "not a regular file"), id="file-replaced-by-a-directory"),
    pytest.param(swap_after_the_check, only_error("c", "changed before it was sent"),
                 id="file-swapped-between-check-and-upload"),
    pytest.param(from_elsewhere(), all_ok, id="run-from-another-working-directory"),
    pytest.param(old_items_file, all_ok, id="items-file-with-cwd-relative-paths"),
    pytest.param(from_elsewhere(old_items_file), all_ok,
                 id="items-file-with-cwd-relative-paths-from-elsewhere"),
    pytest.param(from_elsewhere(retarget("../../outside.png")), outside_never_sent,
                 id="symlink-outside-the-root-from-elsewhere"),
    pytest.param(block_every_shard, answered_but_not_cached, id="cache-shards-blocked"),
    pytest.param(disk_full, answered_but_not_cached, id="cache-disk-full"),
    pytest.param(credentials(env=False), refused_without_leaking,
                 id="credentials-in-base-url-option"),
    pytest.param(credentials(env=True), refused_without_leaking,
                 id="credentials-in-OPENAI_BASE_URL"),
    pytest.param(retry_after(86400), gives_up_at_the_cap, id="retry-after-of-a-day"),
    pytest.param(retry_after(1.0, cap=0.2), gives_up_at_the_cap,
                 id="retry-after-over-a-configured-cap"),
    pytest.param(retry_after(0.5), honoured, id="retry-after-under-the-cap"),
]


@pytest.mark.parametrize(("setup", "check"), CASES)
def test_judge_stage_survives_bad_input(setup: Setup | None, check: Check, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with MockOpenAIServer() as server:
        p = _project(tmp_path, server, monkeypatch)
        if setup is not None:
            setup(p)
        code, rows, summary = _run(p)
        check(p, code, rows, summary)


def test_token_estimate_of_an_unreadable_picture_is_the_worst_case(tmp_path: Path) -> None:
    """The cost estimate (and the client's token limiter) must not end a stage on a picture
    that is not an image any more (it raised UnidentifiedImageError)."""
    from capjudge.cost import WORST_CASE_SIZE, image_tokens, request_tokens
    from capjudge.protocol import Decoding, ImagePart, JudgeRequest, Message

    (tmp_path / "x.png").write_text("not an image")
    request = JudgeRequest(messages=(Message("user", (ImagePart(str(tmp_path / "x.png"),
                                                                "f" * 64, "high"),)),),
                           slots=(), decoding=Decoding(max_tokens=10))
    prompt, completion = request_tokens(request)
    assert prompt >= image_tokens(*WORST_CASE_SIZE, "high") and completion == 10


def test_a_picture_moved_with_its_project_still_resolves(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """Relative ingest paths are relative to the items file: the project can move."""
    from capjudge.item import load_items

    with MockOpenAIServer() as server:
        p = _project(tmp_path, server, monkeypatch)
    moved = tmp_path / "moved"
    shutil.move(p.root, moved)
    monkeypatch.chdir(tmp_path)
    items = load_items(moved / "data" / "ingest" / "items.parquet")
    stored = pq.read_table(moved / "data" / "ingest" / "items.parquet").to_pylist()
    assert {r["media_root"] for r in stored} == {"../../media"}
    assert all(i.root() == moved / "data" / "ingest" / "../../media" for i in items)
    assert all(Path(i.resolve(i.judge_path or "")).is_file() for i in items)
