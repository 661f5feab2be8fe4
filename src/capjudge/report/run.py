"""The report stage's code: :func:`run_report` and the helpers it calls.

It reads the stage's inputs, joins them with the human labels, measures agreement and writes
the outputs listed in :mod:`capjudge.report` (the package overview: which module does what).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.parquet as pq

from capjudge.aggregate import REPEAT_SCHEMA
from capjudge.records import (
    AgreementEntry,
    HistoryEntry,
    ItemRow,
    JudgeSummary,
    LabelRow,
    ReliabilityItem,
    RepeatScore,
    RunLineage,
    Scalar,
    ScoredItem,
)
from capjudge.report.agreement import agreement, clean, criterion_matrices
from capjudge.report.config import ReportConfig
from capjudge.report.context import (
    Figures,
    GalleryEntry,
    Headline,
    JudgeRow,
    NotRunLine,
    ReportContext,
    ReportView,
    SeriesMetrics,
    SystemRow,
    ValidationView,
)
from capjudge.report.database import (
    add_table,
    build_database,
    human_by_criterion,
    label_rows,
    scored_items,
)
from capjudge.report.dataset import describe_data
from capjudge.report.dvc_plots import write_dvc_plots
from capjudge.report.gallery import build_gallery
from capjudge.report.judge_reliability import (
    CALIBRATION_COLUMNS,
    COMPARISON_COLUMNS,
    INJECTION_COLUMNS,
    INJECTION_ITEM_COLUMNS,
    LENGTH_COLUMNS,
    RETEST_COLUMNS,
    RETEST_ITEM_COLUMNS,
    ReliabilitySections,
    as_table,
    calibration_table,
    comparison_table,
    injection_tables,
    length_bias_table,
    retest_tables,
)
from capjudge.report.plots import history_plots, make_plots
from capjudge.report.render import render_html, render_markdown
from capjudge.sample import SAMPLE_CARD
from capjudge.stage_files import (
    CRITERIA,
    ITEM_SCORES,
    QUARANTINE,
    REPEAT_SCORES,
    SYSTEM_SCORES,
    items_file,
    judgements_file,
    summary_file,
)
from capjudge.stats import STATS, pearson

# The bundled sample's protocol (its dataset card's); any data states its own
# (capjudge.report.dataset).
SAMPLE_PROTOCOL = f"{SAMPLE_CARD['protocol']}: {SAMPLE_CARD['description']}"


# The agreement table when no series has an item (an empty run): its key columns, no rows.
EMPTY_AGREEMENT = pa.schema([("judge", pa.string()), ("method", pa.string()),
                             ("mode", pa.string()), ("protocol", pa.string()),
                             ("items", pa.int64()), ("n", pa.int64())]).empty_table()


def _judge_rows(judges: dict[str, JudgeSummary]) -> list[JudgeRow]:
    """The "What ran" table: one row per judge, skip reasons deduplicated with counts."""
    out: list[JudgeRow] = []
    for name, s in judges.items():
        reasons: dict[str, int] = {}
        for per_mode in (s.get("skips") or {}).values():
            for reason, n in per_mode.items():
                reasons[reason] = reasons.get(reason, 0) + n
        backend = s.get("backend") or {}
        backend_id = backend.get("backend")
        out.append({
            "name": name, "method": s.get("method"),
            "backend": backend_id if isinstance(backend_id, str) else None,
            "snapshot": str(backend.get("snapshot"))[:23],
            "modes_ran": (", ".join(s.get("modes_ran") or []) or "-") + _limited(s),
            "skipped": "; ".join(f"{r} ({n})" for r, n in sorted(reasons.items())) or "-",
            # The summary's notes (e.g. G-VEval's reasoning cut at max_tokens) go with it.
            "statuses": "; ".join(x for x in [", ".join(f"{k} {v}" for k, v in
                                                        (s.get("by_status") or {}).items()),
                                              *(s.get("notes") or [])] if x),
            "requests": s.get("requests", "-"), "model_calls": s.get("model_calls"),
            "cache_hits": s.get("cache_hits"),
            "tokens": (s.get("prompt_tokens") or 0) + (s.get("completion_tokens") or 0),
            "cost": cost if (cost := s.get("cost_usd")) is not None else "-"})
    return out


def _limited(summary: JudgeSummary) -> str:
    """The note ' (N of M items: how chosen)' when the judge ran on a subset of the items."""
    items = summary.get("items")
    if not items or items.get("judged", 0) >= items.get("total", 0):
        return ""
    how = []
    if "fraction" in items:
        how.append(f"a seeded sample, `item_fraction` {items['fraction']:g}, "
                   f"`item_seed` {items.get('seed', 0)}")
    if "limit" in items or "fraction" not in items:  # older summaries did not say: limit
        how.append("the first ones, `limit`")
    return f" ({items['judged']} of {items['total']} items: {'; then '.join(how)})"


def _params_group(params: Path, judge: str) -> str:
    """Which params.yaml section defines a judge (``judges`` or ``context_judges``)."""
    try:
        import yaml

        data = yaml.safe_load(params.read_text()) or {}
    except (OSError, ValueError):
        return "judges"
    for group in ("judges", "context_judges"):
        if judge in (data.get(group) or {}):
            return group
    return "judges"


def _not_run(judges: dict[str, JudgeSummary], params: Path | None = None
             ) -> list[NotRunLine]:
    """One line per judge whose modes could not run at all: the modes, why, and a hint."""
    lines: list[NotRunLine] = []
    for name, s in judges.items():
        skipped = s.get("modes_skipped") or {}
        if not skipped:
            continue
        reasons: dict[str, int] = {}
        for per_mode in skipped.values():
            for reason, count in per_mode.items():
                reasons[reason] = max(reasons.get(reason, 0), count)
        hint = None
        if any("vision" in r for r in reasons):
            group = _params_group(params, name) if params else "judges"
            # A local backend's options (llamacpp: parallel, threads) are not the API's.
            reset = (f" -S '~{group}.{name}.backend_options'"
                     if str((s.get("backend") or {}).get("backend", "")).split("/")[0]
                     not in ("openai", "fake") else "")
            hint = (f"dvc exp run -S '{group}.{name}.backend=openai/gpt-4o-2024-08-06'{reset} "
                    "(any backend with image input; OPENAI_API_KEY in the environment"
                    + ("; its context stage needs a vision backend too)"
                       if group == "context_judges" else ")"))
        lines.append({"judge": name, "mode": ", ".join(sorted(skipped)),
                      "reason": "; ".join(f"{r} ({n} item(s))" for r, n in
                                          sorted(reasons.items())),
                      "count": max(reasons.values()), "hint": hint})
    return lines


def _number(value: Scalar) -> float | None:
    """A numeric cell as a float; None for a null (or a non-numeric) cell."""
    return float(value) if isinstance(value, int | float) else None


def _headline(agree: Sequence[AgreementEntry], judges: dict[str, JudgeSummary],
              systems: Sequence[SystemRow]) -> list[Headline]:
    """Per scored judge/mode: the headline numbers.

    Agreement with its CI, n, failure and low-mass rates, and the best and worst systems by
    mean score.
    """
    out: list[Headline] = []
    for a in agree:
        if "kendall_tau_b" not in a:
            continue
        mine = [(s["system"], mean) for s in systems
                if s["judge"] == a["judge"] and s["mode"] == a["mode"]
                and (mean := _number(s.get("mean_score"))) is not None]
        best = max(mine, key=lambda s: s[1], default=None)
        worst = min(mine, key=lambda s: s[1], default=None)
        summary = judges.get(a["judge"])
        out.append({"series": f"{a['judge']}/{a['mode']}", "method": a["method"], "n": a["n"],
                    "entry": a,
                    "failure_rate": summary.get("failure_rate") if summary else None,
                    "low_mass_rate": summary.get("low_mass_rate") if summary else None,
                    "best": f"{best[0]} ({best[1]:.2f})" if best else "-",
                    "worst": f"{worst[0]} ({worst[1]:.2f})" if worst else "-"})
    return sorted(out, key=lambda h: -(h["entry"].get("kendall_tau_b") or -2))


def _validation(out: Path) -> ValidationView | None:
    from capjudge.validate import ValidationReport, summary_lines

    path = out / "validation.json"
    if not path.is_file():
        return None
    report: ValidationReport = json.loads(path.read_text())
    return {"success": report["success"],
            "suites": [{"name": name, "evaluated": r["statistics"]["evaluated_expectations"],
                        "failed": r["statistics"]["unsuccessful_expectations"]}
                       for name, r in report["suites"].items()],
            "failures": summary_lines(report)}


def flat_metrics(ctx: ReportContext) -> dict[str, SeriesMetrics | dict[str, SeriesMetrics]]:
    """``metrics.json`` for DVC: agreement of scored series and each run's failure counts."""
    out: dict[str, SeriesMetrics | dict[str, SeriesMetrics]] = {}
    for a in ctx["agreement"]:
        if "kendall_tau_b" not in a:
            continue  # no empty entries: a series nothing scored is in the report, not here
        entry: SeriesMetrics = {k: clean(v) for k, v in a.items() if k in ("n", *STATS)}
        ci = (a.get("ci95") or {}).get("kendall_tau_b")
        if ci:  # `dvc exp show` lists the headline figure with its CI per judge/mode
            entry["kendall_tau_b_ci_low"], entry["kendall_tau_b_ci_high"] = map(clean, ci)
        out[f"{a['judge']}/{a['mode']}"] = entry
    runs: dict[str, SeriesMetrics] = {}
    for name, s in ctx["judges"].items():
        runs[name] = {
            k: v for k, v in (("failure_rate", s.get("failure_rate")),
                              ("low_mass_rate", s.get("low_mass_rate")),
                              ("model_calls", s.get("model_calls")),
                              ("cost_usd", s.get("cost_usd"))) if v is not None}
    if runs:
        out["runs"] = runs
    return out


