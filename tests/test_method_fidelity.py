"""Fidelity to the papers and the official code: what the prompts say about the frames, what
is reconstructed or added, the ``gveval_code`` profile, a user's own template folder, and
the report saying when G-VEval's reasoning was cut."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from capjudge.item import Item
from capjudge.judge import JudgeConfig, apply_profile, method_options, summarise
from capjudge.methods import Method, MethodOptions, Planned, Skip, get_method
from capjudge.methods.gveval import GVEval, GVEvalACCR, frames_description
from capjudge.methods.harmoniceval import TASK_PHRASES
from capjudge.prompts import get_template, method_spec
from capjudge.protocol import ImagePart, JudgeResponse, SlotResult
from capjudge.records import ContextRow


def video(policy: str | None, indices: tuple[int, ...] = (0, 3, 6)) -> Item:
    return Item(id="v", media_kind="video", media_root="/m", media_path="a.mp4",
                media_sha256="a" * 64, tile_path="/t.png", tile_sha256="b" * 64,
                candidate="A ball rolls.", references=("A ball rolls left.",),
                frame_policy=policy, frame_indices=indices)


def planned(method: Method, item: Item, mode: str, options: MethodOptions) -> Planned:
    out = method.plan(item, mode, options)[0]
    assert isinstance(out, Planned), out
    return out


# --- video prompts name the frames the tile shows ----------------------------------------

def test_first_middle_last_tiles_keep_the_v1_prompts() -> None:
    p = planned(GVEval(), video("first_middle_last", (0, 5, 10)), "ref-free", MethodOptions())
    assert p.request.template == "gveval/video/ref-free@2"
    assert "(the first, the middle and the last frame)" in p.request.messages[-1].text()


@pytest.mark.parametrize("method", [GVEval(), GVEvalACCR()])
@pytest.mark.parametrize("mode", ["ref-free", "combined"])
def test_gveval_code_tiles_are_described_as_what_they_show(method: Method, mode: str) -> None:
    p = planned(method, video("gveval_code"), mode, MethodOptions())
    text = p.request.messages[-1].text()
    assert "frames" in p.request.template and p.request.template.endswith("@2")
    assert "the last frame is not shown" in text
    assert "the middle and the last frame" not in text
    assert "labelled Frame 1, Frame 2 and Frame 3" in text


def test_uniform_tiles_name_all_their_frames() -> None:
    item = video("uniform5", (0, 2, 5, 7, 9))
    text = planned(GVEval(), item, "combined", MethodOptions()).request.messages[-1].text()
    assert "five frames of the video (evenly spaced from the first to the last frame)" in text
    assert "Frame 1, Frame 2, Frame 3, Frame 4 and Frame 5" in text
    assert frames_description(video(None)) is None  # unknown policy: the v1 prompts


def test_reconstructed_prompts_are_marked() -> None:
    entries = {e["id"]: e for e in method_spec("gveval")["templates"]}
    for tid in ("gveval/video/ref-free", "gveval/video/combined", "gveval/accr/ref-only",
                "gveval/accr/ref-free", "gveval/accr/combined", "gveval/image/combined",
                "gveval/video-frames/ref-free", "gveval/accr-frames/combined"):
        assert entries[tid].get("reconstructed"), tid
    assert "reconstructed" not in entries["gveval/image/ref-only"]  # verbatim (appendix B.1)


# --- HarmonicEval: nothing the paper's prompt lacks, unless marked ------------------------

PAPER_CORRECTNESS = [  # harmoniceval.md, Appendix C.1, "Correctness (Crt)."
    "Your task is to rate the candidate caption for the given image on a scale of 1 to 5 on "
    "the following criterion and rating scale.",
    "Evaluation Criterion:",
    "- Correctness: How accurately does the caption describe the image?",
    "Rating Scale:",
    "- 1 Very Low Correctness: The caption is mostly or entirely incorrect; it fails to "
    "accurately describe the image or misses key elements.",
    "- 2 Low Correctness: The caption includes some correct information but misses major "
    "aspects or includes incorrect details.",
    "- 3 Moderate Correctness: The caption is generally accurate, capturing a basic "
    "understanding of the image but may omit some details or include minor inaccuracies.",
    "- 4 High Correctness: The caption is mostly accurate, including key elements and details "
    "of the image with minimal inaccuracies.",
    "- 5 Extremely High Correctness: The caption perfectly captures all relevant and "
    "discernible details of the image with complete accuracy.",
]


def test_harmoniceval_correctness_prompt_is_the_papers_plus_marked_additions() -> None:
    entry = next(e for e in method_spec("harmoniceval")["templates"]
                 if e["id"] == "harmoniceval/correctness")
    phrases = TASK_PHRASES["caption"]
    additions = {a.format(text=phrases["text"], candidate="A dog.", question="",
                          Question=phrases["question_label"]).strip()
                 for a in entry["additions"]}
    template = get_template("harmoniceval", "harmoniceval/correctness")
    image = ImagePart("/x.png", "c" * 64)
    messages = template.render(image=image, candidate="A dog.", t=phrases, question=None)
    lines = [line.strip() for line in messages[-1].text().splitlines() if line.strip()]
    extra = [line for line in lines if line not in PAPER_CORRECTNESS]
    assert extra and set(extra) <= additions, extra
    assert all(line in lines for line in PAPER_CORRECTNESS)
    # The paper's correctness prompt does not ask for the score first: only the marked
    # addition does.
    assert "Output the evaluation score first" not in " ".join(PAPER_CORRECTNESS)


def test_harmoniceval_correctness_matches_the_paper_file(shared_dir: Path) -> None:
    paper = (shared_dir / "papers" / "harmoniceval.md").read_text()
    for line in PAPER_CORRECTNESS:
        assert line in paper, line


# --- the gveval_code profile --------------------------------------------------------------

def test_gveval_code_profile_settings() -> None:
    config = JudgeConfig.from_params({"method": "gveval", "backend": "fake/hash+vision",
                                      "profile": "gveval_code"})
    assert config.temperature == 1.0 and config.top_logprobs == 5
    assert config.method_options == {"video_detail": "high", "frame_policy": "gveval_code",
                                     "profile": "gveval_code"}
    explicit = JudgeConfig.from_params({"method": "gveval", "backend": "fake/hash",
                                        "profile": "gveval_code", "top_logprobs": 20})
    assert explicit.top_logprobs == 20 and explicit.temperature == 1.0  # explicit wins
    with pytest.raises(ValueError, match="no profile"):
        apply_profile({"method": "harmoniceval"}, "gveval_code")


def test_gveval_code_profile_plans_high_detail_and_its_own_frames() -> None:
    config = JudgeConfig.from_params({"method": "gveval", "backend": "fake/hash+vision",
                                      "profile": "gveval_code"})
    options = method_options(config, get_method("gveval"), vision=True)
    p = planned(GVEval(), video("gveval_code"), "ref-free", options)
    assert p.request.decoding.temperature == 1.0 and p.request.decoding.top_logprobs == 5
    assert p.request.messages[-1].images[0].detail == "high"
    skipped = GVEval().plan(video("first_middle_last", (0, 5, 10)), "ref-free", options)[0]
    assert isinstance(skipped, Skip) and "--frame-policy gveval_code" in skipped.reason
    # Images keep the judge's detail; ref-only shows no frames at all.
    image = replace(video("gveval_code"), media_kind="image", judge_path="/i.png",
                    judge_sha256="d" * 64)
    assert planned(GVEval(), image, "ref-free", options).request.messages[-1].images[
        0].detail == "auto"
    assert isinstance(GVEval().plan(video(None), "ref-only", options)[0], Planned)


# --- a user's own template folder ---------------------------------------------------------

OFFICIAL_STYLE = """You will be given one sentence of visual caption generated from a video.
Evaluation Steps: look at the frames.
Generated Caption:
{{Caption}}
The final score is ${{score}}$."""


def user_folder(tmp_path: Path, body: str = OFFICIAL_STYLE) -> Path:
    folder = tmp_path / "official"
    folder.mkdir(exist_ok=True)
    (folder / "vid-ref-free.txt").write_text(body)
    (folder / "vid-accr.txt").write_text("Refs: {{Reference}}\nCaption: {{Caption}}\n"
                                         "Wrap Accuracy score in α ...")
    (folder / "templates.yaml").write_text(json.dumps({
        "method": "gveval",
        "templates": [
            {"id": "gveval/video/ref-free", "file": "vid-ref-free.txt", "needs": ["image"],
             "engine": "replace"},
            {"id": "gveval/accr/ref-only", "file": "vid-accr.txt", "needs": ["references"],
             "engine": "replace", "role": "system"}],
        "slots": [{"name": c, "label": f"{c.capitalize()} score is", "anchor": g}
                  for c, g in zip(("accuracy", "completeness", "conciseness", "relevance"),
                                  "αβψδ", strict=True)]}))
    return folder


def test_user_templates_run_exactly_those_files(tmp_path: Path) -> None:
    folder = user_folder(tmp_path)
    config = JudgeConfig.from_params({"method": "gveval", "backend": "fake/hash+vision",
                                      "templates": str(folder)})
    assert config.method_options["templates"] == str(folder)
    options = method_options(config, get_method("gveval"), vision=True)
    p = planned(GVEval(), video("gveval_code"), "ref-free", options)
    user = p.request.messages[-1]
    assert user.role == "user" and user.text() == OFFICIAL_STYLE.replace("{{Caption}}",
                                                                           "A ball rolls.")
    assert isinstance(user.parts[-1], ImagePart)  # the picture after the text
    assert p.request.template.startswith("gveval/video/ref-free@sha256-")
    # Versioned by content: other words, another version (and another cache key).
    other = planned(GVEval(), video("gveval_code"), "ref-free", method_options(
        JudgeConfig.from_params({"method": "gveval", "backend": "fake/hash+vision",
                                 "templates": str(user_folder(tmp_path, OFFICIAL_STYLE + " "))}),
        get_method("gveval"), vision=True))
    assert other.request.template != p.request.template
    # A mode the folder does not hold is a recorded skip, not the bundled prompt.
    from capjudge.judge import plan

    _, skips = plan([video("gveval_code")], replace(config, modes=["combined"]))
    assert skips and "has no template 'gveval/video/combined'" in skips[0].reason


def test_a_user_folder_with_frames_needs_a_prompt_written_for_them(tmp_path: Path) -> None:
    """``visual_input: frames`` never shows several pictures to a one-tile prompt.

    A folder without ``gveval/video-separate/<mode>``: the item is a recorded skip naming the
    template; one that has it (here the replace engine) gets every frame after its text.
    """
    from capjudge.judge import plan

    folder = user_folder(tmp_path)
    shots = tuple(f"/f{k}.png" for k in range(3))
    clip = replace(video("first_middle_last"), frame_paths=shots,
                   frame_sha256=tuple(str(k) * 64 for k in range(3)))
    config = JudgeConfig.from_params({"method": "gveval", "backend": "fake/hash+vision",
                                      "templates": str(folder), "modes": ["ref-free"],
                                      "method_options": {"visual_input": "frames"}})
    _, skips = plan([clip], config, vision=True)
    assert skips and "has no template 'gveval/video-separate/ref-free'" in skips[0].reason
    spec = json.loads((folder / "templates.yaml").read_text())
    spec["templates"].append({"id": "gveval/video-separate/ref-free", "file": "vid-ref-free.txt",
                              "needs": ["image"], "engine": "replace"})
    (folder / "templates.yaml").write_text(json.dumps(spec))
    planned_, skips = plan([clip], config, vision=True)
    assert not skips and [p.path for p in planned_[0].request.messages[-1].images] == list(shots)
    assert planned_[0].request.template.startswith("gveval/video-separate/ref-free@sha256-")


def test_user_slots_read_the_official_accr_format(tmp_path: Path) -> None:
    folder = user_folder(tmp_path)
    options = MethodOptions(extra={"templates": str(folder)})
    p = planned(GVEvalACCR(), video(None), "ref-only", options)
    assert p.request.messages[0].role == "system"  # text-only: as the official scorer sends
    assert "'A ball rolls left." in p.request.messages[0].text()  # its reference quoting
    text = ("Reasons. The Accuracy score is α80α. The Completeness score is β60β. "
            "The Conciseness score is ψ90ψ. The Relevance score is δ70δ.")
    from capjudge.reading.tokens import read_slot

    slots = [read_slot(None, text, s, 0.5) for s in p.request.slots]
    assert [s.printed for s in slots] == [80, 60, 90, 70]
    response = JudgeResponse("text_only", text=text, slots=slots)
    criteria = GVEvalACCR().interpret(p, response)
    assert GVEvalACCR().overall(criteria, {})[0] == pytest.approx(75.0)


# --- the report says when G-VEval's reasoning was cut -------------------------------------

def test_summary_says_when_reasoning_was_cut() -> None:
    from capjudge.client import ClientStats

    rows = {"status": ["ok", "ok", "skipped"], "mode": ["ref-only"] * 3,
            "reason": [None, None, "no vision"], "cost_usd": [None] * 3,
            "template": ["gveval/image/ref-only@1"] * 3, "completion_tokens": [24, 10, None]}
    config = JudgeConfig(method="gveval", backend="embedded/gemma-3-270m", max_tokens=24)
    summary = summarise(pa.table(rows), ClientStats(), config, {}, 0.0)
    assert summary["reasoning_cut"] == 1
    assert summary["notes"] and "'w/o reason in response' ablation (Table 6)" in \
        summary["notes"][0] and "1 of 2" in summary["notes"][0]
    score_first = summarise(pa.table(rows), ClientStats(), replace(
        config, method="harmoniceval"), {}, 0.0)
    assert score_first["reasoning_cut"] == 1 and score_first["notes"] == []
    assert SlotResult  # (imported for the type)


# --- every method's default prompt against the paper's text --------------------------------

def paper_text(shared_dir: Path, name: str) -> str:
    """A paper file, its line-break hyphenation joined and whitespace collapsed."""
    import re

    text = (shared_dir / "papers" / name).read_text(encoding="utf-8")
    text = re.sub(r"(\w)-\s*\n\s*(\w)", r"\1\2", text)
    return " ".join(text.replace("\u201c", '"').replace("\u201d", '"').split())


def rendered_lines(p: Planned) -> list[str]:
    return [" ".join(line.split()) for m in p.request.messages for line in m.text().splitlines()
            if line.strip()]


IMAGE_ITEM = Item(id="i", media_kind="image", media_root="/m", media_path="a.png",
                  media_sha256="a" * 64, judge_path="/j.png", judge_sha256="d" * 64,
                  candidate="CANDIDATE-TEXT", references=("REFERENCE-ONE", "REFERENCE-TWO"))


def test_visce2_default_prompts_are_table_4(shared_dir: Path) -> None:
    from capjudge.methods.visce2 import VisCE2

    paper = paper_text(shared_dir, "visce2.md")
    table = {kind: ContextRow(media_sha256="d" * 64, kind=kind, status="ok",
                              text="CONTEXT-TEXT") for kind in ("context", "description")}
    options = MethodOptions(extra={"context_table": {"d" * 64: table}})
    for mode in ("vanilla", "references", "description", "context"):
        p = planned(VisCE2(), IMAGE_ITEM, mode, options)
        assert isinstance(p.request.messages[-1].parts[0], ImagePart)  # the image first
        (line,) = rendered_lines(p)
        line = (line.replace("CANDIDATE-TEXT", "{caption}").replace("CONTEXT-TEXT", "{context}")
                .replace("REFERENCE-ONE REFERENCE-TWO", "{references}"))
        assert line in paper, (mode, line)


@pytest.mark.parametrize("mode", ["ref-only", "ref-free"])
def test_gveval_verbatim_prompts_are_appendix_b1(mode: str, shared_dir: Path) -> None:
    paper = paper_text(shared_dir, "gveval_appendix.md")
    p = planned(GVEval(), IMAGE_ITEM, mode, MethodOptions())
    spec = method_spec("gveval")
    additions = {a.split(" (")[0] for a in spec["additions"]}
    for line in rendered_lines(p):
        if line in additions or line.startswith(("CANDIDATE", "REFERENCE")):
            continue
        assert line.replace("{{score}}", "{{score}}") in paper, line
    assert "<caption>" not in " ".join(rendered_lines(p))


@pytest.mark.parametrize("mode", ["ref-only", "ref-free", "combined"])
def test_gveval_accr_default_has_no_guard(mode: str) -> None:
    # The paper prints no ACCR prompt (all reconstructed, marked in templates.yaml): the
    # default adds no tags and no guard sentence to it.
    text = " ".join(rendered_lines(planned(GVEvalACCR(), IMAGE_ITEM, mode, MethodOptions())))
    assert "<caption>" not in text and "data to be rated" not in text
    assert all(e.get("reconstructed") for e in method_spec("gveval")["templates"]
               if e["id"].startswith("gveval/accr"))


@pytest.mark.parametrize("criterion", ["correctness", "completeness", "clarity", "fluency",
                                       "conciseness"])
def test_harmoniceval_default_prompts_are_appendix_c1(criterion: str, shared_dir: Path) -> None:
    from capjudge.methods.harmoniceval import HarmonicEval

    paper = paper_text(shared_dir, "harmoniceval.md")
    options = MethodOptions(extra={"criteria": [criterion]})
    p = planned(HarmonicEval(), IMAGE_ITEM, "default", options)
    template = get_template("harmoniceval", f"harmoniceval/{criterion}")
    phrases = TASK_PHRASES["caption"]
    additions = {a.format(text=phrases["text"], candidate="CANDIDATE-TEXT", question="",
                          Question=phrases["question_label"]) for a in template.additions}
    extra = [line for line in rendered_lines(p) if line not in paper]
    assert extra and set(extra) <= additions, extra


def test_cap3d_default_prompt_is_the_papers(shared_dir: Path) -> None:
    from capjudge.methods.cap3d import Cap3D

    paper = paper_text(shared_dir, "caption3d_correctness_hallucination_prompt.md")
    item = replace(IMAGE_ITEM, media_kind="views", tile_path="/t.png", tile_sha256="b" * 64)
    p = planned(Cap3D(), item, "default", MethodOptions())
    template = get_template("cap3d", "cap3d/score")
    extra = [line for line in rendered_lines(p)
             if line.replace("CANDIDATE-TEXT", "[Insert caption here]") not in paper]
    assert set(extra) <= set(template.additions), extra
    assert 'Model-generated caption: "CANDIDATE-TEXT"' in rendered_lines(p)
