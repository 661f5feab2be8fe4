"""Prefect artifacts the flows publish, so the Prefect UI shows what a run found.

Keys are stable (per judge where the content is per judge), so the UI keeps each key's
history across runs. Prefect keys allow lowercase letters, digits and dashes only:
:func:`artifact_key` makes one from any judge name.

- report stage: ``capjudge-headline`` (table: every scored judge/mode with n, Kendall tau-b and
  its 95 % CI, failure and low-mass rates), ``headline-<judge>`` (the same rows of one judge),
  ``capjudge-report`` (link to the HTML report);
- watch flow: ``watch-verdict`` (markdown: what changed, the paired deltas, the alerts) and
  ``watch-verdict-<judge>`` for each re-evaluated judge;
- judge stage: ``judge-progress-<judge>`` (progress, updated after every chunk).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from uuid import UUID

from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)

from capjudge.records import PublishedHeadline

HEADLINE_KEY = "capjudge-headline"
REPORT_KEY = "capjudge-report"
VERDICT_KEY = "watch-verdict"


def artifact_key(*parts: str) -> str:
    """A valid Prefect artifact key from ``parts`` (lowercase letters, digits, dashes)."""
    key = re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")
    return key or "capjudge"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _tau(value: float | None, ci: Sequence[float | None] | None) -> str:
    if value is None:
        return "-"
    text = f"{100 * value:.1f}"
    if ci and ci[0] is not None and ci[1] is not None:
        text += f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"
    return text


def headline_rows(headline: Sequence[PublishedHeadline]) -> list[dict[str, str | int]]:
    """The table artifact's rows from the report's headline entries."""
    rows: list[dict[str, str | int]] = []
    for h in headline:
        entry = h["entry"]
        rows.append({"judge/mode": h["series"], "method": h["method"], "n": h["n"],
                     "Kendall tau-b x100 [95 % CI]": _tau(
                         entry.get("kendall_tau_b"),
                         (entry.get("ci95") or {}).get("kendall_tau_b")),
                     "failure rate": _pct(h["failure_rate"]),
                     "low-mass rate": _pct(h["low_mass_rate"])})
    return rows


def publish_report(headline: Sequence[PublishedHeadline], report_html: Path) -> dict[str, str]:
    """The report stage's artifacts: the headline table (overall and per judge) and the link.

    Returns:
        key -> artifact id.
    """
    rows = headline_rows(headline)
    ids = {HEADLINE_KEY: str(create_table_artifact(
        rows, key=HEADLINE_KEY, description="Agreement with humans per judge/mode "
        "(coefficients x100, 95 % bootstrap CI), failure and low-mass rates"))}
    for judge in sorted({str(h["series"]).split("/")[0] for h in headline}):
        key = artifact_key("headline", judge)
        mine = [r for r in rows if str(r["judge/mode"]).split("/")[0] == judge]
        ids[key] = str(create_table_artifact(mine, key=key,
                                             description=f"{judge}: agreement with humans"))
    ids[REPORT_KEY] = str(create_link_artifact(
        report_html.resolve().as_uri(), link_text="capjudge HTML report", key=REPORT_KEY,
        description="The self-contained HTML report of this run"))
    return ids


def publish_verdict(markdown: str, per_judge: dict[str, str]) -> dict[str, str]:
    """The watch flow's verdict: one overall markdown artifact and one per judge."""
    ids = {VERDICT_KEY: str(create_markdown_artifact(
        markdown, key=VERDICT_KEY, description="capjudge watch: the verdict of this run"))}
    for judge, text in per_judge.items():
        key = artifact_key("watch-verdict", judge)
        ids[key] = str(create_markdown_artifact(text, key=key,
                                                description=f"capjudge watch: {judge}"))
    return ids


class Progress:
    """A progress artifact for one judge's stage, updated as chunks finish."""

    def __init__(self, judge: str, chunks: int) -> None:
        self.chunks = max(1, chunks)
        self.key = artifact_key("judge-progress", judge)
        created = create_progress_artifact(0.0, key=self.key,
                                           description=f"{judge}: chunks judged")
        # Called from a synchronous flow, Prefect's sync-compatible API returns the id itself
        # (its stubs also allow a coroutine, for async callers).
        if not isinstance(created, UUID):
            raise TypeError(f"expected an artifact id, got {type(created).__name__}")
        self.id: UUID = created

    def update(self, done: int) -> None:
        """Set the progress to ``done`` of the chunks (as a percentage)."""
        update_progress_artifact(self.id, 100.0 * done / self.chunks,
                                 description=f"{done}/{self.chunks} chunks judged")
