"""VisCE² (visce2.md): a VLM extracts an image's visual context, then rates a caption with it.

First the ``context`` stage, once per image, extracts the visual context (up to five important
objects, their features, their relationships); then the VLM rates the candidate 0-100 with the
image and that context.

Modes (the paper's Table 3): ``vanilla`` (image only), ``references`` (w/ references),
``description`` (w/ a detailed description from the extractor), ``context`` (the method), and
the context ablations ``context-objects`` (objects only) and ``context-objects-attributes``
(objects and features, no relationships).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

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
from capjudge.protocol import JudgeRequest, JudgeResponse, ScoreSlot
from capjudge.records import ContextRow, ContextSummary
from capjudge.stage_files import CONTEXTS

MODES = ("vanilla", "references", "description", "context", "context-objects",
         "context-objects-attributes")
SECTIONS = ("objects", "features", "relationships")
_HEADERS = {
    "objects": re.compile(r"^[#*\s-]*(list of )?(important )?objects\b", re.I),
    "features": re.compile(r"^[#*\s-]*(features|attributes)\b", re.I),
    "relationships": re.compile(r"^[#*\s-]*relationships?\b", re.I),
}


def split_context(text: str) -> dict[str, str]:
    """Split an extracted context into its objects / features / relationships sections.

    Returns only the sections whose header was found (an empty dict for unstructured text).
    """
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        header = next((name for name, rx in _HEADERS.items() if rx.match(line)), None)
        if header is not None:
            current = header
            sections.setdefault(current, [])
        if current is not None:
            sections[current].append(line)
    return {k: "\n".join(v).strip() for k, v in sections.items()}


def select_context(text: str, keep: tuple[str, ...]) -> str | None:
    """The context restricted to some sections (the paper's ablations).

    None if the text has no recognisable sections to select from.
    """
    sections = split_context(text)
    if not sections or "objects" not in sections:
        return None
    return "\n".join(sections[k] for k in SECTIONS if k in keep and k in sections)


SCALE = Scale(0, 100, pass_mark=50)
CONFIRM_PREFIX = "\n\nRating: "
"""After the answer, where an off-contract rating is confirmed (the score is asked first)."""


def rating_slot() -> ScoreSlot:
    """The 0-100 rating slot (the first integer of the answer)."""
    scale = method_spec("visce2")["scale"]
    return ScoreSlot(name=scale["name"], low=int(scale["low"]), high=int(scale["high"]),
                     anchor=scale["anchor"], position=scale["position"],
                     forced_prefix=scale["forced_prefix"], confirm_prefix=CONFIRM_PREFIX)


class VisCE2(Method):
    """VisCE² evaluation (step 2); step 1 is :mod:`capjudge.methods.visce2_context`."""

    name = "visce2"
    verdict_contract = "the rating first, an integer 0-100 (the paper reads the first integer)"
    modes = MODES
    default_modes = MODES
    score_mode = "context"
    criteria = (CriterionSpec("score", SCALE, needs_image=True,
                              description="rating 0-100 with the visual context"),)
    overall_scale = SCALE
    combination = ("the first integer printed, canonical phrases removed (§3); option "
                   "score: expected: the expected rating of the 0-100 distribution")
    needs_context = True
    choices = {"prompt_variant": ("paper", "guarded"), "score": ("printed", "expected")}

    def plan(self, item: Item, mode: str, options: MethodOptions) -> list[Planned | Skip]:
        """One request per item and mode; context modes read the context stage's table."""
        self.check_mode(mode)
        file_id = {"vanilla": "vanilla", "references": "references",
                   "description": "description"}.get(mode, "context")
        settings = self.settings(options)
        template = get_template("visce2", f"visce2/{file_id}",
                                variant=dict(settings)["prompt_variant"])
        if not options.vision:
            return [Skip(item.id, mode, "backend has no vision input (VisCE² always shows "
                         "the image)", template.ref)]
        image = item_image(item, options.detail)
        variables: dict[str, Any] = {"candidate": item.candidate}
        if mode == "references":
            refs = list(item.references)
            if not refs:
                return [Skip(item.id, mode, "no reference captions", template.ref)]
            variables["references"] = refs
        if "context" in template.needs:
            kind = "description" if mode == "description" else "context"
            table: dict[str, dict[str, ContextRow]] = options.extra.get("context_table") or {}
            entry = table.get(image.sha256, {}).get(kind)
            if entry is None:
                return [Skip(item.id, mode, f"no extracted {kind} for this image (run the "
                             "context stage)", template.ref)]
            if entry.status != "ok":
                return [Skip(item.id, mode, f"{kind} extraction {entry.status}: "
                             f"{entry.reason}", template.ref)]
            text: str | None = entry.text
            if mode.startswith("context-"):
                keep = ("objects",) if mode == "context-objects" else ("objects", "features")
                text = select_context(text or "", keep)
                if text is None:
                    return [Skip(item.id, mode, "the extracted context has no objects/"
                                 "features/relationships sections to ablate", template.ref)]
            variables["context"] = text
        messages = template.render(image=image, **variables)
        # What the judge may quote: the candidate, the references, the context it was given.
        context = variables.get("context")
        quotes = (item.candidate, *item.references,
                  *([context] if isinstance(context, str) and context else []))
        request = JudgeRequest(messages=messages, slots=(replace(rating_slot(), quotes=quotes),),
                               decoding=options.decoding, template=template.ref,
                               tag=f"{item.id}|{mode}", quotes=quotes)
        return [Planned(item.id, mode, request, settings=settings)]

    def interpret(self, planned: Planned, response: JudgeResponse) -> list[Criterion]:
        """The paper's score: the first integer printed (§3), the expected value beside it.

        With ``score: expected`` the expected value over the rating distribution is the score
        (the printed integer stays in ``printed``). Without a distribution both are the
        printed integer.
        """
        criteria = super().interpret(planned, response)
        if planned.setting("score", "printed") == "expected":
            return criteria
        for c in criteria:
            if c.score is not None and c.printed is not None:
                c.score = float(c.printed)
        return criteria

    def context_settings(self) -> type | None:
        """:class:`~capjudge.methods.visce2_context.ContextConfig` (``contexts.<name>``)."""
        from capjudge.methods.visce2_context import ContextConfig

        return ContextConfig

    def run_context(self, items: Sequence[Item], out_dir: str | Path,
                    section: Mapping[str, object]) -> ContextSummary:
        """Step 1: extract every distinct picture's visual context (and description)."""
        from capjudge.methods.visce2_context import ContextConfig, run_context

        return run_context(items, out_dir, ContextConfig.from_params(section))

    def load_context(self, path: str | Path) -> dict[str, dict[str, ContextRow]]:
        """The context stage's output as ``{picture sha256: {kind: row}}``.

        ``path`` is its folder, or its contexts.parquet. Empty when absent (modes then record
        skips).
        """
        from capjudge.methods.visce2_context import load_context_table

        file = Path(path) / CONTEXTS if Path(path).is_dir() else Path(path)
        return load_context_table(file) if file.is_file() else {}
