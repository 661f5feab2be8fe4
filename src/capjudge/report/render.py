"""Rendering the report: Markdown and a self-contained HTML page.

Both come from Jinja templates (``report/templates``) over the same context; plots are
inlined in the HTML as data URLs.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from capjudge.records import AgreementEntry
from capjudge.report.context import ReportView

TEMPLATES = Path(__file__).parent / "templates"


def fmt(value: Any, scale: float = 100.0, digits: int = 1) -> str:
    """A number for a table cell (x100 for coefficients by default); '-' for none/NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{scale * float(value):.{digits}f}"


def with_ci(entry: AgreementEntry, name: str) -> str:
    """``τ [low, high]`` for a statistic with its bootstrap CI (x100)."""
    ci = (entry.get("ci95") or {}).get(name)
    value = fmt(entry.get(name))
    return f"{value} [{fmt(ci[0])}, {fmt(ci[1])}]" if ci else value


def ci_cell(row: Mapping[str, object], name: str, scale: float = 100.0, digits: int = 1) -> str:
    """``value [low, high]`` from a table row's ``name``, ``name_low`` and ``name_high`` columns.

    That is the reliability tables' layout; the values are multiplied by ``scale``.
    """
    value = fmt(row.get(name), scale, digits)
    low, high = row.get(f"{name}_low"), row.get(f"{name}_high")
    if low is None or high is None or any(isinstance(v, float) and math.isnan(v)
                                          for v in (low, high)):
        return value
    return f"{value} [{fmt(low, scale, digits)}, {fmt(high, scale, digits)}]"


def md_cell(value: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def data_url(path: str) -> str:
    """A PNG file as a data URL (the HTML page has no external files)."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode()


@cache
def _environment(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             undefined=jinja2.StrictUndefined, autoescape=autoescape,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(fmt=fmt, with_ci=with_ci, md=md_cell, data_url=data_url, ci=ci_cell)
    return env


def render_markdown(ctx: ReportView) -> str:
    """report.md."""
    return _environment(False).get_template("report.md.j2").render(**ctx)


def render_html(ctx: ReportView) -> str:
    """report.html: the same content, escaped, with the plots inlined."""
    return _environment(True).get_template("report.html.j2").render(**ctx)
