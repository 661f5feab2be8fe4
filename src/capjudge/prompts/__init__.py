"""Versioned prompt templates (Jinja, StrictUndefined) next to their score scales.

Each method has a folder with a ``templates.yaml`` (scale, and per template: id, version, file,
what it needs) and the ``.j2`` files. A template renders the *user* message (and optionally a
system message from a second file); the token ``{{ IMAGE }}`` marks where the image goes.

Every rendered request records ``id@version``. ``versions.lock`` pins the sha256 of each
``id@version``'s text: changing a template's text without bumping its version fails the test
suite, so two results that claim the same template version always used the same words.

Candidate texts are inserted as delimited *data* (``| data`` escapes the closing delimiter) and
the instructions are restated after them, so a caption that says "ignore the instructions" is
judged, not obeyed.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import jinja2
import yaml

from capjudge.backends.base import ImagePart, Message

IMAGE_MARK = "\x00IMAGE\x00"
_INCLUDE = re.compile(r"""{%-?\s*include\s+["']([^"']+)["']""")
PROMPTS_DIR = Path(str(files("capjudge.prompts")))


def _data(value: Any) -> str:
    """Neutralise delimiters inside inserted data so it cannot close its block early."""
    text = str(value)
    for tag in ("caption", "reference", "context", "question", "description"):
        text = text.replace(f"</{tag}>", f"<\\/{tag}>")
    return text


@dataclass(frozen=True)
class Template:
    """One versioned template."""

    method: str
    id: str
    version: int
    file: str
    system_file: str | None
    needs: tuple[str, ...]  # image | references | question | context | description
    folder: Path

    @property
    def ref(self) -> str:
        return f"{self.id}@{self.version}"

    def files(self) -> list[str]:
        """The template's file, its system file and every partial they include (recursively)."""
        todo = [self.file] + ([self.system_file] if self.system_file else [])
        seen: list[str] = []
        while todo:
            name = todo.pop(0)
            if name in seen:
                continue
            seen.append(name)
            text = (self.folder / name).read_text(encoding="utf-8")
            todo += _INCLUDE.findall(text)
        return seen

    def source(self) -> str:
        """The full text that determines what this template renders."""
        return "\n---\n".join(
            f"{n}\n{(self.folder / n).read_text(encoding='utf-8')}" for n in self.files())

    def sha256(self) -> str:
        return hashlib.sha256(self.source().encode("utf-8")).hexdigest()

    def render(self, image: ImagePart | None = None, **variables: Any) -> tuple[Message, ...]:
        """Render to chat messages; raises ``jinja2.UndefinedError`` on a missing variable."""
        env = _environment(str(self.folder))
        user = env.get_template(self.file).render(IMAGE=IMAGE_MARK, **variables).strip()
        if IMAGE_MARK in user and image is None:
            raise ValueError(f"{self.ref} needs an image")
        parts: list[str | ImagePart] = []
        for k, chunk in enumerate(user.split(IMAGE_MARK)):
            if k > 0 and image is not None:
                parts.append(image)
            if chunk:
                parts.append(chunk)
        messages = []
        if self.system_file:
            system = env.get_template(self.system_file).render(**variables).strip()
            messages.append(Message("system", (system,)))
        messages.append(Message("user", tuple(parts)))
        return tuple(messages)


@cache
def _environment(folder: str) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder), undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False, autoescape=False,
    )
    env.filters["data"] = _data
    return env


@cache
def method_spec(method: str) -> dict[str, Any]:
    """The parsed ``templates.yaml`` of a method folder."""
    path = PROMPTS_DIR / method / "templates.yaml"
    if not path.is_file():
        raise KeyError(f"no prompt templates for method {method!r}")
    spec: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return spec


def get_template(method: str, template_id: str) -> Template:
    """Look up a template by method and id."""
    spec = method_spec(method)
    for entry in spec["templates"]:
        if entry["id"] == template_id:
            return Template(method=method, id=entry["id"], version=int(entry["version"]),
                            file=entry["file"], system_file=entry.get("system"),
                            needs=tuple(entry.get("needs", ())), folder=PROMPTS_DIR / method)
    raise KeyError(f"no template {template_id!r} for method {method!r}")


def all_templates() -> list[Template]:
    """Every template of every method folder."""
    out = []
    for folder in sorted(p for p in PROMPTS_DIR.iterdir() if (p / "templates.yaml").is_file()):
        for entry in method_spec(folder.name)["templates"]:
            out.append(get_template(folder.name, entry["id"]))
    return out


def versions_lock() -> dict[str, str]:
    """``id@version`` -> sha256 of its text, as pinned in ``versions.lock``."""
    data: dict[str, str] = json.loads((PROMPTS_DIR / "versions.lock").read_text())
    return data