def _ran(systems: Sequence[SystemRow]) -> set[str]:
    """The judge/mode series that scored at least one item."""
    return {f"{s['judge']}/{s['mode']}" for s in systems if (_number(s.get("scored")) or 0) > 0}


def _two(value: object) -> str:
    """A figure with two decimals, '-' when there is none."""
    return f"{value:.2f}" if isinstance(value, int | float) else "-"


def _summaries(view: ReportView) -> dict[str, str]:
    """One line per collapsed table: what it holds and its most telling figure."""
    rel = view["reliability"]
    out: dict[str, str] = {}
    pairs = rel.get("judge_comparisons") or []
    significant = [c for c in pairs if (c.get("delta_tau_b_low") or 0) > 0
                   or (c.get("delta_tau_b_high") or 0) < 0]
    out["judges_compared"] = (f"{len(pairs)} pair(s) of series on shared items; the 95 % CI "
                              f"of delta tau-b excludes 0 for {len(significant)}")
    injection = [(v, r["series"]) for r in rel.get("injection") or []
                 if (v := r.get("inflation")) is not None and r.get("case") == "all"]
    if injection:
        inflation, series = max(injection, key=lambda r: r[0])
        out["injection"] = (f"{len(injection)} series with scored adversarial items; largest "
                            f"mean inflation {inflation:+.2f} points ({series})")
    else:
        out["injection"] = "no series scored adversarial items against clean twins"
    length = [(v, r["series"]) for r in rel.get("length_bias") or []
              if (v := r.get("partial_spearman")) is not None]
    if length:
        rho, series = max(length, key=lambda r: abs(r[0]))
        out["length_bias"] = (f"{len(length)} series; strongest: {series} partial rho "
                              f"{100 * rho:.1f}")
    else:
        # Rows without an estimate (constant scores, lengths or labels on a small run): the
        # section is still shown, with its rows' dashes, and this line says why.
        out["length_bias"] = (f"{len(rel.get('length_bias') or [])} series; no partial "
                              "correlation could be estimated (constant scores, lengths or "
                              "human labels)")
    calibration = [(v, r) for r in rel.get("calibration") or []
                   if (v := r.get("mae_after")) is not None]
    if calibration:
        mae_after, top = min(calibration, key=lambda r: r[0])
        out["calibration"] = (f"{len(calibration)} series; lowest MAE after the map: "
                              f"{top['series']} {mae_after:.2f} (before "
                              f"{_two(top.get('mae_before'))})")
    else:
        out["calibration"] = (f"{len(rel.get('calibration') or [])} series; no map could be "
                              "evaluated (too few distinct scores or labels)")
    systems = view["systems"]
    out["systems"] = (f"{len({s['system'] for s in systems})} systems x "
                      f"{len({(s['judge'], s['mode']) for s in systems})} series that ran "
                      f"({len(systems)} rows; best and worst per series in the headline)")
    return out


