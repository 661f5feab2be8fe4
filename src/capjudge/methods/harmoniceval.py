"""HarmonicEval (harmoniceval.md): five criteria, each its own prompt on 1-5, harmonically weighted.

Score smoothing: the expectation over the rating distribution, with σ_c from the same
distribution. The overall score is the harmonic weighting ``w_c ∝ σ_c^(-2(1-γ)/γ)`` of the
smoothed scores (§2.2).

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
from pathlib import Path
from typing import Any

from capjudge.backends.base import (
    Decoding,
    ImagePart,
    JudgeRequest,
    JudgeResponse,
    Message,
    ScoreSlot,
)
from capjudge.item import Item
from capjudge.methods.base import (
    Criterion,
    CriterionSpec,
    Method,
    MethodOptions,
    Planned,
    Scale,
    Skip,
    item_image,
)
from capjudge.prompts import get_template, method_spec
from capjudge.scoring import harmonic_score

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


SCALE = Scale(1, 5, pass_mark=3)


def rating_slot(criterion: str) -> ScoreSlot:
    """The 1-5 rating slot of one criterion (the score is written first)."""
    scale = method_spec("harmoniceval")["scale"]
    return ScoreSlot(name=criterion, low=int(scale["low"]), high=int(scale["high"]),
                     anchor=scale["anchor"], position=scale["position"],
                     forced_prefix=scale["forced_prefix"])


def boxed_image(item: Item, detail: str, tiles_dir: Path) -> ImagePart:
    """The image with the REG target box drawn in red (cached by content hash and box)."""
    from PIL import Image, ImageDraw

    from capjudge.media import save_png, sha256_file, sha256_text

    extra = item.extra_dict()
    bbox = extra.get("bbox")
    base = item_image(item, detail)
    if not (isinstance(bbox, list) and len(bbox) == 4):
        raise ValueError("a 'reg' item needs extra.bbox = [x0, y0, x1, y1]")
    key = sha256_text(base.sha256, json.dumps([float(b) for b in bbox]))
    out = tiles_dir / f"{key}-bbox.png"
    if not out.is_file():
        with Image.open(base.path) as source:
            img = source.convert("RGB")
        width = max(2, round(min(img.size) / 150))
        ImageDraw.Draw(img).rectangle([float(b) for b in bbox], outline=(255, 0, 0),
                                      width=width)
        save_png(img, out)
    return ImagePart(str(out), sha256_file(out), detail)


class HarmonicEval(Method):
    """HarmonicEval's criterion-wise scoring and harmonic weighting.

    Method options: ``criteria`` (a subset to run), ``explain`` (the "Why?" turn),
    ``tiles_dir`` (where boxed REG images are cached).
    """

    name = "harmoniceval"
    criteria = tuple(CriterionSpec(c, SCALE, needs_image=c in IMAGE_CRITERIA,
                                   description=f"{c}, 1-5") for c in CRITERIA)
    overall_scale = SCALE
    combination = ("harmonic weighting of the smoothed criterion scores, "
                   "w_c ∝ σ_c^(-2(1-γ)/γ) (§2.2)")
    explains = True

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
        for criterion in criteria:
            template = get_template("harmoniceval", f"harmoniceval/{criterion}")
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
            request = JudgeRequest(messages=messages, slots=(rating_slot(criterion),),
                                   decoding=options.decoding, template=template.ref,
                                   tag=f"{item.id}|{criterion}")
            out.append(Planned(item.id, mode, request, criterion))
        return out

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

    def overall(self, criteria: Sequence[Criterion], options: dict[str, Any]
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
        gamma = float(options.get("gamma", 0.75))
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
