"""The request cache: round trip, checksums, write failures that never raise, several writer
processes at once, and no directory scans on the hot path."""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import multiprocessing
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

from capjudge.cache import RequestCache, decode_entry, encode_entry
from capjudge.protocol import JudgeResponse, SlotResult, Usage

KEY = "ab" + "0" * 62


def key_of(i: int) -> str:
    return f"{i:064x}"[::-1]  # spread over shards


def response(text: str = "The final score is $85$.", n: int = 101) -> JudgeResponse:
    probs = [1.0 / n] * n
    return JudgeResponse(
        status="ok", text=text,
        slots=[SlotResult(name="score", values=list(range(n)), probs=probs, mass=0.97,
                          source="logprobs", printed=85),
               SlotResult(name="other", values=[1, 2], probs=None, mass=None, source="none",
                          status="parse_failure", reason="no anchor", anchor_forced=True)],
        usage=Usage(prompt_tokens=120, completion_tokens=30), model="gpt-4o-2024-08-06",
        system_fingerprint="fp_1", latency_s=1.25, attempts=2)


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "capjudge.cache" and r.levelno == logging.WARNING]


# --- JudgeResponse.to_json / from_json ------------------------------------------------------

NOT_STORED = {"cache_key"}  # set by the client on every response; the entry's own key


def asdict_stored(r: JudgeResponse) -> dict[str, object]:
    return {k: v for k, v in dataclasses.asdict(r).items() if k not in NOT_STORED}


def test_to_json_matches_asdict_and_round_trips() -> None:
    r = response()
    r.cache_key = KEY
    data = r.to_json()
    assert data == asdict_stored(r)
    assert list(data) == list(asdict_stored(r))  # same key order: same file bytes
    r.cache_key = ""
    assert data["slots"][0]["values"] is not r.slots[0].values  # no aliasing
    assert JudgeResponse.from_json(data) == r
    assert JudgeResponse.from_json(json.loads(json.dumps(data))) == r


def test_to_json_covers_every_field() -> None:
    """A field added to a dataclass must be added to the hand-written copies too."""
    data = response().to_json()
    assert set(data) == {f.name for f in dataclasses.fields(JudgeResponse)} - NOT_STORED
    assert set(data["slots"][0]) == {f.name for f in dataclasses.fields(SlotResult)}
    assert set(data["usage"]) == {f.name for f in dataclasses.fields(Usage)}


def test_from_json_defaults_and_required_fields() -> None:
    assert JudgeResponse.from_json({"status": "ok"}) == JudgeResponse(status="ok")
    with pytest.raises(KeyError):
        JudgeResponse.from_json({"text": "no status"})
    # Keys a newer version may add are ignored, at every level.
    data = response().to_json()
    data["new_field"] = 1
    data["usage"]["image_tokens"] = 3
    data["slots"][0]["entropy"] = 0.5
    assert JudgeResponse.from_json(data) == response()
    del data["slots"][1]["name"]
    with pytest.raises(KeyError):
        JudgeResponse.from_json(data)


# --- round trip -----------------------------------------------------------------------------

def test_round_trip(tmp_path: Path) -> None:
    cache = RequestCache(tmp_path)
    assert cache.get(KEY) is None
    original = response()
    assert cache.put(KEY, original, {"backend": "fake", "tag": "item-1"}) is True
    hit = cache.get(KEY)
    assert hit is not None and hit.cached is True and hit.cache_key == KEY
    assert dataclasses.replace(hit, cached=False, cache_key="") == original
    assert original.cached is False
    assert len(cache) == 1
    # The file is valid JSON, framed by its checksum.
    doc = json.loads((cache.root / KEY[:2] / f"{KEY}.json").read_text(encoding="utf-8"))
    assert set(doc) == {"sha256", "entry"} and doc["entry"]["meta"]["tag"] == "item-1"
    # A second cache object on the same directory (another process, another host) sees it.
    assert RequestCache(tmp_path).get(KEY) == hit


def test_failed_or_empty_answers_are_not_stored(tmp_path: Path) -> None:
    cache = RequestCache(tmp_path)
    assert cache.put(KEY, JudgeResponse(status="error", reason="boom")) is False
    assert cache.put(KEY, JudgeResponse(status="parse_failure", text="x")) is False
    assert cache.put(KEY, JudgeResponse(status="ok", text="  \n")) is False
    assert cache.get(KEY) is None and len(cache) == 0
    assert cache.write_failures == 0  # not stored on purpose: not a failure
    assert cache.put(KEY, JudgeResponse(status="low_mass", text="$50$")) is True


def test_entries_of_earlier_versions_still_read(tmp_path: Path) -> None:
    """Entries written before checksums (the whole file was the entry) are still served."""
    cache = RequestCache(tmp_path)
    path = cache.root / KEY[:2] / f"{KEY}.json"
    path.parent.mkdir(parents=True)
    original = response()
    old = {"key": KEY, "meta": {}, "response": asdict_stored(original)}
    path.write_text(json.dumps(old, ensure_ascii=False), encoding="utf-8")
    hit = cache.get(KEY)
    assert hit is not None and hit.cached
    assert dataclasses.replace(hit, cached=False, cache_key="") == original


@pytest.mark.parametrize("bad", ["", "ab", "../../etc/passwd", ".hidden-key", "ab/cd"])
def test_keys_that_are_not_keys_are_refused(tmp_path: Path, bad: str) -> None:
    cache = RequestCache(tmp_path)
    with pytest.raises(ValueError, match="not a cache key"):
        cache.get(bad)
    with pytest.raises(ValueError, match="not a cache key"):
        cache.put(bad, response())


# --- damaged entries ------------------------------------------------------------------------

def test_bit_flipped_parseable_entry_is_a_miss_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = RequestCache(tmp_path)
    assert cache.put(KEY, response("The final score is $85$."))
    path = cache.root / KEY[:2] / f"{KEY}.json"
    good = path.read_bytes()
    # Flip one bit in the answer text ("$85$" -> "$95$"), in a probability digit and in the
    # stored checksum: each leaves a file that still parses as JSON.
    for needle, offset in ((b"$85$", 1), (b"0.0099", 5), (b'"sha256":"', 12)):
        at = good.index(needle) + offset
        bad = bytearray(good)
        bad[at] ^= 0x01
        json.loads(bytes(bad))  # precondition: parseable
        path.write_bytes(bytes(bad))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="capjudge.cache"):
            assert cache.get(KEY) is None
        assert any("checksum mismatch" in m for m in warnings_of(caplog)), needle
    # The next answer replaces the damaged entry.
    assert cache.put(KEY, response()) and cache.get(KEY) is not None


@pytest.mark.parametrize("keep", [0, 1, 40, 120, -1])
def test_truncated_entry_is_a_miss(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                   keep: int) -> None:
    cache = RequestCache(tmp_path)
    assert cache.put(KEY, response())
    path = cache.root / KEY[:2] / f"{KEY}.json"
    path.write_bytes(path.read_bytes()[:keep])
    with caplog.at_level(logging.WARNING, logger="capjudge.cache"):
        assert cache.get(KEY) is None
    assert any("damaged entry" in m for m in warnings_of(caplog))


def test_entry_under_the_wrong_key_is_a_miss(tmp_path: Path) -> None:
    cache = RequestCache(tmp_path)
    other = "ab" + "1" * 62
    path = cache.root / KEY[:2] / f"{KEY}.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(encode_entry(other, response()))  # a valid entry, moved by hand
    assert cache.get(KEY) is None
    with pytest.raises(ValueError, match="holds key"):
        decode_entry(path.read_bytes(), KEY)


# --- write failures never raise -------------------------------------------------------------

