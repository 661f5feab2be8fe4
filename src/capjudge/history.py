"""Judge history: every run's agreement per judge/mode, kept in the run registry.

The report stage (also when the watch flow re-runs it through DVC) appends one entry per
scored judge/mode series to ``<registry>/history.jsonl``: what identifies the run (judge,
method, template id@version, backend id, model snapshot, the models and
``system_fingerprint`` values its answers reported, data version = sha256 of
``items.parquet``, code version = git revision, date), its agreement with humans (Kendall
τ-b with the bootstrap 95 % CI), its failure and low-mass rates, the mean score per system,
and the paired difference to the series' previous run on the items both scored — computed by
:func:`capjudge.compare.compare_series`, the same paired bootstrap CI and permutation test
``capjudge compare`` reports, once, when the entry is written (with the number of bootstrap
resamples, so ``capjudge compare`` on the same two runs uses as many and prints the same CI).
``capjudge history`` prints tau-b and the differences x100, as the report and ``capjudge
compare`` do, and under a run what changed from the run before it (:func:`format_history`).

:func:`alerts` turns the entries of a new run into the watch flow's alert lines: a paired Δτ
whose whole 95 % CI lies below ``-alert_drop``, or a failure / low-mass rate above its limit.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import SupportsFloat

from capjudge.records import AgreementEntry, BackendLineage, HistoryEntry, RunLineage

HISTORY_FILE = "history.jsonl"


def history_path(registry: Path) -> Path:
    """Where the history lives in a registry."""
    return Path(registry) / HISTORY_FILE


def load_history(registry: Path, judge: str | None = None) -> list[HistoryEntry]:
    """Every history entry (optionally of one judge), in the order they were appended."""
    path = history_path(registry)
    if not path.is_file():
        return []
    entries: list[HistoryEntry] = [json.loads(line) for line in path.read_text().splitlines()
                                   if line.strip()]
    return [e for e in entries if judge is None or e["judge"] == judge]


def identity(backend: BackendLineage | None) -> str:
    """A short hash of what says which model answered: backend, snapshot, models, fingerprints.

    None (a judge the lineage does not list) hashes as a backend with none of them.
    """
    facts = {k: backend.get(k) if backend else None
             for k in ("backend", "snapshot", "models", "fingerprints")}
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()
                          ).hexdigest()[:12]


def _finite(value: object) -> float | None:
    if value is None:
        return None
    if not isinstance(value, SupportsFloat):
        raise TypeError(f"not a number: {value!r}")
    number = float(value)
    return None if math.isnan(number) else number


def run_entries(run: RunLineage, agreement: Sequence[AgreementEntry],
                judges: Mapping[str, Mapping[str, object]],
                systems: Sequence[Mapping[str, object]]) -> list[HistoryEntry]:
    """History entries (without the paired difference) for one run's scored series.

    Args:
        run: the run's lineage (:func:`capjudge.lineage.collect`).
        agreement: the report's agreement entries (:func:`capjudge.report.agreement.agreement`).
        judges: each judge's run summary (``summary.json``), for the failure/low-mass rates.
        systems: the ``system_scores`` rows (judge, mode, system, mean_score).
    """
    backends = {b["judge"]: b for b in run.get("backends") or []}
    out: list[HistoryEntry] = []
    for a in agreement:
        if "kendall_tau_b" not in a:
            continue  # not scored: nothing to put on a curve (the report says why)
        backend = backends.get(a["judge"])
        summary = judges.get(a["judge"], {})
        ci = (a.get("ci95") or {}).get("kendall_tau_b")
        means = {str(s["system"]): _finite(s.get("mean_score")) for s in systems
                 if s["judge"] == a["judge"] and s["mode"] == a["mode"]}
        revision = run.get("git_revision")
        out.append({
            "run_id": run["run_id"], "time": run["time"], "judge": a["judge"],
            "mode": a["mode"], "series": f"{a['judge']}/{a['mode']}", "method": a["method"],
            "templates": list(backend["templates"] or []) if backend else [],
            "settings": list(backend.get("settings") or []) if backend else [],
            "backend": backend["backend"] if backend else None,
            "snapshot": backend["snapshot"] if backend else None,
            "models": list(backend["models"] or []) if backend else [],
            "fingerprints": list(backend["fingerprints"] or []) if backend else [],
            "identity": identity(backend),
            "data_version": run.get("dataset_sha256"),
            "code_version": (f"{revision}{'-dirty' if run.get('git_dirty') else ''}"
                             if revision else None),
            "protocol": a.get("protocol"), "n": a["n"],
            "kendall_tau_b": _finite(a["kendall_tau_b"]),
            "ci95": [_finite(v) for v in ci] if ci else None,
            "failure_rate": _finite(summary.get("failure_rate")),
            "low_mass_rate": _finite(summary.get("low_mass_rate")),
            "system_means": dict(sorted(means.items())),
        })
    return out


def paired_to_previous(entry: HistoryEntry, previous: HistoryEntry | None,
                       db: Path, previous_db: Path, n_boot: int) -> HistoryEntry:
    """``entry`` with its difference to ``previous`` (the series' last run) filled in.

    The difference is :func:`capjudge.compare.compare_series` on the items both runs scored
    (new minus previous): Δτ-b, its paired bootstrap 95 % CI and the paired permutation p.
    """
    from capjudge.compare import compare_series, load_run

    entry = entry.copy()
    entry["previous_run"] = previous["run_id"] if previous else None
    entry["snapshot_changed"] = previous is not None \
        and previous["identity"] != entry["identity"]
    entry["paired"] = None
    if previous is None:
        return entry
    if not previous_db.is_file():
        entry["paired_note"] = f"the previous run's database is gone ({previous_db})"
        return entry
    a, b = load_run(previous_db), load_run(db)
    sa, sb = a["series"].get(entry["series"]), b["series"].get(entry["series"])
    if sa is None or sb is None:
        entry["paired_note"] = "the series is missing from one of the two databases"
        return entry
    result = compare_series(sa["items"], sb["items"], entry["method"], n_boot, None,
                            b["human_criterion"])
    g = result.get("agreement")
    if g is None:
        entry["paired_note"] = result.get("note") or "fewer than 3 shared, labelled items"
        return entry
    entry["paired"] = {"n": g["n"], "difference": _finite(g["difference_b_minus_a"]),
                       "ci95": [_finite(v) for v in g["difference_ci95"]],
                       "p_value": _finite(g["permutation_p_value"]), "n_boot": n_boot}
    return entry


def default_bootstrap(registry: Path, db_a: Path, db_b: Path, params: Path | None = None,
                      fallback: int = 500) -> int:
    """The resamples ``capjudge compare`` uses when not told: the ones the history used.

    For two registered runs the history records the paired difference of each series to its
    previous run with ``report.bootstrap`` resamples; with the same number, the same seed and
    the same items :func:`capjudge.compare.compare_series` gives the very same CI, so both
    commands print one figure for one change. Otherwise ``report.bootstrap`` of ``params``
    (what the report stage would use), else ``fallback``.
    """
    run_a, run_b = _run_id(Path(db_a)), _run_id(Path(db_b))
    for entry in load_history(Path(registry)):
        paired = entry.get("paired")
        if entry["run_id"] == run_b and entry.get("previous_run") == run_a and paired \
                and isinstance(paired.get("n_boot"), int):
            return int(paired["n_boot"])
    if params is not None and params.is_file():
        import yaml

        try:
            report = (yaml.safe_load(params.read_text(encoding="utf-8")) or {}).get("report")
        except (yaml.YAMLError, AttributeError, UnicodeDecodeError):
            report = None  # an unreadable params file: the fallback, not a failed compare
        boot = report.get("bootstrap") if isinstance(report, dict) else None
        if isinstance(boot, int) and not isinstance(boot, bool) and boot >= 0:
            return boot
    return fallback


def _run_id(db: Path) -> str:
    """The run id a database's ``runs`` table records, else its folder's name.

    (The registry files a run under its id.)
    """
    import duckdb

    try:
        con = duckdb.connect(str(db), read_only=True)
        try:
            row = con.execute("SELECT run_id FROM runs").fetchone()
        finally:
            con.close()
    except duckdb.Error:  # no such table (an older database) or not a database at all
        row = None
    return str(row[0]) if row and row[0] is not None else db.parent.name


def record_run(registry: Path, run: RunLineage, agreement: Sequence[AgreementEntry],
               judges: Mapping[str, Mapping[str, object]],
               systems: Sequence[Mapping[str, object]], n_boot: int = 500
               ) -> list[HistoryEntry]:
    """Append the run's entries to the registry's history; returns them.

    The run must already be registered (:func:`capjudge.lineage.register`): the paired
    difference reads its database and the previous run's from the registry.
    """
    registry = Path(registry)
    last: dict[str, HistoryEntry] = {}
    for e in load_history(registry):
        if e["run_id"] != run["run_id"]:
            last[e["series"]] = e
    entries = []
    db = registry / run["run_id"] / "capjudge.duckdb"
    spreads = retest_tau_spreads(db)
    for entry in run_entries(run, agreement, judges, systems):
        previous = last.get(entry["series"])
        entry = paired_to_previous(
            entry, previous, db,
            registry / previous["run_id"] / "capjudge.duckdb" if previous else Path("-"),
            n_boot)
        entry["retest_tau_spread"] = spreads.get(entry["series"])
        entries.append(entry)
    with history_path(registry).open("a") as handle:
        for entry in entries:
            handle.write(json.dumps(entry, sort_keys=True) + "\n")
    return entries


def retest_tau_spreads(db: Path) -> dict[str, float]:
    """Per series run with repeats: how far its Kendall tau-b with the humans moves.

    Between two samples of the same judge: the largest minus the smallest tau-b over its
    repeats. That is the judge's own noise on the statistic a drift is measured in: an API judge
    cannot be made deterministic, and a drift within it is a new sample, not a change.
    """
    from capjudge.stats import kendall_tau_b

    if not db.is_file():
        return {}
    import duckdb

    try:
        con = duckdb.connect(str(db), read_only=True)
        try:
            rows = con.execute("""
                SELECT r.judge || '/' || r.mode, r.repeat, r.score, h.human
                FROM repeat_scores r JOIN (SELECT DISTINCT item_id, human FROM scored_items
                                           WHERE human IS NOT NULL) h USING (item_id)
                WHERE r.score IS NOT NULL""").fetchall()
        finally:
            con.close()
    except Exception:  # noqa: BLE001 - an older database without the tables: no spread
        return {}
    samples: dict[str, dict[int, list[tuple[float, float]]]] = {}
    for series, repeat, score, human in rows:
        samples.setdefault(series, {}).setdefault(int(repeat), []).append(
            (float(score), float(human)))
    out: dict[str, float] = {}
    for series, by_repeat in samples.items():
        taus = [kendall_tau_b([s for s, _ in pairs], [h for _, h in pairs])
                for pairs in by_repeat.values() if len(pairs) >= 3]
        taus = [t for t in taus if t == t]  # NaN: a constant repeat
        if len(taus) >= 2:
            out[series] = max(taus) - min(taus)
    return out


def series_history(entries: Sequence[HistoryEntry]) -> dict[str, list[HistoryEntry]]:
    """Entries grouped by judge/mode series, oldest first."""
    out: dict[str, list[HistoryEntry]] = {}
    for e in sorted(entries, key=lambda e: e["time"]):
        out.setdefault(e["series"], []).append(e)
    return dict(sorted(out.items()))


def alerts(entries: Sequence[HistoryEntry], *, alert_drop: float = 0.05,
           max_failure_rate: float | None = None, max_low_mass_rate: float | None = None
           ) -> list[str]:
    """Alert lines for a run's history entries (empty: nothing to alert on).

    A series alerts when its paired Δτ-b to the previous run has a 95 % CI entirely below
    ``-alert_drop`` (a drop larger than the threshold, not explained by resampling items) and
    below the judge's own test-retest spread of tau-b when it was measured (``repeats`` > 1:
    a sampled API judge's rerun moves by that much with nothing changed), or when its judge's
    failure or low-mass rate is above its limit. Each line carries the figures.
    """
    lines = []
    judges_seen: set[str] = set()
    for e in entries:
        paired = e.get("paired")
        upper = paired["ci95"][1] if paired else None
        drop = -paired["difference"] if paired and paired["difference"] is not None else None
        spread = e.get("retest_tau_spread")
        limit = max(alert_drop, spread or 0.0)
        if paired and upper is not None and upper < -limit and drop is not None:
            # x100, as the report, `history` and `compare` print tau-b.
            lines.append(
                f"{e['series']}: Kendall tau-b x100 dropped by {_x100(drop)} "
                f"({_x100(e['kendall_tau_b'])} now, previous run {e['previous_run']}); "
                f"paired 95 % CI of the change [{_x100(paired['ci95'][0])}, "
                f"{_x100(upper)}] lies below -{_x100(limit)} (watch.alert_drop "
                f"{alert_drop:g} as a fraction)"
                + (f" (the judge's own test-retest spread of tau-b x100 is {_x100(spread)})"
                   if spread is not None else "")
                + f"; permutation p = {paired['p_value']:.3f}; "
                f"n = {paired['n']} shared items; snapshot {e['snapshot']}"
                + (" (changed)" if e.get("snapshot_changed") else ""))
        if e["judge"] in judges_seen:
            continue  # the rates are per judge: one line, not one per mode
        judges_seen.add(e["judge"])
        lines += rate_alerts(e["judge"], e, max_failure_rate=max_failure_rate,
                             max_low_mass_rate=max_low_mass_rate, run=e["run_id"])
    return lines


def _x100(value: float | None) -> str:
    """A coefficient as the report prints it, for a line of text: :func:`_num` unpadded."""
    return _num(value).strip()


def rate_alerts(judge: str, summary: Mapping[str, object], *, max_failure_rate: float | None = None,
                max_low_mass_rate: float | None = None, run: str | None = None) -> list[str]:
    """Alert lines for a judge whose failure or low-mass rate is above its limit.

    ``summary`` is a history entry or the judge's ``summary.json`` (both carry
    ``failure_rate`` and ``low_mass_rate``).
    """
    lines = []
    for name, key, limit in (("failure rate", "failure_rate", max_failure_rate),
                             ("low-mass rate", "low_mass_rate", max_low_mass_rate)):
        value = summary.get(key)
        if limit is not None and isinstance(value, int | float) and value > limit:
            lines.append(f"{judge}: {name} {value:.3f} is above the limit {limit:.3f}"
                         + (f" (run {run})" if run else ""))
    return lines


def format_history(entries: Sequence[HistoryEntry]) -> str:
    """The series as plain text: one block per judge/mode, one line per run.

    Kendall tau-b and the paired difference to the previous run are x100 (the report's and
    ``capjudge compare``'s unit); under a run whose records differ from the previous run's, a
    ``changed:`` line names what (:func:`capjudge.compare.what_changed`).
    """
    from capjudge.compare import what_changed

    blocks = []
    for series, points in series_history(entries).items():
        lines = [f"{series}",
                 f"  {'run':<26} {'date':<20} {'n':>4}  {'tau-b x100 [95 % CI]':<24}  "
                 f"{'delta x100 vs previous [95 % CI], p':<36} backend@snapshot fingerprints"]
        by_run = {e["run_id"]: e for e in points}
        for e in points:
            ci = e.get("ci95") or [None, None]
            paired = e.get("paired")
            delta = (f"{_num(paired['difference'])} [{_num(paired['ci95'][0])}, "
                     f"{_num(paired['ci95'][1])}], p {_num(paired['p_value'], 1, 3)}"
                     if paired else "-")
            mark = " *changed*" if e.get("snapshot_changed") else ""
            lines.append(f"  {e['run_id']:<26} {e['time'][:19]:<20} {e['n']:>4}  "
                         f"{_num(e['kendall_tau_b'])} [{_num(ci[0])}, {_num(ci[1])}]  "
                         f"{delta:<36} {e['backend']}@{e['snapshot']}"
                         f" {','.join(e.get('fingerprints') or []) or ''}{mark}")
            previous = by_run.get(e.get("previous_run") or "")
            changed = what_changed(previous, e) if previous else []
            if changed:
                lines.append(f"  {'':<26} changed: {'; '.join(changed)}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + ("\n" if blocks else "")


def _num(value: float | None, scale: float = 100.0, digits: int = 1) -> str:
    """A cell: x100 with one decimal for tau-b and its differences (the report's unit)."""
    return "     -" if value is None else f"{scale * value:6.{digits}f}"
