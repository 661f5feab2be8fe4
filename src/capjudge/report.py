"""The report stage: join scores with human labels in DuckDB, measure agreement, write reports.

Database ``capjudge.duckdb`` (tables, all documented in the README):

- ``items``, ``quarantine``: from ingest.
- ``judgements``: every judge's rows (with ``judge``), distributions included.
- ``criteria``, ``item_scores``, ``system_scores``: from the aggregate stage.
- ``labels``: human labels in long form (``item_id``, ``criterion``, ``annotator``, ``value``).
- ``agreement``: per judge and mode, the statistics against the human ``overall`` label.

Outputs: ``report.md`` and a self-contained ``report.html`` (plots inlined), PNG heatmaps
(human rating x metric score, rows normalised as in VisCE² Fig. 3) and scatter plots,
``metrics.json`` (flat, for ``dvc metrics diff``) and ``agreement_points.csv`` (for
``dvc plots diff``). Every number names its protocol.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from capjudge.metaeval.stats import STATS, bootstrap_ci, kendall_tau_b, pearson, system_level

SAMPLE_PROTOCOL = ("sample-gold: one row per item, the human label is the annotators' mean "
                   "(the bundled sample's labels are derived from its generator)")


@dataclass(frozen=True)
class ReportConfig:
    """``params.yaml: report``."""

    human_criterion: str = "overall"
    bootstrap: int = 500
    title: str = "capjudge report"
    registry: str | None = ".capjudge-runs"  # where runs are filed for `capjudge compare`
    params: str = "params.yaml"


def label_rows(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """items.labels (JSON) in long form: one row per item, criterion and annotator."""
    rows = []
    for item in items:
        for criterion, value in json.loads(item.get("labels") or "{}").items():
            values = value if isinstance(value, list) else [value]
            for k, v in enumerate(values):
                rows.append({"item_id": item["id"], "criterion": criterion, "annotator": k,
                             "value": float(v)})
    return rows


def build_database(db_path: Path, tables: dict[str, pa.Table]) -> Any:
    """(Re)create the DuckDB database with the given tables; returns an open connection."""
    import duckdb

    db_path.parent.mkdir(parents=True, exist_ok=True)
    for stale in (db_path, Path(f"{db_path}.wal")):
        stale.unlink(missing_ok=True)
    con = duckdb.connect(str(db_path))
    for name, table in tables.items():
        con.register(f"_{name}", table)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM _{name}")
        con.unregister(f"_{name}")
    return con


def agreement(con: Any, criterion: str, n_boot: int) -> list[dict[str, Any]]:
    """Per judge and mode: scores joined with the mean human label, and the statistics."""
    joined = con.execute("""
        SELECT s.judge, s.method, s.mode, s.item_id, s.system, s.score, s.status,
               h.human
        FROM item_scores s
        JOIN (SELECT item_id, avg(value) AS human FROM labels WHERE criterion = ?
              GROUP BY item_id) h USING (item_id)
        ORDER BY s.judge, s.mode, s.item_id
    """, [criterion]).fetchall()
    groups: dict[tuple[str, str, str], list[tuple[Any, ...]]] = {}
    for row in joined:
        groups.setdefault((row[0], row[1], row[2]), []).append(row)
    out = []
    for (judge, method, mode), rows in sorted(groups.items()):
        scored = [r for r in rows if r[5] is not None]
        entry: dict[str, Any] = {"judge": judge, "method": method, "mode": mode,
                                 "protocol": "sample-gold", "items": len(rows),
                                 "n": len(scored),
                                 "not_scored": {s: sum(1 for r in rows if r[6] == s)
                                                for s in sorted({r[6] for r in rows})
                                                if s not in ("ok", "partial")},
                                 "ci95": {}}
        if len(scored) >= 3:
            x = [float(r[5]) for r in scored]
            y = [float(r[7]) for r in scored]
            for name, stat in STATS.items():
                entry[name] = stat(x, y)
                if n_boot:
                    entry["ci95"][name] = list(bootstrap_ci(x, y, stat, n_boot=n_boot))
            entry["system_pearson"], entry["systems"] = system_level(
                x, y, [r[4] or "(none)" for r in scored])
        out.append(entry)
    return out


def criterion_matrices(con: Any) -> dict[str, dict[str, dict[str, float]]]:
    """Kendall tau-b of each judge criterion against each human criterion (HarmonicEval
    Table 3 layout), for judges with more than one criterion."""
    rows = con.execute("""
        SELECT c.judge, c.mode, c.criterion, c.item_id, c.score, l.criterion, l.human
        FROM criteria c
        JOIN (SELECT item_id, criterion, avg(value) AS human FROM labels
              GROUP BY item_id, criterion) l USING (item_id)
        WHERE c.score IS NOT NULL
    """).fetchall()
    data: dict[str, dict[str, dict[str, list[tuple[float, float]]]]] = {}
    for judge, mode, crit, _, score, human_crit, human in rows:
        data.setdefault(f"{judge}/{mode}", {}).setdefault(crit, {}).setdefault(
            human_crit, []).append((float(score), float(human)))
    out: dict[str, dict[str, dict[str, float]]] = {}
    for key, by_crit in data.items():
        if len(by_crit) < 2:
            continue
        out[key] = {c: {h: kendall_tau_b([a for a, _ in v], [b for _, b in v])
                        for h, v in sorted(hs.items()) if len(v) >= 3}
                    for c, hs in sorted(by_crit.items())}
    return out


def _plots(con: Any, out_dir: Path, criterion: str) -> dict[str, list[str]]:
    """Heatmap and scatter PNG per judge/mode with at least 3 scored items."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = con.execute("""
        SELECT s.judge || '/' || s.mode, s.method, s.score, h.human FROM item_scores s
        JOIN (SELECT item_id, avg(value) AS human FROM labels WHERE criterion = ?
              GROUP BY item_id) h USING (item_id) WHERE s.score IS NOT NULL
    """, [criterion]).fetchall()
    series: dict[str, list[tuple[str, float, float]]] = {}
    for key, method, score, human in rows:
        series.setdefault(key, []).append((method, float(score), float(human)))
    files: dict[str, list[str]] = {}
    plot_dir = out_dir / "plots"
    plot_dir.mkdir(parents=True, exist_ok=True)
    for key, points in sorted(series.items()):
        if len(points) < 3:
            continue
        method = points[0][0]
        low, high = (1, 5) if method == "harmoniceval" else (0, 100)
        scores = np.array([p[1] for p in points])
        human = np.array([p[2] for p in points])
        name = key.replace("/", "__")
        fig, ax = plt.subplots(figsize=(4.5, 3.5), dpi=100)
        ax.scatter(human, scores, s=14, alpha=0.6)
        ax.set_xlabel(f"human {criterion}")
        ax.set_ylabel(f"{key} score")
        ax.set_ylim(low - 0.05 * (high - low), high + 0.05 * (high - low))
        ax.set_title(f"{key} (n={len(points)})", fontsize=9)
        fig.tight_layout()
        scatter = plot_dir / f"{name}-scatter.png"
        fig.savefig(scatter, metadata={"Software": None})
        plt.close(fig)
        levels = sorted(set(np.round(human).astype(int)))
        bins = np.linspace(low, high, 11)
        matrix = np.zeros((len(levels), 10))
        for i, level in enumerate(levels):
            sel = scores[np.round(human).astype(int) == level]
            counts, _ = np.histogram(sel, bins=bins)
            matrix[i] = counts / max(1, counts.sum())  # rows sum to 1 (VisCE² Fig. 3)
        fig, ax = plt.subplots(figsize=(5, 3), dpi=100)
        im = ax.imshow(matrix, aspect="auto", cmap="viridis", origin="lower",
                       extent=(low, high, levels[0] - 0.5, levels[-1] + 0.5))
        ax.set_xlabel(f"{key} score")
        ax.set_ylabel(f"human {criterion}")
        fig.colorbar(im, ax=ax, fraction=0.05)
        fig.tight_layout()
        heat = plot_dir / f"{name}-heatmap.png"
        fig.savefig(heat, metadata={"Software": None})
        plt.close(fig)
        files[key] = [str(heat), str(scatter)]
    return files


def _fmt(value: Any, scale: float = 100.0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{scale * value:.1f}"


def render_markdown(ctx: dict[str, Any]) -> str:
    lines = [f"# {ctx['title']}", "", f"Protocol: {SAMPLE_PROTOCOL}. Coefficients x100; "
             "95 % bootstrap CIs in brackets.", "", "## What ran", "",
             "| judge | method | backend | snapshot | ran | skipped (why) | statuses | calls "
             "| cache hits | tokens | cost USD |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in ctx["judges"].items():
        skipped = "; ".join(f"{m}: {', '.join(f'{r} ({n})' for r, n in v.items())}"
                            for m, v in (s.get("skips") or {}).items()) or "-"
        statuses = ", ".join(f"{k} {v}" for k, v in s.get("by_status", {}).items())
        backend = s.get("backend", {})
        ran = ", ".join(s.get("modes_ran", [])) or "-"
        lines.append(f"| {name} | {s.get('method')} | {backend.get('backend')} | "
                     f"{str(backend.get('snapshot'))[:23]} | {ran} | {skipped} | {statuses} | "
                     f"{s.get('model_calls')} | "
                     f"{s.get('cache_hits')} | "
                     f"{s.get('prompt_tokens', 0) + s.get('completion_tokens', 0)} | "
                     f"{s.get('cost_usd') if s.get('cost_usd') is not None else '-'} |")
    lines += ["", "## Agreement with humans (overall)", "",
              "| judge/mode | n | not scored | tau_b | tau_c | pearson | spearman | "
              "system pearson |", "|---|---|---|---|---|---|---|---|"]
    for a in ctx["agreement"]:
        ci = a.get("ci95", {})

        def cell(name: str, a: dict[str, Any] = a, ci: dict[str, Any] = ci) -> str:
            v = a.get(name)
            if name in ci:
                return f"{_fmt(v)} [{_fmt(ci[name][0])}, {_fmt(ci[name][1])}]"
            return _fmt(v)

        not_scored = ", ".join(f"{k} {v}" for k, v in a["not_scored"].items()) or "-"
        lines.append(f"| {a['judge']}/{a['mode']} | {a['n']} | {not_scored} | "
                     f"{cell('kendall_tau_b')} | {cell('kendall_tau_c')} | {cell('pearson')} | "
                     f"{cell('spearman')} | {_fmt(a.get('system_pearson'))} |")
    if ctx["matrices"]:
        lines += ["", "## Per-criterion agreement (Kendall tau-b x100)", ""]
        for key, matrix in ctx["matrices"].items():
            humans = sorted({h for row in matrix.values() for h in row})
            lines += [f"**{key}**", "", "| judge criterion | " + " | ".join(humans) + " |",
                      "|---|" + "---|" * len(humans)]
            for crit, row in matrix.items():
                lines.append(f"| {crit} | " + " | ".join(_fmt(row.get(h)) for h in humans)
                             + " |")
            lines.append("")
    lines += ["", "## Systems", "", "| judge/mode | system | mean score | scored/items | "
              "failed | precision macro | precision micro |", "|---|---|---|---|---|---|---|"]
    for s in ctx["systems"]:
        lines.append(f"| {s['judge']}/{s['mode']} | {s['system']} | "
                     f"{_fmt(s['mean_score'], 1)} | {s['scored']}/{s['items']} | {s['failed']} | "
                     f"{_fmt(s['precision_macro'], 1)} | {_fmt(s['precision_micro'], 1)} |")
    run = ctx.get("lineage")
    if run:
        lines += ["", "## Lineage", "", f"- run: `{run['run_id']}` at {run['time']}",
                  f"- git: `{run['git_revision']}`" + (" (dirty tree)" if run["git_dirty"]
                                                        else ""),
                  f"- dvc.lock sha256: `{run['dvc_lock_sha256']}`",
                  f"- params sha256: `{run['params_sha256']}`",
                  f"- dataset (items.parquet) sha256: `{run['dataset_sha256']}`",
                  "- packages: " + ", ".join(f"{k} {v}" for k, v in run["packages"].items()
                                             if v), "",
                  "| judge | backend | snapshot | models | fingerprints | templates |",
                  "|---|---|---|---|---|---|"]
        for b in run["backends"]:
            lines.append(f"| {b['judge']} | {b['backend']} | {b['snapshot']} | "
                         f"{', '.join(b['models']) or '-'} | "
                         f"{', '.join(b['fingerprints']) or '-'} | "
                         f"{', '.join(b['templates'])} |")
    lines += ["", "## Validation", "", ctx.get("validation") or "not run", "", "## Plots", ""]
    for key, files in ctx["plots"].items():
        for f in files:
            lines.append(f"![{key}]({Path(f).relative_to(ctx['out_dir']).as_posix()})")
    return "\n".join(lines) + "\n"


def render_html(markdown_text: str, out_dir: Path) -> str:
    """A self-contained page: the Markdown's tables and the plots inlined as data URLs."""
    import html

    body = []
    in_table = False
    for line in markdown_text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if set("".join(cells)) <= set("-: "):
                continue
            tag = "th" if not in_table else "td"
            if not in_table:
                body.append("<table>")
                in_table = True
            body.append("<tr>" + "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in cells)
                        + "</tr>")
            continue
        if in_table:
            body.append("</table>")
            in_table = False
        if line.startswith("!["):
            path = out_dir / line[line.index("(") + 1:-1]
            data = base64.b64encode(path.read_bytes()).decode()
            body.append(f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,'
                        f'{data}">')
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{html.escape(line.lstrip('# '))}</h{level}>")
        elif line.strip():
            body.append(f"<p>{html.escape(line)}</p>")
    if in_table:
        body.append("</table>")
    style = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;margin:1em 0;font-size:13px}"
             "td,th{border:1px solid #ccc;padding:3px 6px}th{background:#eee}"
             "img{max-width:48%;margin:4px}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>capjudge report</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")


