"""The aggregate stage: judge outputs (raw distributions) -> per-item and per-system scores.

Aggregation only reads the judges' ``judgements.parquet`` files, so changing an aggregation
parameter (HarmonicEval's gamma, whether low-mass judgements count) never re-runs a judge.

Outputs (in ``out_dir``):

- ``criteria.parquet``: one row per judge, item, mode and criterion (score, argmax, sd, mass,
  status, reason).
- ``item_scores.parquet``: one row per judge, item and mode with the method's overall score
  (each method says how its criteria combine), a status from the one rule
  (:func:`capjudge.methods.verdict`: ``ok``, ``low_mass``, ``partial`` when some criteria are
  missing, ``failed`` with its ``cause``, ``skipped``) and why.
- ``system_scores.parquet``: per judge, mode and system: mean overall score, counts, failures,
  and the method's declared system-level aggregates (e.g. 3D precision macro and micro).
- ``repeat_scores.parquet``: one row per judge, item, mode and test-retest repeat
  (``JudgeConfig.repeats``) with that repeat's overall score and status; the report's
  test-retest section reads it. With one repeat it holds repeat 0 only.
- ``summary.json``.

With ``repeats > 1`` an item's score is the mean of its scored repeats (each repeat's score
from the one rule); every number for a judge run with one repeat is unchanged.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from capjudge.atomic import atomic_path, check_complete, stage_outputs, write_json
from capjudge.methods import Criterion, Verdict, get_method, verdict

ITEM_SCHEMA = pa.schema([
    ("judge", pa.string()), ("method", pa.string()), ("mode", pa.string()),
    ("item_id", pa.string()), ("system", pa.string()), ("score", pa.float64()),
    ("status", pa.string()), ("cause", pa.string()), ("reason", pa.string()),
    ("criteria_scored", pa.int64()), ("criteria_total", pa.int64()), ("backend", pa.string()),
    ("snapshot", pa.string()),
])
REPEAT_SCHEMA = pa.schema([
    ("judge", pa.string()), ("method", pa.string()), ("mode", pa.string()),
    ("item_id", pa.string()), ("system", pa.string()), ("repeat", pa.int64()),
    ("score", pa.float64()), ("status", pa.string()), ("cause", pa.string()),
])
SYSTEM_FIELDS = [
    ("judge", pa.string()), ("method", pa.string()), ("mode", pa.string()),
    ("system", pa.string()), ("mean_score", pa.float64()), ("items", pa.int64()),
    ("scored", pa.int64()), ("failed", pa.int64()),
]
"""Fixed system columns; each method's declared aggregates (e.g. 3D ``precision_macro``,
``precision_micro``) follow as float columns."""


@dataclass(frozen=True)
class AggregateConfig:
    """``params.yaml: aggregate``."""

    gamma: float = 0.75  # HarmonicEval weighting: 1 uniform, 0.5 inverse variance, ->0 select
    include_low_mass: bool = True  # low-mass judgements have a score; flagged, still used

    def options(self) -> dict[str, Any]:
        """The options every method's ``overall`` and the status rule receive."""
        return {"gamma": self.gamma, "include_low_mass": self.include_low_mass}


def _criterion(row: dict[str, Any]) -> Criterion:
    return Criterion(name=row["criterion"], status=row["status"], reason=row.get("reason"),
                     score=row.get("score"), sd=row.get("sd"), mass=row.get("mass"),
                     printed=row.get("printed"), source=row.get("source") or "none")


def combine_repeats(verdicts: Sequence[Verdict]) -> Verdict:
    """One item's verdict from its test-retest repeats' verdicts.

    One repeat: that verdict, unchanged. Several: the score is the mean of the scored repeats;
    the status is ``ok`` only when every repeat is, ``partial`` when some repeats have no
    score (the reason says how many), else the worst scored status (``partial`` before
    ``low_mass``). With no scored repeat, the first repeat's failure (or skip) stands.

    Args:
        verdicts: the item's per-repeat verdicts, repeat 0 first.
    """
    if len(verdicts) == 1:
        return verdicts[0]
    scored = [v for v in verdicts if v.score is not None]
    if not scored:
        return verdicts[0]
    score = sum(float(v.score) for v in scored if v.score is not None) / len(scored)
    first = scored[0]
    if len(scored) < len(verdicts):
        causes = sorted({v.detail for v in verdicts if v.score is None})
        return Verdict(score, "partial", None,
                       f"scored in {len(scored)} of {len(verdicts)} repeats "
                       f"(others: {', '.join(causes)})", first.scored, first.total)
    for status in ("partial", "low_mass"):
        worst = next((v for v in scored if v.status == status), None)
        if worst is not None:
            return Verdict(score, status, None, worst.reason, worst.scored, worst.total)
    return Verdict(score, "ok", None, first.reason, first.scored, first.total)


