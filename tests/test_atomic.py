"""One atomic-write helper and stage outputs committed as a set (issue 21, item 5).

A stage killed between writing its files (``items.parquet`` new, ``summary.json`` and
``capjudge.duckdb`` old: the probe's 300 rows vs 206) leaves its folder marked incomplete,
and every reader refuses it with a one-line message until a run finishes; orphan temporaries
of dead writers are removed at the start of the next run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from capjudge.cli import main as cli_main
from capjudge.util import atomic
from capjudge.util.atomic import (
    HOST,
    INCOMPLETE_MARKER,
    IncompleteOutputError,
    atomic_path,
    check_complete,
    clean_orphans,
    stage_outputs,
    write_json,
)


def test_write_is_whole_or_nothing(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    write_json(target, {"n": 1})
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("{half")
        raise RuntimeError("killed")
    assert json.loads(target.read_text()) == {"n": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]  # no temporary left


def test_temporaries_are_unique_per_process_and_thread(tmp_path: Path) -> None:
    a, b = atomic.temp_path(tmp_path / "x"), atomic.temp_path(tmp_path / "x")
    assert a != b and f".{HOST}.{os.getpid()}." in a.name and a.name.endswith(".tmp")


def test_only_dead_writers_temporaries_are_removed(tmp_path: Path) -> None:
    dead = tmp_path / f".x.{HOST}.999999999.1.abcd.tmp"
    live = tmp_path / f".y.{HOST}.{os.getpid()}.1.abcd.tmp"
    other_host_new = tmp_path / ".z.elsewhere.1.1.abcd.tmp"
    old_format = tmp_path / ".judgements.parquet.tmp"
    for p in (dead, live, other_host_new, old_format):
        p.write_bytes(b"x")
    old = os.stat(old_format).st_mtime - 2 * atomic.ORPHAN_AGE_S
    os.utime(old_format, (old, old))
    assert clean_orphans(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name,
                                                                 other_host_new.name])


def test_a_set_killed_half_way_is_refused_until_rewritten(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), stage_outputs(tmp_path) as out:
        write_json(out / "a.json", 1)
        raise RuntimeError("kill -9 between two files")
    assert (tmp_path / INCOMPLETE_MARKER).exists()
    with pytest.raises(IncompleteOutputError, match="run ingest again"):
        check_complete(tmp_path, "ingest")
    with stage_outputs(tmp_path) as out:
        write_json(out / "a.json", 2)
    check_complete(tmp_path)


def test_an_ingest_killed_between_its_files_is_refused_by_the_judge(
        sample_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import capjudge.ingest as ingest_module

    out = tmp_path / "ingest"
    manifest = tmp_path / "m.jsonl"
    lines = (sample_dir / "manifest.jsonl").read_text().splitlines()
    images = [line for line in lines if '"image"' in line][:5]
    manifest.write_text("\n".join(images) + "\n")
    assert cli_main(["ingest", str(manifest), "--media-root", str(sample_dir), "--out",
                     str(out)]) == 0
    stray = out / f".items.parquet.{HOST}.999999999.1.abcd.tmp"
    stray.write_bytes(b"left by a kill")

    def killed(path: Path, data: object, **_: object) -> Path:
        raise KeyboardInterrupt  # as a kill between items.parquet and summary.json

    monkeypatch.setattr(ingest_module, "write_json", killed)
    with pytest.raises(KeyboardInterrupt):
        ingest_module.ingest(manifest, sample_dir, out)
    monkeypatch.undo()
    assert not stray.exists()  # orphan removed at the start of the run
    code = cli_main(["judge", "--backend", "fake/hash", "--items", str(out / "items.parquet"),
                     "--out", str(tmp_path / "judge"), "--cache-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert code == 2 and "incomplete output" in err and "run ingest again" in err
    assert cli_main(["ingest", str(manifest), "--media-root", str(sample_dir), "--out",
                     str(out)]) == 0
    assert cli_main(["judge", "--backend", "fake/hash", "--items", str(out / "items.parquet"),
                     "--out", str(tmp_path / "judge"), "--cache-dir", str(tmp_path / "c")]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["items"] == 5
    assert not list(out.glob(".*.tmp")) and not (tmp_path / "judge" / INCOMPLETE_MARKER).exists()