def test_put_with_a_file_blocking_the_shard_directory(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = RequestCache(tmp_path)
    (cache.root / KEY[:2]).write_text("not a directory")
    with caplog.at_level(logging.WARNING, logger="capjudge.cache"):
        assert cache.put(KEY, response()) is False
        assert cache.put("ab" + "1" * 62, response()) is False
        assert cache.get(KEY) is None  # reading through the blocked shard is a plain miss
    assert cache.write_failures == 2
    assert len(warnings_of(caplog)) == 1  # once per kind of failure
    assert cache.put("cd" + "0" * 62, response()) is True  # other shards still work


def test_cache_root_that_is_a_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("")
    with caplog.at_level(logging.WARNING, logger="capjudge.cache"):
        cache = RequestCache(blocker)  # does not raise
        assert cache.put(KEY, response()) is False
        assert cache.get(KEY) is None
    assert bool(cache) and len(cache) == 0
    assert len(warnings_of(caplog)) == 2  # opening, writing


def _put_as_nobody(root: str) -> None:
    """Child process: drop root, then write into a read-only cache and read from it."""
    if os.geteuid() == 0:
        os.setgid(65534)
        os.setuid(65534)
    cache = RequestCache(root)  # must not raise either
    ok = cache.put(KEY, response()) is False and cache.write_failures == 1
    ok = ok and cache.get("cd" + "0" * 62) is not None  # a read-only cache still serves
    os._exit(0 if ok else 1)


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
def test_put_into_a_read_only_directory(tmp_path: Path) -> None:
    # Root writes through permission bits, so the writer runs as an unprivileged user in a
    # directory it may enter but not write.
    base = Path(tempfile.mkdtemp(prefix="capjudge-ro-"))
    try:
        base.chmod(0o755)
        cache = RequestCache(base)
        assert cache.put("cd" + "0" * 62, response())
        for d in (cache.root, cache.root / "cd"):
            d.chmod(0o555)
        child = multiprocessing.get_context("spawn").Process(target=_put_as_nobody,
                                                             args=(str(base),))
        child.start()
        child.join(timeout=60)
        assert child.exitcode == 0
    finally:
        for d in (base / "requests", base / "requests" / "cd"):
            d.chmod(0o755)
        shutil.rmtree(base)


def test_put_with_permission_denied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = RequestCache(tmp_path)
    real_open = os.open

    def denied(path: str, flags: int, mode: int = 0o777) -> int:
        if flags & os.O_CREAT:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", denied)
    assert cache.put(KEY, response()) is False
    assert cache.write_failures == 1


@pytest.mark.parametrize("where", ["fsync", "replace"])
def test_disk_full_returns_false_and_leaves_no_temp_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        where: str) -> None:
    cache = RequestCache(tmp_path)
    assert cache.put("cd" + "0" * 62, response())  # the shard exists

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, where, full)
    with caplog.at_level(logging.WARNING, logger="capjudge.cache"):
        assert cache.put("cd" + "1" * 62, response()) is False
        assert cache.put("cd" + "2" * 62, response()) is False
    monkeypatch.undo()
    assert [m for m in warnings_of(caplog) if "ENOSPC" in m]
    assert len(warnings_of(caplog)) == 1
    assert sorted(p.name for p in (cache.root / "cd").iterdir()) == [f"{'cd' + '0' * 62}.json"]


def test_unencodable_meta_returns_false(tmp_path: Path) -> None:
    cache = RequestCache(tmp_path)
    assert cache.put(KEY, response(), {"bad": object()}) is False
    assert cache.write_failures == 1


# --- several writers at once ----------------------------------------------------------------

N_KEYS = 300


def _writer(root: str, worker: int) -> None:
    """Writes every key (in its own order, from two threads) with its own distinct answer."""
    cache = RequestCache(root)
    keys = [key_of(i) for i in range(N_KEYS)]
    keys = keys[worker:] + keys[:worker]  # different orders: real races on the same keys

    def run(part: list[str]) -> None:
        for k in part:
            assert cache.put(k, response(f"worker {worker} says $85$ for {k}"), {"w": worker})

    threads = [threading.Thread(target=run, args=(keys[t::2],)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_concurrent_writer_processes_leave_every_entry_whole(tmp_path: Path) -> None:
    n_workers = 4
    ctx = multiprocessing.get_context("spawn")  # no forked locks; like separate hosts
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w)) for w in range(n_workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * n_workers
    cache = RequestCache(tmp_path)
    for i in range(N_KEYS):
        k = key_of(i)
        raw = Path(cache._path(k)).read_bytes()
        hit = decode_entry(raw, k)  # raises if damaged
        assert hit.text.startswith("worker ") and hit.text.endswith(f"for {k}")
    assert len(cache) == N_KEYS
    leftovers = [p for p in cache.root.rglob("*") if p.is_file() and p.suffix != ".json"]
    assert leftovers == []  # every temp file was renamed into place


# --- no directory scans on the hot path -----------------------------------------------------

def test_truthiness_get_and_put_never_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    cache = RequestCache(tmp_path)
    assert cache.put(KEY, response())

    def no_scan(*_: object, **__: object) -> None:
        raise AssertionError("directory scanned on the hot path")

    for name in ("glob", "rglob", "iterdir"):
        monkeypatch.setattr(Path, name, no_scan)
    monkeypatch.setattr(os, "scandir", no_scan)
    monkeypatch.setattr(os, "listdir", no_scan)
    monkeypatch.setattr(os, "walk", no_scan)
    monkeypatch.setattr(RequestCache, "__len__", no_scan)
    assert bool(cache) is True
    assert cache.get(KEY) is not None
    assert cache.get("ff" + "0" * 62) is None  # a miss in a shard that does not exist
    assert cache.put("ff" + "0" * 62, response())  # creates that shard
    assert cache.get("ff" + "0" * 62) is not None
    assert cache.put(KEY, response("again $80$"))


def test_len_counts_entries_only(tmp_path: Path) -> None:
    cache = RequestCache(tmp_path)
    for i in range(5):
        assert cache.put(key_of(i), response())
    (cache.root / "zz.txt").write_text("stray")
    (cache.root / key_of(0)[:2] / f".{key_of(0)}.host.1.2.abcd.tmp").write_text("{")
    assert len(cache) == 5
