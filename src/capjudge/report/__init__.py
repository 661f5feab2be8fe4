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

The code lives in :mod:`capjudge.report.run`; this package re-exports its public names.
"""

from capjudge.report.run import (
    SAMPLE_PROTOCOL,
    ReportConfig,
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
