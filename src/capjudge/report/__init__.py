"""The report stage: join scores with human labels in DuckDB, measure agreement, write reports.

Split by concern: :mod:`~capjudge.report.database` (tables and the one human-label view),
:mod:`~capjudge.report.agreement` (pure agreement maths over the joined rows),
:mod:`~capjudge.report.plots` (PNG plots on each method's declared scale),
:mod:`~capjudge.report.judge_reliability` (test-retest, injection, length bias, calibration
and judge-vs-judge tables over :mod:`capjudge.stats`) and
:mod:`~capjudge.report.render` (Markdown and HTML from Jinja templates).

Outputs: ``capjudge.duckdb``, ``report.md``, a self-contained ``report.html`` (plots inlined),
PNG plots, ``metrics.json`` (flat, for ``dvc metrics diff``; only series that were scored),
``agreement_points.csv`` (for ``dvc plots diff``) and ``lineage.json``. Every number names its
protocol.

The code lives in :mod:`capjudge.report.run` and the settings in
:mod:`capjudge.report.config`; this package re-exports their public names.
"""

from typing import TYPE_CHECKING, Any

from capjudge.report.config import ReportConfig

if TYPE_CHECKING:
    from capjudge.report.run import (
        SAMPLE_PROTOCOL,
        agreement,
        criterion_matrices,
        flat_metrics,
        label_rows,
        pearson,
        report_view,
        run_report,
    )

__all__ = ["ReportConfig", "SAMPLE_PROTOCOL", "agreement", "criterion_matrices", "flat_metrics",
           "label_rows", "pearson", "report_view", "run_report"]


def __getattr__(name: str) -> Any:
    """The stage's code, imported when first asked for (PEP 562).

    The settings (:class:`ReportConfig`) are imported with the package; the statistics and
    plotting behind :func:`run_report` only when something uses them, so the aggregate and
    validate stages' processes, which import this package for the settings, skip them.
    """
    if name in __all__:
        from capjudge.report import run

        return getattr(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
