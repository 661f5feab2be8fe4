"""The bundled sample: deterministic, and its gold labels follow from the generator."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from capjudge.sample import Group, generate_sample, score_claims


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(folder).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def test_same_seed_same_bytes(tmp_path: Path, sample_dir: Path) -> None:
    generate_sample(tmp_path / "again", seed=0)
    assert _digest(tmp_path / "again") == _digest(sample_dir)
    generate_sample(tmp_path / "other", seed=1)
    assert _digest(tmp_path / "other") != _digest(sample_dir)


def test_score_claims_follows_the_ch_scheme() -> None:
    scene = [Group("circle", "red", 2, "left"), Group("square", "blue", 1, "right")]
    assert score_claims(scene, scene) == (8, 0)
    assert score_claims(scene, [Group("circle", "green", 3, "left")]) == (2, 2)
    # A non-existent object is one hallucination, however many attributes it has.
    assert score_claims(scene, [*scene, Group("triangle", "yellow", 3, "left")]) == (8, 1)


def test_sample_covers_every_error_type_with_labels(sample_dir: Path) -> None:
    rows = [json.loads(line) for line in (sample_dir / "manifest.jsonl").read_text().splitlines()]
    types = {r["error_type"] for r in rows}
    for kind in ("correct", "wrong_colour", "wrong_count", "hallucinated_object",
                 "missing_main_object", "verbose", "disfluent", "irrelevant", "adversarial",
                 "false_temporal", "wrong_category"):
        assert kind in types
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        labels = r["labels"]
        assert 1 <= labels["overall"] <= 5
        if "image" in r:
            assert 3 <= len(r["references"]) <= 5
            assert {"correctness", "completeness", "clarity", "fluency", "conciseness",
                    "correct_attributes", "hallucinations"} <= labels.keys()
    correct = [r for r in rows if r["error_type"] == "correct" and "image" in r]
    assert all(r["labels"]["hallucinations"] == 0 for r in correct)
    adversarial = [r for r in rows if r["error_type"] == "adversarial"]
    assert adversarial and all(r["labels"]["overall"] == 1 for r in adversarial)
    assert (sample_dir / "LICENSE").read_text().count("CC0") >= 1
    size = sum(p.stat().st_size for p in sample_dir.rglob("*") if p.is_file())
    assert size < 3_000_000
