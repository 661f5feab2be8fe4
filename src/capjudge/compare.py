"""``capjudge compare RUN_A RUN_B``: what changed between two runs (e.g. two judge backends).

Series are matched by ``judge/mode``; pass ``--series A_KEY B_KEY`` to compare two differently
named judges. For each matched series, on the items both runs scored:

- score shifts per item (mean, mean absolute, largest) and per system (mean score A vs B);
- agreement with humans in A and in B (Kendall tau-b with bootstrap 95 % CIs) and a paired
  permutation test of the difference;
- items whose pass/fail flipped (score >= the method's declared pass mark, or
  ``--threshold``) and items whose rank moved by more than 10 % of the list;
- cost and token difference;
- the two runs' lineage (backends, snapshots, fingerprints), and per series what changed between
  them as far as the run records say (:func:`what_changed`: backend, snapshot, models,
  fingerprints, template versions, the method's named settings, data and code version).

Kendall tau-b and its differences are printed x100, as in the report and ``capjudge history``;
the paired bootstrap CI of the difference is the one the history records
(:func:`compare_series`, also what :func:`capjudge.history.paired_to_previous` calls), with as
many resamples as the history used for that pair of runs
(:func:`capjudge.history.default_bootstrap`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, NotRequired, TypedDict

import numpy as np
from scipy import stats

from capjudge.methods import get_method
from capjudge.stats import (
    bootstrap_ci,
    kendall_tau_b,
    paired_difference,
    paired_permutation_test,
)


class SeriesItem(TypedDict):
    """One item of a series in a run: its system, the judge's score and the human label."""

    system: str | None
    score: float | None
    human: float | None


class RunSeries(TypedDict):
    """One judge/mode series of a run: its method and its items by id."""

    method: str
    items: dict[str, SeriesItem]


class JudgeCost(TypedDict):
    """What one judge of a run spent."""

    usd: float
    tokens: int
    calls: int


class RunData(TypedDict):
    """What :func:`load_run` reads from a run's report database."""

    series: dict[str, RunSeries]
    costs: dict[str, JudgeCost]
    run: Mapping[str, object]
    """The ``runs`` table's row (the run's lineage, flattened); empty for older databases."""
    backends: list[Mapping[str, object]]
    human_criterion: str | None
    protocol: str | None
    """The protocol id the report recorded with its agreement figures (None: not recorded)."""


class ItemShift(TypedDict):
    """One item's score in both runs and the shift B - A."""

    item_id: str
    a: float
    b: float
    shift: float


class Shift(TypedDict):
    """How the common items' scores moved from run A to run B."""

    mean: float
    mean_abs: float
    max_abs: float
    largest: list[ItemShift]
    """The ten largest shifts."""


class SystemShift(TypedDict):
    """One system's mean score in both runs."""

    mean_a: float
    mean_b: float
    shift: float
    n: int


class ItemPair(TypedDict):
    """One item's score in both runs."""

    item_id: str
    a: float
    b: float


class PassFail(TypedDict):
    """Items whose pass/fail verdict (score >= threshold) flipped between the runs."""

    threshold: float
    flipped: int
    items: list[ItemPair]
    """The first 20 flips."""


class RankMove(TypedDict):
    """One item's rank in both runs."""

    item_id: str
    rank_a: float
    rank_b: float


class RankChanges(TypedDict):
    """Items that moved more than 10 % of the list in rank."""

    moved_over_10pct: int
    items: list[RankMove]
    kendall_tau_between_runs: float


class RunsAgreement(TypedDict):
    """Both runs' Kendall tau-b with humans on the labelled common items, and the change."""

    protocol: str
    n: int
    kendall_tau_b_a: float
    ci95_a: list[float]
    kendall_tau_b_b: float
    ci95_b: list[float]
    difference_b_minus_a: float
    difference_ci95: list[float]
    permutation_p_value: float
    n_boot: NotRequired[int]
    """The bootstrap resamples behind the CIs."""


class SeriesComparison(TypedDict):
    """One series compared between two runs (:func:`compare_series`)."""

    items_a: int
    items_b: int
    common_scored: int
    note: NotRequired[str]
    """Why nothing else is there (fewer than 2 common scored items)."""
    shift: NotRequired[Shift]
    systems: NotRequired[dict[str, SystemShift]]
    pass_fail: NotRequired[PassFail]
    rank_changes: NotRequired[RankChanges]
    agreement: NotRequired[RunsAgreement]
    """With at least 3 labelled common items."""
    changed: NotRequired[list[str]]
    """What the run records say changed for this series' judge (:func:`what_changed`)."""