def flat_metrics(ctx: dict[str, Any]) -> dict[str, Any]:
    """``metrics.json`` for DVC: agreement and failure counts per judge/mode."""
    out: dict[str, Any] = {}
    for a in ctx["agreement"]:
        key = f"{a['judge']}/{a['mode']}"
        out[key] = {k: (None if isinstance(v, float) and math.isnan(v) else v)
                    for k, v in a.items() if k in ("n", *STATS)}
    for name, s in ctx["judges"].items():
        out.setdefault("runs", {})[name] = {"failure_rate": s.get("failure_rate"),
                                            "low_mass_rate": s.get("low_mass_rate"),
                                            "model_calls": s.get("model_calls"),
                                            "cost_usd": s.get("cost_usd")}
    return out


def run_report(ingest_dir: str | Path, judge_dirs: Sequence[str | Path],
               aggregate_dir: str | Path, out_dir: str | Path, config: ReportConfig
               ) -> dict[str, Any]:
    """Build the database, compute agreement, write every report file; returns the context."""
    ingest, agg, out = Path(ingest_dir), Path(aggregate_dir), Path(out_dir)
    items = pq.read_table(ingest / "items.parquet")
    judgement_tables = []
    judges: dict[str, Any] = {}
    for d in judge_dirs:
        t = pq.read_table(Path(d) / "judgements.parquet")
        judgement_tables.append(t.add_column(0, "judge", pa.array([Path(d).name] * len(t))))
        judges[Path(d).name] = json.loads((Path(d) / "summary.json").read_text())
    tables = {
        "items": items, "quarantine": pq.read_table(ingest / "quarantine.parquet"),
        "judgements": pa.concat_tables(judgement_tables, promote_options="default"),
        "criteria": pq.read_table(agg / "criteria.parquet"),
        "item_scores": pq.read_table(agg / "item_scores.parquet"),
        "system_scores": pq.read_table(agg / "system_scores.parquet"),
        "labels": pa.Table.from_pylist(label_rows(items.to_pylist()), schema=pa.schema([
            ("item_id", pa.string()), ("criterion", pa.string()), ("annotator", pa.int64()),
            ("value", pa.float64())])),
    }
    db = out / "capjudge.duckdb"
    con = build_database(db, tables)
    try:
        agree = agreement(con, config.human_criterion, config.bootstrap)
        con.register("_agreement", pa.Table.from_pylist(
            [{k: (json.dumps(v) if isinstance(v, dict) else v) for k, v in a.items()}
             for a in agree]))
        con.execute("CREATE TABLE agreement AS SELECT * FROM _agreement")
        ctx = {"title": config.title, "out_dir": out, "judges": judges, "agreement": agree,
               "matrices": criterion_matrices(con),
               "systems": con.execute("SELECT * FROM system_scores ORDER BY judge, mode, "
                                      "system").df().to_dict("records"),
               "plots": _plots(con, out, config.human_criterion)}
        from capjudge.lineage import collect

        run = collect(Path(config.params), ingest, [Path(d) for d in judge_dirs])
        ctx["lineage"] = run
        flat = {k: v for k, v in run.items() if k not in ("backends", "packages")}
        flat["packages"] = json.dumps(run["packages"], sort_keys=True)
        con.register("_runs", pa.Table.from_pylist([flat]))
        con.execute("CREATE TABLE runs AS SELECT * FROM _runs")
        con.register("_run_backends", pa.Table.from_pylist(
            [{"run_id": run["run_id"], **b} for b in run["backends"]]))
        con.execute("CREATE TABLE run_backends AS SELECT * FROM _run_backends")
        points = con.execute("""
            SELECT s.judge || '/' || s.mode AS series, s.item_id, h.human, s.score
            FROM item_scores s JOIN (SELECT item_id, avg(value) AS human FROM labels
            WHERE criterion = ? GROUP BY item_id) h USING (item_id)
            WHERE s.score IS NOT NULL ORDER BY series, item_id""",
                             [config.human_criterion]).fetchall()
    finally:
        con.close()
    validation = out / "validation.md"
    ctx["validation"] = validation.read_text() if validation.is_file() else None
    md = render_markdown(ctx)
    (out / "report.md").write_text(md)
    (out / "report.html").write_text(render_html(md, out))
    (out / "metrics.json").write_text(json.dumps(flat_metrics(ctx), indent=2, sort_keys=True)
                                      + "\n")
    with (out / "agreement_points.csv").open("w") as handle:
        handle.write("series,item_id,human,score\n")
        for series, item_id, human, score in points:
            handle.write(f"{series},{item_id},{human},{score:.6f}\n")
    (out / "lineage.json").write_text(json.dumps(ctx["lineage"], indent=2, sort_keys=True)
                                      + "\n")
    if config.registry:
        from capjudge.lineage import register

        register(ctx["lineage"], out, Path(config.registry))
    return ctx


__all__ = ["run_report", "ReportConfig", "agreement", "criterion_matrices", "pearson"]
