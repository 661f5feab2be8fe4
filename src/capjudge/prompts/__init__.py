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

A judge can point at a folder of its own templates (``judges.<name>.templates``, or
``--templates``): a ``templates.yaml`` of the same shape, whose templates are versioned by the
sha256 of their content (``id@sha256-<16 hex>``), so two runs that claim the same version used
the same words. Besides Jinja, such a folder may use ``engine: replace``: the file is sent as it
is, with ``{{Caption}}`` and ``{{Reference}}`` replaced as the G-VEval repository's scorer does
(references joined ``'r1'; 'r2``) and the picture after the text (``role: system`` for a
text-only prompt sent as a system message, as that scorer does), so a user who holds the
official prompt files runs exactly those. Its ``scale`` (or ``slots``) says where the score is.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
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
    version: int | str  # bundled: an integer pinned in versions.lock; user folders: a hash
    file: str
    system_file: str | None
    needs: tuple[str, ...]  # image | references | question | context | description
    folder: Path
    engine: str = "jinja"  # jinja | replace (user folders: the file as it is, placeholders)
    role: str = "user"  # replace engine: the role of a prompt without a picture

    @property
    def ref(self) -> str:
        """The template's reference, ``id@version``."""
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
        """The content hash of :meth:`source` (hex SHA-256)."""
        return hashlib.sha256(self.source().encode("utf-8")).hexdigest()

    def render(self, image: ImagePart | None = None, **variables: Any) -> tuple[Message, ...]:
        """Render to chat messages; raises ``jinja2.UndefinedError`` on a missing variable."""
        if self.engine == "replace":
            return self._render_replace(image, variables)
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


    def _render_replace(self, image: ImagePart | None, variables: dict[str, Any]
                        ) -> tuple[Message, ...]:
        """The file as it is, placeholders replaced the way the G-VEval scorer does."""
        text = (self.folder / self.file).read_text(encoding="utf-8")
        refs = [str(r) for r in variables.get("references") or []]
        text = text.replace("{{Reference}}", "'" + "'; '".join(refs))
        text = text.replace("{{Caption}}", str(variables.get("candidate", "")))
        if variables.get("question"):
            text = text.replace("{{Question}}", str(variables["question"]))
        if image is None:
            return (Message("system" if self.role == "system" else "user", (text,)),)
        return (Message("user", (text, image)),)  # the picture after the text


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


def user_spec(folder: str | Path) -> dict[str, Any]:
    """The ``templates.yaml`` of a user's template folder.

    Raises:
        ValueError: no such folder or file, or it is not a mapping with ``templates``.
    """
    path = Path(folder) / "templates.yaml"
    if not path.is_file():
        raise ValueError(f"template folder {folder}: no templates.yaml")
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(spec, dict) or not isinstance(spec.get("templates"), list):
        raise ValueError(f"{path}: expected a mapping with a 'templates' list")
    return spec


def get_template(method: str, template_id: str, folder: str | Path | None = None
                 ) -> Template:
    """Look up a template by method and id.

    In a user's ``folder`` when given (see the module doc); its version is then the content
    hash.

    Raises:
        KeyError: no bundled template with that id.
        ValueError: the user folder has no such template (or no usable templates.yaml).
    """
    if folder is not None:
        spec = user_spec(folder)
        for entry in spec["templates"]:
            if entry.get("id") == template_id:
                draft = Template(method=method, id=template_id, version=0, file=entry["file"],
                                 system_file=entry.get("system"),
                                 needs=tuple(entry.get("needs", ())), folder=Path(folder),
                                 engine=entry.get("engine", "jinja"),
                                 role=entry.get("role", "user"))
                meta = json.dumps({k: v for k, v in entry.items() if k != "version"},
                                  sort_keys=True)
                digest = hashlib.sha256((draft.source() + "\n---\n" + meta).encode())
                return replace(draft, version=f"sha256-{digest.hexdigest()[:16]}")
        raise ValueError(f"template folder {folder} has no template {template_id!r} "
                         f"(it has: {', '.join(str(e.get('id')) for e in spec['templates'])})")
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