class ComparedBackend(TypedDict):
    """One judge's backend in a run (the ``run_backends`` columns a comparison shows)."""

    judge: str | None
    backend: str | None
    snapshot: str | None
    models: list[str]
    fingerprints: list[str]
    templates: NotRequired[list[str]]
    """Template ``id@version`` of the judge's answers (absent from older databases)."""
    settings: NotRequired[list[str]]
    """The method's named options (absent from older databases)."""


class RunFacts(TypedDict):
    """Which run a side of a comparison is."""

    db: str
    run_id: object
    time: object
    git_revision: object
    backends: list[ComparedBackend]
    git_dirty: NotRequired[object]
    dataset_sha256: NotRequired[object]


class CostComparison(TypedDict):
    """What the compared judges spent in both runs."""

    usd_a: float
    usd_b: float
    usd_difference: float
    tokens_a: float
    tokens_b: float
    tokens_difference: float


class Comparison(TypedDict):
    """``comparison.json`` (:func:`compare_runs`)."""

    run_a: RunFacts
    run_b: RunFacts
    series: dict[str, SeriesComparison]
    cost: NotRequired[CostComparison]


def load_run(db: Path) -> RunData:
    """A run's series (items with score, system, human), costs and lineage from its database."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        # The report database's own view joins judges with the human criterion it was
        # built for; comparing never re-derives (or hard-codes) that join.
        scores = con.execute("SELECT series, method, item_id, system, score, human "
                             "FROM scored_items").fetchall()
        criterion = con.execute("SELECT value FROM settings WHERE key = 'human_criterion'"
                                ).fetchone()
        costs = con.execute("""
            SELECT judge, sum(coalesce(cost_usd, 0)), sum(coalesce(prompt_tokens, 0)
                   + coalesce(completion_tokens, 0)), count(*) FILTER (WHERE NOT cached
                   AND status <> 'skipped')
            FROM judgements GROUP BY judge""").fetchall()
        tables = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
        run = con.execute("SELECT * FROM runs").df().to_dict("records")[0] \
            if "runs" in tables else {}
        backends = con.execute("SELECT * FROM run_backends").df().to_dict("records") \
            if "run_backends" in tables else []
        # The protocol the report recorded for its agreement figures (the data's own).
        protocols = con.execute("SELECT DISTINCT protocol FROM agreement WHERE protocol IS "
                                "NOT NULL").fetchall() if "agreement" in tables else []
    finally:
        con.close()
    series: dict[str, RunSeries] = {}
    for key, method, item, system, score, human in scores:
        s = series.setdefault(key, RunSeries(method=method, items={}))
        s["items"][item] = SeriesItem(system=system, score=score, human=human)
    return RunData(series=series,
                   costs={r[0]: JudgeCost(usd=r[1], tokens=r[2], calls=r[3]) for r in costs},
                   run=run, backends=backends,
                   human_criterion=criterion[0] if criterion else None,
                   protocol=protocols[0][0] if len(protocols) == 1 else None)


def compare_series(a: Mapping[str, SeriesItem], b: Mapping[str, SeriesItem], method: str,
                   n_boot: int, threshold: float | None, human_criterion: str | None = None,
                   protocol: str | None = None) -> SeriesComparison:
    """Shifts, flips, rank changes and agreement of one series between two runs."""
    common = sorted(k for k in a if k in b and a[k]["score"] is not None
                    and b[k]["score"] is not None)
    out: SeriesComparison = {"items_a": len(a), "items_b": len(b),
                             "common_scored": len(common)}
    if len(common) < 2:
        out["note"] = "fewer than 2 items scored in both runs"
        return out
    sa = np.array([a[k]["score"] for k in common], float)
    sb = np.array([b[k]["score"] for k in common], float)
    shift = sb - sa
    order = np.argsort(-np.abs(shift))
    out["shift"] = {"mean": float(shift.mean()), "mean_abs": float(np.abs(shift).mean()),
                    "max_abs": float(np.abs(shift).max()),
                    "largest": [{"item_id": common[i], "a": float(sa[i]), "b": float(sb[i]),
                                 "shift": float(shift[i])} for i in order[:10]]}
    systems: dict[str, list[tuple[float, float]]] = {}
    for k, x, y in zip(common, sa, sb, strict=True):
        systems.setdefault(a[k]["system"] or "(none)", []).append((x, y))
    out["systems"] = {s: {"mean_a": float(np.mean([p[0] for p in v])),
                          "mean_b": float(np.mean([p[1] for p in v])),
                          "shift": float(np.mean([p[1] - p[0] for p in v])), "n": len(v)}
                      for s, v in sorted(systems.items())}
    cut = threshold if threshold is not None else get_method(method).overall_scale.threshold
    flips: list[ItemPair] = [{"item_id": k, "a": float(x), "b": float(y)}
             for k, x, y in zip(common, sa, sb, strict=True) if (x >= cut) != (y >= cut)]
    out["pass_fail"] = {"threshold": cut, "flipped": len(flips), "items": flips[:20]}
    ra, rb = stats.rankdata(-sa), stats.rankdata(-sb)
    moved: list[RankMove] = [
        {"item_id": common[i], "rank_a": float(ra[i]), "rank_b": float(rb[i])}
             for i in range(len(common)) if abs(ra[i] - rb[i]) > 0.1 * len(common)]
    out["rank_changes"] = {"moved_over_10pct": len(moved), "items": moved[:20],
                           "kendall_tau_between_runs": float(kendall_tau_b(sa, sb))}
    human_idx = [i for i, k in enumerate(common) if a[k]["human"] is not None]
    if len(human_idx) >= 3:
        h = np.array([a[common[i]]["human"] for i in human_idx], float)
        xa, xb = sa[human_idx], sb[human_idx]
        ta, tb = kendall_tau_b(xa, h), kendall_tau_b(xb, h)
        diff, p = paired_permutation_test(xb, xa, h, n_perm=max(200, n_boot))
        # Paired bootstrap of the difference: the same resampled items for both runs.
        ci = paired_difference(xb, xa, h, n_boot=n_boot, seed=2)
        out["agreement"] = {
            "protocol": f"{protocol or 'protocol not recorded'} (human "
                        f"{human_criterion or 'label'}, annotators averaged)",
            "n": len(human_idx),
            "kendall_tau_b_a": ta, "ci95_a": list(bootstrap_ci(xa, h, kendall_tau_b,
                                                               n_boot=n_boot)),
            # The report's seed for both runs: on the same items, the same CI as its table
            # (and as capjudge history, which shows the report's).
            "kendall_tau_b_b": tb, "ci95_b": list(bootstrap_ci(xb, h, kendall_tau_b,
                                                               n_boot=n_boot)),
            "difference_b_minus_a": diff, "difference_ci95": [ci.low, ci.high],
            "permutation_p_value": p, "n_boot": n_boot}
    return out


def compare_runs(db_a: Path, db_b: Path, *, series: tuple[str, str] | None = None,
                 n_boot: int = 500, threshold: float | None = None) -> Comparison:
    """Compare two runs' report databases; returns the JSON-able comparison."""
    a, b = load_run(db_a), load_run(db_b)
    pairs = [series] if series else sorted((k, k) for k in a["series"] if k in b["series"])
    if not pairs:
        raise ValueError("the runs share no judge/mode series; pass --series A_KEY B_KEY "
                         f"(A has {sorted(a['series'])}, B has {sorted(b['series'])})")
    result: Comparison = {"run_a": _run_facts(a, str(db_a)), "run_b": _run_facts(b, str(db_b)),
                          "series": {}}
    for ka, kb in pairs:
        if ka not in a["series"] or kb not in b["series"]:
            raise ValueError(f"series {ka!r} / {kb!r} not found in both runs")
        method = a["series"][ka]["method"]
        compared = compare_series(a["series"][ka]["items"], b["series"][kb]["items"], method,
                                  n_boot, threshold, a["human_criterion"], a["protocol"])
        facts_a = _judge_facts(result["run_a"], ka.split("/")[0])
        facts_b = _judge_facts(result["run_b"], kb.split("/")[0])
        if set(facts_a) & set(facts_b):  # else the databases predate the lineage tables
            compared["changed"] = what_changed(facts_a, facts_b)
        result["series"][f"{ka} vs {kb}" if ka != kb else ka] = compared
    judges_a = {p[0].split("/")[0] for p in pairs}
    judges_b = {p[1].split("/")[0] for p in pairs}
    usd_a, usd_b = _spent(a["costs"], judges_a, "usd"), _spent(b["costs"], judges_b, "usd")
    tok_a = _spent(a["costs"], judges_a, "tokens")
    tok_b = _spent(b["costs"], judges_b, "tokens")
    result["cost"] = {"usd_a": usd_a, "usd_b": usd_b, "usd_difference": usd_b - usd_a,
                      "tokens_a": tok_a, "tokens_b": tok_b, "tokens_difference": tok_b - tok_a}
    return result


