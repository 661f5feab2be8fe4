"""mkdocs hooks: fill the generated parts of the docs from the code at build time.

A page holds a marker comment, ``<!-- gen:KIND [ARG] -->``; :func:`on_page_markdown` replaces it
with text generated from the registries, the argparse parser, the prompt folders' templates.yaml
and the committed run outputs, so these parts cannot drift from the code. The pages themselves
stay readable on GitHub (the marker line says what is generated there). Nothing is downloaded.

Kinds: ``cli`` (every subcommand's help), ``source FILE:NAME`` (a class or function quoted from
a test, for the worked examples), ``method NAME`` (the method's declared metadata and its
templates.yaml: paper mapping, templates, reconstructed parts, additions), ``backends``,
``datasets``, ``protocols``, ``sample-metrics`` (the committed ``reports/metrics.json`` and
``reports/lineage.json`` of the bundled sample run).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
# Document this checkout's code, not whatever capjudge the venv has installed.
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

MARKER = re.compile(r"^<!-- gen:([a-z-]+)(?: ([^ ]+))? -->$", re.MULTILINE)


def _cell(value: object) -> str:
    """A value as a markdown table cell (pipes escaped, newlines folded)."""
    return " ".join(str(value).split()).replace("|", "\\|")


def _help_text(parser: argparse.ArgumentParser) -> str:
    # A fixed width keeps the page identical on every terminal.
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        return parser.format_help()
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse has no public accessor for sub-commands
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def gen_cli(_: str | None) -> str:
    """Every subcommand's ``--help``, from ``capjudge.cli.build_parser()``."""
    from capjudge.cli import build_parser

    parser = build_parser()
    parser.prog = "capjudge"
    out = ["```text", _help_text(parser).rstrip(), "```", ""]

    def walk(prefix: str, sub: argparse.ArgumentParser) -> None:
        for name, child in _subparsers(sub).items():
            title = f"{prefix} {name}"
            out.extend([f"## `{title}`", "", "```text", _help_text(child).rstrip(), "```", ""])
            walk(title, child)

    walk("capjudge", parser)
    return "\n".join(out)


def _scale(scale: Any) -> str:
    high = "" if scale.high is None else f"{scale.high:g}"
    text = f"{scale.low:g}–{high}" if high else f"≥ {scale.low:g}"
    if scale.pass_mark is not None:
        text += f" (pass mark {scale.pass_mark:g})"
    return text


def gen_method(name: str | None) -> str:
    """A method's declared metadata and its prompt folder's templates.yaml."""
    from capjudge.methods import METHOD_REGISTRY

    if not name:
        raise ValueError("gen:method needs a method name")
    cls = METHOD_REGISTRY.get(name)
    out = ["### Declared by the method", "",
           f"- modes: {', '.join(f'`{m}`' for m in cls.modes)}; default "
           f"{', '.join(f'`{m}`' for m in cls.default_modes)}",
           f"- overall scale: {_scale(cls.overall_scale)}; criteria combine as: "
           f"{_cell(cls.combination)}"]
    for option, values in sorted(cls.choices.items()):
        out.append(f"- option `{option}`: {', '.join(f'`{v}`' for v in values)} "
                   f"(first: the default)")
    if cls.profiles:
        out.append(f"- profiles: {', '.join(f'`{p}`' for p in sorted(cls.profiles))}")
    if cls.needs_context:
        out.append("- needs a context stage (`contexts.NAME.method`)")
    if cls.aggregates:
        out.append(f"- system aggregates: {', '.join(f'`{a}`' for a in cls.aggregates)}")
    out += ["", "| criterion | scale | needs the image | description |", "|---|---|---|---|"]
    for criterion in cls.criteria:
        out.append(f"| `{criterion.name}` | {_scale(criterion.scale)} | "
                   f"{'yes' if criterion.needs_image else 'no'} | {_cell(criterion.description)} |")
    # A method's prompts live in prompts/<its module's name>/ (docs/extending/method.md), so
    # G-VEval ACCR, defined in methods/gveval.py, shares G-VEval's folder.
    folder = cls.__module__.rsplit(".", 1)[-1]
    path = ROOT / "src" / "capjudge" / "prompts" / folder / "templates.yaml"
    if not path.is_file():
        return "\n".join(out) + "\n"
    raw = path.read_text(encoding="utf-8")
    spec = yaml.safe_load(raw)
    # Every comment block of the file is the method's own account of its paper mapping and
    # deviations: one paragraph each, in file order.
    paragraphs: list[list[str]] = [[]]
    for line in raw.splitlines():
        if line.strip().startswith("#"):
            paragraphs[-1].append(line.strip().lstrip("#").strip())
        elif paragraphs[-1]:
            paragraphs.append([])
    out += ["", f"### Paper mapping (`prompts/{folder}/templates.yaml`)", ""]
    for paragraph in paragraphs:
        if paragraph:
            out += [_cell(" ".join(paragraph)).replace("\\|", "|"), ""]
    for key, label in (("additions", "Additions to the paper's text (default `paper` variant)"),
                       ("guarded_additions", "Additions of the `guarded` variant")):
        if spec.get(key):
            out += [f"{label}:", ""] + [f"- `{_cell(a)}`" for a in spec[key]] + [""]
    scale = spec.get("scale")
    if scale:
        out += [f"Score slot: `{_cell(json.dumps(scale, ensure_ascii=False))}`", ""]
    for slot in spec.get("slots", []) or []:
        out += [f"- slot `{_cell(json.dumps(slot, ensure_ascii=False))}`"]
    out += ["### Templates", "",
            "| id | version | file | needs | variants | not the paper's text (`reconstructed`) "
            "| additions |", "|---|---|---|---|---|---|---|"]
    for template in spec.get("templates", []):
        files = template.get("file", "")
        if template.get("system"):
            files = f"{files}` + system `{template['system']}"
        additions = "; ".join(f"`{_cell(a)}`" for a in template.get("additions", []))
        guarded = "; ".join(f"`{_cell(a)}`" for a in template.get("guarded_additions", []))
        if guarded:
            additions += f" (guarded: {guarded})" if additions else f"guarded: {guarded}"
        out.append("| `{}` | {} | `{}` | {} | {} | {} | {} |".format(
            template["id"], template["version"], files,
            ", ".join(template.get("needs", [])) or "—",
            ", ".join(template.get("variants", [])) or "—",
            _cell(template.get("reconstructed", "")) or "— (the paper's text)",
            additions or "—"))
    return "\n".join(out) + "\n"


