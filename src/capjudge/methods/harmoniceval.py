"""HarmonicEval (harmoniceval.md): five criteria, each its own prompt on 1-5, harmonically weighted.

Score smoothing as the paper defines it (§2.2, Appendix A eqs. 7-8): s̃_c = Σ_r r P(r) and
σ_c = √(Σ_r (r - s̃_c)² P(r)) on the model's own probabilities of the ratings 1-5, *not*
renormalised over them (the captured mass is on every row; below 1 it pulls s̃_c down, as the
paper's formula does). The method option ``score: renormalised`` renormalises P over 1-5 first
(the expectation of the conditional distribution). The overall score is the harmonic weighting
``w_c ∝ σ_c^(-2(1-γ)/γ)`` of the smoothed scores (§2.2).

Correctness and completeness see the image (and the question); clarity, fluency and conciseness
see only the text (Appendix C.4), so they run on a text-only backend and the image criteria are
skipped there. Task phrasing follows the item's ``task``: ``caption`` (image captioning),
``vqa``, ``reg`` (referring expression: the target box, ``extra.bbox = [x0, y0, x1, y1]``, is
drawn in red on the image) and ``vdu`` (visual document understanding). With the option
``explain: true`` a second turn asks "Why? Tell me the reason." after the score (recorded as the
criterion's reasoning; it does not change the score).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from capjudge.item import Item
from capjudge.methods.base import (
    AggregateOptions,
    AggregateSetting,
    Criterion,
    CriterionSpec,
    Method,
    MethodOptions,
    Planned,
    Scale,
    Skip,
    item_image,
    rubric_levels,
)
from capjudge.prompts import get_template, method_spec
from capjudge.protocol import Decoding, ImagePart, JudgeRequest, JudgeResponse, Message, ScoreSlot
from capjudge.scoring import harmonic_score, paper_smoothing

CRITERIA = ("correctness", "completeness", "clarity", "fluency", "conciseness")
IMAGE_CRITERIA = ("correctness", "completeness")
TASK_PHRASES: dict[str, dict[str, str]] = {
    "caption": {"text": "caption", "source": "the given image", "target": "the image",
                "question_label": "Question"},
    "vqa": {"text": "answer", "source": "the given image and question",
            "target": "the image and question", "question_label": "Question"},
    "reg": {"text": "referring expression",
            "source": "the region in the red bounding box of the given image",
            "target": "the region in the red bounding box", "question_label": "Question"},
    "vdu": {"text": "answer", "source": "the given document image and question",
            "target": "the document image and question", "question_label": "Question"},
}


# The judge rates 1-5 (the slot's scale, templates.yaml); the paper's s̃_c = Σ_r r P(r) on the
# model's own probabilities is below 1 when the ratings hold little of the mass, so the score
# a row carries lies in [0, 5] (under ``score: renormalised`` it stays in [1, 5]).
SCALE = Scale(0, 5, pass_mark=3)
CONFIRM_PREFIX = "\n\nScore: "
"""After the answer, where an off-contract rating is confirmed (the score is asked first)."""


def rating_slot(criterion: str) -> ScoreSlot:
    """The 1-5 rating slot of one criterion (the score is written first)."""
    scale = method_spec("harmoniceval")["scale"]
    return ScoreSlot(name=criterion, low=int(scale["low"]), high=int(scale["high"]),
                     anchor=scale["anchor"], position=scale["position"],
                     forced_prefix=scale["forced_prefix"], confirm_prefix=CONFIRM_PREFIX)


def boxed_image(item: Item, detail: str, tiles_dir: Path) -> ImagePart:
    """The image with the REG target box drawn in red (cached by content hash and box)."""
    from PIL import Image, ImageDraw

    from capjudge.media import save_png, sha256_file, sha256_text

    extra = item.extra_dict()
    bbox = extra.get("bbox")
    base = item_image(item, detail)
    coords = [b for b in bbox if isinstance(b, (int, float, str))] if isinstance(bbox, list) else []
    if not (isinstance(bbox, list) and len(bbox) == 4 and len(coords) == 4):
        raise ValueError("a 'reg' item needs extra.bbox = [x0, y0, x1, y1]")
    box = [float(b) for b in coords]
    key = sha256_text(base.sha256, json.dumps(box))
    out = tiles_dir / f"{key}-bbox.png"
    if not out.is_file():
        with Image.open(base.path) as source:
            img = source.convert("RGB")
        width = max(2, round(min(img.size) / 150))
        ImageDraw.Draw(img).rectangle(box, outline=(255, 0, 0),
                                      width=width)
        save_png(img, out)
    return ImagePart(str(out), sha256_file(out), detail)


class HarmonicEval(Method):
    """HarmonicEval's criterion-wise scoring and harmonic weighting.

    Method options: ``criteria`` (a subset to run), ``explain`` (the "Why?" turn),
    ``tiles_dir`` (where boxed REG images are cached).
    """

    name = "harmoniceval"
    verdict_contract = "the criterion's rating first, an integer 1-5, before any explanation"
    criteria = tuple(CriterionSpec(c, SCALE, needs_image=c in IMAGE_CRITERIA,
                                   description=f"{c}, 1-5") for c in CRITERIA)
    overall_scale = SCALE
    combination = ("harmonic weighting of the smoothed criterion scores, "
                   "w_c ∝ σ_c^(-2(1-γ)/γ) (§2.2)")
    explains = True
    choices = {"prompt_variant": ("paper", "guarded"), "score": ("paper", "renormalised")}
    # §2.2: gamma 0.75 in the paper's experiments; 1 weights uniformly, 0.5 by inverse
    # variance, towards 0 selects the most confident criterion.
    aggregate_settings = {"gamma": AggregateSetting(
        0.75, 0.0, 1.0, low_open=True,
        doc="harmonic weighting: 1 uniform, 0.5 inverse variance, towards 0 select")}

    def plan(self, item: Item, mode: str, options: MethodOptions) -> list[Planned | Skip]:
        """One request per criterion (image criteria skipped on a text-only backend)."""
        self.check_mode(mode)
        task = item.task or "caption"
        phrases = TASK_PHRASES.get(task)
        criteria = options.extra.get("criteria") or CRITERIA
        unknown = sorted(set(criteria) - set(CRITERIA))
        if unknown:
            raise ValueError(f"unknown HarmonicEval criteria {unknown}; choose from {CRITERIA}")
        out: list[Planned | Skip] = []
        settings = self.settings(options)
        for criterion in criteria:
            template = get_template("harmoniceval", f"harmoniceval/{criterion}",
                                    variant=dict(settings)["prompt_variant"])
            if phrases is None:
                out.append(Skip(item.id, mode, f"task {task!r} has no HarmonicEval phrasing",
                                template.ref, criterion))
                continue
            image = None
            if criterion in IMAGE_CRITERIA:
                if not options.vision:
                    out.append(Skip(item.id, mode, "backend has no vision input (criterion "
                                    "needs the image)", template.ref, criterion))
                    continue
                try:
                    image = (boxed_image(item, options.detail, Path(options.extra.get(
                        "tiles_dir", ".capjudge-cache/tiles"))) if task == "reg"
                        else item_image(item, options.detail))
                except ValueError as exc:
                    out.append(Skip(item.id, mode, str(exc), template.ref, criterion))
                    continue
            messages = template.render(image=image, candidate=item.candidate, t=phrases,
                                       question=item.question)
            quotes = tuple(q for q in (item.candidate, item.question) if q)
            slot = rating_slot(criterion)
            levels = rubric_levels(messages, slot.low, slot.high)
            request = JudgeRequest(messages=messages,
                                   slots=(replace(slot, quotes=quotes, levels=levels),),
                                   decoding=options.decoding, template=template.ref,
                                   tag=f"{item.id}|{criterion}", quotes=quotes)
            out.append(Planned(item.id, mode, request, criterion, settings=settings))
        return out

    def interpret(self, planned: Planned, response: JudgeResponse) -> list[Criterion]:
        """Each criterion's s̃_c and σ_c on the model's probabilities (the paper's formulas).

        ``score: renormalised`` keeps the expectation and sd of the distribution renormalised
        over 1-5 (``expected`` holds that expectation in both cases).
        """
        criteria = super().interpret(planned, response)
        if planned.setting("score", "paper") == "renormalised":
            return criteria
        for c in criteria:
            if c.probs is not None and c.mass is not None and c.score is not None and \
                    c.mass > 0:
                c.score, c.sd = paper_smoothing(c.values or [], c.probs, min(c.mass, 1.0))
        return criteria

    def explanation_request(self, planned: Planned, response: JudgeResponse) -> JudgeRequest:
        """The optional second turn: the first answer, then "Why? Tell me the reason."."""
        template = get_template("harmoniceval", "harmoniceval/explain")
        follow_up = template.render()
        messages = (*planned.request.messages, Message("assistant", (response.text,)),
                    *follow_up)
        return JudgeRequest(messages=messages, slots=(),
                            decoding=Decoding(max_tokens=planned.request.decoding.max_tokens
                                              * 8 or 256),
                            template=f"{planned.request.template}+{template.ref}",
                            tag=planned.request.tag + "|why")

    def overall(self, criteria: Sequence[Criterion], options: AggregateOptions
                ) -> tuple[float | None, str | None]:
        """The harmonically weighted score over the criteria that have a score.

        Criteria that were skipped (no vision) or failed are left out and the result says so
        through the row's reason; no criterion is imputed.

        A criterion scored without a distribution (``text_only``: the answer had no
        log-probabilities) has no σ. It is weighted as the least confident criterion that has
        one (σ = the largest measured σ of the item), so it never outweighs a measured
        criterion; when no criterion has a distribution the weights are uniform. (Taking its
        σ as 0 would give it nearly all the weight: the floor of σ is 1e-6.)
        """
        gamma = self.setting(options, "gamma")
        scored = [c for c in criteria if c.score is not None]
        if not scored:
            return None, "no criterion was scored"
        measured = [c.sd for c in scored if c.sd is not None]
        fallback = max(measured) if measured else 1.0
        value = harmonic_score([float(c.score) for c in scored if c.score is not None],
                               [c.sd if c.sd is not None else fallback for c in scored], gamma)
        missing = sorted(set(CRITERIA) - {c.name for c in scored})
        return value, (f"over {len(scored)} of 5 criteria (missing: {', '.join(missing)})"
                       if missing else None)
