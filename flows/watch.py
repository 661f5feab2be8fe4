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

Schedules need a running Prefect server (``prefect server start``, then
``PREFECT_API_URL=http://127.0.0.1:4200/api``); with a work pool, deploy ``watch_flow`` with
``prefect deploy`` instead of ``--cron``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from capjudge.watch import WatchState, classify, fingerprint
from flows.params import load_params


def judges_of(params: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """judge name -> (params group, section) for every configured judge."""
    out = {}
    for group in ("judges", "context_judges"):
        for name, section in (params.get(group) or {}).items():
            out[name] = (group, section)
    return out


@task(name="backend-fingerprint", retries=1, retry_delay_seconds=5, cache_policy=NO_CACHE)
def fingerprint_task(judge: str, backend: str, options: dict[str, Any], probe: bool
                     ) -> dict[str, Any]:
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
def compare_task(registry: str, previous: str, out_dir: str) -> str:
    from capjudge.compare import compare_runs, write_comparison
    from capjudge.lineage import resolve_run

    result = compare_runs(resolve_run(previous, Path(registry)),
                          resolve_run("latest", Path(registry)), n_boot=200)
    md, _ = write_comparison(result, Path(out_dir))
    return str(md)


@flow(name="capjudge-watch")
def watch_flow(params_path: str = "params.yaml", registry: str = ".capjudge-runs",
               probe: bool = True, report_dir: str = "reports/watch") -> dict[str, Any]:
    """Check every judge's backend; re-evaluate (through DVC) the ones whose model changed."""
    logger = get_run_logger()
    params = load_params(params_path)
    state = WatchState(registry)
    previous = state.load()
    judges = judges_of(params)
    current: dict[str, dict[str, Any]] = {}
    for name, (_, section) in judges.items():
        options = dict(section.get("backend_options") or {})
        current[name] = fingerprint_task(name, section["backend"], options, probe)
    groups = classify(current, previous)
    summary: dict[str, Any] = {"checked": sorted(judges), **groups}
    for judge in groups["unreachable"]:
        logger.error("%s: backend %s unreachable: %s", judge, current[judge]["backend"],
                     current[judge]["error"])
        state.record({"event": "unreachable", "judge": judge, **current[judge]})
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
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        logger.info("backend changed for %s: re-running through `dvc exp run %s`",
                    ", ".join(groups["changed"]), " ".join(f"-S {s}" for s in settings))
        dvc_exp_run(settings, f"watch-{stamp}")
        comparison = None
        if before is not None:
            comparison = compare_task(registry, before, f"{report_dir}/{stamp}")
            logger.info("comparison against run %s: %s", before, comparison)
        summary.update(comparison=comparison, previous_run=before)
        for judge in groups["changed"]:
            state.record({"event": "re-evaluated", "judge": judge, "previous":
                          previous[judge], "current": current[judge],
                          "comparison": comparison, "previous_run": before})
    elif not groups["unreachable"] and not groups["new"]:
        logger.info("no backend changed (%d checked): nothing to do", len(judges))
        state.record({"event": "no_change", "judges": sorted(judges)})
    # Reachable backends' fingerprints become the new baseline; unreachable ones keep theirs.
    state.save({**previous, **{j: current[j] for j in current if "error" not in current[j]}})
    if groups["unreachable"]:
        raise RuntimeError(f"unreachable backends (recorded in {state.events}): "
                           + "; ".join(f"{j}: {current[j]['error']}"
                                       for j in groups["unreachable"]))
    return summary


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
    kwargs = {"params_path": args.params, "registry": args.registry,
              "probe": not args.no_probe}
    if args.once:
        try:
            summary = watch_flow(**kwargs)
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
