"""The report database (DuckDB): the run's tables and the one view of human labels.

Tables: ``items``, ``quarantine`` (ingest), ``judgements`` (every judge's rows, with
``judge``), ``criteria``, ``item_scores``, ``system_scores`` (aggregate), ``labels`` (human
labels in long form: ``item_id``, ``criterion``, ``annotator``, ``value``), ``settings``
(``human_criterion``: which label the report compares with), and after the report ``agreement``,
``runs``, ``run_backends``.

Views: ``human`` (per item and criterion, the annotators' mean) and ``scored_items``
(``item_scores`` joined with the configured human criterion's mean). The report and
``capjudge compare`` both read ``scored_items``; the SQL that joins judges with humans is
written here once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from capjudge.records import ItemRow, LabelRow, ScoredItem

HUMAN_VIEW = """
CREATE OR REPLACE VIEW human AS
SELECT item_id, criterion, avg(value) AS human, count(*) AS annotators
FROM labels GROUP BY item_id, criterion
"""

SCORED_ITEMS_VIEW = """
CREATE OR REPLACE VIEW scored_items AS
SELECT s.judge, s.method, s.mode, s.judge || '/' || s.mode AS series, s.item_id, s.system,
       s.score, s.status, s.cause, s.reason, h.human
FROM item_scores s
LEFT JOIN human h ON h.item_id = s.item_id
     AND h.criterion = (SELECT value FROM settings WHERE key = 'human_criterion')
"""


def label_rows(items: Sequence[ItemRow]) -> list[LabelRow]:
    """items.labels (JSON) in long form: one row per item, criterion and annotator."""
    rows = []
    for item in items:
        for criterion, value in json.loads(item.labels or "{}").items():
            values = value if isinstance(value, list) else [value]
            for k, v in enumerate(values):
                rows.append(LabelRow(item_id=item.id, criterion=criterion, annotator=k,
                                     value=float(v)))
    return rows


def build_database(db_path: Path, tables: dict[str, pa.Table], human_criterion: str) -> Any:
    """(Re)create the database with the given tables and the views; returns a connection."""
    import duckdb

    db_path.parent.mkdir(parents=True, exist_ok=True)
    for stale in (db_path, Path(f"{db_path}.wal")):
        stale.unlink(missing_ok=True)
    con = duckdb.connect(str(db_path))
    for name, table in tables.items():
        add_table(con, name, table)
    add_table(con, "settings", pa.Table.from_pylist(
        [{"key": "human_criterion", "value": human_criterion}]))
    con.execute(HUMAN_VIEW)
    con.execute(SCORED_ITEMS_VIEW)
    return con


def add_table(con: Any, name: str, table: pa.Table) -> None:
    """Create table ``name`` from an Arrow table."""
    con.register(f"_{name}", table)
    con.execute(f"CREATE TABLE {name} AS SELECT * FROM _{name}")
    con.unregister(f"_{name}")


def scored_items(con: Any) -> list[ScoredItem]:
    """Every judge/mode's items with their score, status and the human label's mean."""
    rows: list[ScoredItem] = con.execute(
        "SELECT * FROM scored_items ORDER BY series, item_id").df().to_dict("records")
    for r in rows:  # pandas turns SQL NULL into NaN in float columns
        for key in ("score", "human"):
            if r[key] is not None and r[key] != r[key]:
                r[key] = None
    return rows


def human_by_criterion(con: Any) -> list[tuple[str, str, str, str, float, str, float]]:
    """Rows for the per-criterion matrices: one per scored criterion of each labelled item.

    Each row is (judge, mode, judge criterion, item, score, human criterion, human).
    """
    # Test-retest repeats of one criterion are averaged: one point per item, as the item
    # scores are (one repeat: the score itself).
    rows: list[tuple[str, str, str, str, float, str, float]] = con.execute("""
        SELECT c.judge, c.mode, c.criterion, c.item_id, avg(c.score), h.criterion, h.human
        FROM criteria c JOIN human h USING (item_id)
        WHERE c.score IS NOT NULL
        GROUP BY c.judge, c.mode, c.criterion, c.item_id, h.criterion, h.human
    """).fetchall()
    return rows
