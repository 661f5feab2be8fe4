"""G-VEval (gveval.md): chain-of-thought, then "The final score is $N$" on 0-100.

The expected score comes from the score token's distribution. Reference-free, reference-only
and combined modes, for images and for videos (the 1536x512 Frame 1..3 tile made at ingest).

``gveval-accr`` asks for the four ACCR dimensions of §3.1 (accuracy, completeness, conciseness,
relevance), each written as ``Name: $N$`` on 0-100 (the paper's scoring setting) with its own
score position and distribution; the item's ACCR score is their mean.

Video prompts name the frames the tile really shows: the v1 video prompts say "the first, the
middle and the last frame" (the ``first_middle_last`` policy); tiles sampled otherwise
(``gveval_code``, ``uniformN``) get the ``gveval/video-frames/*`` (``gveval/accr-frames/*``)
prompts, which describe their frames.

Named option ``visual_input``: ``tile`` (the paper's, the default) or ``frames``, which attaches
the sampled frames one by one, each after its label (``gveval/video-separate/*``,
``gveval/accr-separate/*`` prompts), for judges that read several images or a video better
than one wide tile; recorded on every row like every named option.

Method options: ``media`` (media kinds to judge), ``templates`` (a user's template folder, see
:mod:`capjudge.prompts`; with ``visual_input: frames`` it must hold
``gveval/video-separate/<mode>``), ``video_detail`` (the image detail sent for video tiles, or
for each frame) and ``frame_policy`` (video items must have been sampled with it, else they
are skipped with the reason). The ``gveval_code`` profile (``judges.<name>.profile``) sets
what the G-VEval repository's scorer does: ``temperature: 1`` with ``top_logprobs: 5``, video
tiles at detail ``high``, frames at ``linspace(0, N-1, 4)[:3]`` (ingest with
``--frame-policy gveval_code``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

from capjudge.item import Item
from capjudge.methods.base import (
    AggregateOptions,
    Criterion,
    CriterionSpec,
    Method,
    MethodOptions,
    Planned,
    Profile,
    Scale,
    Skip,
    item_frames,
    item_image,
)
from capjudge.prompts import Template, get_template, method_spec, user_spec
from capjudge.protocol import ImagePart, JudgeRequest, ScoreSlot

MODES = ("ref-free", "ref-only", "combined")
ACCR = ("accuracy", "completeness", "conciseness", "relevance")


def score_slot() -> ScoreSlot:
    """The 0-100 ``$N$`` slot, from the method's templates.yaml."""
    scale = method_spec("gveval")["scale"]
    return ScoreSlot(name=scale["name"], low=int(scale["low"]), high=int(scale["high"]),
                     anchor=scale["anchor"], label=scale.get("label"),
                     forced_prefix=scale["forced_prefix"])


def accr_slots() -> tuple[ScoreSlot, ...]:
    """One labelled 0-100 slot per ACCR dimension."""
    return tuple(ScoreSlot(name=c, low=0, high=100, anchor="$", label=c.capitalize(),
                           forced_prefix=f"\n{c.capitalize()}: $") for c in ACCR)


def user_slots(folder: str | Path, default: tuple[ScoreSlot, ...]) -> tuple[ScoreSlot, ...]:
    """Where a user template folder's answers put their scores.

    That is the folder's ``slots`` (a list of ScoreSlot fields per criterion; ACCR's official
    prompts wrap each score in a Greek letter:
    ``{name: accuracy, label: "Accuracy score is", anchor: "α"}``) or ``scale`` (fields
    overriding the single default slot), else the bundled ones.
    """
    spec = user_spec(folder)
    # One folder may hold G-VEval's and ACCR's prompts: each takes the slots it declares.
    given = {e["name"]: e for e in spec.get("slots") or [] if isinstance(e, dict)}
    if any(s.name in given for s in default):
        return tuple(replace(s, **{k: v for k, v in given[s.name].items() if k != "name"})
                     if s.name in given else s for s in default)
    if spec.get("scale") and len(default) == 1:
        fields = {k: v for k, v in spec["scale"].items() if k != "name"}
        return (replace(default[0], **fields),)
    return default


