"""CLI misuse and settings out of range (issue 21, items 3 and 4): one line, exit 2, no call.

Every case runs ``capjudge`` in process and must end in exit 2 with a one-line
``capjudge <command>: error: ...`` message naming the problem, without a traceback and
before any model call (the fake backend's ``generate`` is watched). Crashes found by the
probe that are per-row problems (a symlink loop, a half-written tile sidecar) are here too:
they must quarantine the row or rebuild the tile, and the stage goes on.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from PIL import Image

from capjudge.backends.fake import FakeBackend
from capjudge.cli import main as cli_main


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts FakeBackend.generate calls (a misuse must be refused before any)."""
    seen: list[int] = []
    original = FakeBackend.generate

    def generate(self: FakeBackend, requests):  # type: ignore[no-untyped-def]
        seen.append(len(requests))
        return original(self, requests)

    monkeypatch.setattr(FakeBackend, "generate", generate)
    return seen


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli_main(args)
    err = capsys.readouterr().err
    return code, err


JUDGE = ["judge", "--backend", "fake/hash", "--cache-dir", "{tmp}/cache"]
SCORE = ["score", "--backend", "fake/hash", "--cache-dir", "{tmp}/cache"]
INGEST = ["ingest", "{sample}/manifest.jsonl", "--media-root", "{sample}"]

# (arguments, a fragment the one-line message must hold)
MISUSE = [
    (JUDGE + ["--items", "{tmp}/nope.parquet", "--out", "{tmp}/j"], "items table not found"),
    (JUDGE + ["--items", "{items}", "--out", "{tmp}/afile"], "not a folder"),
    (JUDGE + ["--items", "{items}", "--out", "{tmp}/j", "--limit", "-5"], "--limit"),
    (JUDGE + ["--items", "{items}", "--out", "{tmp}/j", "--limit", "0"], "--limit"),
    (JUDGE + ["--items", "{items}", "--out", "{tmp}/j", "--concurrency", "0"], "--concurrency"),
    (JUDGE + ["--items", "{items}", "--out", "{tmp}/j", "--concurrency", "-2"],
     "--concurrency"),
    (JUDGE + ["--items", "{items}", "--out", "{tmp}/j", "--max-tokens", "-5"], "max_tokens"),
    (JUDGE + ["--items", "{items}", "--out", "{tmp}/j", "--max-tokens", "0"], "max_tokens"),
    (JUDGE + ["--items", "{items}", "--out", "{tmp}/j", "--min-mass", "2"], "min_mass"),
    (JUDGE + ["--items", "{items}", "--out", "{tmp}/j", "--min-mass", "-0.1"], "min_mass"),
    (JUDGE + ["--items", "{items}", "--out", "{tmp}/j", "--min-mass", "nan"], "min_mass"),
    (JUDGE + ["--items", "{items}", "--out", "{tmp}/j", "--max-retry-after", "0"],
     "max_retry_after_s"),
    (JUDGE + ["--items", "{items}", "--out", "{tmp}/j", "--timeout", "0"], "timeout_s"),
    (JUDGE + ["--items", "{items}", "--out", "{tmp}/j", "--timeout", "inf"], "timeout_s"),
    (["judge", "--backend", "fake/nosuchscript", "--items", "{items}", "--out", "{tmp}/j"],
     "unknown fake script"),
    (JUDGE + ["--items", "{tmp}/afile", "--out", "{tmp}/j"], "not a readable items table"),
    (SCORE + ["--caption", ""], "--caption is empty"),
    (SCORE + ["--caption", " \u200b "], "--caption is empty"),
    (SCORE + ["--caption", "x", "--method", "harmoniceval", "--gamma", "-1"], "--gamma"),
    (SCORE + ["--caption", "x", "--method", "harmoniceval", "--gamma", "0"], "--gamma"),
    (SCORE + ["--caption", "x", "--gamma", "nan"], "--gamma"),
    (SCORE + ["--caption", "x", "--params", "{tmp}/scalar.yaml"], "mapping"),
    (SCORE + ["--caption", "x", "--params", "{tmp}/broken.yaml"], "not readable YAML"),
    (SCORE + ["--caption", "x", "--min-mass", "1.5"], "min_mass"),
    (SCORE + ["--caption", "x", "--method", "visce2", "--method-option",
              "visual_input=frames"], "visce2 has no option 'visual_input'"),
    (SCORE + ["--caption", "x", "--method", "gveval", "--method-option",
              "visual_input=video"], "unknown visual_input"),
    (SCORE + ["--caption", "a \u202eb"], "bidirectional"),
    (SCORE + ["--caption", "a\x07b"], "control characters"),
    (SCORE + ["--caption", "x" * 20_001], "--caption is too long"),
    (SCORE + ["--caption", "x", "--ref", "y" * 20_001], "--ref is too long"),
    (INGEST + ["--out", "{tmp}/afile"], "not a folder"),
    (INGEST + ["--out", "{tmp}/i", "--frames", "0", "--frame-policy", "uniform"], "--frames"),
    (INGEST + ["--out", "{tmp}/i", "--frames", "100000", "--frame-policy", "uniform"],
     "--frames"),
    (INGEST + ["--out", "{tmp}/i", "--decode-timeout", "0"], "--decode-timeout"),
    (INGEST + ["--out", "{tmp}/i", "--decode-timeout", "-3"], "--decode-timeout"),
    (INGEST + ["--out", "{tmp}/i", "--max-candidate-chars", "-1"], "max_candidate_chars"),
    (["ingest", "{tmp}/nope.jsonl", "--media-root", "{sample}", "--out", "{tmp}/i"],
     "manifest not found"),
    (["ingest", "{sample}/manifest.jsonl", "--media-root", "{tmp}/nope", "--out", "{tmp}/i"],
     "not a folder"),
]


