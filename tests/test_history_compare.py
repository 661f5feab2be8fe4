"""``capjudge history`` and ``capjudge compare`` print one figure for one change.

Two hand-made registered runs (databases with the lineage tables the report writes, history
entries written by :func:`capjudge.history.record_run`) that differ in snapshot, template
version and a method setting: both commands show Kendall tau-b and the paired difference x100
(the report's unit) with the same paired bootstrap CI, and both name what changed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from capjudge.history import load_history, record_run
from capjudge.report.agreement import agreement
from capjudge.report.database import add_table, build_database, scored_items

ITEMS = [f"i{k:02d}" for k in range(10)]
SYSTEMS = ["s1"] * 5 + ["s2"] * 5
HUMAN = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
N_BOOT = 300  # not compare's old default (500): the default must follow the history


def _register(registry: Path, run_id: str, time: str, scores: list[float], snapshot: str,
              template: str, settings: str) -> None:
    """A run filed as lineage.register files it, with its history entries appended."""
    item_scores = pa.Table.from_pylist([
        {"judge": "j", "method": "gveval", "mode": "ref-only", "item_id": i, "system": s,
         "score": x, "status": "ok", "cause": None, "reason": None}
        for i, s, x in zip(ITEMS, SYSTEMS, scores, strict=True)])
    labels = pa.Table.from_pylist([{"item_id": i, "criterion": "overall", "annotator": 0,
                                    "value": h} for i, h in zip(ITEMS, HUMAN, strict=True)])
    judgements = pa.Table.from_pylist([{"judge": "j", "cost_usd": 0.0, "prompt_tokens": 1,
                                        "completion_tokens": 1, "cached": False,
                                        "status": "ok"}])
    backend: dict[str, Any] = {
        "judge": "j", "method": "gveval", "backend": "openai/gpt-4o", "snapshot": snapshot,
        "backend_facts": "{}", "models": [snapshot], "fingerprints": ["fp_1"],
        "templates": [template], "settings": [settings], "judgements": len(ITEMS)}
    run: dict[str, Any] = {"run_id": run_id, "time": time, "git_revision": "abc1234",
                           "git_dirty": False, "dvc_lock_sha256": None, "params_sha256": None,
                           "dataset_sha256": "d" * 64, "packages": {}, "backends": [backend]}
    folder = registry / run_id
    folder.mkdir(parents=True)
    con = build_database(folder / "capjudge.duckdb", {"item_scores": item_scores,
                                                      "labels": labels,
                                                      "judgements": judgements}, "overall")
    # The lineage tables, as the report stage writes them.
    flat = {k: v for k, v in run.items() if k not in ("backends", "packages")}
    add_table(con, "runs", pa.Table.from_pylist([{**flat, "packages": "{}"}]))
    add_table(con, "run_backends", pa.Table.from_pylist([{"run_id": run_id, **backend}]))
    rows = scored_items(con)
    con.close()
    (folder / "lineage.json").write_text(json.dumps(run))
    systems = [{"judge": "j", "mode": "ref-only", "system": s, "mean_score": 50.0}
               for s in ("s1", "s2")]
    record_run(registry, run, agreement(rows, N_BOOT, "sample-gold"),  # type: ignore[arg-type]
               {"j": {"failure_rate": 0.0, "low_mass_rate": 0.0}}, systems, n_boot=N_BOOT)


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    reg = tmp_path / "runs"
    _register(reg, "r1", "2026-01-01T00:00:00+00:00",
              [10, 20, 30, 40, 50, 60, 70, 80, 90, 100], "gpt-4o-2024-08-06",
              "gveval/image/ref-only@1", "prompt_variant=paper")
    # Three swapped neighbours: a drop with a CI that straddles zero.
    _register(reg, "r2", "2026-01-02T00:00:00+00:00",
              [20, 10, 30, 50, 40, 60, 80, 70, 90, 100], "gpt-4o-2024-11-20",
              "gveval/image/ref-only@2", "prompt_variant=guarded")
    return reg


NUMBER = r"(-?\d+\.\d)"
FIGURE = rf"{NUMBER} \[\s*{NUMBER},\s*{NUMBER}\]"  # "x [low, high]", any padding


def test_history_and_compare_print_the_same_change(
        registry: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from capjudge.cli import main

    entry = next(e for e in load_history(registry) if e["run_id"] == "r2")
    paired = entry["paired"]
    assert paired is not None and paired["difference"] is not None
    expected = tuple(f"{100 * v:.1f}" for v in (paired["difference"], *paired["ci95"]))

    assert main(["history", "--registry", str(registry)]) == 0
    history = capsys.readouterr().out
    r2_line = next(line for line in history.splitlines() if line.strip().startswith("r2 "))
    figures = re.findall(FIGURE, r2_line)
    assert figures[1] == expected  # [0]: tau-b of r2, [1]: the difference to r1
    assert "tau-b x100" in history and "delta x100" in history

    assert main(["compare", "r1", "r2", "--registry", str(registry),
                 "--params", str(tmp_path / "none.yaml"), "--out", str(tmp_path / "cmp")]) == 0
    compare = capsys.readouterr().out
    line = next(x for x in compare.splitlines() if x.startswith("Difference B - A"))
    assert re.findall(FIGURE, line)[0] == expected
    assert f"{N_BOOT} resamples" in line  # the history's resamples, not a default of its own
    # Each run's tau-b: the report's CI (the one history shows) on the same items.
    tau_b = re.findall(FIGURE, r2_line)[0]
    assert re.search(rf"\| B \| {re.escape(tau_b[0])} \| \[{re.escape(tau_b[1])}, "
                     rf"{re.escape(tau_b[2])}\] \|", compare), compare


def test_both_name_what_changed(registry: Path, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    from capjudge.cli import main

    expected = ["snapshot: gpt-4o-2024-08-06 -> gpt-4o-2024-11-20",
                "templates: gveval/image/ref-only@1 -> gveval/image/ref-only@2",
                "method settings: prompt_variant=paper -> prompt_variant=guarded"]
    assert main(["history", "--registry", str(registry)]) == 0
    history = capsys.readouterr().out
    changed = [line for line in history.splitlines() if "changed:" in line]
    assert len(changed) == 1  # under r2 only (r1 has no previous run)
    for fact in expected:
        assert fact in changed[0]
    assert "fingerprints" not in changed[0] and "data:" not in changed[0]  # unchanged

    assert main(["compare", "previous", "latest", "--registry", str(registry),
                 "--out", str(tmp_path / "cmp")]) == 0
    compare = capsys.readouterr().out
    line = next(x for x in compare.splitlines() if x.startswith("What changed from A to B"))
    for fact in expected:
        assert fact in line
    data = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert data["series"]["j/ref-only"]["changed"][:3] == expected[:1] + [
        "models: gpt-4o-2024-08-06 -> gpt-4o-2024-11-20"] + expected[1:2]
