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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import pyarrow.parquet as pq

from capjudge.methods import (
    AggregateOptions,
    Criterion,
    Verdict,
    aggregate_settings,
    get_method,
    verdict,
)
from capjudge.protocol import Status
from capjudge.records import (
    AggregateSummary,
    CriterionScore,
    ItemScore,
    Judgement,
    RepeatScore,
    SystemScore,
)
from capjudge.stage_files import (
    CRITERIA,
    ITEM_SCORES,
    REPEAT_SCORES,
    SYSTEM_SCORES,
    judgements_file,
    summary_file,
)
from capjudge.util.atomic import atomic_path, check_complete, stage_outputs, write_json

REPEAT_SCHEMA = RepeatScore.schema()
"""The columns of ``repeat_scores.parquet`` (:class:`capjudge.records.RepeatScore`)."""


@dataclass(frozen=True)
class AggregateConfig:
    """``params.yaml: aggregate``.

    Attributes:
        include_low_mass: low-mass judgements have a score; flagged, still used (False: left
            out, as if they had failed).
        settings: the methods' own numbers (:attr:`capjudge.methods.Method.aggregate_settings`,
            e.g. HarmonicEval's ``gamma``), written in params.yaml as keys of ``aggregate``
            beside ``include_low_mass`` (:meth:`from_section`). Absent: each method's default.
    """

    include_low_mass: bool = True
    settings: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _checked(self.settings)

    @classmethod
    def from_section(cls, section: Mapping[str, object]) -> AggregateConfig:
        """The config from ``params.yaml: aggregate`` (without ``out``).

        Raises:
            ValueError: a key no method declares, or a value out of its bounds.
        """
        include = section.get("include_low_mass", True)
        if not isinstance(include, bool):
            raise ValueError(f"aggregate.include_low_mass must be true or false, got "
                             f"{include!r}")
        return cls(include_low_mass=include, settings=_checked(
            {k: v for k, v in section.items() if k != "include_low_mass"}))

    def options(self) -> AggregateOptions:
        """The options every method's ``overall`` and the status rule receive."""
        return {"include_low_mass": self.include_low_mass, "settings": dict(self.settings)}

    def in_force(self) -> dict[str, float]:
        """Every declared setting's value in this run (the default where not set)."""
        return {name: float(self.settings.get(name, setting.default))
                for name, (setting, _) in sorted(aggregate_settings().items())}


def _checked(settings: Mapping[str, object]) -> dict[str, float]:
    """``settings`` checked against what the methods declare (names, numbers, bounds).

    Raises:
        ValueError: a name no method declares, or a value out of its setting's bounds.
    """
    if not settings:
        return {}
    declared = aggregate_settings()
    out: dict[str, float] = {}
    for name, value in settings.items():
        if name not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise ValueError(f"aggregate.{name}: no method declares this setting "
                             f"(declared: {known})")
        out[name] = declared[name][0].check(name, value)
    return out


def _criterion(row: Judgement) -> Criterion:
    # The judge stage wrote the status from a Status; the file holds it as text.
    return Criterion(name=row.criterion, status=cast(Status, row.status), reason=row.reason,
                     score=row.score, sd=row.sd, mass=row.mass, printed=row.printed,
                     source=row.source or "none")


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


def aggregate_judge(judge: str, rows: Sequence[Judgement], config: AggregateConfig
                    ) -> tuple[list[ItemScore], list[SystemScore]]:
    """Item and system scores of one judge's judgement rows."""
    items, systems, _ = aggregate_judge_repeats(judge, rows, config)
    return items, systems


