"""Aggregate -> validate -> report on judged sample data; validation catches bad scores."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from capjudge.aggregate import AggregateConfig, aggregate_judge, run_aggregate
from capjudge.judge import JudgeConfig, run_judge
from capjudge.records import Judgement
from capjudge.report import ReportConfig, run_report
from capjudge.testing.openai_server import MockOpenAIServer
from capjudge.validate import ValidateConfig, ValidationFailed, run_validate


@pytest.fixture(scope="module")
def judged(ingested: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    root = tmp_path_factory.mktemp("judged")
    dirs = []
    with MockOpenAIServer() as server:
        for name, method in (("gv", "gveval"), ("he", "harmoniceval"), ("c3", "cap3d")):
            config = JudgeConfig(method=method, backend="openai/gpt-4o-2024-08-06",
                                 backend_options={"base_url": server.url}, concurrency=8,
                                 cache_dir=str(root / "cache"), limit=None,
                                 modes=["ref-only"] if method == "gveval" else None)
            run_judge(ingested / "items.parquet", root / name, config)
            dirs.append(root / name)
    return root, dirs


def test_aggregate_gamma_changes_scores_without_rejudging(judged: tuple[Path, list[Path]],
                                                          tmp_path: Path) -> None:
    _, dirs = judged
    a = run_aggregate(dirs, tmp_path / "a", AggregateConfig(settings={"gamma": 0.75}))
    run_aggregate(dirs, tmp_path / "b", AggregateConfig(settings={"gamma": 1.0}))
    assert a["item_status"]["he/default"]["ok"] > 0
    sa = {(r["judge"], r["item_id"]): r["score"]
          for r in pq.read_table(tmp_path / "a" / "item_scores.parquet").to_pylist()}
    sb = {(r["judge"], r["item_id"]): r["score"]
          for r in pq.read_table(tmp_path / "b" / "item_scores.parquet").to_pylist()}
    he_keys = [k for k in sa if k[0] == "he"]
    assert any(abs(sa[k] - sb[k]) > 1e-9 for k in he_keys)  # weighting changed
    gv_keys = [k for k in sa if k[0] == "gv" and sa[k] is not None]
    assert all(sa[k] == sb[k] for k in gv_keys)  # G-VEval is unaffected by gamma
    # gamma = 1 is the plain mean of the five smoothed criteria
    crit = pq.read_table(tmp_path / "b" / "criteria.parquet").to_pylist()
    item = he_keys[0][1]
    scores = [c["score"] for c in crit if c["judge"] == "he" and c["item_id"] == item]
    assert sb[("he", item)] == pytest.approx(sum(scores) / len(scores))
    systems = pq.read_table(tmp_path / "a" / "system_scores.parquet").to_pylist()
    c3 = [s for s in systems if s["judge"] == "c3" and s["precision_micro"] is not None]
    assert c3 and all(0 <= s["precision_micro"] <= 100 for s in c3)


def test_failures_and_skips_are_statuses_not_scores() -> None:
    rows = [
        {"item_id": "a", "mode": "m", "method": "gveval", "criterion": "score", "status": "ok",
         "score": 70.0, "sd": 3.0, "system": "s1"},
        {"item_id": "b", "mode": "m", "method": "gveval", "criterion": "score",
         "status": "parse_failure", "reason": "no integer", "score": None, "system": "s1"},
        {"item_id": "c", "mode": "m", "method": "gveval", "criterion": "*", "status": "skipped",
         "reason": "no vision", "score": None, "system": "s2"},
    ]
    items, systems = aggregate_judge("j", [Judgement.from_row(r) for r in rows],
                                     AggregateConfig())
    by = {i.item_id: i for i in items}
    assert by["a"].status == "ok" and by["a"].score == 70.0
    assert by["b"].status == "failed" and by["b"].score is None
    assert "no integer" in by["b"].reason
    assert by["c"].status == "skipped" and by["c"].score is None
    s1 = next(s for s in systems if s.system == "s1")
    assert s1.mean_score == 70.0 and s1.failed == 1 and s1.scored == 1


def test_validation_and_report(judged: tuple[Path, list[Path]], ingested: Path,
                               tmp_path: Path) -> None:
    _, dirs = judged
    run_aggregate(dirs, tmp_path / "agg", AggregateConfig())
    report = run_validate(ingested / "items.parquet", dirs, tmp_path / "reports",
                          ValidateConfig())
    assert report["success"]
    ctx = run_report(ingested, dirs, tmp_path / "agg", tmp_path / "reports",
                     ReportConfig(bootstrap=50))
    out = tmp_path / "reports"
    md = (out / "report.md").read_text()
    assert "sample-gold" in md and "## Agreement with humans" in md
    assert "cap3d judges 3D objects" in md  # skipped, with the reason
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html and "<table>" in html
    assert list((out / "plots").glob("*-heatmap.png"))
    metrics = json.loads((out / "metrics.json").read_text())
    assert "gv/ref-only" in metrics and -1 <= metrics["gv/ref-only"]["kendall_tau_b"] <= 1
    con = duckdb.connect(str(out / "capjudge.duckdb"), read_only=True)
    tables = {r[0] for r in con.execute("show tables").fetchall()}
    assert {"items", "judgements", "item_scores", "labels", "agreement"} <= tables
    n = con.execute("select count(*) from labels where criterion = 'overall'").fetchone()
    assert n is not None and n[0] > 100
    con.close()
    gv = next(a for a in ctx["agreement"] if a["judge"] == "gv")
    assert gv["n"] > 100 and "kendall_tau_b" in gv["ci95"]


def test_out_of_range_score_fails_validation_readably(judged: tuple[Path, list[Path]],
                                                      ingested: Path, tmp_path: Path) -> None:
    _, dirs = judged
    table = pq.read_table(dirs[0] / "judgements.parquet")
    rows = table.to_pylist()
    bad_id = rows[0]["item_id"]
    rows[0]["score"] = 150.0  # outside G-VEval's 0-100
    broken = tmp_path / "gv"
    broken.mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), broken / "judgements.parquet")
    with pytest.raises(ValidationFailed) as info:
        run_validate(ingested / "items.parquet", [broken], tmp_path / "reports",
                     ValidateConfig())
    message = str(info.value)
    assert "scores-gveval-all" in message and "expect_column_values_to_be_between" in message
    assert "150.0" in message and "'max_value': 100" in message
    assert bad_id  # the row is still there: validation reports, it does not drop
    md = (tmp_path / "reports" / "validation.md").read_text()
    assert "FAILED" in md and "150.0" in md


# -- your own data (issue #39, item 4): the protocol line and the label-key check ------------

def _own_report(tmp_path: Path, criterion: str, card: dict[str, str] | None = None
                ) -> tuple[str, str]:
    """The Markdown and HTML report on a tiny data set whose labels are named ``rating``."""
    from tiny_project import ingest_and_judge, write_manifest

    if card is not None:
        write_manifest(tmp_path)
        (tmp_path / "my.dataset.json").write_text(json.dumps(card))
    ingest, judge_dir = ingest_and_judge(tmp_path)
    run_aggregate([judge_dir], tmp_path / "agg", AggregateConfig())
    run_report(ingest, [judge_dir], tmp_path / "agg", tmp_path / "rep",
               ReportConfig(bootstrap=20, registry=None, human_criterion=criterion,
                            params=str(tmp_path / "none.yaml")))
    return ((tmp_path / "rep" / "report.md").read_text(),
            (tmp_path / "rep" / "report.html").read_text())


def test_a_criterion_no_label_has_names_the_label_keys_found(tmp_path: Path) -> None:
    md, html = _own_report(tmp_path, "overall")
    headline = md.split("## Headline", 1)[1].split("##", 1)[0]
    assert "No judge scored at least 3 items with human labels." in headline
    # One line naming the criterion asked for and the keys the items carry.
    note = next(line for line in headline.splitlines() if "No judge scored" in line)
    assert "'overall'" in note and "rating" in note and "human_criterion" in note
    assert "No label is named" in html and "are: rating" in html


def test_a_close_criterion_gets_a_did_you_mean(tmp_path: Path) -> None:
    from capjudge.report.dataset import label_key_note

    assert label_key_note("rating", ["fluency", "rating"]) is None
    assert "Did you mean 'rating'?" in (label_key_note("ratings", ["fluency", "rating"]) or "")
    assert "Did you mean" not in (label_key_note("overall", ["rating"]) or "")
    assert "no human labels" in (label_key_note("overall", []) or "")


def test_the_protocol_line_describes_the_users_data_not_the_sample(tmp_path: Path) -> None:
    md, html = _own_report(tmp_path, "rating")
    line = next(x for x in md.splitlines() if x.startswith("Protocol:"))
    assert "sample" not in line and "generator" not in line
    assert "my.jsonl" in line and "4 items" in line and "2 systems" in line
    assert "4 labelled `rating`" in line and "manifest-labels" in line
    assert "generator" not in html.split("<h2>", 1)[0]
    # The protocol recorded with the numbers is the data's too, not the sample's.
    con = duckdb.connect(str(tmp_path / "rep" / "capjudge.duckdb"), read_only=True)
    protocols = {r[0] for r in con.execute("select distinct protocol from agreement").fetchall()}
    con.close()
    assert protocols == {"manifest-labels"}


def test_a_dataset_card_names_the_protocol_and_provenance(tmp_path: Path) -> None:
    card = {"name": "my captions v1", "protocol": "crowd-3",
            "description": "three crowd raters per caption, 1-5"}
    md, _ = _own_report(tmp_path, "rating", card)
    line = next(x for x in md.splitlines() if x.startswith("Protocol:"))
    assert line.startswith("Protocol: crowd-3: three crowd raters per caption, 1-5.")
    assert "my captions v1" in line and "4 items" in line


def test_the_sample_carries_its_provenance_as_a_dataset_card(sample_dir: Path) -> None:
    from capjudge.manifest import read_dataset_card
    from capjudge.report import SAMPLE_PROTOCOL

    card = read_dataset_card(sample_dir / "manifest.jsonl")
    assert card["protocol"] == "sample-gold"
    assert SAMPLE_PROTOCOL == f"{card['protocol']}: {card['description']}"
    assert "generator" in card["description"]


def test_a_broken_dataset_card_is_refused_naming_the_file(tmp_path: Path) -> None:
    from tiny_project import write_manifest

    from capjudge.ingest import ingest
    from capjudge.manifest import ManifestError

    manifest = write_manifest(tmp_path)
    (tmp_path / "my.dataset.json").write_text('{"protocol": "x", "provenence": "typo"}')
    with pytest.raises(ManifestError, match=r"my\.dataset\.json: unknown dataset card key"):
        ingest(manifest, tmp_path / "media", tmp_path / "ingest")