def report_view(ctx: ReportContext) -> ReportView:
    """What the report pages show: rows only for the series that ran.

    A series that scored nothing is the one line per judge under the headline ("Modes that
    could not run", with the reason and the item count); its empty rows stay in the database
    tables, not on the page.
    """
    ran = _ran(ctx["systems"])
    rel = ctx["reliability"]
    # Every section has a series except the comparisons (a pair of series): kept whole.
    reliability: ReliabilitySections = {
        "reliability_retest": [r for r in rel["reliability_retest"] if r["series"] in ran],
        "reliability_items": [r for r in rel["reliability_items"] if r["series"] in ran],
        "injection": [r for r in rel["injection"] if r["series"] in ran],
        "injection_items": [r for r in rel["injection_items"] if r["series"] in ran],
        "length_bias": [r for r in rel["length_bias"] if r["series"] in ran],
        "calibration": [r for r in rel["calibration"] if r["series"] in ran],
        "judge_comparisons": list(rel["judge_comparisons"])}
    view: ReportView = {**ctx, "judges": ctx["judge_rows"],
                        "agreement": [a for a in ctx["agreement"] if a["n"] > 0],
                        "systems": [s for s in ctx["systems"]
                                    if f"{s['judge']}/{s['mode']}" in ran],
                        "reliability": reliability, "summaries": {}}
    view["summaries"] = _summaries(view)
    return view