def _spent(costs: Mapping[str, JudgeCost], judges: set[str],
           key: Literal["usd", "tokens"]) -> float:
    """What the judges spent in ``key`` (a judge without judgements spent nothing)."""
    return sum((costs[j][key] or 0) if j in costs else 0 for j in judges)


def _run_facts(data: RunData, db: str) -> RunFacts:
    run = data["run"]
    facts: RunFacts = {"db": db, "run_id": run.get("run_id"), "time": run.get("time"),
                       "git_revision": run.get("git_revision"),
                       "backends": [_backend_facts(b) for b in data["backends"]]}
    if "git_dirty" in run:
        facts["git_dirty"] = run["git_dirty"]
    if "dataset_sha256" in run:
        facts["dataset_sha256"] = run["dataset_sha256"]
    return facts


# What a run record says about the judge that produced a series, and how each fact is named
# in "what changed" (history entries carry the same keys).
CHANGE_FACTS = (("backend", "backend"), ("snapshot", "snapshot"), ("models", "models"),
                ("fingerprints", "fingerprints"), ("templates", "templates"),
                ("settings", "method settings"), ("data_version", "data"),
                ("code_version", "code"))


def _judge_facts(run: RunFacts, judge: str) -> dict[str, object]:
    """The :data:`CHANGE_FACTS` of ``judge`` in a run (only those the run's records hold)."""
    facts: dict[str, object] = {}
    row = next((b for b in run["backends"] if b["judge"] == judge), None)
    if row is not None:
        facts.update({k: v for k, v in row.items() if k != "judge"})
    # Strings only: DuckDB hands a missing value over as None or NaN.
    data = run.get("dataset_sha256")
    if isinstance(data, str) and data:
        facts["data_version"] = data
    revision = run.get("git_revision")
    if isinstance(revision, str) and revision:
        dirty = run.get("git_dirty") in (True, 1)  # a numpy bool too; NaN is not dirty
        facts["code_version"] = f"{revision}{'-dirty' if dirty else ''}"
    return facts