@pytest.mark.parametrize(("args", "fragment"), MISUSE,
                         ids=[" ".join(a[1:])[:60] for a, _ in MISUSE])
def test_misuse_is_one_line_exit_2_before_any_call(
        args: list[str], fragment: str, ingested: Path, sample_dir: Path, tmp_path: Path,
        calls: list[int], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("not a folder\n")
    (tmp_path / "scalar.yaml").write_text("5\n")
    (tmp_path / "broken.yaml").write_text("judge: [unclosed\n")
    filled = [a.format(tmp=tmp_path, items=ingested / "items.parquet", sample=sample_dir)
              for a in args]
    code, err = run_cli(filled, capsys)
    lines = [line for line in err.splitlines() if "error:" in line]
    assert code == 2, err
    assert "Traceback" not in err
    assert len(lines) == 1 and fragment in lines[0], err
    assert calls == []  # refused before any model call
    assert not (tmp_path / "afile").is_dir()


def test_judge_out_existing_file_fails_before_any_call(
        ingested: Path, tmp_path: Path, calls: list[int],
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "judgements"
    out.write_text("a file where the folder goes\n")
    code, err = run_cli(["judge", "--backend", "fake/hash", "--items",
                         str(ingested / "items.parquet"), "--out", str(out), "--cache-dir",
                         str(tmp_path / "cache"), "--limit", "3"], capsys)
    assert code == 2 and "not a folder" in err and calls == []
    assert out.read_text() == "a file where the folder goes\n"


def test_a_good_limit_judges_exactly_that_many(ingested: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main(["judge", "--backend", "fake/hash", "--items",
                     str(ingested / "items.parquet"), "--out", str(tmp_path / "j"),
                     "--cache-dir", str(tmp_path / "cache"), "--limit", "5"])
    assert code == 0
    summary = json.loads((tmp_path / "j" / "summary.json").read_text())
    assert summary["items"]["judged"] == 5


def _image_project(root: Path) -> Path:
    media = root / "media"
    media.mkdir(parents=True)
    Image.new("RGB", (16, 12), (200, 10, 10)).save(media / "a.png")
    os.symlink("loop2.png", media / "loop1.png")
    os.symlink("loop1.png", media / "loop2.png")
    rows = [{"id": "good", "image": "a.png", "candidate": "red", "references": []},
            {"id": "loop", "image": "loop1.png", "candidate": "red", "references": []},
            {"id": "good2", "image": "a.png", "candidate": "also red", "references": []}]
    (root / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return media


def test_a_symlink_loop_quarantines_its_row_and_ingest_goes_on(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    media = _image_project(tmp_path)
    code = cli_main(["ingest", str(tmp_path / "m.jsonl"), "--media-root", str(media),
                     "--out", str(tmp_path / "out")])
    assert code == 0
    items = pq.read_table(tmp_path / "out" / "items.parquet").column("id").to_pylist()
    quarantine = pq.read_table(tmp_path / "out" / "quarantine.parquet").to_pylist()
    assert items == ["good", "good2"]
    assert [q["id"] for q in quarantine] == ["loop"]
    assert "symlink loop" in quarantine[0]["reason"]


def test_a_half_written_tile_sidecar_is_rebuilt(sample_dir: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    manifest = tmp_path / "videos.jsonl"
    rows = [json.loads(line) for line in (sample_dir / "manifest.jsonl").read_text().splitlines()]
    manifest.write_text("".join([json.dumps(r) + "\n" for r in rows if "video" in r][:2]))
    out = tmp_path / "out"
    assert cli_main(["ingest", str(manifest), "--media-root", str(sample_dir), "--out",
                     str(out)]) == 0
    sidecars = sorted((out / "tiles").glob("*.json"))
    assert sidecars
    for sidecar in sidecars:  # as a kill of an earlier version left them
        sidecar.write_text(sidecar.read_text()[: len(sidecar.read_text()) // 2])
    assert cli_main(["ingest", str(manifest), "--media-root", str(sample_dir), "--out",
                     str(out)]) == 0
    for sidecar in sidecars:
        assert json.loads(sidecar.read_text())["tile_sha256"]  # rebuilt whole
    assert pq.read_table(out / "items.parquet").num_rows == 2


ARGPARSE_MISUSE = [
    ["sample", "--out", "{tmp}/s", "--images", "-3"],
    ["sample", "--out", "{tmp}/s", "--images", "0"],
    ["meta-eval", "--dataset", "pascal50s", "--path", "x", "--limit", "-1"],
    ["meta-eval", "--dataset", "pascal50s", "--path", "x", "--bootstrap", "-5"],
    ["estimate-cost", "--expected-completion", "-4"],
    ["compare", "a", "b", "--bootstrap", "-1"],
    ["compare", "a", "b", "--threshold", "nan"],
]


@pytest.mark.parametrize("args", ARGPARSE_MISUSE, ids=[" ".join(a)[:50] for a in ARGPARSE_MISUSE])
def test_out_of_range_flags_are_refused_by_the_parser(
        args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli_main([a.format(tmp=tmp_path) for a in args])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "Traceback" not in err
    assert len([line for line in err.splitlines() if "error:" in line]) == 1
    assert not (tmp_path / "s").exists()


def test_sample_out_a_file_and_templates_without_yaml(
        ingested: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "afile").write_text("x")
    assert cli_main(["sample", "--out", str(tmp_path / "afile")]) == 2
    assert cli_main(["judge", "--backend", "fake/hash", "--items",
                     str(ingested / "items.parquet"), "--out", str(tmp_path / "j"),
                     "--templates", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a folder" in err and "no templates.yaml" in err and "Traceback" not in err
