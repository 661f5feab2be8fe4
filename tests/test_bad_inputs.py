"""Every bad input the ingest probes found, one table row each.

Each case ingests a tiny manifest holding one good row and the case's row. A bad row must be
quarantined with a readable reason (and counted in summary.json) while the good row is kept; an
accepted oddity (a BOM, map labels, timestamp columns, a CMYK JPEG, ...) must become an item
with the right values. Nothing may crash the stage.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
import logging
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from capjudge.ingest import ingest
from capjudge.manifest import ManifestError, to_json_value
from capjudge.media import sha256_file
from helpers import grey_video, png_bomb

Row = dict[str, Any]
Build = Callable[[Path], tuple[str, bytes]]  # media root -> (manifest file name, bytes)
Check = Callable[[Row, Path], None]  # (the case's item, media root) -> assertions

GOOD: Row = {"id": "good", "image": "good.png", "candidate": "A red square.",
             "references": ["A red box."]}


# --------------------------------------------------------------------------------------------
# Media, made once for the module


def _png_rgb16(path: Path, rgb: tuple[int, int, int], size: int = 4) -> None:
    """A 16-bit-per-channel RGB PNG (Pillow cannot write one)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    line = b"\x00" + struct.pack(">HHH", *rgb) * size
    path.write_bytes(b"\x89PNG\r\n\x1a\n"
                     + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 16, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(line * size)) + chunk(b"IEND", b""))


@pytest.fixture(scope="module")
def media_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A media root with one file per media case, and a file outside it."""
    base = tmp_path_factory.mktemp("bad-inputs")
    root = base / "media"
    (root / "sub").mkdir(parents=True)
    Image.new("RGB", (64, 48), (200, 10, 10)).save(root / "good.png")
    Image.new("RGB", (64, 48), (200, 10, 10)).save(root / "sub" / "good.png")
    Image.new("RGB", (8, 8)).save(base / "outside.png")
    (root / "link.png").symlink_to(base / "outside.png")
    (root / "zero.png").write_bytes(b"")
    (root / "junk.png").write_bytes(b"this is not an image " * 20)
    whole = (root / "good.png").read_bytes()
    (root / "truncated.png").write_bytes(whole[: len(whole) // 2])
    grey_video(root / "clip.mp4", 5)
    clip = (root / "clip.mp4").read_bytes()
    (root / "truncated.mp4").write_bytes(clip[: len(clip) // 3])
    png_bomb(root / "bomb.png")
    # Pictures a vision API would not take as they are.
    Image.new("CMYK", (16, 16), (0, 255, 255, 0)).save(root / "cmyk.jpg")
    Image.new("I;16", (4, 4), 40000).save(root / "grey16.png")
    _png_rgb16(root / "rgb16.png", (60000, 1000, 30000))
    frames = [Image.new("RGB", (8, 8), c) for c in ((255, 0, 0), (0, 255, 0), (0, 0, 255))]
    frames[0].save(root / "anim.gif", save_all=True, append_images=frames[1:], duration=100)
    colours = Image.new("RGB", (16, 16))
    colours.putdata([(i, 255 - i, i * 7 % 256) for i in range(256)])
    colours.quantize(256).save(root / "palette.png")  # 256 colours: an 8-bit palette PNG
    Image.new("LA", (8, 8), (128, 200)).save(root / "la.png")
    # Stored 60x20 (landscape); EXIF orientation 6 says "turn 90 degrees clockwise to show".
    rotated = Image.new("RGB", (60, 20), (0, 200, 0))
    exif = rotated.getexif()
    exif[0x0112] = 6
    rotated.save(root / "rotated.jpg", exif=exif)
    return root


# --------------------------------------------------------------------------------------------
# Manifest builders


def row(**changes: Any) -> Row:
    """The case's row: a valid image row with ``changes`` applied (None removes a key)."""
    base: Row = {"id": "case", "image": "good.png", "candidate": "A red square.",
                 "references": ["A red box."]}
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def jsonl(case: Row | bytes | Callable[[Path], Row], *, bom: bool = False,
          good_first: bool = True) -> Build:
    """A JSONL manifest: the good row and the case (a row, raw line bytes, or root -> row)."""
    def build(root: Path) -> tuple[str, bytes]:
        value = case(root) if callable(case) else case
        line = value if isinstance(value, bytes) else json.dumps(value).encode()
        good = json.dumps(GOOD).encode()
        lines = [good, line] if good_first else [line, good]
        return "m.jsonl", (b"\xef\xbb\xbf" if bom else b"") + b"\n".join(lines) + b"\n"
    return build


