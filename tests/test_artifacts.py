"""Prefect artifacts on a test Prefect server: the judge stage's progress, the report stage's
headline table and report link, the watch verdict — with their stable keys and content."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from flows.artifacts import artifact_key


def _artifacts(key: str, since: datetime) -> list[Any]:
    """The artifacts with this key created since ``since``: the server is shared by the
    process's tests, which run one after another."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
    return [a for a in found if a.created is not None and a.created >= since]


def test_artifact_keys_are_valid_prefect_keys() -> None:
    assert artifact_key("headline", "Gveval_Embedded.v2") == "headline-gveval-embedded-v2"
    assert artifact_key("judge-progress", "likelihood-embedded") == \
        "judge-progress-likelihood-embedded"
    assert artifact_key("??") == "capjudge"


@pytest.mark.heavy(seconds=20)
@pytest.mark.slow
def test_flows_publish_their_artifacts(harness: None, ingested: Path, tmp_path: Path) -> None:
    from prefect import flow

    from capjudge.aggregate import AggregateConfig, run_aggregate
    from capjudge.judge import JudgeConfig
    from capjudge.report import ReportConfig
    from capjudge.validate import ValidateConfig, run_validate
    from flows.artifacts import publish_verdict
    from flows.judge import judge_flow
    from flows.report import report_flow

    started = datetime.now(UTC)
    config = JudgeConfig(method="gveval", backend="fake/hash", modes=["ref-only"],
                         cache_dir=str(tmp_path / "cache"))
    judge_dir = tmp_path / "My_Judge"
    judge_flow("My_Judge", str(ingested / "items.parquet"), str(judge_dir), config,
               chunk_size=64)
    progress = _artifacts("judge-progress-my-judge", started)
    assert len(progress) == 1 and progress[0].type == "progress"
    assert float(progress[0].data) == pytest.approx(100.0)  # every chunk done

    run_aggregate([judge_dir], tmp_path / "agg", AggregateConfig())
    run_validate(ingested / "items.parquet", [judge_dir], tmp_path / "out", ValidateConfig())
    result = report_flow(str(ingested), [str(judge_dir)], str(tmp_path / "agg"),
                         str(tmp_path / "out"), ReportConfig(bootstrap=20, registry=None))
    (table,) = _artifacts("capjudge-headline", started)
    assert table.type == "table"
    text = str(table.data)
    assert "My_Judge/ref-only" in text and "Kendall tau-b x100 [95 % CI]" in text
    assert "failure rate" in text and "low-mass rate" in text
    tau = result["headline"][0]["entry"]["kendall_tau_b"]
    assert f"{100 * tau:.1f} [" in text  # the figure with its CI
    (mine,) = _artifacts("headline-my-judge", started)
    assert "My_Judge/ref-only" in str(mine.data)
    (link,) = _artifacts("capjudge-report", started)
    # Prefect 3.8 stores a link artifact as markdown: "[text](uri)" (LinkArtifact.type).
    assert link.type == "markdown"
    assert str(link.data).startswith("[capjudge HTML report](")
    assert (tmp_path / "out" / "report.html").as_uri() in str(link.data)

    @flow(name="verdict")
    def verdict() -> None:
        publish_verdict("# capjudge watch: ALERT\n\n- j/m: dropped", {"j": "## j\n"})

    verdict()
    (md,) = _artifacts("watch-verdict", started)
    assert md.type == "markdown" and "ALERT" in str(md.data)
    assert _artifacts("watch-verdict-j", started)