def _reliability(con: Any, config: ReportConfig) -> ReliabilitySections:
    """The judge-reliability and judges-compared sections, each also a database table."""
    cursor = con.execute("""
        SELECT s.judge, s.method, s.mode, s.series, s.item_id, s.system, s.score, s.human,
               i.candidate, i.extra, i.media_sha256
        FROM scored_items s JOIN items i ON i.id = s.item_id
        ORDER BY s.series, s.item_id""")
    names = [d[0] for d in cursor.description]
    rows = [cast(ReliabilityItem, dict(zip(names, r, strict=True))) for r in cursor.fetchall()]
    cursor = con.execute("SELECT * FROM repeat_scores ORDER BY judge, mode, item_id, repeat")
    names = [d[0] for d in cursor.description]
    repeats = [RepeatScore.from_row(dict(zip(names, r, strict=True)))
               for r in cursor.fetchall()]
    n_boot, seed = config.bootstrap, config.seed
    retest, retest_items = retest_tables(repeats, n_boot, seed)
    injection, injection_items = injection_tables(rows, n_boot, seed)
    sections: ReliabilitySections = {
        "reliability_retest": retest, "reliability_items": retest_items,
        "injection": injection, "injection_items": injection_items,
        "length_bias": length_bias_table(rows, n_boot, seed),
        "calibration": calibration_table(rows, n_boot, fit_fraction=config.calibration_fit,
                                         seed=seed) if config.calibration else [],
        "judge_comparisons": comparison_table(rows, n_boot, seed),
    }
    for name, table_rows, columns in (
            ("reliability_retest", sections["reliability_retest"], RETEST_COLUMNS),
            ("reliability_items", sections["reliability_items"], RETEST_ITEM_COLUMNS),
            ("injection", sections["injection"], INJECTION_COLUMNS),
            ("injection_items", sections["injection_items"], INJECTION_ITEM_COLUMNS),
            ("length_bias", sections["length_bias"], LENGTH_COLUMNS),
            ("calibration", sections["calibration"], CALIBRATION_COLUMNS),
            ("judge_comparisons", sections["judge_comparisons"], COMPARISON_COLUMNS)):
        add_table(con, name, as_table(table_rows, columns))
    return sections