def csv_manifest(case_line: bytes, *, bom: bool = False) -> Build:
    """A CSV manifest (CRLF, like Excel) with the good row and ``case_line``."""
    header = b"id,image,candidate,references,labels"
    good = b'good,good.png,A red square.,"[""A red box.""]",'

    def build(root: Path) -> tuple[str, bytes]:
        body = b"\r\n".join([header, good, case_line]) + b"\r\n"
        return "m.csv", (b"\xef\xbb\xbf" if bom else b"") + body
    return build


def parquet(case: Row, schema: pa.Schema) -> Build:
    """A Parquet manifest with the good row and ``case`` under ``schema``."""
    def build(root: Path) -> tuple[str, bytes]:
        sink = io.BytesIO()
        pq.write_table(pa.Table.from_pylist([GOOD, case], schema=schema), sink)
        return "m.parquet", sink.getvalue()
    return build


def schema(*extra: tuple[str, pa.DataType]) -> pa.Schema:
    """The manifest columns as Parquet types, plus ``extra`` columns."""
    return pa.schema([("id", pa.string()), ("image", pa.string()), ("candidate", pa.string()),
                      ("references", pa.list_(pa.string())), *extra])


# --------------------------------------------------------------------------------------------
# Expectations


@dataclass(frozen=True)
class Quarantined:
    """The case's row is quarantined, its reason containing ``reason``, under ``id``."""

    reason: str
    id: str | None = "case"


@dataclass(frozen=True)
class Accepted:
    """The case's row becomes the item ``case``; ``check`` looks at its values."""

    check: Check | None = None


def extra_is(expected: dict[str, Any]) -> Check:
    def check(item: Row, root: Path) -> None:
        assert json.loads(item["extra"]) == expected
    return check


def labels_are(expected: dict[str, Any]) -> Check:
    def check(item: Row, root: Path) -> None:
        assert json.loads(item["labels"]) == expected
    return check


def judge_copy(note: str, mode: str, fmt: str, size: tuple[int, int],
               pixel: Any = None) -> Check:
    """The item keeps the original's hash and points the judge at a normalised copy."""
    def check(item: Row, root: Path) -> None:
        original = root / item["media_path"]
        assert item["media_sha256"] == sha256_file(original)
        assert item["judge_path"] != str(original) and Path(item["judge_path"]).is_file()
        assert item["judge_sha256"] == sha256_file(item["judge_path"]) != item["media_sha256"]
        assert item["judge_sha256"] in Path(item["judge_path"]).name  # content-addressed
        assert note in item["judge_note"]
        with Image.open(item["judge_path"]) as copy:
            assert (copy.mode, copy.format, copy.size) == (mode, fmt, size)
            assert getattr(copy, "n_frames", 1) == 1
            if pixel is not None:
                assert copy.getpixel((0, 0)) == pixel
        assert (item["width"], item["height"]) == size
    return check


def upright_views_tile(item: Row, root: Path) -> None:
    """View 1 (rotated.jpg, shown 20x60) is letterboxed as a portrait: black at its sides."""
    with Image.open(item["tile_path"]) as tile:
        assert tile.getpixel((40, 256)) == (0, 0, 0)  # side padding: not landscape
        centre = tile.getpixel((256, 256))
        assert isinstance(centre, tuple)
        assert centre[1] > 150 and centre[0] < 60 and centre[2] < 60  # the green picture
    assert item["judge_path"] == item["tile_path"]