def _shown(key: str, value: object) -> str:
    """A fact's value for one line: hashes of data and code shortened, lists joined."""
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value) or "-"
    text = "-" if value is None else str(value)
    if key == "data_version":
        return text[:12]
    if key == "code_version":
        revision, dirty, _ = text.partition("-dirty")
        return revision[:12] + ("-dirty" if dirty else "")
    return text


def what_changed(before: Mapping[str, object], after: Mapping[str, object]) -> list[str]:
    """What differs between two runs of a judge, one ``"<fact>: <before> -> <after>"`` a line.

    ``before`` and ``after`` hold :data:`CHANGE_FACTS` keys (a history entry, or a run's
    ``run_backends`` row with the run's data and code version). A fact missing from either
    (a record written before it was kept) is left out: nothing can be said about it. Lists
    (templates, settings, models, fingerprints) show what left and what came.

    Returns:
        The lines, empty when every fact both records hold is the same.
    """
    lines = []
    for key, label in CHANGE_FACTS:
        if key not in before or key not in after:
            continue
        old, new = before[key], after[key]
        if isinstance(old, list | tuple) and isinstance(new, list | tuple):
            gone = [v for v in old if v not in new]
            came = [v for v in new if v not in old]
            if gone or came:
                lines.append(f"{label}: {_shown(key, gone)} -> {_shown(key, came)}")
        elif old != new:
            lines.append(f"{label}: {_shown(key, old)} -> {_shown(key, new)}")
    return lines


def _backend_facts(row: Mapping[str, object]) -> ComparedBackend:
    """A ``run_backends`` row's shown columns (DuckDB gives its lists as numpy arrays)."""

    def text(key: str) -> str | None:
        value = row.get(key)
        return value if isinstance(value, str) else None

    def texts(key: str) -> list[str]:
        value = row.get(key)
        return [str(v) for v in value] if isinstance(value, np.ndarray | list) else []

    out: ComparedBackend = {"judge": text("judge"), "backend": text("backend"),
                            "snapshot": text("snapshot"), "models": texts("models"),
                            "fingerprints": texts("fingerprints")}
    if "templates" in row:
        out["templates"] = texts("templates")
    if "settings" in row:
        out["settings"] = texts("settings")
    return out


