"""``ingest`` on a full disk ends with one line naming the path, as ``capjudge judge`` does.

The full disk is simulated where each kind of write happens: the Parquet tables, the DuckDB
database (DuckDB raises its own exception with the system's message in it) and a views tile
made while the rows are read (which must stop the ingest, not quarantine the row).
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import capjudge.ingest as ingest_module
from capjudge.cli import main as cli_main
from capjudge.ingest import IngestConfig, IngestResult
from capjudge.util.atomic import INCOMPLETE_MARKER, OutputWriteError

FULL = os.strerror(errno.ENOSPC)  # "No space left on device"


class DirectIngest:
    """The ingest flow replaced by its task's body (no Prefect server is started)."""

    def with_options(self, **_: Any) -> Any:
        from tasks.ingest import ingest_task

        def run(manifest: str, media_root: str, out: str, config: IngestConfig,
                workers: int) -> IngestResult:
            return ingest_task.fn(manifest, media_root, out, config)
        return run


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    media = tmp_path / "media"
    media.mkdir()
    for k, colour in enumerate(((200, 0, 0), (0, 200, 0))):
        Image.new("RGB", (32, 32), colour).save(media / f"v{k}.png")
    rows = [{"id": "img", "image": "v0.png", "candidate": "A red square."},
            {"id": "obj", "views": ["v0.png", "v1.png"], "candidate": "A cube."}]
    path = media / "manifest.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _ingest(manifest: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = cli_main(["ingest", str(manifest), "--media-root", str(manifest.parent),
                     "--out", str(out)])
    return code, capsys.readouterr().err


def _one_line(err: str) -> str:
    assert "Traceback" not in err
    lines = [line for line in err.strip().splitlines() if "INFO" not in line]
    assert len(lines) == 1, err
    return lines[0]


def test_a_full_disk_writing_the_tables_is_one_line(
        manifest: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def full(table: Any, where: Any, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, FULL, str(where))

    monkeypatch.setattr(ingest_module.pq, "write_table", full)
    out = tmp_path / "out"
    code, err = _ingest(manifest, out, capsys)
    line = _one_line(err)
    assert code == 2
    assert line.startswith(f"capjudge ingest: error: cannot write {out}")
    assert FULL in line and "MB free on that disk" in line and "run ingest again" in line
    assert (out / INCOMPLETE_MARKER).exists()  # no later stage takes the folder as done
    monkeypatch.undo()
    code, _ = _ingest(manifest, out, capsys)  # room again: the same command finishes
    assert code == 0 and not (out / INCOMPLETE_MARKER).exists()


def test_duckdbs_own_full_disk_error_is_the_same_line(
        manifest: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import duckdb

    def full(*args: Any, **kwargs: Any) -> Any:
        # What DuckDB 1.x raises on a full tmpfs (seen with a 450 kB one).
        raise duckdb.IOException(f'IO Error: Could not write file "{args[0]}": {FULL}')

    monkeypatch.setattr(duckdb, "connect", full)
    out = tmp_path / "out"
    code, err = _ingest(manifest, out, capsys)
    assert code == 2
    assert _one_line(err).startswith(
        f"capjudge ingest: error: cannot write {out / 'capjudge.duckdb'}: {FULL}")


def test_a_full_disk_while_making_tiles_stops_instead_of_quarantining(
        manifest: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def full(paths: list[str], tile: str) -> tuple[str, str]:
        raise OSError(errno.ENOSPC, FULL, tile)

    monkeypatch.setattr(ingest_module, "tile_views", full)
    out = tmp_path / "out"
    code, err = _ingest(manifest, out, capsys)
    assert code == 2
    line = _one_line(err)
    assert f"cannot write {out / 'tiles'}" in line and FULL in line
    assert not (out / "quarantine.parquet").exists()  # the row was not blamed for the disk


def test_the_ingest_flow_stops_with_the_same_line(
        manifest: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """flows.ingest: the task's error is a RuntimeError, which the stage prints in one line.

    The flow itself is replaced by the task's body (no Prefect server is started): what is
    checked is that the error the task raises is one the stage turns into its line and exit 2.
    """
    import yaml

    import flows.ingest as flow_module
    from tasks.ingest import ingest_task

    def full(table: Any, where: Any, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, FULL, str(where))

    monkeypatch.setattr(ingest_module.pq, "write_table", full)
    out = tmp_path / "out"
    with pytest.raises(OutputWriteError, match=f"cannot write {out}"):
        ingest_task.fn(str(manifest), str(manifest.parent), str(out), IngestConfig())

    monkeypatch.setattr(flow_module, "ingest_flow", DirectIngest())
    root = Path(__file__).resolve().parents[1]
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["ingest"].update(manifest=str(manifest), media_root=str(manifest.parent),
                            out=str(out))
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    capsys.readouterr()
    assert flow_module.main(["--params", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ingest: error: cannot write {out}") and FULL in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_the_ingest_flow_fails_when_every_row_is_quarantined(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """dvc repro stops at ingest (exit 2, one line), not after judging and reporting nothing."""
    import yaml

    import flows.ingest as flow_module
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"id": "a", "image": "nowhere.png",
                                    "candidate": "A square."}) + "\n")
    monkeypatch.setattr(flow_module, "ingest_flow", DirectIngest())
    root = Path(__file__).resolve().parents[1]
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["ingest"].update(manifest=str(manifest), media_root=str(tmp_path),
                            out=str(tmp_path / "out"))
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    capsys.readouterr()
    assert flow_module.main(["--params", str(path)]) == 2
    err = capsys.readouterr().err
    assert "ingest: error: every one of the 1 manifest rows was quarantined" in err
