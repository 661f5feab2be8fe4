"""Ingest: every bad row is quarantined with a readable reason, every good row is kept."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from PIL import Image

from capjudge.cli import main as cli_main
from helpers import grey_video, png_bomb


@pytest.fixture
def messy(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A media root and a manifest with good rows and one row per failure case.

    Returns (manifest, media_root, {bad id: expected words in its reason}).
    """
    root = tmp_path / "media"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    Image.new("RGB", (64, 48), (200, 10, 10)).save(root / "good.png")
    Image.new("RGB", (64, 48), (10, 200, 10)).save(root / "good2.jpg")
    grey_video(root / "a" / "clip.mp4", 9)
    grey_video(root / "b" / "clip.mp4", 14)
    (root / "zero.png").write_bytes(b"")
    (root / "junk.png").write_bytes(os.urandom(300))
    full = (root / "good.png").read_bytes()
    (root / "truncated.png").write_bytes(full[: len(full) // 2])
    video = (root / "a" / "clip.mp4").read_bytes()
    (root / "truncated.mp4").write_bytes(video[: len(video) // 3])
    png_bomb(root / "bomb.png")
    outside = tmp_path / "outside.png"
    Image.new("RGB", (8, 8)).save(outside)
    (root / "link.png").symlink_to(outside)

    def row(i: str, **kw: object) -> dict[str, object]:
        base: dict[str, object] = {"id": i, "task": "caption", "image": "good.png",
                                   "candidate": "A red square.", "references": ["A red box."]}
        base.update(kw)
        return {k: v for k, v in base.items() if v is not None}

    good = [
        row("ok-image"),
        row("ok-image2", image="good2.jpg", labels={"overall": [3, 4], "fluency": 5},
            system="m1", question="What is it?"),
        row("ok-video-a", image=None, video="a/clip.mp4", references=[]),
        row("ok-video-b", image=None, video="b/clip.mp4"),
        row("ok-views", image=None, views=["good.png", "good2.jpg"]),
        row("ok-absolute-inside", image=str(root / "good.png")),
    ]
    bad = {
        "missing": (row("missing", image="nope.png"), "file not found"),
        "escape": (row("escape", image="../outside.png"), "escapes the media root"),
        "absolute": (row("absolute", image=str(outside)), "escapes the media root"),
        "symlink": (row("symlink", image="link.png"), "escapes the media root"),
        "url": (row("url", image=None, video="http://example.com/v.m3u8"), "URLs are not"),
        "junk": (row("junk", image="junk.png"), "undecodable image"),
        "truncated": (row("truncated", image="truncated.png"), "undecodable image"),
        "truncated-video": (row("truncated-video", image=None, video="truncated.mp4"),
                            "video"),
        "zero": (row("zero", image="zero.png"), "zero-byte"),
        "bomb": (row("bomb", image="bomb.png"), "decompression bomb"),
        "ok-image": (row("ok-image", candidate="duplicate"), "duplicate id 'ok-image'"),
        "empty": (row("empty", candidate="   "), "'candidate' is empty"),
        "control": (row("control", candidate="A red\x00 square\x07"), "control characters"),
        "wrongtype": (row("wrongtype", references=5), "'references' must be a list"),
        "wrongtype2": (row("wrongtype2", candidate=3), "'candidate' must be a string"),
        "labels": (row("labels", labels={"overall": "good"}), "labels['overall']"),
        "twomedia": (row("twomedia", video="a/clip.mp4"), "exactly one of"),
        "nomedia": (row("nomedia", image=None), "exactly one of"),
        "task": (row("task", task="poetry"), "'task' must be one of"),
        "surrogate": (None, "lone surrogate"),
        "nonutf8": (None, "not valid UTF-8"),
        "notobject": (None, "not an object"),
    }
    lines = [json.dumps(r) for r in good]
    for r, _ in bad.values():
        if r is not None:
            lines.append(json.dumps(r))
    lines.append('{"id": "surrogate", "image": "good.png", "candidate": "bad \\udc80 text"}')
    manifest = tmp_path / "manifest.jsonl"
    data = ("\n".join(lines) + "\n").encode()
    data += b'{"id": "nonutf8", "image": "good.png", "candidate": "caf\xe9"}\n'
    data += b'["notobject"]\n\n'
    manifest.write_bytes(data)
    expected = {k: words for k, (_, words) in bad.items()}
    return manifest, root, expected


def test_ingest_quarantines_each_bad_row_and_keeps_good_ones(
        messy: tuple[Path, Path, dict[str, str]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    manifest, root, expected = messy
    out = tmp_path / "out"
    code = cli_main(["ingest", str(manifest), "--media-root", str(root), "--out", str(out)])
    assert code == 0
    items = pq.read_table(out / "items.parquet").to_pylist()
    quarantine = pq.read_table(out / "quarantine.parquet").to_pylist()
    assert sorted(i["id"] for i in items) == sorted(
        ["ok-image", "ok-image2", "ok-video-a", "ok-video-b", "ok-views", "ok-absolute-inside"])
    # Every bad row is there once, with a reason naming the problem (ids may be unreadable).
    assert len(quarantine) == len(expected)
    reasons = " | ".join(q["reason"] for q in quarantine)
    for key, words in expected.items():
        assert words in reasons, f"{key}: {words!r} not in reasons"
    by_id = {q["id"]: q for q in quarantine if q["id"]}
    assert "truncated" in by_id and by_id["bomb"]["line"] > 0
    nonutf8 = [q for q in quarantine if "UTF-8" in q["reason"]]
    n_lines = len(manifest.read_bytes().splitlines())
    assert nonutf8 and nonutf8[0]["line"] == n_lines - 2  # 1-based; then one more row, one blank
    summary = json.loads((out / "summary.json").read_text())
    assert summary["items"] == 6 and summary["quarantined"] == len(expected)
    err = capsys.readouterr().err
    assert f"{len(expected)} quarantined" in err

    # The DuckDB database holds both tables for later stages.
    con = duckdb.connect(str(out / "capjudge.duckdb"), read_only=True)
    assert con.execute("select count(*) from items").fetchone() == (6,)
    assert con.execute("select count(*) from quarantine").fetchone() == (len(expected),)
    con.close()

    rows = {i["id"]: i for i in items}
    assert json.loads(rows["ok-image2"]["labels"]) == {"fluency": 5.0, "overall": [3.0, 4.0]}
    assert rows["ok-image"]["media_sha256"] == rows["ok-absolute-inside"]["media_sha256"]
    assert rows["ok-views"]["media_kind"] == "views"
    assert Image.open(rows["ok-views"]["tile_path"]).size == (1024, 512)


def test_same_file_name_in_two_folders_gets_two_tiles(
        messy: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    manifest, root, _ = messy
    out = tmp_path / "out"
    assert cli_main(["ingest", str(manifest), "--media-root", str(root), "--out", str(out)]) == 0
    rows = {r["id"]: r for r in pq.read_table(out / "items.parquet").to_pylist()}
    a, b = rows["ok-video-a"], rows["ok-video-b"]
    assert a["media_sha256"] != b["media_sha256"]
    assert a["tile_path"] != b["tile_path"] and a["tile_sha256"] != b["tile_sha256"]
    assert a["n_frames"] == 9 and b["n_frames"] == 14
    assert a["frame_indices"] == [0, 4, 8] and b["frame_indices"] == [0, 6, 13]
    for r in (a, b):
        assert Image.open(r["tile_path"]).size == (1536, 512)
        assert r["media_sha256"] in r["tile_path"] and r["frame_policy"] == "first_middle_last"


def test_unparseable_manifest_fails_with_file_and_line(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"id": "a", "image": "x.png", "candidate": "ok"}\n{"id": "b", oops\n')
    code = cli_main(["ingest", str(manifest), "--media-root", str(tmp_path),
                     "--out", str(tmp_path / "o")])
    assert code == 2
    err = capsys.readouterr().err
    assert f"{manifest}:2: not valid JSON" in err


def test_strict_mode_exits_3_when_rows_are_quarantined(
        messy: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    manifest, root, _ = messy
    code = cli_main(["ingest", str(manifest), "--media-root", str(root),
                     "--out", str(tmp_path / "o"), "--strict"])
    assert code == 3


def test_csv_and_parquet_manifests_match_jsonl(tmp_path: Path) -> None:
    import pyarrow as pa

    root = tmp_path
    Image.new("RGB", (32, 32), (1, 2, 3)).save(root / "x.png")
    csv_path = root / "m.csv"
    csv_path.write_text(
        'id,task,image,candidate,references,labels\n'
        'c1,caption,x.png,A dark square.,"[""A square.""]","{""overall"": 4}"\n'
        'c2,caption,missing.png,Nothing.,[],\n'
    )
    pa_path = root / "m.parquet"
    pq.write_table(pa.Table.from_pylist([
        {"id": "p1", "task": "caption", "image": "x.png", "candidate": "A dark square.",
         "references": ["A square."], "labels": '{"overall": 4}'}]), pa_path)
    for manifest, good in ((csv_path, "c1"), (pa_path, "p1")):
        out = tmp_path / f"out-{manifest.suffix[1:]}"
        assert cli_main(["ingest", str(manifest), "--media-root", str(root),
                         "--out", str(out)]) == 0
        items = pq.read_table(out / "items.parquet").to_pylist()
        assert [i["id"] for i in items] == [good]
        assert items[0]["references"] == ["A square."]
        assert json.loads(items[0]["labels"]) == {"overall": 4.0}


def test_decode_timeout_is_a_quarantine_reason(tmp_path: Path) -> None:
    grey_video(tmp_path / "v.mp4", 5)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"id": "v", "video": "v.mp4", "candidate": "grey"}) + "\n")
    out = tmp_path / "o"
    # Its only row quarantined: exit 3 (nothing to judge), the reason in the table.
    assert cli_main(["ingest", str(manifest), "--media-root", str(tmp_path), "--out", str(out),
                     "--decode-timeout", "0.001"]) == 3
    q = pq.read_table(out / "quarantine.parquet").to_pylist()
    assert len(q) == 1 and "timed out" in q[0]["reason"]


def test_sample_suite_ingests_cleanly(ingested: Path) -> None:
    items = pq.read_table(ingested / "items.parquet").to_pylist()
    quarantine = pq.read_table(ingested / "quarantine.parquet").to_pylist()
    assert quarantine == []
    kinds = {k: sum(1 for i in items if i["media_kind"] == k) for k in ("image", "video", "views")}
    assert kinds["image"] >= 80 and kinds["video"] >= 12 and kinds["views"] >= 12
    for item in items:
        assert len(item["media_sha256"]) == 64
        if item["media_kind"] != "image":
            assert Path(item["tile_path"]).is_file()


def test_console_script_is_installed() -> None:
    exe = shutil.which("capjudge", path=os.path.dirname(sys.executable))
    assert exe, "the capjudge console script is not installed next to the interpreter"
    proc = subprocess.run([exe, "--help"], capture_output=True, text=True, check=True)
    for command in ("sample", "ingest"):
        assert command in proc.stdout


def test_video_frames_are_kept_on_their_own_and_reused(
        messy: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    """Each sampled frame is kept beside the tile as decoded, named and hashed in the item.

    A judge shown the frames (not the tile) reads them from there; a tile made before frames
    were kept (its sidecar lists none) is made again rather than reused without them.
    """
    import hashlib

    manifest, root, _ = messy
    out = tmp_path / "out"
    assert cli_main(["ingest", str(manifest), "--media-root", str(root), "--out", str(out)]) == 0
    rows = {r["id"]: r for r in pq.read_table(out / "items.parquet").to_pylist()}
    a = rows["ok-video-a"]
    assert len(a["frame_paths"]) == len(a["frame_sha256"]) == 3
    levels = []
    for path, sha in zip(a["frame_paths"], a["frame_sha256"], strict=True):
        assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == sha
        frame = Image.open(path)
        assert frame.size == (160, 90)  # as decoded, not letterboxed into a panel
        levels.append(frame.convert("L").getpixel((80, 45)))
    # Frames 0, 4, 8 of a clip whose frame i is grey 20 + 8i (lossy coding: within a few).
    assert all(abs(got - (20 + 8 * i)) <= 3 for got, i in zip(levels, (0, 4, 8), strict=True))
    assert rows["ok-image"]["frame_paths"] is None

    # A second run reuses the tile and frames (same files, same hashes).
    mtimes = [os.stat(p).st_mtime_ns for p in a["frame_paths"]]
    assert cli_main(["ingest", str(manifest), "--media-root", str(root), "--out", str(out)]) == 0
    again = {r["id"]: r for r in pq.read_table(out / "items.parquet").to_pylist()}["ok-video-a"]
    assert again["frame_sha256"] == a["frame_sha256"]
    assert [os.stat(p).st_mtime_ns for p in a["frame_paths"]] == mtimes

    # A sidecar written before frames were kept: the tile is made again, with its frames.
    sidecar = Path(a["tile_path"]).with_suffix(".json")
    old = json.loads(sidecar.read_text())
    del old["frame_paths"], old["frame_sha256"]
    sidecar.write_text(json.dumps(old))
    for p in a["frame_paths"]:
        Path(p).unlink()
    assert cli_main(["ingest", str(manifest), "--media-root", str(root), "--out", str(out)]) == 0
    remade = {r["id"]: r for r in pq.read_table(out / "items.parquet").to_pylist()}["ok-video-a"]
    assert remade["frame_sha256"] == a["frame_sha256"]
    assert all(Path(p).is_file() for p in remade["frame_paths"])


def test_relative_frame_paths_resolve_from_another_directory(
        messy: tuple[Path, Path, dict[str, str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """As the DVC pipeline stores them (relative to the items file), frames resolve anywhere."""
    import hashlib

    from capjudge.item import load_items
    from capjudge.methods.base import item_frames

    manifest, root, _ = messy
    monkeypatch.chdir(tmp_path)
    assert cli_main(["ingest", os.path.relpath(manifest), "--media-root",
                     os.path.relpath(root), "--out", "out"]) == 0
    stored = {r["id"]: r for r in pq.read_table("out/items.parquet").to_pylist()}
    assert all(not os.path.isabs(p) for p in stored["ok-video-a"]["frame_paths"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    items = {i.id: i for i in load_items(tmp_path / "out" / "items.parquet")}
    frames = item_frames(items["ok-video-a"], "auto")
    assert len(frames) == 3
    for part in frames:
        assert hashlib.sha256(Path(part.path).read_bytes()).hexdigest() == part.sha256


def test_every_row_quarantined_is_an_error_naming_the_media_root(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A wrong media root quarantines every row: an error, not an empty evaluation (exit 0)."""
    media = tmp_path / "media"
    media.mkdir()
    Image.new("RGB", (32, 32), (9, 9, 9)).save(media / "x.png")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"id": f"r{i}", "image": "x.png",
                                            "candidate": "A dark square."}) + "\n"
                                for i in range(3)))
    code = cli_main(["ingest", str(manifest), "--media-root", str(tmp_path),
                     "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 3
    line = next(x for x in err.splitlines() if x.startswith("ingest: error:"))
    assert "every one of the 3 manifest rows was quarantined" in line
    assert "3 x file not found" in line and repr(str(tmp_path)) in line
    assert "quarantine.parquet" in line
    # The right root: nothing to say.
    assert cli_main(["ingest", str(manifest), "--media-root", str(media),
                     "--out", str(tmp_path / "o2")]) == 0
    assert "error" not in capsys.readouterr().err


def test_nothing_ingested_is_silent_when_anything_is_left() -> None:
    from capjudge.ingest import IngestResult, nothing_ingested

    some = IngestResult(4, 1, 3, {"image": 1}, {"file not found: 'a.png'": 3}, "out")
    assert nothing_ingested(some, "media") is None
    none = IngestResult(4, 0, 4, {}, {"candidate is empty": 1, "file not found: 'a.png'": 3},
                        "out")
    message = nothing_ingested(none, "media") or ""
    assert message.index("3 x file not found") < message.index("1 x candidate is empty")
    assert "'media'" in message
    only_text = IngestResult(2, 0, 2, {}, {"candidate is empty": 2}, "out")
    assert "media root" not in (nothing_ingested(only_text, "media") or "media root")
