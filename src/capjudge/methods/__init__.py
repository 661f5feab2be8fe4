"""Judging methods: each turns an ingested item into judge requests for a mode, or says why it
cannot (a recorded skip), and names the criteria its responses carry."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from capjudge.backends.base import Decoding, ImagePart, JudgeRequest


@dataclass(frozen=True)
class Planned:
    """A request to send for (item, mode)."""

    item_id: str
    mode: str
    request: JudgeRequest


@dataclass(frozen=True)
class Skip:
    """Why (item, mode) is not judged: recorded and reported, never silently dropped."""

    item_id: str
    mode: str
    reason: str
    template: str = ""


@dataclass(frozen=True)
class MethodOptions:
    """Settings shared by all methods (``params.yaml: judges.<name>``)."""

    decoding: Decoding = Decoding()
    detail: str = "auto"  # OpenAI image detail
    vision: bool = True  # does the backend accept images
    extra: dict[str, Any] = field(default_factory=dict)


class Method(Protocol):
    """What the judge stage needs from a method."""

    name: str
    modes: tuple[str, ...]
    default_modes: tuple[str, ...]

    def plan(self, item: dict[str, Any], mode: str, options: MethodOptions) -> Planned | Skip:
        """The request for one item in one mode, or the reason it is skipped."""
        ...


def item_image(item: dict[str, Any], detail: str) -> ImagePart:
    """The picture a judge sees for an item: the image itself, or the frame/view tile."""
    if item["media_kind"] == "image":
        path = Path(item["media_root"]) / item["media_path"]
        return ImagePart(str(path), item["media_sha256"], detail)
    return ImagePart(str(item["tile_path"]), item["tile_sha256"], detail)


def get_method(name: str) -> Method:
    """A method by name (imported lazily)."""
    if name == "gveval":
        from capjudge.methods.gveval import GVEval

        return GVEval()
    raise KeyError(f"unknown method {name!r}; known: gveval")


METHODS = ("gveval",)
