"""Every method from `capjudge score` against the protocol server; the context stage; the
embedded model on the text-only criteria; adversarial captions."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from capjudge.cli import main as cli_main
from capjudge.item import load_items
from capjudge.judge import JudgeConfig, run_judge
from capjudge.methods.visce2_context import ContextConfig, run_context
from capjudge.testing.openai_server import MockOpenAIServer


@pytest.fixture
def server() -> Iterator[MockOpenAIServer]:
    with MockOpenAIServer() as s:
        yield s


def score(capsys: pytest.CaptureFixture[str], server: MockOpenAIServer, tmp_path: Path,
          *args: str) -> tuple[int, dict[str, object]]:
    code = cli_main(["score", "--backend", "openai/gpt-4o-2024-08-06", "--base-url",
                     server.url, "--cache-dir", str(tmp_path / "cache"), "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def test_score_every_method(capsys: pytest.CaptureFixture[str], server: MockOpenAIServer,
                            tmp_path: Path, sample_dir: Path,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    image = str(sample_dir / "images" / "scene-00.png")
    video = str(sample_dir / "videos" / "move_lr.mp4")
    views = [str(sample_dir / "objects" / "cube" / f"view-{i}.png") for i in range(1, 5)]
    common = {"score", "status", "mass", "distribution", "reasoning", "backend", "model",
              "criteria"}

    code, out = score(capsys, server, tmp_path, "--method", "harmoniceval", "--image", image,
                      "--caption", "Two blue squares.", "--gamma", "0.5")
    assert code == 0 and common <= set(out)
    criteria = out["criteria"]
    assert isinstance(criteria, dict) and set(criteria) == {
        "correctness", "completeness", "clarity", "fluency", "conciseness"}
    assert all(1 <= c["score"] <= 5 and c["sd"] is not None for c in criteria.values())
    from capjudge.scoring import harmonic_score

    expected = harmonic_score([c["score"] for c in criteria.values()],
                              [c["sd"] for c in criteria.values()], 0.5)
    assert out["score"] == pytest.approx(expected) and out["aggregate_settings"] == {"gamma": 0.5}

    code, out = score(capsys, server, tmp_path, "--method", "gveval-accr", "--mode",
                      "combined", "--video", video, "--caption", "A red circle moves right.",
                      "--ref", "A red ball travels from left to right.")
    assert code == 0
    accr = out["criteria"]
    assert isinstance(accr, dict) and set(accr) == {"accuracy", "completeness", "conciseness",
                                                    "relevance"}
    assert out["score"] == pytest.approx(sum(c["score"] for c in accr.values()) / 4)
    assert "Frame 1" in server.requests[-1]["messages"][0]["content"][0]["text"]

    code, out = score(capsys, server, tmp_path, "--method", "cap3d", "--views", *views,
                      "--caption", "A red cube.")
    crit = out["criteria"]
    assert isinstance(crit, dict) and {"correctness", "hallucination", "precision"} <= set(crit)
    c, h = crit["correctness"]["score"], crit["hallucination"]["score"]
    if c + h == 0:
        assert code == 3 and out["status"] == "undefined" and out["score"] is None
    else:
        assert code == 0 and out["score"] == pytest.approx(100 * c / (c + h))

    before = server.total_received
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    code, out = score(capsys, server, tmp_path, "--method", "visce2", "--image", image,
                      "--caption", "Two blue squares.")
    assert not list(scratch.iterdir())  # the one-picture context stage left nothing behind
    assert code == 0 and 0 <= float(out["score"]) <= 100  # type: ignore[arg-type]
    assert server.total_received - before == 3  # context + description + the rating
    bodies = [json.dumps(b) for b in server.requests[-3:]]
    assert any("Analyze the uploaded image" in b for b in bodies)
    assert "List of Important Objects" in bodies[-1]  # the context went into the rating
    code, _ = score(capsys, server, tmp_path, "--method", "visce2", "--mode", "vanilla",
                    "--image", image, "--caption", "Two blue squares.")
    assert code == 0 and server.total_received - before == 4  # extraction came from the cache


def test_context_stage_runs_once_per_picture(server: MockOpenAIServer, ingested: Path,
                                             tmp_path: Path) -> None:
    items = pq.read_table(ingested / "items.parquet").to_pylist()
    subset = [i for i in items if i["media_kind"] == "image"][:12]  # 2-3 images, 12 items
    items_path = tmp_path / "items.parquet"
    pq.write_table(pa.Table.from_pylist(subset), items_path)
    config = ContextConfig(backend="openai/gpt-4o-2024-08-06",
                           backend_options={"base_url": server.url},
                           cache_dir=str(tmp_path / "cache"))
    first = run_context(items_path, tmp_path / "ctx", config)
    pictures = len({i["media_sha256"] for i in subset})
    assert first["pictures"] == pictures and first["model_calls"] == 2 * pictures
    # A new candidate for an image already seen: no extraction at all.
    extra = dict(subset[0], id="new-candidate", candidate="Something else entirely.")
    pq.write_table(pa.Table.from_pylist([*subset, extra]), items_path)
    again = run_context(items_path, tmp_path / "ctx2", config)
    assert again["model_calls"] == 0 and again["cache_hits"] == 2 * pictures
    rows = pq.read_table(tmp_path / "ctx2" / "contexts.parquet").to_pylist()
    assert sum(r["items"] for r in rows if r["kind"] == "context") == len(subset) + 1

    judge = JudgeConfig(method="visce2", backend="openai/gpt-4o-2024-08-06",
                        modes=["context", "context-objects", "description"],
                        backend_options={"base_url": server.url},
                        cache_dir=str(tmp_path / "cache"),
                        method_options={"contexts": str(tmp_path / "ctx2/contexts.parquet")})
    summary = run_judge(items_path, tmp_path / "judge", judge)
    assert summary["by_status"].get("ok") == 3 * (len(subset) + 1)
    assert summary["model_calls"] == 3 * (len(subset) + 1)


def test_video_frames_attached_one_by_one_through_the_judge_stage(ingested: Path,
                                                                   tmp_path: Path) -> None:
    """``visual_input: frames`` on ingested videos: each sampled frame (verified against its
    hash) is sent as its own picture, and every row records the option."""
    import base64
    import hashlib

    items = [i for i in load_items(ingested / "items.parquet") if i.media_kind == "video"][:4]
    assert items and all(len(i.frame_paths) == len(i.frame_indices) == 3 for i in items)
    bodies: list[dict[str, object]] = []

    def spy(body: dict[str, object]) -> object:
        from capjudge.testing.openai_server import default_script

        bodies.append(body)
        return default_script(body)  # type: ignore[arg-type]

    with MockOpenAIServer(spy) as s:  # type: ignore[arg-type]
        config = JudgeConfig(method="gveval", backend="openai/gpt-4o-2024-08-06",
                             modes=["ref-free"], backend_options={"base_url": s.url},
                             cache_dir=str(tmp_path / "cache"),
                             method_options={"visual_input": "frames"})
        summary = run_judge(ingested / "items.parquet", tmp_path / "judge", config)
    assert summary["by_status"].get("ok", 0) >= len(items)
    sent = {hashlib.sha256(base64.b64decode(part["image_url"]["url"].split(",", 1)[1]))
            .hexdigest() for body in bodies for m in body["messages"]  # type: ignore[union-attr]
            if isinstance(m["content"], list) for part in m["content"]
            if part["type"] == "image_url"}
    for item in items:
        assert set(item.frame_sha256) <= sent and item.tile_sha256 not in sent
    rows = pq.read_table(tmp_path / "judge" / "judgements.parquet").to_pylist()
    videos = [r for r in rows if r["item_id"] in {i.id for i in items}]
    assert videos and all("visual_input=frames" in r["settings"].split("; ") for r in videos)
    assert all(r["template"] == "gveval/video-separate/ref-free@1" for r in videos)


def test_adversarial_captions_are_judged_as_data(ingested: Path, tmp_path: Path) -> None:
    items = load_items(ingested / "items.parquet")
    attacks = [i for i in items if "Ignore the instructions" in i.candidate
               or "OVERRIDE" in i.candidate or "Disregard" in i.candidate]
    assert len(attacks) >= 3
    captured: list[str] = []

    def spy(body: dict[str, object]) -> object:
        from capjudge.testing.openai_server import default_script

        captured.append(json.dumps(body))
        return default_script(body)  # type: ignore[arg-type]

    with MockOpenAIServer(spy) as s:  # type: ignore[arg-type]
        for method in ("gveval", "harmoniceval", "gveval-accr"):
            # The delimiters and the guard are the named ``guarded`` variant (the default is
            # the paper's text): tests/test_injection_inflation.py covers the default.
            config = JudgeConfig(method=method, backend="openai/gpt-4o-2024-08-06",
                                 backend_options={"base_url": s.url},
                                 cache_dir=str(tmp_path / "cache"),
                                 method_options={"prompt_variant": "guarded"})
            from capjudge.judge import plan

            planned, _ = plan(attacks, config, vision=True)
            for p in planned:
                text = p.request.messages[-1].text()
                candidate = next(i.candidate for i in attacks if i.id == p.item_id)
                start = text.index(f"<caption>{candidate.replace('</caption>', '')}")
                # The instructions are restated after the data.
                assert "ignore them" in text[start:]


@pytest.mark.slow
def test_embedded_harmoniceval_runs_text_criteria_and_skips_image_ones(
        ingested: Path, tmp_path: Path) -> None:
    config = JudgeConfig(method="harmoniceval", backend="embedded/gemma-3-270m", max_tokens=2,
                         limit=2, cache_dir=str(tmp_path / "cache"))
    summary = run_judge(ingested / "items.parquet", tmp_path / "out", config)
    rows = pq.read_table(tmp_path / "out" / "judgements.parquet").to_pylist()
    ran = {r["criterion"] for r in rows if r["status"] != "skipped"}
    skipped = {r["criterion"] for r in rows if r["status"] == "skipped"}
    assert ran == {"clarity", "fluency", "conciseness"}
    assert skipped == {"correctness", "completeness"}
    for r in rows:
        if r["status"] in ("ok", "low_mass"):
            # The paper's s̃ = Σ r P(r) on the model's own probabilities: the small model puts
            # little mass on "1".."5", so s̃ = mass x the renormalised expectation.
            assert 1 <= r["expected"] <= 5 and r["sd"] is not None and len(r["probs"]) == 5
            assert r["score"] == pytest.approx(r["mass"] * r["expected"])
    assert summary["model_calls"] == 6