def frames_description(item: Item, separate: bool = False) -> dict[str, object] | None:
    """What a video's frames are, for the prompt.

    The keys: ``count`` (in words), ``which``, ``labels`` (joined) and ``label_list``.

    Args:
        item: a video item.
        separate: the frames are attached one by one (``visual_input: frames``), whose prompts
            always describe them.

    Returns:
        None for a ``first_middle_last`` tile (and tiles whose policy is unknown), which the
        v1 prompts describe.
    """
    policy = item.frame_policy or "first_middle_last"
    if policy == "first_middle_last" and not separate:
        return None
    n = (len(item.frame_paths) if separate else 0) or len(item.frame_indices) or 3
    labels = [f"Frame {k + 1}" for k in range(n)]
    joined = labels[0] if n == 1 else ", ".join(labels[:-1]) + f" and {labels[-1]}"
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven",
             8: "eight", 9: "nine", 10: "ten"}
    if policy == "first_middle_last":
        which = "the first, the middle and the last frame"
    elif policy == "gveval_code":
        which = ("the first frame and the frames one third and two thirds of the way through "
                 "the clip; the last frame is not shown")
    elif policy.startswith("uniform"):
        which = ("the middle frame" if n == 1 else
                 "evenly spaced from the first to the last frame")
    else:
        which = f"sampled by the {policy!r} policy"
    return {"count": words.get(n, str(n)), "which": which, "labels": joined,
            "label_list": labels}


SCALE = Scale(0, 100, pass_mark=50)

PROFILES: dict[str, Profile] = {
    # What the G-VEval repository's scorer does (evaluation/gveval/scorer.py, utils.py):
    # temperature 1, top_logprobs 5, detail "high" for video, frames linspace(0, N-1, 4)[:3].
    "gveval_code": {"temperature": 1.0, "top_logprobs": 5,
                    "method_options": {"video_detail": "high", "frame_policy": "gveval_code"}},
}


def _plan_with(template: Template, item: Item, mode: str, options: MethodOptions,
               slots: tuple[ScoreSlot, ...], medium: str,
               frames: dict[str, object] | None = None,
               settings: tuple[tuple[str, str], ...] = (), separate: bool = False
               ) -> list[Planned | Skip]:
    """The request for one item and mode, or the recorded reason there is none.

    ``separate``: the video's frames are shown one by one, not its tile (``visual_input:
    frames``, with a template written for them).
    """
    if "references" in template.needs and not item.references:
        return [Skip(item.id, mode, "no reference captions (mode needs references)",
                     template.ref)]
    image: ImagePart | None = None
    shown: list[ImagePart] | None = None  # the frames, one by one (visual_input: frames)
    if "image" in template.needs:
        if not options.vision:
            return [Skip(item.id, mode, "backend has no vision input (mode needs the "
                         f"{'frames' if medium == 'video' else 'image'})", template.ref)]
        wanted = options.extra.get("frame_policy")
        if medium == "video" and wanted and (item.frame_policy or "") != wanted:
            return [Skip(item.id, mode, f"the judge needs frames sampled with the {wanted} "
                         f"policy (this tile: {item.frame_policy or 'unknown'}); ingest with "
                         f"--frame-policy {wanted}", template.ref)]
        detail = options.extra.get("video_detail") if medium == "video" else None
        if separate:
            try:
                shown = item_frames(item, detail or options.detail)
            except ValueError as exc:
                return [Skip(item.id, mode, f"visual_input: frames: {exc}", template.ref)]
        else:
            image = item_image(item, detail or options.detail)
    messages = template.render(image=image, images=shown, candidate=item.candidate,
                               references=list(item.references), medium=medium, frames=frames,
                               question=item.question)
    # What the judge may quote: masked before its verdict is located.
    quotes = (item.candidate, *item.references)
    request = JudgeRequest(messages=messages, slots=tuple(replace(s, quotes=quotes)
                                                          for s in slots),
                           decoding=options.decoding, template=template.ref,
                           tag=f"{item.id}|{mode}", quotes=quotes)
    return [Planned(item.id, mode, request, settings=settings)]