def _f(v: object, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.{digits}f}"


def render(result: Comparison) -> str:
    """The comparison as Markdown."""
    a, b = result["run_a"], result["run_b"]
    lines = ["# capjudge comparison", "",
             f"- A: `{a.get('run_id')}` ({a['db']})", f"- B: `{b.get('run_id')}` ({b['db']})",
             "", "| run | judge | backend | snapshot | models | fingerprints |",
             "|---|---|---|---|---|---|"]
    for name, run in (("A", a), ("B", b)):
        for be in run["backends"]:
            lines.append(f"| {name} | {be['judge']} | {be['backend']} | {be['snapshot']} | "
                         f"{', '.join(be['models']) or '-'} | "
                         f"{', '.join(be['fingerprints']) or '-'} |")
    for key, s in result["series"].items():
        lines += ["", f"## {key}", "", f"Items scored in both runs: {s['common_scored']} "
                  f"(A {s['items_a']}, B {s['items_b']})."]
        if "changed" in s:
            lines += ["", "What changed from A to B: " + ("; ".join(s["changed"]) or
                      "nothing the run records hold (backend, snapshot, models, fingerprints,"
                      " templates, method settings, data, code)") + ".", ""]
        if "shift" not in s:
            lines.append(s.get("note", ""))
            continue
        sh = s["shift"]
        lines += [f"Score shift B - A: mean {_f(sh['mean'])}, mean |shift| "
                  f"{_f(sh['mean_abs'])}, max |shift| {_f(sh['max_abs'])}.", ""]
        if "agreement" in s:
            g = s["agreement"]
            lines += ["| run | Kendall tau-b x100 | 95 % CI |", "|---|---|---|",
                      f"| A | {_f(100 * g['kendall_tau_b_a'], 1)} | [{_f(100 * g['ci95_a'][0], 1)}"
                      f", {_f(100 * g['ci95_a'][1], 1)}] |",
                      f"| B | {_f(100 * g['kendall_tau_b_b'], 1)} | [{_f(100 * g['ci95_b'][0], 1)}"
                      f", {_f(100 * g['ci95_b'][1], 1)}] |", "",
                      f"Difference B - A (x100): {_f(100 * g['difference_b_minus_a'], 1)} "
                      + (f"[{_f(100 * g['difference_ci95'][0], 1)}, "
                         f"{_f(100 * g['difference_ci95'][1], 1)}] "
                         if g.get("difference_ci95") else "")
                      + (f"(paired bootstrap 95 % CI, {g['n_boot']} resamples; "
                         if "n_boot" in g else "(")
                      + f"paired permutation p = {_f(g['permutation_p_value'], 3)}; protocol: "
                      f"{g['protocol']}).", ""]
        lines += ["| system | mean A | mean B | shift | n |", "|---|---|---|---|---|"]
        for name, v in s["systems"].items():
            lines.append(f"| {name} | {_f(v['mean_a'])} | {_f(v['mean_b'])} | "
                         f"{_f(v['shift'])} | {v['n']} |")
        pf = s["pass_fail"]
        lines += ["", f"Pass/fail (score >= {pf['threshold']}) flipped for {pf['flipped']} "
                  f"item(s); {s['rank_changes']['moved_over_10pct']} item(s) moved more than "
                  f"10 % in rank (tau between runs "
                  f"{_f(s['rank_changes']['kendall_tau_between_runs'])}).", "",
                  "| largest shifts: item | A | B | shift |", "|---|---|---|---|"]
        for it in sh["largest"][:10]:
            lines.append(f"| {it['item_id']} | {_f(it['a'])} | {_f(it['b'])} | "
                         f"{_f(it['shift'])} |")
    c = result["cost"]
    lines += ["", "## Cost", "", f"A: ${_f(c['usd_a'], 4)} ({c['tokens_a']} tokens); "
              f"B: ${_f(c['usd_b'], 4)} ({c['tokens_b']} tokens); difference "
              f"${_f(c['usd_difference'], 4)}."]
    return "\n".join(lines) + "\n"


def write_comparison(result: Comparison, out_dir: Path) -> tuple[Path, Path]:
    """Write comparison.md and comparison.json."""
    out_dir.mkdir(parents=True, exist_ok=True)
    md, js = out_dir / "comparison.md", out_dir / "comparison.json"
    md.write_text(render(result))
    js.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return md, js