def gen_source(arg: str | None) -> str:
    """``FILE:NAME``: the source of a top-level class or function, as a python code block.

    ``FILE`` alone: the whole file (small files only: a plugin's ``entry_points.txt``).

    Worked examples quote the tests that run them, so an example that stops working fails the
    test suite, and one that is renamed or removed fails the strict build here.
    """
    import ast

    path_text, _, name = (arg or "").partition(":")
    path = ROOT / path_text
    source = path.read_text(encoding="utf-8")
    if not name:  # a whole small file (a plugin's entry_points.txt, a templates.yaml)
        language = {".py": "python", ".txt": "ini", ".yaml": "yaml", ".j2": "jinja"}.get(
            path.suffix, "text")
        return "\n".join([f"```{language} title=\"{path_text}\"", source.rstrip(), "```", ""])
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name == name:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            lines = source.splitlines()[start - 1:node.end_lineno]
            return "\n".join([f"```python title=\"{path_text}\"", *lines, "```", ""])
    raise ValueError(f"gen:source {arg!r}: no top-level class or function {name!r} in {path}")


def _type_name(hint: Any) -> str:
    text = str(hint).replace("typing.", "").replace("capjudge.params.", "")
    # "or", not "|": a pipe inside a code span in a table cell renders with its backslash.
    return text.replace("<class '", "").replace("'>", "").replace(" | ", " or ")


def gen_params(_: str | None) -> str:
    """Every section and key of ``params.yaml``, from the pydantic schema (``capjudge.params``)."""
    import typing

    from pydantic import BaseModel

    from capjudge.params import params_model

    def is_model(value: Any) -> bool:
        return isinstance(value, type) and issubclass(value, BaseModel)

    def model_of(hint: Any) -> Any:
        # A section is `Model | None` or `dict[str, Model] | None` (one entry per name).
        for arg in (hint, *typing.get_args(hint)):
            if is_model(arg):
                return arg, ""
            if typing.get_origin(arg) is dict and is_model(typing.get_args(arg)[-1]):
                return typing.get_args(arg)[-1], "NAME."
        return None, ""

    out = []
    for name, field in params_model().model_fields.items():
        section = field.alias or name
        model, prefix = model_of(field.annotation)
        out += [f"## `{section}`", ""]
        if model is None:
            out += [f"A mapping: `{_cell(_type_name(field.annotation))}`.", ""]
            continue
        if prefix:
            out += [f"One entry per name (`{section}.NAME`), each with these keys.", ""]
        out += ["| key | type | default |", "|---|---|---|"]
        for key, sub in model.model_fields.items():
            default = "required" if sub.is_required() else f"`{_cell(repr(sub.default))}`"
            out.append(f"| `{section}.{prefix}{sub.alias or key}` | "
                       f"`{_cell(_type_name(sub.annotation))}` | {default} |")
        out.append("")
    return "\n".join(out)


