"""Versioned prompt templates (Jinja, StrictUndefined) next to their score scales.

Each method has a folder with a ``templates.yaml`` (scale, and per template: id, version, file,
what it needs) and the ``.j2`` files. A template renders the *user* message (and optionally a
system message from a second file); the token ``{{ IMAGE }}`` marks where the image goes.

Every rendered request records ``id@version``. ``versions.lock`` pins the sha256 of each
``id@version``'s text: changing a template's text without bumping its version fails the test
suite, so two results that claim the same template version always used the same words.

By default a bundled template renders its paper's prompt word for word (only placeholders
filled; where the paper does not say where the caption or references go, the smallest
insertion, listed under ``additions`` in ``templates.yaml``). **Prompt variants** are named
options: ``prompt_variant: guarded`` (templates listed with ``variants: [guarded]``) renders
the same template with ``guarded`` true: candidate texts inserted as delimited *data* (``|
data`` neutralises anything that could close the block, look-alikes included: see
:func:`neutralise_delimiters`) and an injection-guard sentence restating the instructions
after them. A variant has its own template id (``<id>+guarded``), version and pinned hash.

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
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import jinja2
import yaml

from capjudge.protocol import ImagePart, Message

IMAGE_MARK = "\x00IMAGE\x00"
_INCLUDE = re.compile(r"""{%-?\s*include\s+["']([^"']+)["']""")
PROMPTS_DIR = Path(str(files("capjudge.prompts")))


PROMPT_VARIANTS = ("paper", "guarded")
"""``paper``: the paper's text (the default); ``guarded``: delimiters and injection guard."""

DELIMITED_TAGS = ("caption", "reference", "context", "question", "description")

# Characters that render like the ASCII of a delimiter but that NFKC leaves alone (Cyrillic,
# Greek, other look-alikes); NFKC itself folds full-width and compatibility forms.
CONFUSABLES = {
    "\u0430": "a", "\u0441": "c", "\u0435": "e", "\u0456": "i", "\u043e": "o", "\u0440": "p",
    "\u0455": "s", "\u0445": "x", "\u0443": "y", "\u0410": "a", "\u0421": "c", "\u0415": "e",
    "\u0406": "i", "\u041e": "o", "\u0420": "p", "\u0405": "s", "\u0422": "t", "\u03bf": "o",
    "\u039f": "o", "\u03b9": "i", "\u0399": "i", "\u03c1": "p", "\u03a1": "p", "\u0131": "i",
    "\u0261": "g", "\u0251": "a", "\u2039": "<", "\u203a": ">", "\u2329": "<", "\u232a": ">",
    "\u3008": "<", "\u3009": ">", "\u27e8": "<", "\u27e9": ">", "\u02c2": "<", "\u02c3": ">",
    "\u2215": "/", "\u2044": "/", "\u29f8": "/", "\u1735": "/", "\u200b": "", "\u200c": "",
    "\u200d": "", "\u2060": "", "\ufeff": "", "\u00ad": "",
}
_ENTITY = {"&lt;": "<", "&#60;": "<", "&#x3c;": "<", "&gt;": ">", "&#62;": ">", "&#x3e;": ">",
           "&sol;": "/", "&#47;": "/", "&#x2f;": "/", "&bsol;": "\\"}
_TAG_SHAPE = re.compile(r"<\s*/?\s*(?:" + "|".join(DELIMITED_TAGS) + r")\b(?:[^<>]{0,20}?>)?",
                        re.I)


def _skeleton(text: str) -> tuple[str, list[int]]:
    """``text`` folded for matching, with the original offset of each folded character.

    Folding: NFKC, the confusables map, HTML entities, case.
    """
    out: list[str] = []
    origin: list[int] = []
    k = 0
    while k < len(text):
        entity = next((e for e in _ENTITY if text.startswith(e, k) or
                       text[k:k + len(e)].lower() == e), None)
        if entity is not None:
            out.append(_ENTITY[entity])
            origin.append(k)
            k += len(entity)
            continue
        ch = text[k]
        folded = CONFUSABLES.get(ch)
        if folded is None:
            folded = unicodedata.normalize("NFKC", ch).casefold()
            folded = "".join(CONFUSABLES.get(c, c) for c in folded)
        for c in folded:
            out.append(c)
            origin.append(k)
        k += 1
    return "".join(out), origin


def neutralise_delimiters(value: Any) -> str:
    r"""Inserted data that cannot open or close a delimited block, look-alikes included.

    Every span that, once folded (NFKC, a confusables map for Cyrillic/Greek/angle-bracket
    look-alikes, HTML entities, case, zero-width characters dropped), reads as a tag of
    :data:`DELIMITED_TAGS` ("</CAPTION>", "</caption >", "</caption\\n>", "< /caption>",
    full-width "＜／caption＞", Cyrillic "</сарtion>", "&lt;/caption&gt;") is replaced by
    ``[/caption]`` (``[caption]`` for an opening tag): still readable as what the caption
    says, but no longer a delimiter. Text without such a span is returned unchanged.
    """
    text = str(value)
    folded, origin = _skeleton(text)
    # A span ends where the next folded character's original starts (an entity such as
    # "&gt;" is one folded character from four original ones).
    spans = [(origin[m.start()], origin[m.end()] if m.end() < len(origin) else len(text),
              m.group(0)) for m in _TAG_SHAPE.finditer(folded)]
    for start, end, shape in reversed(spans):
        name = re.search("|".join(DELIMITED_TAGS), shape.lower())
        closing = "/" in shape.split(name.group(0))[0] if name else True
        tag = name.group(0) if name else "tag"
        text = text[:start] + (f"[/{tag}]" if closing else f"[{tag}]") + text[end:]
    return text


def _data(value: Any) -> str:
    """Neutralise delimiters inside inserted data so it cannot close its block early."""
    return neutralise_delimiters(value)


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
    variant: str = "paper"  # paper | guarded (see PROMPT_VARIANTS)
    additions: tuple[str, ...] = ()  # rendered lines that are not the paper's text

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
        """The content hash of :meth:`source` (hex SHA-256; a variant's name is part of it)."""
        source = self.source() if self.variant == "paper" else \
            f"{self.source()}\n---\nvariant: {self.variant}"
        return hashlib.sha256(source.encode("utf-8")).hexdigest()

    def render(self, image: ImagePart | None = None, *,
               images: Sequence[ImagePart] | None = None, **variables: Any
               ) -> tuple[Message, ...]:
        """Render to chat messages.

        Args:
            image: the picture every ``{{ IMAGE }}`` of the template shows.
            images: instead of ``image``, one picture per ``{{ IMAGE }}`` in the order they
                render (a video's frames attached one by one).
            **variables: the template's variables.

        Raises:
            jinja2.UndefinedError: a missing variable.
            ValueError: a template that shows a picture without one, or ``images`` whose
                number is not the number of places the template shows one.
        """
        if image is not None and images is not None:
            raise ValueError("give image or images, not both")
        if self.engine == "replace":
            return self._render_replace([image] if image is not None else list(images or ()),
                                        variables)
        env = _environment(str(self.folder))
        variables = {"guarded": self.variant == "guarded", **variables}
        user = env.get_template(self.file).render(IMAGE=IMAGE_MARK, **variables).strip()
        chunks = user.split(IMAGE_MARK)
        if images is None:  # one picture, shown wherever the template shows one
            images = [image] * (len(chunks) - 1) if image is not None else []
        if len(chunks) > 1 and not images:
            raise ValueError(f"{self.ref} needs an image")
        if len(images) != len(chunks) - 1:
            raise ValueError(f"{self.ref} shows {len(chunks) - 1} picture(s); "
                             f"{len(images)} given")
        parts: list[str | ImagePart] = []
        for k, chunk in enumerate(chunks):
            if k > 0:
                parts.append(images[k - 1])
            if chunk:
                parts.append(chunk)
        messages = []
        if self.system_file:
            system = env.get_template(self.system_file).render(**variables).strip()
            messages.append(Message("system", (system,)))
        messages.append(Message("user", tuple(parts)))
        return tuple(messages)


    def _render_replace(self, images: Sequence[ImagePart], variables: Mapping[str, object]
                        ) -> tuple[Message, ...]:
        """The file as it is, placeholders replaced the way the G-VEval scorer does."""
        text = (self.folder / self.file).read_text(encoding="utf-8")
        given = variables.get("references") or []
        refs = [str(r) for r in given] if isinstance(given, list | tuple) else []
        text = text.replace("{{Reference}}", "'" + "'; '".join(refs))
        text = text.replace("{{Caption}}", str(variables.get("candidate", "")))
        if variables.get("question"):
            text = text.replace("{{Question}}", str(variables["question"]))
        if not images:
            return (Message("system" if self.role == "system" else "user", (text,)),)
        return (Message("user", (text, *images)),)  # the pictures after the text


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


def get_template(method: str, template_id: str, folder: str | Path | None = None,
                 variant: str = "paper") -> Template:
    """Look up a template by method and id.

    In a user's ``folder`` when given (see the module doc); its version is then the content
    hash (a user's folder has no variants: it is sent as written).

    Args:
        method: the method folder.
        template_id: the template's id (without a variant suffix).
        folder: a user's template folder.
        variant: ``paper`` (the default) or ``guarded``; a template that lists no variants
            has only its paper text (nothing is inserted to guard).

    Raises:
        KeyError: no bundled template with that id.
        ValueError: the user folder has no such template (or no usable templates.yaml), or
            the variant is unknown.
    """
    if variant not in PROMPT_VARIANTS:
        raise ValueError(f"unknown prompt_variant {variant!r}; choose from {PROMPT_VARIANTS}")
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
            guarded = variant != "paper" and variant in entry.get("variants", ())
            key = f"{variant}_additions" if guarded else "additions"
            return Template(method=method,
                            id=f"{entry['id']}+{variant}" if guarded else entry["id"],
                            version=int(entry["version"]),
                            file=entry["file"], system_file=entry.get("system"),
                            needs=tuple(entry.get("needs", ())), folder=PROMPTS_DIR / method,
                            variant=variant if guarded else "paper",
                            additions=tuple(entry.get(key, spec.get(key, ()))))
    raise KeyError(f"no template {template_id!r} for method {method!r}")


def all_templates() -> list[Template]:
    """Every template of every method folder, each of its variants included."""
    out = []
    for folder in sorted(p for p in PROMPTS_DIR.iterdir() if (p / "templates.yaml").is_file()):
        for entry in method_spec(folder.name)["templates"]:
            out.append(get_template(folder.name, entry["id"]))
            out += [get_template(folder.name, entry["id"], variant=v)
                    for v in entry.get("variants", ())]
    return out


def versions_lock() -> dict[str, str]:
    """``id@version`` -> sha256 of its text, as pinned in ``versions.lock``."""
    data: dict[str, str] = json.loads((PROMPTS_DIR / "versions.lock").read_text())
    return data