def run_report(ingest_dir: str | Path, judge_dirs: Sequence[str | Path],
               aggregate_dir: str | Path, out_dir: str | Path, config: ReportConfig
               ) -> ReportContext:
    """Build the database, compute agreement, write every report file; returns the context."""
    from capjudge.history import load_history, record_run, series_history
    from capjudge.lineage import collect, register

    ingest, agg, out = Path(ingest_dir), Path(aggregate_dir), Path(out_dir)
    item_rows, tables, judges = _read_inputs(ingest, agg, judge_dirs)
    data = describe_data(ingest, item_rows, config.human_criterion)  # the protocol line
    con = build_database(out / "capjudge.duckdb", tables, config.human_criterion)
    try:
        rows = scored_items(con)
        agree = agreement(rows, config.bootstrap, data.protocol)
        for a in agree:
            a["not_scored_text"] = ", ".join(f"{k} {v}" for k, v in a["not_scored"].items()) \
                or "-"
            if a.get("text_only"):  # scored, but say how many had no distribution
                a["not_scored_text"] += f" (text_only: {a['text_only']} scored from the " \
                    "printed number alone)"
            if a.get("note"):  # no statistic: the reason stands where the figures would be
                a["not_scored_text"] += f"; no agreement: {a['note']}"
        add_table(con, "agreement", pa.Table.from_pylist(
            [{k: (json.dumps(v) if isinstance(v, dict) else v) for k, v in a.items()}
             for a in agree]) if agree else EMPTY_AGREEMENT)
        raw_matrices = criterion_matrices(human_by_criterion(con))
        reasoning = {(j, m, i): t for j, m, i, t in con.execute(
            "SELECT judge, mode, item_id, first(reasoning ORDER BY criterion) FROM judgements "
            "WHERE reasoning IS NOT NULL GROUP BY judge, mode, item_id").fetchall()}
        reliability = _reliability(con, config)
        systems = con.execute("SELECT * FROM system_scores ORDER BY judge, mode, system"
                              ).df().to_dict("records")
        systems = [{k: clean(v) for k, v in s.items()} for s in systems]
        run = collect(Path(config.params), ingest, [Path(d) for d in judge_dirs])
        flat = {k: v for k, v in run.items() if k not in ("backends", "packages")}
        flat["packages"] = json.dumps(run["packages"], sort_keys=True)
        add_table(con, "runs", pa.Table.from_pylist([flat]))
        add_table(con, "run_backends", pa.Table.from_pylist(
            [{"run_id": run["run_id"], **b} for b in run["backends"]]))
    finally:
        con.close()
    fixed = {"judge", "method", "mode", "system", "mean_score", "items", "scored", "failed"}
    plots = _with_relpaths(make_plots(rows, out, config.human_criterion), out)
    headline = _headline(agree, judges, systems)
    (out / "thumbs").mkdir(parents=True, exist_ok=True)  # a declared output, even if empty
    gallery: list[GalleryEntry] = []
    if headline:  # the series the report leads with
        lead = headline[0]["series"]
        gallery = build_gallery(lead, [r for r in rows if r["series"] == lead],
                                {r.id: r for r in item_rows}, reasoning, ingest, out)
    history: dict[str, list[HistoryEntry]] = {}
    if config.registry:
        # Filed before rendering: the History section shows this run with its paired
        # difference to the previous one, read from the two registered databases.
        register(run, out, Path(config.registry))
        record_run(Path(config.registry), run, agree, judges, systems, config.bootstrap)
        history = series_history(load_history(Path(config.registry)))
    history_figures = _with_relpaths(history_plots(history, out), out)
    ctx: ReportContext = {
        "title": config.title, "protocol": data.line, "label_note": data.label_note,
        "gallery": gallery,
        "human_criterion": config.human_criterion, "out_dir": out,
        "judges": judges, "judge_rows": _judge_rows(judges),
        "not_run": _not_run(judges, Path(config.params)),
        "agreement": agree,
        "headline": headline,
        "matrices": {k: {"humans": sorted({h for row in m.values() for h in row}), "rows": m}
                     for k, m in raw_matrices.items()},
        "systems": systems,
        "aggregate_names": sorted({k for s in systems for k in s if k not in fixed}),
        "lineage": run,
        "packages": ", ".join(f"{k} {v}" for k, v in run["packages"].items() if v),
        "validation": _validation(out), "plots": plots,
        "reliability": reliability, "calibration_enabled": config.calibration,
        "history": history, "history_plots": history_figures,
        "registry": config.registry,
    }
    _write_report_files(out, ctx, rows, run)
    return ctx