def gen_backends(_: str | None) -> str:
    """The registered backend kinds with their declared options."""
    from capjudge.backends import BACKEND_REGISTRY

    out = ["| kind | class | options | default concurrency | summary |", "|---|---|---|---|---|"]
    # The project's own kinds: the page must not depend on which plugins are installed.
    for kind in filter(BACKEND_REGISTRY.is_builtin, BACKEND_REGISTRY.names()):
        cls = BACKEND_REGISTRY.get(kind)
        doc = (cls.__doc__ or "").strip().split("\n")[0]
        out.append(f"| `{kind}/...` | `{cls.__module__}.{cls.__name__}` | "
                   f"{', '.join(f'`{o}`' for o in sorted(cls.options))} | "
                   f"{cls.default_concurrency} | {_cell(doc)} |")
    return "\n".join(out) + "\n"


def gen_datasets(_: str | None) -> str:
    """The built-in meta-eval datasets (one module each under ``metaeval/datasets/loaders/``)."""
    from capjudge.metaeval import datasets

    out = ["| `--dataset` | published file | default protocol | references | kind | about |",
           "|---|---|---|---|---|---|"]
    for name in filter(datasets.DATASET_REGISTRY.is_builtin, datasets.dataset_names()):
        spec = datasets.get_dataset(name)
        out.append(f"| `{name}` | {_cell(spec.file) or '—'} | `{spec.default_protocol}` | "
                   f"{'yes' if spec.has_references else 'no'} | "
                   f"{'pairwise (accuracy)' if spec.pairwise else 'ratings'} | "
                   f"{_cell(spec.description)} |")
    return "\n".join(out) + "\n"


def gen_protocols(_: str | None) -> str:
    """The protocols the built-in meta-eval datasets declare."""
    from capjudge.metaeval import datasets

    out = ["| `--protocol` | dataset | rows | criterion | headline | references | rounding | "
           "description |", "|---|---|---|---|---|---|---|---|"]
    builtin = filter(datasets.DATASET_REGISTRY.is_builtin, datasets.dataset_names())
    for p in (p for name in builtin for p in datasets.get_dataset(name).protocols):
        refs = "all" if p.refs is None else str(p.refs)
        if p.ref_settings:
            refs += " (also " + ", ".join(str(r) for r in p.ref_settings) + ")"
        out.append(f"| `{p.name}` | `{p.dataset}` | {p.rows} | {p.criterion} | {p.headline} | "
                   f"{refs} | {'—' if p.round_to is None else p.round_to} | "
                   f"{_cell(p.description)} |")
    return "\n".join(out) + "\n"


def gen_sample_metrics(_: str | None) -> str:
    """Agreement on the bundled sample, from the committed reports/metrics.json + lineage.json."""
    metrics = json.loads((ROOT / "reports" / "metrics.json").read_text(encoding="utf-8"))
    lineage_path = ROOT / "reports" / "lineage.json"
    lineage = json.loads(lineage_path.read_text(encoding="utf-8")) if lineage_path.is_file() else {}
    out = []
    run = lineage.get("run", lineage)
    facts = [f"{key} `{run[key]}`" for key in ("run_id", "time", "git_revision", "git_dirty")
             if isinstance(run, dict) and key in run]
    out += ["Read from `reports/metrics.json` (written by the `report` stage of `dvc repro` on the "
            "bundled sample and committed with `dvc.lock`)"
            + (": " + ", ".join(facts) if facts else "") + ". Coefficients × 100.", "",
            "| judge / mode | n | Kendall τ-b | Kendall τ-c | Pearson | Spearman |",
            "|---|---:|---:|---:|---:|---:|"]
    for series, values in sorted(metrics.items()):
        if not isinstance(values, dict) or "kendall_tau_b" not in values:
            continue

        def pct(key: str, values: dict[str, Any] = values) -> str:
            value = values.get(key)
            return "—" if value is None else f"{100 * value:.1f}"

        out.append(f"| `{series}` | {values.get('n', '—')} | {pct('kendall_tau_b')} | "
                   f"{pct('kendall_tau_c')} | {pct('pearson')} | {pct('spearman')} |")
    runs = metrics.get("runs", {})
    if runs:
        out += ["", "| judge | failure rate | low-mass rate | model calls |",
                "|---|---:|---:|---:|"]
        for judge, values in sorted(runs.items()):
            out.append(f"| `{judge}` | {values.get('failure_rate', '—')} | "
                       f"{values.get('low_mass_rate', '—')} | {values.get('model_calls', '—')} |")
    return "\n".join(out) + "\n"


GENERATORS: dict[str, Callable[[str | None], str]] = {
    "cli": gen_cli, "method": gen_method, "backends": gen_backends, "datasets": gen_datasets,
    "protocols": gen_protocols, "sample-metrics": gen_sample_metrics, "source": gen_source,
    "params": gen_params,
}


def render(markdown: str) -> str:
    """Replace every marker in a page's markdown by its generated text."""
    def replace(match: re.Match[str]) -> str:
        kind, arg = match.group(1), match.group(2)
        if kind not in GENERATORS:
            raise ValueError(f"unknown docs generator {kind!r} (known: {sorted(GENERATORS)})")
        return GENERATORS[kind](arg)

    return MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """The mkdocs event: fill the markers of one page."""
    return render(markdown)
