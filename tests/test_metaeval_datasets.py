"""Meta-eval dataset loaders on files in the published shape, the registry, the EMScore protocol.

The published files are not shipped (licences), so each test writes a small file in exactly the
shape its authors published (nested strings included) and checks what the loader makes of it,
and that malformed input is a DatasetError naming the file and the entry.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from capjudge.metaeval import arrange, correlate, run_meta_eval
from capjudge.metaeval.baselines import baseline_scores
from capjudge.metaeval.datasets import (
    DATASET_REGISTRY,
    LOADERS,
    Candidate,
    DatasetError,
    MetaDataset,
    dataset_names,
    get_dataset,
    load,
    register_dataset,
    unregister_dataset,
)
from capjudge.metaeval.datasets.loaders.vatex_eval import load_vatex_eval
from capjudge.metaeval.protocols import (
    Protocol,
    get_protocol,
    protocol_names,
    register_protocol,
    unregister_protocol,
)

# The built-in datasets are the modules of metaeval/datasets/loaders/: every test over "every
# dataset" takes them from the registry, so a new module is covered without editing this file.
BUILTIN = [n for n in dataset_names() if DATASET_REGISTRY.is_builtin(n)]


def _write(path: Path, obj: Any) -> Path:
    path.write_text(json.dumps(obj, indent=2))
    return path


# --- VATEX-EVAL ------------------------------------------------------------------------------

def _vatex_entry(vid: str, seed: int) -> dict[str, Any]:
    """One video of vid_cans_score_dict.json as published: refs nested, scores a string."""
    rng = np.random.default_rng(seed)
    ratings = rng.integers(1, 6, size=(6, 3)).tolist()
    return {"vid": vid,
            "cands": [f"a person {w} in video {vid}" for w in
                      ("runs", "cooks food", "plays a guitar", "dances", "swims", "talks")],
            "refs": [[f"reference {r} of {vid}: a person cooks food" for r in range(9)]],
            "scores": str(ratings)}


@pytest.fixture
def vatex_file(tmp_path: Path) -> Path:
    data = {f"vid{i}": _vatex_entry(f"vid{i}", i) for i in range(5)}
    return _write(tmp_path / "vid_cans_score_dict.json", data)


def test_vatex_reads_the_published_form(vatex_file: Path) -> None:
    raw = json.loads(vatex_file.read_text())
    assert isinstance(raw["vid0"]["scores"], str)  # the shape that used to fail
    data = load("vatex-eval", vatex_file)
    assert len(data.candidates) == 30
    first = data.candidates[0]
    assert first.ratings["overall"] == [float(v) for v in eval(raw["vid0"]["scores"])[0]]
    assert len(first.references) == 9 and first.references[0].startswith("reference 0 of vid0")
    assert first.group == "vid0" and first.key == "vid0#0"
    assert data.has_references


def test_vatex_tolerates_plain_refs_list_scores_and_numpy_repr(tmp_path: Path) -> None:
    rows = [[3, 4, 3], [2, 2, 1], [5, 5, 4]]
    cands = ["a man cooks", "a dog runs", "a child sings"]
    refs = ["a man is cooking food"] * 9
    variants = {
        "list": {"cands": cands, "refs": refs, "scores": rows},
        "nested": {"cands": cands, "refs": [refs], "scores": json.dumps(rows)},
        "numpy": {"cands": cands, "refs": [refs], "scores": "[[3 4 3]\n [2 2 1]\n [5 5 4]]"},
        "floats": {"cands": cands, "refs": [refs], "scores": "[[3.0, 4.0, 3.0], [2.0, 2.0, "
                                                             "1.0], [5.0, 5.0, 4.0]]"},
    }
    for name, entry in variants.items():
        data = load("vatex-eval", _write(tmp_path / f"{name}.json", {"v": entry}))
        assert [c.ratings["overall"] for c in data.candidates] == rows, name
        assert data.candidates[0].references == refs, name


@pytest.mark.parametrize(("change", "message"), [
    ({"scores": "[[3, 4, 3], [2, 2"}, "scores does not parse"),
    ({"scores": "three, four"}, "scores does not parse"),
    ({"scores": str([[3, 4, 3]] * 5)}, "scores has 5 rows for 6 cands"),
    ({"scores": str([[3, 4]] * 6)}, "2 ratings, expected 3"),
    ({"scores": str([[3, 4, 7]] * 6)}, "rating 7 is outside [1, 5]"),
    ({"scores": str([["x", 4, 3]] * 6)}, "rating is not a number"),
    ({"scores": "[3, 4, 3]"}, "scores must be a list of rating lists"),
    ({"cands": ["a", 3, "b", "c", "d", "e"]}, "cands must be a list of strings"),
    ({"refs": [["a"] * 9, ["b"] * 9]}, "2 different reference lists"),
    ({"refs": []}, "refs has 0 entries"),
    ({"scores": None}, "scores must be a list"),
])
def test_vatex_bad_entries_name_file_and_video(tmp_path: Path, change: dict[str, Any],
                                               message: str) -> None:
    entry = _vatex_entry("vid7", 7)
    entry.update(change)
    path = _write(tmp_path / "vid_cans_score_dict.json", {"vid0": _vatex_entry("vid0", 0),
                                                          "vid7": entry})
    with pytest.raises(DatasetError) as info:
        load("vatex-eval", path)
    text = str(info.value)
    assert str(path) in text and "video 'vid7'" in text and message in text


def test_vatex_missing_key_and_malformed_file(tmp_path: Path) -> None:
    entry = _vatex_entry("vid3", 3)
    del entry["scores"]
    path = _write(tmp_path / "a.json", {"vid3": entry})
    with pytest.raises(DatasetError, match=r"video 'vid3': missing key 'scores'"):
        load("vatex-eval", path)
    broken = tmp_path / "b.json"
    broken.write_text('{"vid0": {"cands": ["a"], ')
    with pytest.raises(DatasetError, match="not valid JSON"):
        load("vatex-eval", broken)
    with pytest.raises(DatasetError, match="not in the vatex-eval format"):
        load("vatex-eval", _write(tmp_path / "c.json", [1, 2]))


# --- The EMScore protocol --------------------------------------------------------------------

def _candidates(ratings: Sequence[Sequence[float]]) -> list[Candidate]:
    return [Candidate(key=str(i), candidate=f"c{i}", references=["r"],
                      ratings={"overall": list(r)}) for i, r in enumerate(ratings)]


def test_emscore_per_annotator_tau_b_with_rounding_hand_computed() -> None:
    # The first two scores differ only in the 5th decimal: rounded to 4 decimals they tie.
    metric = [0.12341, 0.12344, 0.5, 0.9]
    per_annotator = [[1, 3, 1], [2, 1, 1], [3, 2, 4], [4, 4, 3]]  # rows: candidates
    proto = get_protocol("vatex-eval")
    assert proto.name == "vatex-eval-emscore" and proto.round_to == 4
    rows = arrange(_candidates(per_annotator), proto, "overall")
    out = correlate(metric, rows, proto, n_boot=0)
    # 6 pairs, the metric ties one of them (n1 = 1).
    # annotator 1 (1,2,3,4): C=5, D=0, no rating ties   -> 5 / sqrt(5 * 6)
    # annotator 2 (3,1,2,4): C=4, D=1                   -> 3 / sqrt(5 * 6)
    # annotator 3 (1,1,4,3): C=4, D=1, one rating tie   -> 3 / sqrt(5 * 5)
    expected = [5 / math.sqrt(30), 3 / math.sqrt(30), 3 / 5]
    assert out["kendall_tau_b_per_annotator"] == pytest.approx(expected)
    assert out["kendall_tau_b"] == pytest.approx(sum(expected) / 3)
    human = np.array(per_annotator, float)
    rounded = np.around(metric, 4)
    assert out["kendall_tau_b"] == pytest.approx(np.mean(
        [stats.kendalltau(rounded, human[:, k]).statistic for k in range(3)]))
    assert out["spearman"] == pytest.approx(np.mean(
        [stats.spearmanr(rounded, human[:, k]).statistic for k in range(3)]))
    assert out["n_candidates"] == 4 and out["annotators"] == 3 and out["n"] == 12
    # Without the rounding annotator 1 agrees perfectly: the rounding is what made the tie.
    unrounded = correlate(metric, rows, Protocol("x", "vatex-eval", "per-annotator"), n_boot=0)
    assert unrounded["kendall_tau_b_per_annotator"][0] == pytest.approx(1.0)


def _overlap_scorer(calls: list[list[int]]) -> Callable[[Sequence[str], Sequence[Sequence[str]]],
                                                        list[float | None]]:
    """A toy reference-based metric that records how many references it was given."""
    def score(candidates: Sequence[str], references: Sequence[Sequence[str]]
              ) -> list[float | None]:
        calls.append([len(r) for r in references])
        return [_overlap(c, r) for c, r in zip(candidates, references, strict=True)]

    return score


def _overlap(candidate: str, refs: Sequence[str]) -> float:
    words = set(candidate.split())
    return float(np.mean([len(words & set(r.split())) / len(words) for r in refs]))


def test_vatex_default_protocol_reports_both_reference_settings(vatex_file: Path) -> None:
    calls: list[list[int]] = []
    result = run_meta_eval("vatex-eval", str(vatex_file), metrics=[],
                           judges={"toy": _overlap_scorer(calls)}, n_boot=0)
    assert result["protocol"] == "vatex-eval-emscore"
    assert "averaged over the 3 annotators" in result["protocol_description"]
    assert result["settings"] == {"1ref": 1, "9refs": 9}
    assert result["references_used"] == [1, 9]
    assert sorted(result["metrics"]) == ["toy@1ref", "toy@9refs"]
    assert [set(c) for c in calls] == [{1}, {9}]
    data = load("vatex-eval", vatex_file)
    human = np.array([c.ratings["overall"] for c in data.candidates])
    for label, n in (("1ref", 1), ("9refs", 9)):
        m = result["metrics"][f"toy@{label}"]
        assert m["references_used"] == n
        scores = np.around([_overlap(c.candidate, c.references[:n]) for c in data.candidates],
                           4)
        per = [stats.kendalltau(scores, human[:, k]).statistic for k in range(3)]
        assert m["kendall_tau_b_per_annotator"] == pytest.approx(per)
        assert m["kendall_tau_b"] == pytest.approx(np.mean(per))


def test_vatex_single_setting_protocols_and_refs_override(vatex_file: Path) -> None:
    for protocol, n in (("vatex-eval-1ref", 1), ("vatex-eval-9refs", 9)):
        calls: list[list[int]] = []
        result = run_meta_eval("vatex-eval", str(vatex_file), protocol=protocol, metrics=[],
                               judges={"toy": _overlap_scorer(calls)}, n_boot=0)
        assert list(result["metrics"]) == ["toy"] and result["references_used"] == n
        assert "settings" not in result and len(calls) == 1 and set(calls[0]) == {n}
    calls = []
    result = run_meta_eval("vatex-eval", str(vatex_file), metrics=[], refs=3,
                           judges={"toy": _overlap_scorer(calls)}, n_boot=0)
    assert list(result["metrics"]) == ["toy"] and len(calls) == 1 and set(calls[0]) == {3}


@pytest.mark.skipif(shutil.which("java") is None, reason="the baselines need Java")
def test_cli_meta_eval_vatex_on_the_published_form(vatex_file: Path, tmp_path: Path) -> None:
    from capjudge.cli import main as cli_main

    out = tmp_path / "vatex.json"
    code = cli_main(["meta-eval", "--dataset", "vatex-eval", "--path", str(vatex_file),
                     "--metrics", "bleu1", "--json", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    assert set(result["metrics"]) == {"bleu1@1ref", "bleu1@9refs"}
    assert all(-1 <= m["kendall_tau_b"] <= 1 for m in result["metrics"].values())


# --- Nebula, Polaris -------------------------------------------------------------------------

def _nebula_rows() -> list[dict[str, Any]]:
    return [
        {"imgid": "59cf362fd6a5ed162f0e46e580383b53",
         "mt": "a large group of people walking around in a city",
         "refs": ["a bunch of people are walking around outside",
                  "A crowd of people mill about on the street.  ",
                  "The crowds are gathering in the city plaza.",
                  "A crowd of people walking in a city.",
                  "Several people standing or walking on a sidewalk."],
         "score": 1.0},
        {"imgid": "7d7ad0b4d3d62b601638eb375228b7c8", "mt": "a bottle of milk",
         "refs": [f"A bottle of milk is sitting on table {i}." for i in range(10)],
         "score": 0.55},
        {"imgid": "eba7d980b7871d1978c215e7e84fbc2e", "mt": "man wearing a black dress",
         "refs": ["a boy jumping his skateboard over a red box"] * 5,
         "score": 0.2916666666666667},
    ]


def test_nebula_loader(tmp_path: Path) -> None:
    data = load("nebula", _write(tmp_path / "nebula_test.json", _nebula_rows()))
    assert [c.ratings["overall"] for c in data.candidates] == [[1.0], [0.55],
                                                               [0.2916666666666667]]
    assert data.candidates[0].references[1] == "A crowd of people mill about on the street."
    assert len(data.candidates[1].references) == 10  # the published file has such images
    assert data.candidates[0].image == "59cf362fd6a5ed162f0e46e580383b53"
    assert get_dataset("nebula").has_references and data.has_references
    assert get_protocol("nebula").name == "nebula"
    for change, message in (({"score": 1.5}, "score 1.5 is outside [0, 1]"),
                            ({"score": "high"}, "score is not a number"),
                            ({"refs": "['unterminated"}, "refs does not parse"),
                            ({"refs": None}, "refs must be a list of strings")):
        rows = _nebula_rows()
        rows[2].update(change)
        path = _write(tmp_path / "bad.json", rows)
        with pytest.raises(DatasetError) as info:
            load("nebula", path)
        assert str(path) in str(info.value) and "entry 2" in str(info.value)
        assert message in str(info.value)
    rows = _nebula_rows()
    del rows[1]["refs"]
    with pytest.raises(DatasetError, match="entry 1: missing key 'refs'"):
        load("nebula", _write(tmp_path / "bad.json", rows))


def _polaris_json_rows() -> list[dict[str, Any]]:
    return [
        {"id": "test_1", "imgid": "e00d9a3a68f914ca3f52c8f05c08b685",
         "mt": "a group of people sitting at tables under red umbrellas", "score": 0.78125,
         "count": 8, "explanation": {"fluency": "fluent", "relevance": "relevant",
                                     "descriptiveness": "basic"}},
        {"id": "test_2", "imgid": "3206f63b4bba1fe0d49ec1a2fdd58e35",
         "mt": "a bathroom with a tub and a toilet", "score": 0.75, "count": 6},
        {"id": "test_3", "imgid": "3206f63b4bba1fe0d49ec1a2fdd58e35",
         "mt": "a picture on the wall", "score": 0.0, "count": 1},
    ]


def test_polaris_json_is_reference_free(tmp_path: Path) -> None:
    path = _write(tmp_path / "polaris_test.json", _polaris_json_rows())
    data = load("polaris-json", path)
    assert [c.key for c in data.candidates] == ["test_1", "test_2", "test_3"]
    assert [c.ratings["overall"] for c in data.candidates] == [[0.78125], [0.75], [0.0]]
    assert not data.has_references and "no references" in data.notes
    spec = get_dataset("polaris-json")
    assert not spec.has_references and not spec.pairwise
    assert "reference-free metrics only" in get_protocol("polaris-json").description
    with pytest.raises(DatasetError) as info:
        run_meta_eval("polaris-json", str(path), metrics=["bleu4", "cider"], n_boot=0)
    text = str(info.value)
    assert "bleu4, cider need references" in text and "3 of 3" in text
    assert "Polaris JSON form" in text and "reference-free" in text
    # Reference-free judges are fine.
    result = run_meta_eval("polaris-json", str(path), metrics=[], n_boot=0,
                           judges={"len": lambda c, r: [float(len(x)) for x in c]})
    assert result["protocol"] == "polaris-json" and result["metrics"]["len"]["n"] == 3
    assert "no references" in result["notes"]
    # The baselines themselves refuse empty reference lists (before needing Java).
    with pytest.raises(ValueError, match="need references"):
        baseline_scores(["a cat"], [[]], ["bleu1"])
    # Loading the JSON form as the CSV dataset says which name to use.
    with pytest.raises(DatasetError, match="--dataset polaris-json"):
        load("polaris", path)
    bad = _polaris_json_rows()
    bad[1]["count"] = 2.5
    with pytest.raises(DatasetError, match=r"entry 1 \(id 'test_2'\): count must be a whole"):
        load("polaris-json", _write(tmp_path / "bad.json", bad))


def test_polaris_csv_groups_annotator_rows(tmp_path: Path) -> None:
    path = tmp_path / "polaris_test.csv"
    path.write_text(
        ",imgid,mt,refs,score\n"
        "0,img1,a dog runs on grass,\"['A dog running in a field.', \"\"A dog's run\"\"]\",0.75\n"
        "1,img1,a dog runs on grass,\"['A dog running in a field.', \"\"A dog's run\"\"]\",1.0\n"
        "2,img2,a cat,\"['A cat sleeping.']\",0.25\n")
    data = load("polaris", path)
    assert len(data.candidates) == 2
    assert data.candidates[0].ratings["overall"] == [0.75, 1.0]
    assert data.candidates[0].references == ["A dog running in a field.", "A dog's run"]
    assert data.candidates[1].ratings["overall"] == [0.25] and data.candidates[1].image == "img2"
    rows = arrange(data.candidates, get_protocol("polaris"), "overall")
    assert rows.human == [0.75, 1.0, 0.25]  # every annotator's rating a row
    path.write_text("imgid,mt,refs,score\nimg1,a dog,\"['unterminated\",0.5\n")
    with pytest.raises(DatasetError, match=r"line 2: refs does not parse"):
        load("polaris", path)
    path.write_text("imgid,caption,score\nimg1,a dog,0.5\n")
    with pytest.raises(DatasetError, match="lacks column"):
        load("polaris", path)


# --- Composite, FOIL -------------------------------------------------------------------------

def test_composite_fleur_form_has_no_references(tmp_path: Path) -> None:
    path = _write(tmp_path / "composite.json", {
        "flickr8k": [{"image": "Flickr8k_Dataset/1.jpg", "caption": "a dog", "human": 4},
                     {"image": "Flickr8k_Dataset/1.jpg", "caption": "a dog", "human": 5},
                     {"image": "Flickr8k_Dataset/2.jpg", "caption": "a cat", "human": 2}],
        "coco": [{"image": "val2014/COCO_val2014_000000000042.jpg", "caption": "a bus",
                  "human": 3}]})
    data = load("composite", path)
    assert [c.ratings["overall"] for c in data.candidates] == [[4, 5], [2], [3]]
    assert not data.has_references and not get_dataset("composite").has_references
    with pytest.raises(DatasetError, match="need references"):
        run_meta_eval("composite", str(path), metrics=["cider"], n_boot=0)
    bad = json.loads(path.read_text())
    del bad["coco"][0]["human"]
    with pytest.raises(DatasetError, match=r"'coco' row 0: missing key 'human'"):
        load("composite", _write(tmp_path / "bad.json", bad))


def _foil_file(tmp_path: Path) -> Path:
    return _write(tmp_path / "foilv1.0_test_2017.json", {
        "info": {}, "licenses": [],
        "images": [{"id": 42, "file_name": "COCO_val2014_000000000042.jpg"}],
        "annotations": [
            {"id": 7, "image_id": 42, "caption": "A cat sits on a mat.", "foil": False,
             "target_word": "cat", "foil_word": "cat"},
            {"id": 7, "image_id": 42, "caption": "A dog sits on a mat.", "foil": True,
             "target_word": "cat", "foil_word": "dog"},
            {"id": 7, "image_id": 42, "caption": "A bird sits on a mat.", "foil": True,
             "target_word": "cat", "foil_word": "bird"}]})


def test_foil_published_coco_form(tmp_path: Path) -> None:
    path = _foil_file(tmp_path)
    data = load("foil", path)
    assert [(p.a, p.b, p.prefers_a) for p in data.pairs] == [
        ("A cat sits on a mat.", "A dog sits on a mat.", True),
        ("A cat sits on a mat.", "A bird sits on a mat.", True)]
    assert data.pairs[0].image == "COCO_val2014_000000000042.jpg"
    assert not data.has_references and "captions_val2014.json" in data.notes
    _write(tmp_path / "captions_val2014.json", {"annotations": [
        {"image_id": 42, "id": 1, "caption": "A cat sits on a mat."},
        {"image_id": 42, "id": 2, "caption": "A cat is sitting on a rug."},
        {"image_id": 42, "id": 3, "caption": "A small cat on a mat."},
        {"image_id": 9, "id": 4, "caption": "Another image."}]})
    data = load("foil", path)
    # The original caption is one of the COCO captions: it is not a reference of itself.
    assert data.pairs[0].references == ["A cat is sitting on a rug.", "A small cat on a mat."]
    assert {get_protocol("foil", p).refs for p in protocol_names("foil")} == {None, 1, 4}
    raw = json.loads(path.read_text())
    raw["annotations"][1]["foil"] = False
    with pytest.raises(DatasetError, match=r"annotation id 7: 2 original captions"):
        load("foil", _write(tmp_path / "bad.json", raw))
    raw["annotations"][1]["foil"] = "yes"
    with pytest.raises(DatasetError, match=r"annotation 1 \(id 7\): foil must be true or false"):
        load("foil", _write(tmp_path / "bad.json", raw))


# --- Malformed input for every dataset -------------------------------------------------------

@pytest.mark.parametrize("name", sorted(BUILTIN))
@pytest.mark.parametrize("content", ['{"broken": [1, 2', "[]", "{}", '[{"x": 1}]', '"text"',
                                     "null"])
def test_every_loader_rejects_malformed_files_clearly(tmp_path: Path, name: str,
                                                      content: str) -> None:
    path = tmp_path / "data.json"
    path.write_text(content)
    with pytest.raises(DatasetError) as info:
        load(name, path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(("name", "content", "message"), [
    ("flickr8k-expert", {"img1": {"ground_truth": ["a ref"], "human_judgement": [
        {"caption": "a dog", "rating": 5.0}]}}, "image 'img1', human_judgement 0: rating 5"),
    ("flickr8k-cf", {"img1": {"ground_truth": ["a ref"], "human_judgement": [
        {"rating": 0.5}]}}, "image 'img1', human_judgement 0: missing key 'caption'"),
    ("pascal50s", {"HC": [{"captions": ["a", "b"], "label": 2, "references": ["r"]}]},
     "HC entry 0: label must be 0 or 1"),
    ("pascal50s", {"HC": [{"captions": ["a"], "label": 0, "references": ["r"]}]},
     "HC entry 0: captions has 1 entries, expected 2"),
    ("msvd-eval", {"vid1301": {"ref": ["r"], "candidate": "c",
                               "human_score": [[4, 3, 4, 5]]}},
     "video 'vid1301', annotator 0: 4 values, expected 5"),
    ("msvd-eval", {"vid1301": {"ref": ["r"], "candidate": "c",
                               "human_score": "[[4, 3, 4, 5, 4.0], [4, 3"}},
     "video 'vid1301': human_score does not parse"),
])
def test_bad_entries_are_named(tmp_path: Path, name: str, content: Any, message: str) -> None:
    path = _write(tmp_path / "data.json", content)
    with pytest.raises(DatasetError) as info:
        load(name, path)
    assert str(path) in str(info.value) and message in str(info.value)


def test_jsonl_loaders_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "mscoco_THumB-1.0.jsonl"
    good = {"SYS": "Up-Down", "seg_id": "974", "hyp": "a cat", "P": 4.0, "R": 3.0,
            "human_score": 3.5}
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "P": "n/a"}) + "\n")
    with pytest.raises(DatasetError, match=r"line 2: P is not a number"):
        load("thumb", path)
    path.write_text(json.dumps(good) + "\n{oops\n")
    with pytest.raises(DatasetError, match=r"line 2: not valid JSON"):
        load("thumb", path)
    path.write_text(json.dumps(good) + "\n")
    data = load("thumb", path)
    assert not data.has_references and "no references file" in data.notes
    mmhe = tmp_path / "mmhe.jsonl"
    mmhe.write_text(json.dumps({"id": 1, "candidate": "a cat", "scores": {"correctness": []}}))
    with pytest.raises(DatasetError, match=r"line 1: scores\['correctness'\] must be"):
        load("mmhe", mmhe)


# --- The registry ----------------------------------------------------------------------------

def test_registry_lists_every_dataset_with_a_consistent_default_protocol() -> None:
    assert {"flickr8k-expert", "vatex-eval", "pascal50s", "mmhe"} <= set(BUILTIN)
    assert len(BUILTIN) >= 12
    assert dataset_names() == sorted(dataset_names())
    for name in dataset_names():
        spec = get_dataset(name)
        protocol = get_protocol(name)
        assert protocol.name == spec.default_protocol and protocol.dataset == name
        assert protocol.pairwise == spec.pairwise, name
        assert protocol.description, name
    assert get_protocol("vatex-eval").name == "vatex-eval-emscore"
    assert {"vatex-eval-1ref", "vatex-eval-9refs"} <= set(protocol_names("vatex-eval"))
    assert LOADERS["vatex-eval"] is load_vatex_eval and "foil" in LOADERS
    with pytest.raises(DatasetError, match="unknown dataset 'nope'; known: composite"):
        load("nope", "x.json")
    with pytest.raises(KeyError):
        get_protocol("nope")
    with pytest.raises(ValueError, match="already registered"):
        register_dataset("vatex-eval", load_vatex_eval)


def test_each_loader_module_declares_its_own_spec_and_listing_imports_none() -> None:
    import importlib
    import subprocess

    for name in BUILTIN:
        module = importlib.import_module("capjudge.metaeval.datasets.loaders."
                                         + name.replace("-", "_"))
        spec = module.SPEC
        assert spec.name == name and get_dataset(name) is spec
        assert spec.default_protocol in {p.name for p in spec.protocols}, name
        assert all(p.dataset == name for p in spec.protocols), name
        assert spec.file and spec.description, name
    code = ("import sys; from capjudge.metaeval.datasets import dataset_names; "
            "names = dataset_names(); "
            "print(len(names), [m for m in sys.modules if '.datasets.loaders.' in m])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split(" ", 1)
    assert int(out[0]) >= 12 and out[1].strip() == "[]"


def test_register_a_dataset_from_outside(tmp_path: Path) -> None:
    @register_dataset("toy-set", default_protocol="toy-set-mean", has_references=False,
                      file="toy.json")
    def load_toy(path: Path) -> MetaDataset:
        rows = json.loads(path.read_text())
        return MetaDataset("toy-set", candidates=_candidates(rows))

    register_protocol(Protocol("toy-set-mean", "toy-set", "mean", headline="pearson",
                               description="annotators averaged"))
    try:
        assert "toy-set" in dataset_names() and not get_dataset("toy-set").has_references
        path = _write(tmp_path / "toy.json", [[1, 2], [3, 4], [5, 5]])
        result = run_meta_eval("toy-set", str(path), metrics=[], n_boot=0,
                               judges={"id": lambda c, r: [float(x[1:]) for x in c]})
        assert result["protocol"] == "toy-set-mean" and result["n_rows"] == 3
        assert result["metrics"]["id"]["pearson"] == pytest.approx(
            stats.pearsonr([0, 1, 2], [1.5, 3.5, 5]).statistic)
    finally:
        unregister_dataset("toy-set")
        unregister_protocol("toy-set-mean")
    assert "toy-set" not in dataset_names()


def test_lazy_registration_imports_the_loader_only_when_loading(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    module = tmp_path / "capjudge_toy_plugin.py"
    module.write_text(
        "from capjudge.metaeval.datasets import Candidate, MetaDataset\n"
        "def load(path):\n"
        "    return MetaDataset('lazy-toy', candidates=[Candidate('0', 'a', ['r'],"
        " {'overall': [1.0]})])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    register_dataset("lazy-toy", "capjudge_toy_plugin:load", default_protocol="polaris")
    try:
        assert "lazy-toy" in dataset_names()
        assert "capjudge_toy_plugin" not in sys.modules
        data = load("lazy-toy", _write(tmp_path / "x.json", {}))
        assert "capjudge_toy_plugin" in sys.modules and data.candidates[0].candidate == "a"
        register_dataset("lazy-missing", "capjudge_no_such_module:load")
        with pytest.raises(DatasetError, match="cannot import its loader"):
            load("lazy-missing", tmp_path / "x.json")
        with pytest.raises(ValueError, match="module:function"):
            register_dataset("lazy-bad", "no_colon_here")
    finally:
        unregister_dataset("lazy-toy")
        unregister_dataset("lazy-missing")
        sys.modules.pop("capjudge_toy_plugin", None)