def aggregate_judge_repeats(judge: str, rows: Sequence[Judgement], config: AggregateConfig
                            ) -> tuple[list[ItemScore], list[SystemScore], list[RepeatScore]]:
    """Item, system and per-repeat item scores of one judge's judgement rows.

    Rows without a ``repeat`` (written before repeats existed) are repeat 0. A skipped
    criterion row is recorded once but holds for every repeat (nothing was asked).
    """
    if not rows:
        return [], [], []
    method_name = rows[0].method
    method = get_method(method_name)
    groups: dict[tuple[str, str], list[Judgement]] = defaultdict(list)
    for r in rows:
        groups[(r.item_id, r.mode)].append(r)
    items: list[ItemScore] = []
    per_repeat: list[RepeatScore] = []
    criteria_of: dict[tuple[str, str], list[list[Criterion]]] = {}
    for (item_id, mode), group in sorted(groups.items()):
        first = group[0]
        # Row positions per repeat; skip rows join every repeat, in their original order.
        by_repeat: dict[int, list[int]] = defaultdict(list)
        skipped = [i for i, r in enumerate(group) if r.status == "skipped"]
        for i, r in enumerate(group):
            if r.status != "skipped":
                by_repeat[int(r.repeat or 0)].append(i)
        if not by_repeat:
            by_repeat[0] = []
        repeat_criteria = {k: [_criterion(group[i]) for i in sorted(positions + skipped)]
                           for k, positions in sorted(by_repeat.items())}
        criteria_of[(item_id, mode)] = list(repeat_criteria.values())
        repeat_verdicts = {k: verdict(method, c, config.options())
                           for k, c in repeat_criteria.items()}
        for k, rv in repeat_verdicts.items():
            per_repeat.append(RepeatScore(
                judge=judge, method=method_name, mode=mode, item_id=item_id,
                system=first.system, repeat=k, score=rv.score, status=rv.status,
                cause=rv.cause))
        v = combine_repeats(list(repeat_verdicts.values()))
        items.append(ItemScore(
            judge=judge, method=method_name, mode=mode, item_id=item_id, system=first.system,
            backend=first.backend, snapshot=first.snapshot, criteria_total=v.total,
            score=v.score, status=v.status, cause=v.cause, reason=v.reason,
            criteria_scored=v.scored))
    systems: list[SystemScore] = []
    by_system: dict[tuple[str, str], list[ItemScore]] = defaultdict(list)
    for it in items:
        by_system[(it.mode, it.system or "(none)")].append(it)
    for (mode, system), members in sorted(by_system.items()):
        values = [float(g.score) for g in members if g.score is not None]
        # Each repeat of an item counts as one criteria list (one repeat: as before).
        aggregates = method.system_aggregates([c for g in members
                                               for c in criteria_of[(g.item_id, mode)]])
        systems.append(SystemScore(
            judge=judge, method=method_name, mode=mode, system=system,
            mean_score=sum(values) / len(values) if values else None, items=len(members),
            scored=len(values), failed=sum(g.status == "failed" for g in members),
            aggregates=aggregates))
    return items, systems, per_repeat


def run_aggregate(judge_dirs: Sequence[str | Path], out_dir: str | Path,
                  config: AggregateConfig) -> AggregateSummary:
    """Aggregate every judge directory (its name is the judge's name)."""
    all_criteria: list[CriterionScore] = []
    all_items: list[ItemScore] = []
    all_systems: list[SystemScore] = []
    all_repeats: list[RepeatScore] = []
    for d in judge_dirs:
        path = judgements_file(d)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no judgements (did the judge stage run?)")
        check_complete(d, "the judge stage")  # not a set a killed run left half-written
        judge = Path(d).name
        rows = Judgement.from_table(pq.read_table(path))
        all_criteria += [CriterionScore(
            judge=judge, method=r.method, mode=r.mode, item_id=r.item_id, system=r.system,
            criterion=r.criterion, status=r.status, reason=r.reason, score=r.score,
            argmax=r.argmax, sd=r.sd, mass=r.mass, backend=r.backend, snapshot=r.snapshot,
            template=r.template, repeat=r.repeat or 0) for r in rows]
        items, systems, repeats = aggregate_judge_repeats(judge, rows, config)
        all_items += items
        all_systems += systems
        all_repeats += repeats
    tables = {
        CRITERIA: CriterionScore.table(all_criteria),
        ITEM_SCORES: ItemScore.table(all_items),
        REPEAT_SCORES: RepeatScore.table(all_repeats),
        SYSTEM_SCORES: SystemScore.table(all_systems),
    }
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for it in all_items:
        counts[f"{it.judge}/{it.mode}"][it.status] += 1
    summary: AggregateSummary = {
        "settings": config.in_force(), "include_low_mass": config.include_low_mass,
        "judges": [Path(d).name for d in judge_dirs],
        "item_status": {k: dict(v) for k, v in sorted(counts.items())}}
    # The five files are one set (capjudge.util.atomic.stage_outputs).
    with stage_outputs(out_dir) as out:
        for name, table in tables.items():
            with atomic_path(out / name) as tmp:
                pq.write_table(table, tmp)
        write_json(summary_file(out), summary)
    return summary