def _read_inputs(ingest: Path, agg: Path, judge_dirs: Sequence[str | Path]
                 ) -> tuple[list[ItemRow], dict[str, pa.Table], dict[str, JudgeSummary]]:
    """The items, the stages' tables and each judge's summary; half-written inputs are refused.

    The tables: items, quarantine, judgements (with their judge), the aggregates and labels.
    """
    from capjudge.util.atomic import check_complete
    from capjudge.util.credentials import redact_value

    # Inputs a killed run left half-written are refused, not reported.
    check_complete(ingest, "ingest")
    check_complete(agg, "aggregate")
    for d in judge_dirs:
        check_complete(d, "the judge stage")
    items = pq.read_table(items_file(ingest))
    item_rows = ItemRow.from_table(items)
    judgement_tables = []
    judges: dict[str, JudgeSummary] = {}
    for d in judge_dirs:
        t = pq.read_table(judgements_file(d))
        judgement_tables.append(t.add_column(0, "judge", pa.array([Path(d).name] * len(t))))
        # redact_value: no URL user-info from an older summary reaches the report.
        judges[Path(d).name] = redact_value(json.loads(summary_file(d).read_text()))
    tables = {
        "items": items, "quarantine": pq.read_table(ingest / QUARANTINE),
        "judgements": pa.concat_tables(judgement_tables, promote_options="default"),
        "criteria": pq.read_table(agg / CRITERIA),
        "item_scores": pq.read_table(agg / ITEM_SCORES),
        "system_scores": pq.read_table(agg / SYSTEM_SCORES),
        # Aggregates written before test-retest existed have no per-repeat scores.
        "repeat_scores": pq.read_table(agg / REPEAT_SCORES)
        if (agg / REPEAT_SCORES).is_file() else REPEAT_SCHEMA.empty_table(),
        "labels": LabelRow.table(label_rows(item_rows)),
    }
    return item_rows, tables, judges


def _with_relpaths(figures: Figures, out: Path) -> Figures:
    """``figures`` with each file's path relative to the report folder added (``relpath``)."""
    for files in figures.values():
        for f in files:
            f["relpath"] = Path(f["path"]).relative_to(out).as_posix()
    return figures


def _write_report_files(out: Path, ctx: ReportContext, rows: Sequence[ScoredItem],
                        run: RunLineage) -> None:
    """Write the report (Markdown, HTML), its metrics, points, lineage and DVC plot files."""
    view = report_view(ctx)
    (out / "report.md").write_text(render_markdown(view))
    (out / "report.html").write_text(render_html(view))
    (out / "metrics.json").write_text(json.dumps(flat_metrics(ctx), indent=2, sort_keys=True)
                                      + "\n")
    with (out / "agreement_points.csv").open("w") as handle:
        handle.write("series,item_id,human,score\n")
        for r in rows:
            if r["score"] is not None and r["human"] is not None:
                handle.write(f"{r['series']},{r['item_id']},{r['human']},{r['score']:.6f}\n")
    (out / "lineage.json").write_text(json.dumps(run, indent=2, sort_keys=True) + "\n")
    write_dvc_plots(out / "dvcplots", ctx, rows)


__all__ = ["ReportConfig", "SAMPLE_PROTOCOL", "agreement", "criterion_matrices",
           "flat_metrics", "label_rows", "pearson", "run_report"]
