"""Reproduction checks (issue 32): verify-run, the lineage's judgement hash, the watch spread.

- ``capjudge verify-run`` reruns a seeded sample of a judge stage from an empty cache and
  compares every row bit for bit: "reproduced: N/N identical", or the differences (exit 5).
- The report's lineage hashes what a user reads of each judge's rows and says whether they
  equal the ones committed in git.
- A watch drift is set against the judge's own test-retest spread of tau-b.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from capjudge.cli import main as cli_main
from capjudge.history import alerts
from capjudge.judge import JudgeConfig, run_judge
from capjudge.lineage import judgements_sha256, mark_reproduced
from capjudge.records import BackendLineage, HistoryEntry
from capjudge.verify import sample_ids


def _stage(ingested: Path, tmp_path: Path) -> tuple[Path, Path]:
    params = {"ingest": {"out": str(ingested)},
              "judge": {"cache_dir": str(tmp_path / "cache")},
              "judges": {"gv": {"method": "gveval", "backend": "fake/hash+vision",
                                "modes": ["ref-only", "combined"],
                                "out": str(tmp_path / "judge")}}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    run_judge(ingested / "items.parquet", tmp_path / "judge",
              JudgeConfig(method="gveval", backend="fake/hash+vision",
                          modes=["ref-only", "combined"], cache_dir=str(tmp_path / "cache")))
    return path, tmp_path / "judge"


def test_verify_run_reproduces_a_deterministic_judge_and_finds_a_change(
        ingested: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params, judge = _stage(ingested, tmp_path)
    argv = ["verify-run", "--name", "gv", "--params", str(params), "--sample", "6",
            "--json", str(tmp_path / "v.json")]
    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    assert "reproduced: 12/12 identical" in out  # 6 items x 2 modes
    # One stored score changed: the rerun no longer matches it.
    table = pq.read_table(judge / "judgements.parquet")
    rows = table.to_pylist()
    chosen = set(sample_ids(sorted({r["item_id"] for r in rows}), 6))
    victim = next(r for r in rows if r["item_id"] in chosen and r["score"] is not None)
    victim["score"] += 1.0
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), judge / "judgements.parquet")
    assert cli_main(argv) == 5
    out = capsys.readouterr().out
    assert "not reproduced: 11/12 identical" in out and "deterministic engine" in out


def test_verify_run_errors_are_one_line(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({"judges": {}}))
    assert cli_main(["verify-run", "--name", "x", "--params", str(tmp_path / "p.yaml")]) == 2
    assert "no judge 'x'" in capsys.readouterr().err


def test_the_judgement_hash_sees_every_bit_that_a_user_reads(ingested: Path,
                                                             tmp_path: Path) -> None:
    _, judge = _stage(ingested, tmp_path)
    path = judge / "judgements.parquet"
    first = judgements_sha256(path)
    table = pq.read_table(path)
    assert judgements_sha256(path) == first
    # Rows in another order: the same judgements.
    pq.write_table(table.take(list(reversed(range(table.num_rows)))), tmp_path / "r.parquet")
    assert judgements_sha256(tmp_path / "r.parquet") == first
    rows = table.to_pylist()
    k = next(i for i, r in enumerate(rows) if r["probs"])
    rows[k]["probs"] = [p * (1 + 1e-15) for p in rows[k]["probs"]]  # the last bits move
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), tmp_path / "c.parquet")
    assert judgements_sha256(tmp_path / "c.parquet") != first
    backends: list[BackendLineage] = [{"judge": "gv", "judgements_sha256": first},  # type: ignore[typeddict-item]
                                      {"judge": "new", "judgements_sha256": "x"}]  # type: ignore[typeddict-item]
    committed: Any = {"backends": [{"judge": "gv", "judgements_sha256": first}]}
    mark_reproduced(backends, committed)
    assert backends[0]["reproduced"] is True and backends[1]["reproduced"] is None
    mark_reproduced(backends, {"backends": [{"judge": "gv", "judgements_sha256": "old"}]})  # type: ignore[arg-type]
    assert backends[0]["reproduced"] is False


def _entry(difference: float, ci: tuple[float, float], spread: float | None) -> HistoryEntry:
    entry: Any = {"series": "j/m", "judge": "j", "kendall_tau_b": 0.3, "previous_run": "r0",
                  "run_id": "r1", "snapshot": "s", "failure_rate": 0.0, "low_mass_rate": 0.0,
                  "paired": {"difference": difference, "ci95": list(ci), "p_value": 0.01,
                             "n": 100},
                  "retest_tau_spread": spread}
    return entry


def test_a_drift_within_the_judges_own_retest_spread_does_not_alert() -> None:
    # A drop of 0.10 whose CI lies below -0.05: an alert for a deterministic judge ...
    assert alerts([_entry(-0.10, (-0.14, -0.06), None)], alert_drop=0.05)
    # ... but a sampled API judge whose tau-b moves by 0.12 between its own repeats: no.
    assert not alerts([_entry(-0.10, (-0.14, -0.06), 0.12)], alert_drop=0.05)
    lines = alerts([_entry(-0.30, (-0.36, -0.24), 0.12)], alert_drop=0.05)
    assert lines and "test-retest spread of tau-b x100 is 12.0" in lines[0]


def test_each_backend_says_what_a_rerun_must_repeat() -> None:
    from capjudge.backends import backend_class, backend_kinds

    assert backend_class("llamacpp/m").rerun_identity({}) == "request"
    assert backend_class("llamacpp/m").rerun_identity({"determinism": "fast"}) == "none"
    assert backend_class("hf/m").rerun_identity({}) == "run"
    assert backend_class("embedded/m").rerun_identity({}) == "run"
    assert backend_class("openai/m").rerun_identity({}) == "none"
    assert backend_class("fake/hash").rerun_identity({}) == "request"
    for kind in backend_kinds():  # every registered kind answers
        assert backend_class(f"{kind}/m").rerun_identity({}) in ("request", "run", "none")


def test_a_batch_dependent_judge_is_rerun_in_the_stages_own_chunks(
        ingested: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A transformers score's last bits depend on its batch and on the request cache (a sample
    # alone measured 2/30 identical on a run two fresh clones reproduced): such a judge reruns
    # the stage's chunks in order, up to the last one holding a sampled item.
    import json

    from capjudge.backends.fake import FakeBackend

    params, judge = _stage(ingested, tmp_path)
    monkeypatch.setattr(FakeBackend, "rerun_identity", classmethod(lambda cls, options: "run"))
    rows = pq.read_table(judge / "judgements.parquet").to_pylist()
    n = len({r["item_id"] for r in rows})
    summary = judge / "summary.json"
    summary.write_text(json.dumps({"items": {"judged": n, "total": n}, "chunk_size": 2}))
    argv = ["verify-run", "--name", "gv", "--params", str(params), "--sample", "1",
            "--json", str(tmp_path / "v.json")]
    assert cli_main(argv) == 0
    found = json.loads((tmp_path / "v.json").read_text())
    chunks = -(-n // 2)
    assert found["rerun"].startswith("chunks 1-")
    assert f"of {chunks} (2 items each)" in found["rerun"]
    last = int(found["rerun"].split("-")[1].split()[0])
    assert found["items"] == min(n, 2 * last) and found["judgements"] == 2 * found["items"]
    assert "reproduced:" in capsys.readouterr().out
    # A stage that recorded no chunk size: the flow's default is assumed, and said.
    summary.write_text(json.dumps({"items": {"judged": n, "total": n}}))
    assert cli_main(argv) == 0
    assert "recorded no chunk size" in json.loads((tmp_path / "v.json").read_text())["rerun"]
