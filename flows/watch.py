"""Scheduled re-evaluation when a judge's backend model changes.

    python -m flows.watch --once                      # one check now (temporary local server)
    python -m flows.watch --cron "0 3 * * *"          # serve on a schedule (needs a server)

For every judge in ``params.yaml`` the flow takes the backend's current fingerprint and compares
it with the last one recorded (``<registry>/watch.json``). When some changed, it re-runs the
affected judge stages *through DVC* as an experiment (``dvc exp run -S
judges.NAME.fingerprint=...``: the new fingerprint is a parameter, so DVC re-runs exactly those
judges and what depends on them, the cache is not consulted for the new model, lineage lands in
``dvc.lock`` and the experiment is kept), then writes a comparison report against the previous
run and records the event. When nothing changed it does nothing and says so. An unreachable
backend is a recorded, reported failure (the flow ends ``Failed`` after recording it), not a
crash mid-way and not a silent skip.

Alerts: when a re-evaluated judge/mode's paired delta Kendall tau-b against the previous run
has its whole 95 % CI below ``-watch.alert_drop`` (params.yaml, default 0.05), or its judge's
failure rate exceeds ``validate.max_failure_rate`` / its low-mass rate
``watch.max_low_mass_rate``, the flow run ends ``Failed`` with the figures in its message (a
:class:`~capjudge.watch.WatchAlert`) and ``--once`` exits 4. Every run publishes its verdict
as a markdown artifact (``watch-verdict``, and ``watch-verdict-<judge>`` per re-evaluated
judge).

Schedules need a running Prefect server (``prefect server start``, then
``PREFECT_API_URL=http://127.0.0.1:4200/api``); with a work pool, deploy ``watch_flow`` with
``prefect deploy`` instead of ``--cron``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from capjudge.cli.common import EXIT_ALERT
from capjudge.history import HistoryEntry, alerts, load_history, rate_alerts
from capjudge.params import flow_style_hazards
from capjudge.stage_files import default_dir, summary_file
from capjudge.watch import (
    Fingerprint,
    WatchAlert,
    WatchLimits,
    WatchState,
    WatchSummary,
    classify,
    fingerprint,
)
from flows.artifacts import publish_verdict
from flows.params import load_params


def judges_of(params: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """judge name -> (params group, section) for every configured judge."""
    out = {}
    for group in ("judges", "context_judges"):
        for name, section in (params.get(group) or {}).items():
            out[name] = (group, section)
    return out


@task(name="backend-fingerprint", retries=1, retry_delay_seconds=5, cache_policy=NO_CACHE)
def fingerprint_task(judge: str, backend: str, options: Mapping[str, object], probe: bool
                     ) -> Fingerprint:
    """The judge's backend fingerprint now (an ``error`` entry when it cannot be reached)."""
    return fingerprint(judge, backend, options, probe)


@task(name="dvc-exp-run", cache_policy=NO_CACHE)
def dvc_exp_run(settings: list[str], name: str) -> str:
    """Re-run the affected stages as a DVC experiment; returns DVC's output."""
    cmd = ["dvc", "exp", "run", "--name", name]
    for s in settings:
        cmd += ["-S", s]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stdout[-2000:]}\n"
                           f"{done.stderr[-2000:]}")
    return done.stdout


@task(name="compare-runs", cache_policy=NO_CACHE)
def compare_task(registry: str, previous: str, out_dir: str, params_path: str = "params.yaml"
                 ) -> str:
    from capjudge.compare import compare_runs, write_comparison
    from capjudge.history import default_bootstrap
    from capjudge.lineage import resolve_run

    db_a, db_b = resolve_run(previous, Path(registry)), resolve_run("latest", Path(registry))
    # As many resamples as the history used: the comparison prints the history's interval.
    n_boot = default_bootstrap(Path(registry), db_a, db_b, Path(params_path))
    result = compare_runs(db_a, db_b, n_boot=n_boot)
    md, _ = write_comparison(result, Path(out_dir))
    return str(md)