def aggregate_judge(judge: str, rows: Sequence[dict[str, Any]], config: AggregateConfig
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Item and system scores of one judge's judgement rows."""
    items, systems, _ = aggregate_judge_repeats(judge, rows, config)
    return items, systems


def aggregate_judge_repeats(judge: str, rows: Sequence[dict[str, Any]],
                            config: AggregateConfig
                            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                       list[dict[str, Any]]]:
    """Item, system and per-repeat item scores of one judge's judgement rows.

    Rows without a ``repeat`` (written before repeats existed) are repeat 0. A skipped
    criterion row is recorded once but holds for every repeat (nothing was asked).
    """
    if not rows:
        return [], [], []
    method_name = rows[0]["method"]
    method = get_method(method_name)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["item_id"], r["mode"])].append(r)
    items = []
    per_repeat: list[dict[str, Any]] = []
    criteria_of: dict[tuple[str, str], list[list[Criterion]]] = {}
    for (item_id, mode), group in sorted(groups.items()):
        first = group[0]
        # Row positions per repeat; skip rows join every repeat, in their original order.
        by_repeat: dict[int, list[int]] = defaultdict(list)
        skipped = [i for i, r in enumerate(group) if r["status"] == "skipped"]
        for i, r in enumerate(group):
            if r["status"] != "skipped":
                by_repeat[int(r.get("repeat") or 0)].append(i)
        if not by_repeat:
            by_repeat[0] = []
        repeat_criteria = {k: [_criterion(group[i]) for i in sorted(positions + skipped)]
                           for k, positions in sorted(by_repeat.items())}
        criteria_of[(item_id, mode)] = list(repeat_criteria.values())
        repeat_verdicts = {k: verdict(method, c, config.options())
                           for k, c in repeat_criteria.items()}
        for k, rv in repeat_verdicts.items():
            per_repeat.append({"judge": judge, "method": method_name, "mode": mode,
                               "item_id": item_id, "system": first.get("system"), "repeat": k,
                               "score": rv.score, "status": rv.status, "cause": rv.cause})
        v = combine_repeats(list(repeat_verdicts.values()))
        items.append({"judge": judge, "method": method_name, "mode": mode, "item_id": item_id,
                      "system": first.get("system"), "backend": first.get("backend"),
                      "snapshot": first.get("snapshot"), "criteria_total": v.total,
                      "score": v.score, "status": v.status, "cause": v.cause,
                      "reason": v.reason, "criteria_scored": v.scored})
    systems = []
    by_system: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for it in items:
        by_system[(it["mode"], it["system"] or "(none)")].append(it)
    for (mode, system), group in sorted(by_system.items()):
        values = [float(g["score"]) for g in group if g["score"] is not None]
        row = {"judge": judge, "method": method_name, "mode": mode, "system": system,
               "mean_score": sum(values) / len(values) if values else None,
               "items": len(group), "scored": len(values),
               "failed": sum(g["status"] == "failed" for g in group)}
        # Each repeat of an item counts as one criteria list (one repeat: as before).
        row.update(method.system_aggregates([c for g in group
                                             for c in criteria_of[(g["item_id"], mode)]]))
        systems.append(row)
    return items, systems, per_repeat


def system_schema(systems: Sequence[dict[str, Any]]) -> pa.Schema:
    """The fixed system columns plus every aggregate some method reported."""
    fixed = {name for name, _ in SYSTEM_FIELDS}
    extra = sorted({k for row in systems for k in row if k not in fixed})
    return pa.schema(SYSTEM_FIELDS + [(k, pa.float64()) for k in extra])


def run_aggregate(judge_dirs: Sequence[str | Path], out_dir: str | Path,
                  config: AggregateConfig) -> dict[str, Any]:
    """Aggregate every judge directory (its name is the judge's name)."""
    all_criteria: list[dict[str, Any]] = []
    all_items: list[dict[str, Any]] = []
    all_systems: list[dict[str, Any]] = []
    all_repeats: list[dict[str, Any]] = []
    for d in judge_dirs:
        path = Path(d) / "judgements.parquet"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no judgements (did the judge stage run?)")
        check_complete(d, "the judge stage")  # not a set a killed run left half-written
        judge = Path(d).name
        rows = pq.read_table(path).to_pylist()
        for r in rows:
            all_criteria.append({"judge": judge, **{k: r.get(k) for k in (
                "method", "mode", "item_id", "system", "criterion", "status", "reason",
                "score", "argmax", "sd", "mass", "backend", "snapshot", "template")},
                "repeat": r.get("repeat") or 0})
        items, systems, repeats = aggregate_judge_repeats(judge, rows, config)
        all_items += items
        all_systems += systems
        all_repeats += repeats
    schema = system_schema(all_systems)
    tables = {
        "criteria.parquet": pa.Table.from_pylist(all_criteria),
        "item_scores.parquet": pa.Table.from_pylist(all_items, schema=ITEM_SCHEMA),
        "repeat_scores.parquet": pa.Table.from_pylist(all_repeats, schema=REPEAT_SCHEMA),
        "system_scores.parquet": pa.Table.from_pylist(
            [{k: r.get(k) for k in schema.names} for r in all_systems], schema=schema),
    }
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for it in all_items:
        counts[f"{it['judge']}/{it['mode']}"][it["status"]] += 1
    summary = {"gamma": config.gamma, "include_low_mass": config.include_low_mass,
               "judges": [Path(d).name for d in judge_dirs],
               "item_status": {k: dict(v) for k, v in sorted(counts.items())}}
    # The five files are one set (capjudge.atomic.stage_outputs).
    with stage_outputs(out_dir) as out:
        for name, table in tables.items():
            with atomic_path(out / name) as tmp:
                pq.write_table(table, tmp)
        write_json(out / "summary.json", summary)
    return summary
