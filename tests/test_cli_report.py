"""``capjudge report``: judge output folders + ingested items -> the report, no pipeline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny_project import ingest_and_judge

from capjudge.cli import main as cli_main


def test_judge_then_report_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no params.yaml here: the defaults, and nothing filed
    ingest, _ = ingest_and_judge(tmp_path / "data")
    # The folder `capjudge judge --out` writes is what `capjudge report` takes.
    assert cli_main(["judge", "--items", str(ingest / "items.parquet"), "--out", "out/mine",
                     "--method", "gveval", "--backend", "fake/const:80+vision",
                     "--modes", "ref-only", "--cache-dir", "cache"]) == 0
    capsys.readouterr()
    code = cli_main(["report", "out/mine", "--judge-dir", str(tmp_path / "data/judge/fk"),
                     "--items", str(ingest), "--out", "rep", "--human-criterion", "rating",
                     "--bootstrap", "20"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "rep/report.html" in out and "fk/ref-only" in out
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| mine | gveval | fake/const:80+vision" in md
    assert "## Agreement with humans (rating)" in md
    metrics = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    assert metrics["fk/ref-only"]["n"] == 4
    assert (tmp_path / "rep" / "aggregate" / "item_scores.parquet").is_file()
    assert not (tmp_path / ".capjudge-runs").exists()  # filed only with --registry


def test_a_label_key_mismatch_is_one_line_on_stderr(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ingest, judge_dir = ingest_and_judge(tmp_path)
    code = cli_main(["report", str(judge_dir), "--items", str(ingest), "--out", "rep",
                     "--bootstrap", "0"])
    out, err = capsys.readouterr()
    assert code == 0
    lines = [x for x in err.splitlines() if x.startswith("capjudge report:")]
    assert len(lines) == 1 and "'overall'" in lines[0] and "rating" in lines[0]
    assert "0 series" in out


@pytest.mark.parametrize(("args", "fragment"), [
    (["{tmp}/nope"], "nope: no such judge output folder"),
    (["{tmp}/ingest"], "not a judge output folder"),
    ([], "no judge output folder given"),
    (["{judge}", "--items", "{tmp}/missing"], "no items.parquet there"),
    (["{judge}", "{tmp}/other/fk"], "two judges named 'fk'"),
])
def test_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      args: list[str], fragment: str) -> None:
    ingest, judge_dir = ingest_and_judge(tmp_path)
    (tmp_path / "other" / "fk").mkdir(parents=True)
    for name in ("judgements.parquet", "summary.json"):
        (tmp_path / "other" / "fk" / name).write_bytes((judge_dir / name).read_bytes())
    filled = [a.format(tmp=tmp_path, judge=judge_dir) for a in args]
    if "--items" not in filled:
        filled += ["--items", str(ingest)]
    code = cli_main(["report", *filled, "--out", str(tmp_path / "rep")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("capjudge report: error: ") and fragment in err[-1]
    assert not (tmp_path / "rep" / "report.md").exists()


def test_items_without_labels_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    from tiny_project import write_manifest

    from capjudge.ingest import ingest
    from capjudge.judge import JudgeConfig, run_judge

    manifest = write_manifest(tmp_path)
    manifest.write_text("".join(
        json.dumps({k: v for k, v in json.loads(line).items() if k != "labels"}) + "\n"
        for line in manifest.read_text().splitlines()))
    ingest(manifest, tmp_path / "media", tmp_path / "ingest")
    run_judge(tmp_path / "ingest" / "items.parquet", tmp_path / "j",
              JudgeConfig(method="gveval", backend="fake/hash+vision",
                          cache_dir=str(tmp_path / "c"), modes=["ref-only"]))
    code = cli_main(["report", str(tmp_path / "j"), "--items", str(tmp_path / "ingest"),
                     "--out", str(tmp_path / "rep")])
    err = capsys.readouterr().err
    assert code == 2 and "no item carries human labels" in err


def test_compare_names_the_runs_own_protocol_not_the_samples(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from capjudge.compare import compare_runs

    monkeypatch.chdir(tmp_path)
    ingest, judge_dir = ingest_and_judge(tmp_path / "data")
    for out in ("rep1", "rep2"):
        assert cli_main(["report", str(judge_dir), "--items", str(ingest), "--out", out,
                         "--human-criterion", "rating", "--bootstrap", "20"]) == 0
    capsys.readouterr()
    result = compare_runs(tmp_path / "rep1" / "capjudge.duckdb",
                          tmp_path / "rep2" / "capjudge.duckdb", n_boot=20)
    protocol = result["series"]["fk/ref-only"]["agreement"]["protocol"]
    assert protocol.startswith("manifest-labels (human rating") and "sample" not in protocol
