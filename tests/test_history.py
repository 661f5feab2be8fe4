"""Judge history: three registered runs with a snapshot change give the hand-computed series;
an injected drop raises the alert lines; ``capjudge history`` prints them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from capjudge.history import alerts, format_history, load_history, record_run, series_history
from capjudge.report.agreement import agreement
from capjudge.report.database import build_database, scored_items

METHOD = "gveval"  # any method on a 0-100 scale: the pass mark only feeds the flip count
ITEMS = ["a", "b", "c", "d", "e", "f"]
SYSTEMS = ["s1", "s1", "s1", "s2", "s2", "s2"]
HUMAN = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def _register_run(registry: Path, run_id: str, time: str, fingerprint: str,
                  scores: list[float], failure_rate: float = 0.0) -> list[dict[str, Any]]:
    """A run's database in the registry (as lineage.register files it) and its entries."""
    item_scores = pa.Table.from_pylist([
        {"judge": "j", "method": METHOD, "mode": "ref-only", "item_id": i, "system": s,
         "score": x, "status": "ok", "cause": None, "reason": None}
        for i, s, x in zip(ITEMS, SYSTEMS, scores, strict=True)])
    labels = pa.Table.from_pylist([{"item_id": i, "criterion": "overall", "annotator": 0,
                                    "value": h} for i, h in zip(ITEMS, HUMAN, strict=True)])
    judgements = pa.Table.from_pylist([{"judge": "j", "cost_usd": 0.0, "prompt_tokens": 1,
                                        "completion_tokens": 1, "cached": False,
                                        "status": "ok"}])
    folder = registry / run_id
    folder.mkdir(parents=True)
    con = build_database(folder / "capjudge.duckdb", {"item_scores": item_scores,
                                                      "labels": labels,
                                                      "judgements": judgements}, "overall")
    rows = scored_items(con)
    con.close()
    systems = [{"judge": "j", "mode": "ref-only", "system": s,
                "mean_score": sum(x for x, t in zip(scores, SYSTEMS, strict=True) if t == s) / 3}
               for s in ("s1", "s2")]
    run = {"run_id": run_id, "time": time, "git_revision": "abc123", "git_dirty": False,
           "dataset_sha256": "d" * 64,
           "backends": [{"judge": "j", "backend": "openai/gpt-4o-2024-08-06",
                         "snapshot": "gpt-4o-2024-08-06", "models": ["gpt-4o-2024-08-06"],
                         "fingerprints": [fingerprint], "templates": ["gveval/ref-only@1"]}]}
    (folder / "lineage.json").write_text(json.dumps(run))
    return record_run(registry, run, agreement(rows, 200, "sample-gold"),
                      {"j": {"failure_rate": failure_rate, "low_mass_rate": 0.0}}, systems,
                      n_boot=200)


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    reg = tmp_path / "runs"
    # run 1: perfect order; run 2 (same snapshot): items e and f swapped, one discordant
    # pair of 15; run 3 (new fingerprint): the order reversed.
    _register_run(reg, "r1", "2026-01-01T00:00:00+00:00", "fp_1", [10, 20, 30, 40, 50, 60])
    _register_run(reg, "r2", "2026-01-02T00:00:00+00:00", "fp_1", [10, 20, 30, 40, 60, 50])
    _register_run(reg, "r3", "2026-01-03T00:00:00+00:00", "fp_2", [60, 50, 40, 30, 20, 10],
                  failure_rate=0.3)
    return reg


def test_three_runs_and_a_snapshot_change_give_the_hand_computed_history(registry: Path
                                                                         ) -> None:
    history = series_history(load_history(registry))
    assert list(history) == ["j/ref-only"]
    r1, r2, r3 = history["j/ref-only"]
    assert [p["run_id"] for p in (r1, r2, r3)] == ["r1", "r2", "r3"]
    # tau-b: 15 pairs; 15 concordant, then 14 - 1, then 15 discordant.
    assert r1["kendall_tau_b"] == pytest.approx(1.0)
    assert r2["kendall_tau_b"] == pytest.approx(13 / 15)
    assert r3["kendall_tau_b"] == pytest.approx(-1.0)
    for p in (r1, r2, r3):
        assert p["n"] == 6 and p["ci95"][0] <= p["kendall_tau_b"] + 1e-9 <= p["ci95"][1] + 2e-9
    assert [p["snapshot_changed"] for p in (r1, r2, r3)] == [False, False, True]
    assert r1["paired"] is None and r1["previous_run"] is None
    assert r2["previous_run"] == "r1" and r3["previous_run"] == "r2"
    assert r2["paired"]["difference"] == pytest.approx(13 / 15 - 1)
    assert r3["paired"]["difference"] == pytest.approx(-1 - 13 / 15)
    assert r2["paired"]["n"] == r3["paired"]["n"] == 6
    low, high = r3["paired"]["ci95"]
    assert low <= -28 / 15 + 1e-9 and high < -1.0  # reversed on every resample
    assert r2["paired"]["ci95"][1] >= 0  # one swapped pair: not a significant drop
    assert 0 < r3["paired"]["p_value"] <= 1 and 0 < r2["paired"]["p_value"] <= 1
    # Mean score per system: s1 = (10+20+30)/3, s2 = (40+50+60)/3; reversed in run 3.
    assert r1["system_means"] == {"s1": 20.0, "s2": 50.0} == r2["system_means"]
    assert r3["system_means"] == {"s1": 50.0, "s2": 20.0}
    assert r3["fingerprints"] == ["fp_2"] and r3["templates"] == ["gveval/ref-only@1"]
    assert r3["data_version"] == "d" * 64 and r3["code_version"] == "abc123"


def test_alerts_on_a_drop_past_the_threshold_and_on_failure_rate(registry: Path) -> None:
    entries = load_history(registry)
    by_run = {e["run_id"]: e for e in entries}
    assert alerts([by_run["r2"]], alert_drop=0.05, max_failure_rate=0.2) == []
    lines = alerts([by_run["r3"]], alert_drop=0.05, max_failure_rate=0.2,
                   max_low_mass_rate=0.2)
    assert len(lines) == 2
    assert "j/ref-only: Kendall tau-b x100 dropped by 186.7" in lines[0]
    assert "previous run r2" in lines[0] and "(changed)" in lines[0]
    assert "j: failure rate 0.300 is above the limit 0.200" in lines[1]
    # A threshold past the whole CI: no drop alert.
    assert alerts([by_run["r3"]], alert_drop=5.0) == []


def test_history_cli(registry: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from capjudge.cli import main

    assert main(["history", "--registry", str(registry)]) == 0
    text = capsys.readouterr().out
    assert text == format_history(load_history(registry))
    # x100, the report's and capjudge compare's unit; the fingerprint is what changed.
    assert "j/ref-only" in text and text.count("*changed*") == 1 and "-186.7" in text
    assert "changed: fingerprints: fp_1 -> fp_2" in text
    assert main(["history", "--registry", str(registry), "--judge", "j", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [p["run_id"] for p in data["j/ref-only"]] == ["r1", "r2", "r3"]
    assert main(["history", "--registry", str(registry), "--judge", "nope"]) == 2
    assert main(["history", "--registry", str(registry / "missing")]) == 2
