"""Manifest reading and field checks found by the issue 21 probe (one test per finding).

A ``.json`` array manifest is read (never 0 items with exit 0); a CSV row with an unclosed
quote is quarantined alone, never merged with the next rows; duplicate JSON keys, absurd or
out-of-scale labels, references beyond the caps and bidirectional override characters are
quarantined with a reason; image types are sniffed from the bytes.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from capjudge.ingest import IngestConfig, ingest
from capjudge.manifest import FieldLimits, ManifestError, read_rows, validate_fields

GOOD = {"id": "g", "image": "a.png", "candidate": "A red square.", "references": ["Red."]}


def project(tmp_path: Path) -> Path:
    media = tmp_path / "media"
    media.mkdir()
    Image.new("RGB", (16, 12), (200, 10, 10)).save(media / "a.png")
    return media


def outcome(tmp_path: Path, manifest: Path, config: IngestConfig | None = None
            ) -> tuple[list[str], dict[str, str]]:
    """(item ids, quarantined id-or-line -> reason) of an ingest."""
    out = tmp_path / "out"
    ingest(manifest, tmp_path / "media", out, config)
    items = pq.read_table(out / "items.parquet").column("id").to_pylist()
    quarantine = {str(q["id"] or q["line"]): q["reason"]
                  for q in pq.read_table(out / "quarantine.parquet").to_pylist()}
    return items, quarantine


@pytest.mark.parametrize("indent", [None, 2])
def test_a_json_array_manifest_is_read(tmp_path: Path, indent: int | None) -> None:
    project(tmp_path)
    rows = [{**GOOD, "id": f"r{i}"} for i in range(3)] + [["not", "an", "object"]]
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(rows, indent=indent))
    items, quarantine = outcome(tmp_path, manifest)
    assert items == ["r0", "r1", "r2"]
    assert quarantine == {"4": "row is a JSON list, not an object"}


def test_a_broken_json_array_is_a_clear_error(tmp_path: Path) -> None:
    manifest = tmp_path / "m.json"
    manifest.write_text('[{"id": "a"},\n {"id": ')
    with pytest.raises(ManifestError, match=r"m.json:2: not valid JSON"):
        list(read_rows(manifest))


def test_duplicate_keys_are_quarantined(tmp_path: Path) -> None:
    project(tmp_path)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        json.dumps(GOOD) + "\n"
        + '{"id": "dup", "image": "a.png", "candidate": "A.", "candidate": "B."}\n'
        + '{"id": "nested", "image": "a.png", "candidate": "A.", '
          '"labels": {"overall": 1, "overall": 5}}\n')
    items, quarantine = outcome(tmp_path, manifest)
    assert items == ["g"]
    assert "duplicate key(s) 'candidate'" in quarantine["dup"]
    assert "duplicate key(s) 'overall'" in quarantine["nested"]


def test_csv_unclosed_quote_is_quarantined_alone(tmp_path: Path) -> None:
    project(tmp_path)
    manifest = tmp_path / "m.csv"
    manifest.write_text(
        "id,image,candidate,references\n"
        'bad,a.png,"An unclosed quote,[]\n'
        'next,a.png,A good row.,"[""Red.""]"\n'
        'multi,a.png,"A caption\nover two lines.",[]\n'
        "last,a.png,Another good row.,[]\n"
        "wide,a.png,too,many,cells\n")
    items, quarantine = outcome(tmp_path, manifest)
    assert items == ["next", "multi", "last"]
    assert "unclosed or misplaced quote" in quarantine["2"]
    assert "5 fields, the header 4" in quarantine["wide"]
    rows = {r.data["id"]: r for r in read_rows(manifest) if r.data}
    assert rows["next"].data["candidate"] == "A good row."  # never merged into 'bad'
    assert rows["multi"].data["candidate"] == "A caption\nover two lines."


@pytest.mark.parametrize(("labels", "fragment"), [
    ({"overall": 1e300}, "not a rating"),
    ({"overall": -1e300}, "not a rating"),
    ({"overall": [3, 2e7]}, "not a rating"),
    ({"overall": float("inf")}, "finite"),
])
def test_absurd_labels_are_quarantined(labels: dict[str, object], fragment: str) -> None:
    from capjudge.manifest import RawRow

    row, reasons = validate_fields(RawRow(1, {**GOOD, "labels": labels}, "raw"))
    assert row is None and fragment in reasons[0]


def test_labels_outside_a_declared_scale_are_quarantined() -> None:
    from capjudge.manifest import RawRow

    limits = FieldLimits(label_scales={"overall": (1.0, 5.0)})
    ok, _ = validate_fields(RawRow(1, {**GOOD, "labels": {"overall": [1, 5]}}, "r"),
                            limits=limits)
    bad, reasons = validate_fields(RawRow(1, {**GOOD, "labels": {"overall": 6}}, "r"),
                                   limits=limits)
    assert ok is not None and bad is None
    assert "outside its declared scale 1..5" in reasons[0]
    with pytest.raises(ValueError, match="label_scales.overall"):
        IngestConfig(label_scales={"overall": [5, 1]})


@pytest.mark.parametrize(("references", "fragment"), [
    (["x" * 20_001], "references[0] is too long (20,001 characters"),
    (["r"] * 101, "too many references (101"),
])
def test_references_beyond_the_caps_are_quarantined(references: list[str],
                                                    fragment: str) -> None:
    from capjudge.manifest import RawRow

    row, reasons = validate_fields(RawRow(1, {**GOOD, "references": references}, "r"))
    assert row is None and fragment in reasons[0]
    raised = FieldLimits(max_reference_chars=None, max_references=None)
    assert validate_fields(RawRow(1, {**GOOD, "references": references}, "r"),
                           limits=raised)[0] is not None


@pytest.mark.parametrize("char", ["\u202e", "\u202a", "\u2066", "\u2069"])
def test_bidi_overrides_are_quarantined(char: str) -> None:
    from capjudge.manifest import RawRow

    row, reasons = validate_fields(RawRow(1, {**GOOD, "candidate": f"A {char}red square."},
                                          "r"))
    assert row is None and "bidirectional override/isolate" in reasons[0]
    rtl = validate_fields(RawRow(1, {**GOOD, "candidate": "\u200fمربع أحمر"}, "r"))[0]
    assert rtl is not None  # right-to-left text and its plain marks are fine


def test_webp_bytes_named_png_are_sent_as_webp(tmp_path: Path) -> None:
    from capjudge.backends.openai_backend import image_data_url
    from capjudge.media import sha256_file
    from capjudge.protocol import ImagePart

    path = tmp_path / "looks.png"
    Image.new("RGB", (8, 8), (1, 2, 3)).save(path, format="WEBP")
    url = image_data_url(ImagePart(str(path), sha256_file(path)))
    assert url.startswith("data:image/webp;base64,")
    assert base64.b64decode(url.split(",", 1)[1])[8:12] == b"WEBP"