NOT_JSON_INT = b'{"id": "case", "image": "good.png", "candidate": "x", "n": ' \
    + b"1" * 5000 + b"}"
WHEN = "2024-05-06T07:08:09.123456789+00:00"
PRICE = decimal.Decimal("12345678901234567890.123456789")
BLOB = b"\x00\xffPNG"

CASES = [
    # ---- already covered by test_ingest.py's messy manifest
    pytest.param(jsonl(row(image="nope.png")), Quarantined("file not found: 'nope.png'"),
                 id="missing-file"),
    pytest.param(jsonl(row(image="../outside.png")), Quarantined("escapes the media root"),
                 id="dotdot-escape"),
    pytest.param(jsonl(lambda root: row(image=str(root.parent / "outside.png"))),
                 Quarantined("escapes the media root"), id="absolute-path-elsewhere"),
    pytest.param(jsonl(row(image="link.png")), Quarantined("escapes the media root"),
                 id="symlink-escape"),
    pytest.param(jsonl(row(image=None, video="http://example.com/v.m3u8")),
                 Quarantined("URLs are not allowed"), id="url"),
    pytest.param(jsonl(row(image="junk.png")), Quarantined("undecodable image"),
                 id="undecodable-image"),
    pytest.param(jsonl(row(image="truncated.png")), Quarantined("undecodable image"),
                 id="truncated-image"),
    pytest.param(jsonl(row(image=None, video="truncated.mp4")), Quarantined("video"),
                 id="truncated-video"),
    pytest.param(jsonl(row(image="zero.png")), Quarantined("zero-byte file"), id="zero-byte"),
    pytest.param(jsonl(row(image="bomb.png")), Quarantined("decompression bomb refused"),
                 id="decompression-bomb"),
    pytest.param(jsonl(row(id="good", candidate="again")),
                 Quarantined("duplicate id 'good' (first at line 1)", id="good"),
                 id="duplicate-id"),
    pytest.param(jsonl(row(candidate="   ")), Quarantined("'candidate' is empty"),
                 id="empty-candidate"),
    pytest.param(jsonl(row(candidate="A red\x00 square\x07")),
                 Quarantined("contains control characters (U+0000, U+0007)"),
                 id="control-characters"),
    pytest.param(jsonl(b'{"id": "case", "image": "good.png", "candidate": "bad \\udc80"}'),
                 Quarantined("'candidate' not valid Unicode (lone surrogate"),
                 id="lone-surrogate"),
    pytest.param(jsonl(b'{"id": "case", "image": "good.png", "candidate": "caf\xe9"}'),
                 Quarantined("not valid UTF-8 (byte 53: 0xe9)"), id="non-utf8-line"),
    pytest.param(jsonl(row(references=5)),
                 Quarantined("'references' must be a list of strings, got int"),
                 id="wrong-type-references"),
    pytest.param(jsonl(row(candidate=3)), Quarantined("'candidate' must be a string, got int"),
                 id="wrong-type-candidate"),
    pytest.param(jsonl(row(labels={"overall": "good"})),
                 Quarantined("labels['overall'] must be a number or a list of numbers, got str"),
                 id="wrong-type-label"),
    pytest.param(jsonl(row(video="clip.mp4")),
                 Quarantined("exactly one of 'image', 'video' or 'views' is required "
                             "(got image, video)"), id="two-media"),
    pytest.param(jsonl(row(image=None)), Quarantined("exactly one of"), id="no-media"),
    pytest.param(jsonl(row(task="poetry")), Quarantined("'task' must be one of"), id="bad-task"),
    pytest.param(jsonl(b'["case"]'), Quarantined("row is a JSON list, not an object", id=None),
                 id="non-object-row"),
    # ---- 1. labels must be finite numbers
    pytest.param(jsonl(b'{"id": "case", "image": "good.png", "candidate": "x", '
                       b'"labels": {"overall": 1' + b"0" * 400 + b"}}"),
                 Quarantined("labels['overall'] must be a finite number, got an integer of "
                             "401 digits"), id="label-401-digit-integer"),
    pytest.param(jsonl(b'{"id": "case", "image": "good.png", "candidate": "x", '
                       b'"labels": {"overall": NaN}}'),
                 Quarantined("labels['overall'] must be a finite number, got NaN"),
                 id="label-nan"),
    pytest.param(jsonl(b'{"id": "case", "image": "good.png", "candidate": "x", '
                       b'"labels": {"overall": [3, -Infinity]}}'),
                 Quarantined("labels['overall'][1] must be a finite number"),
                 id="label-list-with-infinity"),
    pytest.param(jsonl(row(labels={"overall": []})),
                 Quarantined("labels['overall'] is an empty list"), id="label-empty-list"),
    pytest.param(jsonl(NOT_JSON_INT), Quarantined("row holds an integer too long to read"),
                 id="integer-over-4300-digits"),
    pytest.param(jsonl(b"[" * 100_000 + b"]" * 100_000),
                 Quarantined("row nested too deeply", id=None), id="nested-too-deeply"),
    # ---- 2. extra values JSON cannot hold are encoded faithfully
    pytest.param(parquet(
        row(when=dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.UTC), price=PRICE, blob=BLOB,
            day=dt.date(2024, 5, 6), took=dt.timedelta(days=1, seconds=2, microseconds=5),
            at=3_723_000_000_001),
        schema(("when", pa.timestamp("ns", tz="UTC")), ("price", pa.decimal128(38, 9)),
               ("blob", pa.binary()), ("day", pa.date32()), ("took", pa.duration("us")),
               ("at", pa.time64("ns")))),
        Accepted(extra_is({"when": WHEN.replace(".123456789", ""), "price": str(PRICE),
                           "blob": {"$base64": base64.b64encode(BLOB).decode()},
                           "day": "2024-05-06", "took": "P1DT0H0M2.000005S",
                           "at": "01:02:03.000000001"})),
        id="parquet-extra-timestamp-decimal-binary"),
    pytest.param(parquet(row(when=1_714_979_289_123_456_789),
                         schema(("when", pa.timestamp("ns", tz="UTC")))),
                 Accepted(extra_is({"when": WHEN})), id="parquet-extra-nanosecond-timestamp"),
    pytest.param(parquet(row(meta=[("a", 1), ("b", 2)]),
                         schema(("meta", pa.map_(pa.string(), pa.int64())))),
                 Accepted(extra_is({"meta": {"a": 1, "b": 2}})), id="parquet-extra-map"),
    pytest.param(parquet(row(when=10**12), schema(("when", pa.timestamp("s")))),
                 Quarantined("column 'when': value cannot be read (date value out of range)"),
                 id="parquet-timestamp-beyond-year-9999"),
    pytest.param(jsonl(b'{"id": "case", "image": "good.png", "candidate": "x", '
                       b'"meta": {"score": NaN, "big": 1' + b"0" * 30 + b"}}"),
                 Accepted(extra_is({"meta": {"score": {"$float": "NaN"}, "big": 10**30}})),
                 id="jsonl-extra-nan-and-big-integer"),
    pytest.param(jsonl(b'{"id": "case", "image": "good.png", "candidate": "x", '
                       b'"\\udc80": 1}'),
                 Quarantined("extra key '\\\\udc80' is not valid Unicode"),
                 id="extra-key-lone-surrogate"),
    # ---- 3. a UTF-8 byte order mark
    pytest.param(jsonl(row(labels={"overall": 4}), bom=True, good_first=False),
                 Accepted(labels_are({"overall": 4.0})), id="jsonl-bom"),
    pytest.param(csv_manifest(b'case,good.png,A red square.,"[""A red box.""]",'
                              b'"{""overall"": [3, 4]}"', bom=True),
                 Accepted(labels_are({"overall": [3.0, 4.0]})), id="csv-bom"),
    pytest.param(csv_manifest(b"case,good.png,caf\xe9 au lait,[],"),
                 Quarantined("not valid UTF-8 (byte 0xe9)"), id="csv-non-utf8-row"),
    # ---- 4. invisible-only text is empty
    pytest.param(jsonl(row(candidate="\u200b\u200c\u200d\u2060\ufeff \t\u3164")),
                 Quarantined("'candidate' is empty (only invisible characters)"),
                 id="zero-width-candidate"),
    pytest.param(jsonl(row(id="\u200b")), Quarantined("'id' is empty", id="\u200b"),
                 id="zero-width-id"),
    pytest.param(jsonl(b'{"id": "\\udc80x", "image": "good.png", "candidate": "x"}'),
                 Quarantined("'id' not valid Unicode", id="\\udc80x"), id="lone-surrogate-id"),
    # ---- 5. Windows paths
    pytest.param(jsonl(row(image="C:\\images\\a.jpg")),
                 Quarantined("absolute Windows path, not resolvable here: "
                             "'C:\\\\images\\\\a.jpg'"), id="windows-drive-path"),
    pytest.param(jsonl(row(image="D:/data/a.jpg")),
                 Quarantined("absolute Windows path"), id="windows-drive-forward-slashes"),
    pytest.param(jsonl(row(image="\\\\server\\share\\a.jpg")),
                 Quarantined("Windows network (UNC) path"), id="windows-unc-path"),
    pytest.param(jsonl(row(image="sub\\good.png")),
                 Quarantined("backslashes are not path separators here"),
                 id="windows-relative-backslashes"),
    # ---- 6. Parquet map (and struct) labels
    pytest.param(parquet(row(labels=[("overall", 4.0), ("fluency", 3.5)]),
                         schema(("labels", pa.map_(pa.string(), pa.float64())))),
                 Accepted(labels_are({"overall": 4.0, "fluency": 3.5})),
                 id="parquet-map-labels"),
    pytest.param(parquet(row(labels=[("overall", [3.0, 4.0])]),
                         schema(("labels", pa.map_(pa.string(), pa.list_(pa.float64()))))),
                 Accepted(labels_are({"overall": [3.0, 4.0]})), id="parquet-map-list-labels"),
    pytest.param(parquet(row(labels={"overall": 4.0, "fluency": None}),
                         schema(("labels", pa.struct([("overall", pa.float64()),
                                                      ("fluency", pa.float64())])))),
                 Accepted(labels_are({"overall": 4.0})), id="parquet-struct-labels-null"),
    pytest.param(parquet(row(labels=[("overall", 4.0), ("overall", 5.0)]),
                         schema(("labels", pa.map_(pa.string(), pa.float64())))),
                 Quarantined("'labels' must be an object, got list"),
                 id="parquet-map-labels-duplicate-key"),
    # ---- 7. EXIF orientation in tiles (and for the judge)
    pytest.param(jsonl(row(image=None, views=["rotated.jpg", "good.png"])),
                 Accepted(upright_views_tile), id="exif-rotated-view"),
    pytest.param(jsonl(row(image="rotated.jpg")),
                 Accepted(judge_copy("EXIF orientation 6", "RGB", "JPEG", (20, 60))),
                 id="exif-rotated-image"),
    # ---- 8. pictures a vision API does not take: normalised copies
    pytest.param(jsonl(row(image="cmyk.jpg")),
                 Accepted(judge_copy("CMYK JPEG", "RGB", "JPEG", (16, 16))), id="cmyk-jpeg"),
    pytest.param(jsonl(row(image="grey16.png")),
                 Accepted(judge_copy("16-bit PNG", "L", "PNG", (4, 4), pixel=40000 // 256)),
                 id="png-16-bit-grey"),
    pytest.param(jsonl(row(image="rgb16.png")),
                 Accepted(judge_copy("16-bit PNG", "RGB", "PNG", (4, 4),
                                     pixel=(60000 >> 8, 1000 >> 8, 30000 >> 8))),
                 id="png-16-bit-rgb"),
    pytest.param(jsonl(row(image="anim.gif")),
                 Accepted(judge_copy("animated GIF (3 frames); first frame only", "RGB", "PNG",
                                     (8, 8), pixel=(255, 0, 0))), id="animated-gif"),
    pytest.param(jsonl(row(image="palette.png")),
                 Accepted(judge_copy("P PNG", "RGB", "PNG", (16, 16))), id="palette-png"),
    pytest.param(jsonl(row(image="la.png")),
                 Accepted(judge_copy("LA PNG", "RGBA", "PNG", (8, 8), pixel=(128, 128, 128, 200))),
                 id="grey-alpha-png"),
    # ---- 9. candidate length
    pytest.param(jsonl(row(candidate="x" * 5_000_000)),
                 Quarantined("'candidate' is too long (5,000,000 characters; "
                             "the limit is 20,000)"), id="candidate-5-mb"),
    pytest.param(csv_manifest(b"case,good.png," + b"y" * 200_000 + b",[],"),
                 Quarantined("'candidate' is too long (200,000 characters"),
                 id="csv-candidate-over-field-limit"),
    pytest.param(jsonl(row(candidate="z" * 20_000)),
                 Accepted(lambda item, root: None), id="candidate-at-the-limit"),
]


@pytest.mark.parametrize(("build", "expect"), CASES)
def test_bad_input_is_quarantined_or_accepted_and_good_rows_are_kept(
        build: Build, expect: Quarantined | Accepted, media_root: Path, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    name, data = build(media_root)
    manifest = tmp_path / name
    manifest.write_bytes(data)
    out = tmp_path / "out"
    with caplog.at_level(logging.WARNING, logger="capjudge.ingest"):
        result = ingest(manifest, media_root, out)
    items = {i["id"]: i for i in pq.read_table(out / "items.parquet").to_pylist()}
    quarantine = pq.read_table(out / "quarantine.parquet").to_pylist()
    summary = json.loads((out / "summary.json").read_text())

    good = items["good"]  # the good row alongside is always kept, untouched
    assert good["candidate"] == "A red square." and good["references"] == ["A red box."]
    assert good["judge_path"] == str(media_root / "good.png") and good["judge_note"] is None
    assert good["judge_sha256"] == good["media_sha256"] == sha256_file(media_root / "good.png")

    if isinstance(expect, Quarantined):
        assert set(items) == {"good"}
        assert len(quarantine) == 1, quarantine
        q = quarantine[0]
        assert expect.reason in q["reason"]
        assert q["id"] == expect.id and q["line"] >= 1 and q["raw"]
        assert result.n_quarantined == summary["quarantined"] == 1
        assert sum(summary["quarantined_by_reason"].values()) == 1
        assert any("quarantined line" in r.getMessage() for r in caplog.records)
    else:
        assert quarantine == [] and summary["quarantined"] == 0
        assert set(items) == {"good", "case"}
        if expect.check is not None:
            expect.check(items["case"], media_root)


@pytest.mark.parametrize(("name", "data", "message"), [
    pytest.param("m.jsonl", json.dumps(GOOD).encode("utf-16"), ":1: the file is UTF-16",
                 id="utf16-jsonl"),
    pytest.param("m.csv", "id,image,candidate\ngood,good.png,x\n".encode("utf-16"),
                 ":1: the file is UTF-16", id="utf16-csv"),
    pytest.param("m.jsonl", json.dumps(GOOD).encode() + b"\n{oops\n", ":2: not valid JSON",
                 id="broken-json-line"),
    pytest.param("m.txt", b"", "unknown manifest kind", id="unknown-kind"),
])
def test_unreadable_manifest_fails_with_file_and_line(
        name: str, data: bytes, message: str, media_root: Path, tmp_path: Path) -> None:
    manifest = tmp_path / name
    manifest.write_bytes(data)
    with pytest.raises(ManifestError, match=f"^{manifest}.*{message}"):
        ingest(manifest, media_root, tmp_path / "out")


def test_values_without_a_json_form_are_a_reason_not_a_crash() -> None:
    assert to_json_value({"a": [b"\x01", float("inf")]}) == {
        "a": [{"$base64": "AQ=="}, {"$float": "Infinity"}]}
    with pytest.raises(ValueError, match="type object has no JSON form"):
        to_json_value(object())
