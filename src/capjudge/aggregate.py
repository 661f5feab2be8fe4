"""The aggregate stage: judge outputs (raw distributions) -> per-item and per-system scores.

Aggregation only reads the judges' ``judgements.parquet`` files, so changing an aggregation
parameter (HarmonicEval's gamma, whether low-mass judgements count) never re-runs a judge.

Outputs (in ``out_dir``):

- ``criteria.parquet``: one row per judge, item, mode and criterion (score, argmax, sd, mass,
  status, reason).
- ``item_scores.parquet``: one row per judge, item and mode with the method's overall score
  (G-VEval score, ACCR mean, HarmonicEval harmonic weighting, 3D precision, VisCE² rating), a
  status (``ok``, ``partial`` when some criteria are missing, ``failed``, ``skipped``) and why.
- ``system_scores.parquet``: per judge, mode and system: mean overall score, counts, failures,
  and for 3D precision both the macro (mean of items) and micro (summed C and H) precision.
- ``summary.json``.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from capjudge.methods import Criterion, get_method
from capjudge.scoring import precision_macro, precision_micro

ITEM_SCHEMA = pa.schema([
    ("judge", pa.string()), ("method", pa.string()), ("mode", pa.string()),
    ("item_id", pa.string()), ("system", pa.string()), ("score", pa.float64()),
    ("status", pa.string()), ("reason", pa.string()), ("criteria_scored", pa.int64()),
    ("criteria_total", pa.int64()), ("backend", pa.string()), ("snapshot", pa.string()),
])
SYSTEM_SCHEMA = pa.schema([
    ("judge", pa.string()), ("method", pa.string()), ("mode", pa.string()),
    ("system", pa.string()), ("mean_score", pa.float64()), ("items", pa.int64()),
    ("scored", pa.int64()), ("failed", pa.int64()), ("precision_macro", pa.float64()),
    ("precision_micro", pa.float64()),
])


@dataclass(frozen=True)
class AggregateConfig:
    """``params.yaml: aggregate``."""

    gamma: float = 0.75  # HarmonicEval weighting: 1 uniform, 0.5 inverse variance, ->0 select
    include_low_mass: bool = True  # low-mass judgements have a score; flagged, still used


def _criterion(row: dict[str, Any], include_low_mass: bool) -> Criterion:
    score = row.get("score")
    if row["status"] == "low_mass" and not include_low_mass:
        score = None
    return Criterion(name=row["criterion"], status=row["status"], reason=row.get("reason"),
                     score=score, sd=row.get("sd"), mass=row.get("mass"),
                     printed=row.get("printed"))


def aggregate_judge(judge: str, rows: Sequence[dict[str, Any]], config: AggregateConfig
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Item and system scores of one judge's judgement rows."""
    if not rows:
        return [], []
    method_name = rows[0]["method"]
    method = get_method(method_name)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["item_id"], r["mode"])].append(r)
    items = []
    for (item_id, mode), group in sorted(groups.items()):
        judged = [r for r in group if r["status"] != "skipped"]
        first = group[0]
        base = {"judge": judge, "method": method_name, "mode": mode, "item_id": item_id,
                "system": first.get("system"), "backend": first.get("backend"),
                "snapshot": first.get("snapshot"), "criteria_total": len(group)}
        if not judged:
            items.append({**base, "score": None, "status": "skipped", "criteria_scored": 0,
                          "reason": "; ".join(sorted({str(r.get("reason")) for r in group}))})
            continue
        criteria = [_criterion(r, config.include_low_mass) for r in judged]
        score, why = method.overall(criteria, {"gamma": config.gamma})
        scored = sum(c.score is not None for c in criteria)
        failures = sorted({f"{c.name}: {c.status} ({c.reason})" for c in criteria
                           if c.score is None})
        reason: str | None
        if score is None or (isinstance(score, float) and math.isnan(score)):
            status = "failed"
            reason = "; ".join(failures) or why
        elif failures or len(judged) < len(group):
            status, reason = "partial", why or "; ".join(failures)
        else:
            status, reason = "ok", why
        items.append({**base, "score": score, "status": status, "reason": reason,
                      "criteria_scored": scored})
    systems = []
    by_system: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for it in items:
        by_system[(it["mode"], it["system"] or "(none)")].append(it)
    for (mode, system), group in sorted(by_system.items()):
        values = [float(g["score"]) for g in group if g["score"] is not None]
        row = {"judge": judge, "method": method_name, "mode": mode, "system": system,
               "mean_score": sum(values) / len(values) if values else None,
               "items": len(group), "scored": len(values),
               "failed": sum(g["status"] == "failed" for g in group),
               "precision_macro": None, "precision_micro": None}
        if method_name == "cap3d":
            ids = {g["item_id"] for g in group}
            pairs = _ch_pairs([r for r in rows if r["item_id"] in ids and r["mode"] == mode])
            row["precision_macro"] = precision_macro(pairs)
            row["precision_micro"] = precision_micro(pairs)
        systems.append(row)
    return items, systems


def _ch_pairs(rows: Sequence[dict[str, Any]]) -> list[tuple[float, float]]:
    points: dict[str, dict[str, float]] = defaultdict(dict)
    for r in rows:
        if r["criterion"] in ("correctness", "hallucination") and r.get("score") is not None:
            points[r["item_id"]][r["criterion"]] = float(r["score"])
    return [(p["correctness"], p["hallucination"]) for p in points.values()
            if {"correctness", "hallucination"} <= p.keys()]


def run_aggregate(judge_dirs: Sequence[str | Path], out_dir: str | Path,
                  config: AggregateConfig) -> dict[str, Any]:
    """Aggregate every judge directory (its name is the judge's name)."""
    all_criteria: list[dict[str, Any]] = []
    all_items: list[dict[str, Any]] = []
    all_systems: list[dict[str, Any]] = []
    for d in judge_dirs:
        path = Path(d) / "judgements.parquet"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no judgements (did the judge stage run?)")
        judge = Path(d).name
        rows = pq.read_table(path).to_pylist()
        for r in rows:
            all_criteria.append({"judge": judge, **{k: r.get(k) for k in (
                "method", "mode", "item_id", "system", "criterion", "status", "reason",
                "score", "argmax", "sd", "mass", "backend", "snapshot", "template")}})
        items, systems = aggregate_judge(judge, rows, config)
        all_items += items
        all_systems += systems
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(all_criteria), out / "criteria.parquet")
    pq.write_table(pa.Table.from_pylist(all_items, schema=ITEM_SCHEMA), out / "item_scores.parquet")
    pq.write_table(pa.Table.from_pylist(all_systems, schema=SYSTEM_SCHEMA),
                   out / "system_scores.parquet")
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for it in all_items:
        counts[f"{it['judge']}/{it['mode']}"][it["status"]] += 1
    summary = {"gamma": config.gamma, "include_low_mass": config.include_low_mass,
               "judges": [Path(d).name for d in judge_dirs],
               "item_status": {k: dict(v) for k, v in sorted(counts.items())}}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary
