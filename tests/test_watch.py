"""Lineage, comparison and the watch flow: a changed backend fingerprint triggers a DVC
re-evaluation and a comparison report; no change does nothing; an unreachable backend is a
recorded failure."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT

from capjudge.testing.openai_server import MockOpenAIServer
from capjudge.watch import WatchState, classify, fingerprint


def test_fingerprints_and_classification() -> None:
    with MockOpenAIServer() as server:
        opts = {"base_url": server.url}
        a = fingerprint("j", "openai/gpt-4o-2024-08-06", opts)
        assert a["models"] == ["gpt-4o-2024-08-06"] and a["system_fingerprint"] == "fp_test_0001"
        server.fingerprint = "fp_test_0002"
        b = fingerprint("j", "openai/gpt-4o-2024-08-06", opts)
    assert a["fingerprint"] != b["fingerprint"]
    dead = fingerprint("k", "openai/gpt-4o-2024-08-06", {"base_url": "http://127.0.0.1:9/v1",
                                                          "timeout_s": 2})
    assert "error" in dead and "Connection" in dead["error"]
    fake = fingerprint("f", "fake/hash", {})
    groups = classify({"j": b, "k": dead, "f": fake, "n": a}, {"j": a, "f": fake})
    assert groups == {"changed": ["j"], "unchanged": ["f"], "new": ["n"], "unreachable": ["k"],
                      "unwatchable": []}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path,
                                                                               MockOpenAIServer]]:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    root = tmp_path / "project"
    for name in files:
        if name.startswith("data/") or name.startswith("reports/") or not (ROOT / name).exists():
            continue
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, root / name)
    with MockOpenAIServer() as server:
        params = yaml.safe_load((root / "params.yaml").read_text())
        params["sample"]["images"] = 2
        params["contexts"] = {"fake": {"backend": "fake/hash"}}
        params["judges"] = {"main": {"method": "gveval", "backend": "openai/gpt-4o-2024-08-06",
                                     "modes": ["ref-only"], "concurrency": 4,
                                     "backend_options": {"base_url": server.url}}}
        params["context_judges"] = {"ctx": {"method": "visce2", "backend": "fake/hash",
                                            "context": "fake"}}
        params["report"]["bootstrap"] = 20
        (root / "params.yaml").write_text(yaml.safe_dump(params))
        (root / "dvc.lock").unlink(missing_ok=True)
        for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                    ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x"]):
            subprocess.run(cmd, cwd=root, check=True)
        monkeypatch.chdir(root)
        yield root, server


def test_compare_cli_on_two_runs(ingested: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    from capjudge.aggregate import AggregateConfig, run_aggregate
    from capjudge.cli import main as cli_main
    from capjudge.judge import JudgeConfig, run_judge
    from capjudge.report import ReportConfig, run_report

    registry = tmp_path / "registry"
    for k, fp in enumerate(("fp_a", "fp_b")):
        with MockOpenAIServer(fingerprint=fp) as server:
            judge_dir = tmp_path / f"run{k}" / "main"
            run_judge(ingested / "items.parquet", judge_dir, JudgeConfig(
                method="gveval", backend="openai/gpt-4o-2024-08-06", modes=["ref-only"],
                backend_options={"base_url": server.url}, concurrency=8,
                cache_dir=str(tmp_path / f"cache{k}")))
        run_aggregate([judge_dir], tmp_path / f"run{k}" / "agg", AggregateConfig())
        run_report(ingested, [judge_dir], tmp_path / f"run{k}" / "agg",
                   tmp_path / f"run{k}" / "reports",
                   ReportConfig(bootstrap=20, registry=str(registry)))
    capsys.readouterr()
    out = tmp_path / "cmp"
    code = cli_main(["compare", "previous", "latest", "--registry", str(registry),
                     "--bootstrap", "50", "--out", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "## main/ref-only" in text and "95 % CI" in text and "permutation p" in text
    assert "fp_a" in text and "fp_b" in text
    data = json.loads((out / "comparison.json").read_text())
    series = data["series"]["main/ref-only"]
    assert series["common_scored"] > 100 and series["shift"]["mean_abs"] > 0
    assert "pass_fail" in series and "rank_changes" in series
    assert data["cost"]["tokens_a"] > 0


def _labelled_script(items_path: Path, direction: int, salt: str) -> Any:
    """A scripted judge whose score follows the human label (direction 1) or inverts it (-1).

    The item is found by its candidate text in the prompt (the longest one that appears);
    ``salt`` moves each score by at most 3 points (a new snapshot's small differences).
    """
    import hashlib

    import pyarrow.parquet as pq

    from capjudge.testing.openai_server import Scripted, default_script

    human = {}
    for item in pq.read_table(items_path).to_pylist():
        overall = json.loads(item["labels"] or "{}").get("overall")
        if overall is not None:
            values = overall if isinstance(overall, list) else [overall]
            human[item["candidate"]] = sum(values) / len(values)
    by_length = sorted(human, key=len, reverse=True)

    def script(body: dict[str, Any]) -> Scripted:
        text = "\n".join(m["content"] if isinstance(m["content"], str) else
                         " ".join(c.get("text", "") for c in m["content"])
                         for m in body.get("messages", []))
        candidate = next((c for c in by_length if c and c in text), None)
        if candidate is None:
            return default_script(body)
        noise = int(hashlib.sha256(f"{salt}|{candidate}".encode()).hexdigest(), 16) % 7 - 3
        centre = int(50 + direction * 40 * (human[candidate] - 3) / 2) + noise
        return Scripted(distribution={max(0, min(100, centre)): 1.0})

    return script


@pytest.mark.heavy(seconds=92)
@pytest.mark.slow
def test_watch_reevaluates_on_a_changed_fingerprint_keeps_a_history_and_alerts_on_a_drop(
        project: tuple[Path, MockOpenAIServer], prefect_api: str) -> None:
    """Four watch runs on the stand-in server after a first `dvc repro` (issue 22's done-when,
    in one project: each `dvc repro` and experiment costs a minute on 2 cores).

    1. baseline fingerprints; 2. a new snapshot that scores about the same: re-evaluated
    through a kept DVC experiment, compared with the previous run, no alert; 3. nothing
    changed: nothing done; 4. through `capjudge watch --once`, a snapshot that inverts the
    ranking: exit 4, a failed flow run whose message carries the figures.
    """
    import os

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    from capjudge.history import load_history, series_history

    root, server = project
    done = subprocess.run(["dvc", "repro", "ingest"], cwd=root, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    items = root / "data" / "ingest" / "items.parquet"
    server.script = _labelled_script(items, 1, "a")
    done = subprocess.run(["dvc", "repro"], cwd=root, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = (root / "reports" / "report.md").read_text()
    assert "## Lineage" in report and "fp_test_0001" in report
    assert len(list((root / ".capjudge-runs").glob("*/lineage.json"))) == 1
    from flows.watch import watch_flow

    baseline = watch_flow()
    assert baseline["new"] == ["ctx", "main"] and not baseline["changed"]
    # Watch run 2: the provider re-deployed the model; it scores about the same (no alert).
    calls = server.total_received
    server.fingerprint = "fp_test_0002"
    server.script = _labelled_script(items, 1, "b")
    second = watch_flow()
    assert second["changed"] == ["main"] and second["unchanged"] == ["ctx"]
    assert second.get("alerts") == []
    assert server.total_received > calls + 1  # the judge really asked again
    comparison = Path(str(second.get("comparison")))
    text = comparison.read_text()
    assert "fp_test_0001" in text and "fp_test_0002" in text
    data = json.loads(comparison.with_suffix(".json").read_text())
    series = data["series"]["main/ref-only"]
    assert series["shift"]["mean_abs"] > 0 and "agreement" in series
    assert len(list((root / ".capjudge-runs").glob("*/lineage.json"))) == 2
    exps = subprocess.run(["dvc", "exp", "list", "--all-commits"], cwd=root,
                          capture_output=True, text=True)
    assert "watch-" in exps.stdout  # the re-evaluation is a kept DVC experiment
    # Watch run 3: nothing changed, nothing done.
    quiet = watch_flow()
    assert quiet["unchanged"] == ["ctx", "main"] and "comparison" not in quiet
    # Watch run 4, through `capjudge watch --once`: a snapshot that inverts the ranking.
    server.fingerprint = "fp_test_0003"
    server.script = _labelled_script(items, -1, "c")
    env = {**os.environ, "PREFECT_API_URL": prefect_api}
    third = subprocess.run([sys.executable, "-m", "capjudge.cli", "watch", "--once"],
                           cwd=root, capture_output=True, text=True, timeout=900, env=env)
    assert third.returncode == 4, third.stdout[-3000:] + third.stderr[-3000:]
    assert "main/ref-only: Kendall tau-b x100 dropped by" in third.stderr
    # The server is the test process's (shared with its other tests): ask for failed runs.
    failed_only = FlowRunFilter(state=FlowRunFilterState(
        type=FlowRunFilterStateType(any_=[StateType.FAILED])))
    with get_client(sync_client=True) as client:
        runs = [r for r in client.read_flow_runs(flow_run_filter=failed_only)
                if r.name and r.state and r.state.is_failed()]
        messages = [r.state.message or "" for r in runs if r.state]
    failed = [m for m in messages if "capjudge watch alert" in m]
    assert failed and "dropped by" in failed[0] and "95 % CI" in failed[0]
    history = series_history(load_history(root / ".capjudge-runs"))["main/ref-only"]
    assert len(history) == 3  # the dvc repro run, then the two re-evaluations
    assert [p["snapshot_changed"] for p in history] == [False, True, True]
    assert [p["fingerprints"] for p in history] == [["fp_test_0001"], ["fp_test_0002"],
                                                    ["fp_test_0003"]]
    first, second_point, third_point = history
    assert first["kendall_tau_b"] > 0.5 and third_point["kendall_tau_b"] < -0.5
    paired = third_point["paired"]
    assert paired["difference"] == pytest.approx(third_point["kendall_tau_b"]
                                                 - second_point["kendall_tau_b"])
    assert paired["ci95"][1] < -0.05 and paired["n"] == third_point["n"]
    assert second_point["paired"]["ci95"][0] <= second_point["paired"]["difference"]
    report_html = (root / "reports" / "report.html").read_text()
    assert "History" in report_html and "fp_test_0003" in report_html and "changed" in report_html
    events = [e["event"] for e in WatchState(root / ".capjudge-runs").history()]
    assert events[:4] == ["baseline", "baseline", "re-evaluated", "no_change"]
    assert events[-1] == "alert"
