"""Meta-evaluation: protocols, loaders on made-up and real files, the judge as a metric.

The statistics themselves are tested in tests/test_stats.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capjudge.metaeval import run_meta_eval
from capjudge.metaeval.datasets import DatasetError, load
from capjudge.metaeval.protocols import get_protocol


def test_protocol_registry() -> None:
    assert get_protocol("flickr8k-expert").name == "flickr8k-expert-rows"
    assert get_protocol("flickr8k-expert", "flickr8k-expert-mean").rows == "mean"
    vatex = get_protocol("vatex-eval", "vatex-eval-1ref")
    assert vatex.refs == 1 and vatex.round_to == 4 and vatex.rows == "per-annotator"
    with pytest.raises(KeyError):
        get_protocol("thumb", "pascal50s")


def test_small_loaders_on_made_up_files(tmp_path: Path) -> None:
    vatex = tmp_path / "vid_cans_score_dict.json"
    vatex.write_text(json.dumps({"v1": {"cands": ["a man runs", "a dog"], "refs": ["a man "
                                 "running"] * 9, "scores": [[5, 4, 5], [1, 2, 1]]},
                                 "v2": {"cands": ["a car", "a red car drives"],
                                        "refs": ["a red car drives by"] * 9,
                                        "scores": [[2, 2, 3], [5, 4, 4]]}}))
    data = load("vatex-eval", vatex)
    assert len(data.candidates) == 4 and data.candidates[0].ratings["overall"] == [5, 4, 5]
    foil = tmp_path / "foil.json"
    foil.write_text(json.dumps([{"image": "x.jpg", "caption": "a cat on a mat",
                                 "foil": "a dog on a mat", "references": ["a cat on a mat"]}]))
    assert load("foil", foil).pairs[0].prefers_a
    polaris = tmp_path / "polaris.csv"
    polaris.write_text('mt,refs,score,img\n"a cat","[\'a cat sits\']",0.75,1.jpg\n')
    assert load("polaris", polaris).candidates[0].ratings["overall"] == [0.75]
    with pytest.raises(DatasetError, match="not in the foil format"):
        load("foil", vatex)
    with pytest.raises(DatasetError, match="not found"):
        load("thumb", tmp_path / "missing.jsonl")


def test_judge_as_a_metric_on_a_made_up_set(tmp_path: Path) -> None:
    from capjudge.metaeval import judge_scorer
    from capjudge.testing.openai_server import MockOpenAIServer

    path = tmp_path / "vid_cans_score_dict.json"
    path.write_text(json.dumps({f"v{i}": {"cands": [f"caption {i} a", f"caption {i} b"],
                                          "refs": [f"reference {i}"] * 9,
                                          "scores": [[i % 5 + 1] * 3, [(i + 2) % 5 + 1] * 3]}
                                for i in range(6)}))
    with MockOpenAIServer() as server:
        scorer = judge_scorer("gveval", "ref-only", "openai/gpt-4o-2024-08-06",
                              {"base_url": server.url}, str(tmp_path / "cache"))
        result = run_meta_eval("vatex-eval", str(path), protocol="vatex-eval-1ref", metrics=[],
                               judges={"gveval:ref-only": scorer}, n_boot=0)
        assert server.total_received == 12
    m = result["metrics"]["gveval:ref-only"]
    assert result["protocol"] == "vatex-eval-1ref" and result["references_used"] == 1
    assert len(m["kendall_tau_b_per_annotator"]) == 3 and -1 <= m["kendall_tau_b"] <= 1


@pytest.mark.shared
def test_loaders_on_the_real_files(shared_dir: Path) -> None:
    d = shared_dir / "datasets"
    flickr = load("flickr8k-expert", d / "flickr8k_expert" / "flickr8k.json")
    assert len(flickr.candidates) == 5664
    assert sum(len(c.ratings["overall"]) for c in flickr.candidates) == 16992
    thumb = load("thumb", d / "thumb" / "mscoco_mscoco_THumB-1.0.jsonl")
    assert len(thumb.candidates) == 2500 and all(len(c.references) == 4
                                                 for c in thumb.candidates)
    assert {c.system for c in thumb.candidates} >= {"Human", "Up-Down"}
    pascal = load("pascal50s", d / "pascal50s" / "pascal_50s.json")
    assert len(pascal.pairs) == 4000 and {p.category for p in pascal.pairs} == {
        "HC", "HI", "HM", "MM"}
    msvd = load("msvd-eval", d / "msvd_eval" / "MSVD-Eval.json")
    assert len(msvd.candidates) == 197
    assert sum(len(c.ratings["overall"]) for c in msvd.candidates) == 394


@pytest.mark.heavy(seconds=43)
@pytest.mark.shared
@pytest.mark.slow
def test_meta_eval_reproduces_flickr8k_expert_baselines(shared_dir: Path, tmp_path: Path
                                                         ) -> None:
    from capjudge.cli import main as cli_main

    out = tmp_path / "f8k.json"
    path = shared_dir / "datasets" / "flickr8k_expert" / "flickr8k.json"
    code = cli_main(["meta-eval", "--dataset", "flickr8k-expert", "--path", str(path),
                     "--metrics", "bleu1,bleu4,meteor,rougeL,cider", "--bootstrap", "20",
                     "--json", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    assert result["protocol"] == "flickr8k-expert-rows"
    m = result["metrics"]
    published_c = {"bleu1": 32.3, "bleu4": 30.8, "rougeL": 32.3, "meteor": 41.8, "cider": 43.9}
    for name, value in published_c.items():
        assert 100 * m[name]["kendall_tau_c"] == pytest.approx(value, abs=0.1), name
        assert m[name]["n"] == 16992
        lo, hi = m[name]["ci95"]["kendall_tau_c"]
        assert lo < m[name]["kendall_tau_c"] < hi
    assert 100 * m["bleu4"]["kendall_tau_b"] == pytest.approx(30.6, abs=0.1)
    assert 100 * m["cider"]["kendall_tau_b"] == pytest.approx(43.6, abs=0.1)


@pytest.mark.shared
def test_pascal50s_accuracy_protocol(shared_dir: Path) -> None:
    result = run_meta_eval("pascal50s", str(shared_dir / "datasets/pascal50s/pascal_50s.json"),
                           metrics=["bleu1", "rougeL"], n_boot=0, limit=200)
    m = result["metrics"]["bleu1"]
    assert 0.3 < m["accuracy"] <= 1.0 and set(m["by_category"]) <= {"HC", "HI", "HM", "MM"}
    assert m["accuracy"] <= m["accuracy_ties_half"] <= m["accuracy_ties_correct"]