class GVEval(Method):
    """The G-VEval overall score.

    The method option ``media`` (e.g. ``[video]``) restricts a judge to some media kinds; other
    items are recorded as skipped.
    """

    name = "gveval"
    verdict_contract = "one closing sentence 'The final score is $N$', N an integer 0-100"
    modes = MODES
    default_modes = MODES
    criteria: ClassVar[tuple[CriterionSpec, ...]] = (
        CriterionSpec("score", SCALE, description="overall quality, 0-100"),)
    overall_scale = SCALE
    combination = "the expected score of the 0-100 distribution (eq. 1)"
    profiles = PROFILES
    # visual_input: how a video is shown. "tile" is the paper's (§3.5: the sampled frames
    # combined into one labelled image); "frames" attaches each frame on its own, for judges
    # that take several images (or a video) better than one wide picture.
    choices: ClassVar[dict[str, tuple[str, ...]]] = {
        "prompt_variant": ("paper", "guarded"), "visual_input": ("tile", "frames")}
    cut_reasoning = ("a score without its full reasoning is G-VEval's 'w/o reason in response' "
                     "ablation (Table 6), not G-VEval: raise max_tokens")

    def template_id(self, medium: str, mode: str, frames: bool = False,
                    separate: bool = False) -> str:
        """The template for a medium (image / video) and mode.

        ``frames``: a video tile sampled by another policy than first_middle_last (its prompt
        names its frames). ``separate``: a video's frames attached one by one
        (``visual_input: frames``).
        """
        if separate:
            return f"gveval/video-separate/{mode}"
        return f"gveval/video-frames/{mode}" if frames else f"gveval/{medium}/{mode}"

    def slots(self, options: MethodOptions | None = None) -> tuple[ScoreSlot, ...]:
        """Where the score(s) are read (a user template folder may say otherwise)."""
        folder = options.extra.get("templates") if options is not None else None
        return user_slots(folder, (score_slot(),)) if folder else (score_slot(),)

    def plan(self, item: Item, mode: str, options: MethodOptions) -> list[Planned | Skip]:
        """One request per item and mode (skipped without references or vision as needed)."""
        self.check_mode(mode)
        medium = "video" if item.media_kind == "video" else "image"
        settings = self.settings(options)
        shows_video = medium == "video" and mode != "ref-only"
        separate = shows_video and dict(settings).get("visual_input") == "frames"
        frames = frames_description(item, separate) if shows_video else None
        folder = options.extra.get("templates")
        # A user's folder holds the templates it names; the video-frames variants are ours.
        # Frames attached one by one need a prompt written for them, in a user's folder too
        # (its gveval/video-separate/<mode>): a one-tile prompt shown several pictures would
        # score what it does not describe. A folder without one: the item is skipped, naming
        # the template it lacks.
        tile_frames = frames is not None and not folder
        # ``separate`` is passed only when set: a subclass's older template_id lacks it.
        template_id = self.template_id(medium, mode, tile_frames, separate=True) if separate \
            else self.template_id(medium, mode, tile_frames)
        template = get_template("gveval", template_id, folder,
                                variant="paper" if folder else dict(settings)["prompt_variant"])
        kinds = options.extra.get("media")
        if kinds and item.media_kind not in kinds:
            return [Skip(item.id, mode, f"judge configured for {'/'.join(kinds)} items "
                         f"only (this is {item.media_kind})", template.ref)]
        return _plan_with(template, item, mode, options, self.slots(options), medium, frames,
                          settings, separate)


class GVEvalACCR(GVEval):
    """G-VEval's ACCR dimensions (video captions; images work the same way)."""

    name = "gveval-accr"
    verdict_contract = ("four closing lines 'Accuracy: $N$', 'Completeness: $N$', "
                        "'Conciseness: $N$', 'Relevance: $N$', each N an integer 0-100, once")
    criteria = tuple(CriterionSpec(c, SCALE, description=f"ACCR {c}, 0-100") for c in ACCR)
    combination = "the mean of accuracy, completeness, conciseness and relevance"

    def template_id(self, medium: str, mode: str, frames: bool = False,
                    separate: bool = False) -> str:
        """The ACCR template for a mode: one for both media (it names the medium).

        ``frames``, ``separate``: as in :meth:`GVEval.template_id`.
        """
        if separate:
            return f"gveval/accr-separate/{mode}"
        return f"gveval/accr-frames/{mode}" if frames else f"gveval/accr/{mode}"

    def slots(self, options: MethodOptions | None = None) -> tuple[ScoreSlot, ...]:
        """The four ACCR score slots (a user template folder may say otherwise)."""
        folder = options.extra.get("templates") if options is not None else None
        return user_slots(folder, accr_slots()) if folder else accr_slots()

    def overall(self, criteria: Sequence[Criterion], options: AggregateOptions
                ) -> tuple[float | None, str | None]:
        """The mean of the four ACCR scores (None when one is missing)."""
        scores = {c.name: c.score for c in criteria if c.name in ACCR}
        missing = [name for name in ACCR if scores.get(name) is None]
        if missing:
            return None, f"no score for {', '.join(missing)}"
        return sum(s for s in scores.values() if s is not None) / len(ACCR), None