@flow(name="capjudge-watch")
def watch_flow(params_path: str = "params.yaml", registry: str = ".capjudge-runs",
               probe: bool = True, report_dir: str = "reports/watch") -> WatchSummary:
    """Check every judge's backend; re-evaluate (through DVC) the ones whose model changed."""
    logger = get_run_logger()
    params = load_params(params_path)
    state = WatchState(registry)
    previous = state.load()
    judges = judges_of(params)
    current: dict[str, Fingerprint] = {}
    for name, (_, section) in judges.items():
        options = dict(section.get("backend_options") or {})
        current[name] = fingerprint_task(name, section["backend"], options, probe)
    groups = classify(current, previous)
    summary: WatchSummary = {"checked": sorted(judges), "changed": groups["changed"],
                             "unchanged": groups["unchanged"], "new": groups["new"],
                             "unreachable": groups["unreachable"],
                             "unwatchable": groups["unwatchable"]}
    for judge in groups["unreachable"]:
        logger.error("%s: backend %s unreachable: %s", judge, current[judge]["backend"],
                     current[judge]["error"])
        state.record({"event": "unreachable", "judge": judge, **current[judge]})
    for judge in groups["unwatchable"]:
        # Said every time: a change behind this judge's name would go unseen.
        logger.warning("%s: cannot watch this judge: %s", judge,
                       current[judge].get("unwatchable"))
        state.record({"event": "unwatchable", "judge": judge, **current[judge]})
    if groups["new"]:
        logger.info("first fingerprint recorded for %s", ", ".join(groups["new"]))
        for judge in groups["new"]:
            state.record({"event": "baseline", "judge": judge, **current[judge]})
    if groups["changed"]:
        from capjudge.lineage import list_runs

        runs = list_runs(Path(registry))
        before = runs[-1]["run_id"] if runs else None
        # "++" adds the key when the judge has none yet and overrides it otherwise (Hydra).
        settings = [f"++{judges[j][0]}.{j}.fingerprint={current[j]['fingerprint']}"
                    for j in groups["changed"]]
        hazards = flow_style_hazards(Path(params_path).read_text(encoding="utf-8"))
        if hazards:
            # `dvc exp run -S` would rewrite params.yaml into a file DVC cannot read.
            raise RuntimeError(f"{params_path}: cannot re-evaluate through `dvc exp run -S`: "
                             + "; ".join(hazards))
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        logger.info("backend changed for %s: re-running through `dvc exp run %s`",
                    ", ".join(groups["changed"]), " ".join(f"-S {s}" for s in settings))
        limits = watch_limits(params)
        try:
            dvc_exp_run(settings, f"watch-{stamp}")
        except RuntimeError as exc:
            # The validate stage stops the pipeline when a judge fails too often: that is
            # an alert with the judge's figures (from its summary), not an opaque DVC error.
            rates = [line for j in groups["changed"] for line in rate_alerts(
                j, judge_summary(judges[j][1], j), max_failure_rate=limits["max_failure_rate"],
                max_low_mass_rate=limits["max_low_mass_rate"])]
            if not rates:
                raise
            state.record({"event": "alert", "judges": groups["changed"], "alerts": rates,
                          "dvc_error": str(exc)[-2000:]})
            publish_verdict("# capjudge watch: ALERT\n\n" + "\n".join(f"- {r}" for r in rates)
                            + "\n\nThe re-evaluation stopped: " + str(exc)[-500:] + "\n", {})
            # No new baseline: the next check re-runs (and alerts) until the judge recovers.
            raise WatchAlert("capjudge watch alert: " + "; ".join(rates)) from exc
        comparison = None
        if before is not None:
            comparison = compare_task(registry, before, f"{report_dir}/{stamp}", params_path)
            logger.info("comparison against run %s: %s", before, comparison)
        summary["comparison"], summary["previous_run"] = comparison, before
        after = list_runs(Path(registry))
        run_id = after[-1]["run_id"] if after and after[-1]["run_id"] != before else None
        entries = [e for e in load_history(Path(registry)) if e["run_id"] == run_id
                   and e["judge"] in groups["changed"]] if run_id else []
        if not entries:
            logger.warning("no history entry for %s after the re-evaluation (report.registry "
                           "off, or a different registry than %s?): no alert check",
                           ", ".join(groups["changed"]), registry)
        alert_lines = alerts(entries, alert_drop=limits["alert_drop"],
                             max_failure_rate=limits["max_failure_rate"],
                             max_low_mass_rate=limits["max_low_mass_rate"])
        summary["run"], summary["alerts"] = run_id, alert_lines
        markdown, per_judge = verdict_markdown(groups["changed"], previous, current, entries,
                                               alert_lines, limits, run_id, before)
        publish_verdict(markdown, per_judge)
        for judge in groups["changed"]:
            state.record({"event": "re-evaluated", "judge": judge, "previous":
                          previous[judge], "current": current[judge],
                          "comparison": comparison, "previous_run": before, "run": run_id,
                          "alerts": [a for a in alert_lines
                                     if a.startswith((f"{judge}/", f"{judge}:"))]})
        if alert_lines:
            logger.error("alert: %s", " | ".join(alert_lines))
            state.record({"event": "alert", "run": run_id, "alerts": alert_lines})
    elif not groups["unreachable"] and not groups["new"]:
        watched = len(judges) - len(groups["unwatchable"])
        logger.info("no backend changed (%d checked%s): nothing to do", watched,
                    f"; cannot watch {', '.join(groups['unwatchable'])}"
                    if groups["unwatchable"] else "")
        state.record({"event": "no_change", "judges": sorted(judges)})
    if not groups["changed"]:
        publish_verdict(verdict_markdown([], previous, current, [], [], watch_limits(params),
                                         None, None)[0], {})
    # Reachable backends' fingerprints become the new baseline; unreachable ones keep theirs.
    state.save({**previous, **{j: current[j] for j in current if "error" not in current[j]}})
    unreachable = ("unreachable backends (recorded in " f"{state.events}): "
                   + "; ".join(f"{j}: {current[j]['error']}" for j in groups["unreachable"])
                   if groups["unreachable"] else "")
    if summary.get("alerts"):
        # A failed flow run whose message carries the figures: what Prefect automations
        # and notifications match on (docs/guides/lineage.md: alerts).
        raise WatchAlert("capjudge watch alert: " + "; ".join(summary["alerts"])
                         + (f"; also {unreachable}" if unreachable else ""))
    if unreachable:
        raise RuntimeError(unreachable)
    return summary


def judge_summary(section: Mapping[str, object], name: str) -> Mapping[str, object]:
    """The judge stage's ``summary.json`` in the workspace (empty when it is missing)."""
    path = summary_file(str(section.get("out", default_dir("judge", name))))
    data: dict[str, object] = json.loads(path.read_text()) if path.is_file() else {}
    return data


def watch_limits(params: dict[str, Any]) -> WatchLimits:
    """The alert thresholds: ``watch.alert_drop``, ``watch.max_low_mass_rate`` and
    ``validate.max_failure_rate`` (the limit the validate stage enforces)."""
    watch = params.get("watch") or {}
    return {"alert_drop": float(watch.get("alert_drop", 0.05)),
            "max_failure_rate": (params.get("validate") or {}).get("max_failure_rate", 0.2),
            "max_low_mass_rate": watch.get("max_low_mass_rate", 0.2)}


def verdict_markdown(changed: list[str], previous: Mapping[str, Fingerprint],
                     current: Mapping[str, Fingerprint], entries: Sequence[HistoryEntry],
                     alert_lines: list[str], limits: WatchLimits,
                     run_id: str | None, before: str | None) -> tuple[str, dict[str, str]]:
    """The verdict as Markdown: overall, and per re-evaluated judge."""
    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.1f}"

    if not changed:
        unreachable = sorted(j for j, e in current.items() if "error" in e)
        text = ("# capjudge watch: no backend changed\n\n"
                f"{len(current)} judge(s) checked"
                + (f"; unreachable: {', '.join(unreachable)}" if unreachable else "") + ".\n")
        return text, {}
    verdict = "ALERT" if alert_lines else "OK"
    head = [f"# capjudge watch: {verdict}", "",
            f"Re-evaluated: {', '.join(changed)} (run `{run_id}`, previous run `{before}`). "
            f"Alert when the paired 95 % CI of delta tau-b lies below -{limits['alert_drop']}, "
            f"or a failure rate exceeds {limits['max_failure_rate']} / a low-mass rate "
            f"exceeds {limits['max_low_mass_rate']}.", ""]
    if alert_lines:
        head += ["## Alerts", "", *[f"- {a}" for a in alert_lines], ""]
    per_judge = {}
    for judge in changed:
        old, new = previous.get(judge, {}), current[judge]
        lines = [f"## {judge}", "",
                 f"Fingerprint {old.get('fingerprint')} -> {new.get('fingerprint')} "
                 f"(system_fingerprint {old.get('system_fingerprint', '-')} -> "
                 f"{new.get('system_fingerprint', '-')}).", "",
                 "| judge/mode | n | tau-b x100 [95 % CI] | delta vs previous [95 % CI] | p "
                 "| failure % | low-mass % |", "|---|---|---|---|---|---|---|"]
        for e in (e for e in entries if e["judge"] == judge):
            ci, paired = e.get("ci95") or [None, None], e.get("paired")
            delta = (f"{pct(paired['difference'])} [{pct(paired['ci95'][0])}, "
                     f"{pct(paired['ci95'][1])}]" if paired else "-")
            p_value = f"{paired['p_value']:.3f}" if paired else "-"
            lines.append(f"| {e['series']} | {e['n']} | {pct(e['kendall_tau_b'])} "
                         f"[{pct(ci[0])}, {pct(ci[1])}] | {delta} | {p_value} | "
                         f"{pct(e['failure_rate'])} | {pct(e['low_mass_rate'])} |")
        if len(lines) == 6:
            lines.append("| (no scored series in the new run) | | | | | | |")
        per_judge[judge] = "\n".join(lines) + "\n"
    return "\n".join(head) + "\n" + "\n".join(per_judge.values()), per_judge


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    when = parser.add_mutually_exclusive_group(required=True)
    when.add_argument("--once", action="store_true", help="check now, once")
    when.add_argument("--cron", help="serve on this schedule (needs a Prefect server)")
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--registry", default=".capjudge-runs")
    parser.add_argument("--no-probe", action="store_true",
                        help="API backends: use the model list only (no one-token request)")
    args = parser.parse_args(argv)
    try:
        load_params(args.params)  # the schema: a typo fails before the flow (or schedule) starts
        hazards = flow_style_hazards(Path(args.params).read_text(encoding="utf-8"))
        if hazards:  # a re-evaluation's `dvc exp run -S` would corrupt the file
            raise ValueError(f"{args.params}: write these in block style (one key a line) "
                             "before watching: " + "; ".join(hazards))
    except (OSError, ValueError) as exc:
        print(f"watch: error: {exc}", file=sys.stderr)
        return 2
    kwargs = {"params_path": args.params, "registry": args.registry,
              "probe": not args.no_probe}
    if args.once:
        try:
            summary = watch_flow(**kwargs)
        except WatchAlert as exc:
            print(f"watch: {exc}", file=sys.stderr)
            return EXIT_ALERT
        except RuntimeError as exc:
            print(f"watch: {exc}", file=sys.stderr)
            return 1
        print(summary)
        return 0
    if not os.environ.get("PREFECT_API_URL"):
        print("watch: schedules need a running Prefect server: run `prefect server start`, "
              "then set PREFECT_API_URL=http://127.0.0.1:4200/api (the temporary server of "
              "one-off runs cannot keep a schedule)", file=sys.stderr)
        return 2
    watch_flow.serve(name="capjudge-watch", cron=args.cron, parameters=kwargs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
