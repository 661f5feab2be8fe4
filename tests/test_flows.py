"""The Prefect flows run for real (temporary local server via the test harness)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest


@pytest.fixture(scope="module")
def harness() -> Iterator[None]:
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        yield


@pytest.mark.slow
def test_sample_then_ingest_flows(harness: None, tmp_path: Path) -> None:
    from flows.ingest import ingest_flow
    from flows.sample import sample_flow

    counts = sample_flow(str(tmp_path / "sample"), 0, 4)
    assert counts["images"] == 4
    result = ingest_flow(str(tmp_path / "sample" / "manifest.jsonl"), str(tmp_path / "sample"),
                         str(tmp_path / "ingest"), {"frame_policy": "gveval_code"})
    assert result["n_quarantined"] == 0 and result["n_items"] == counts["items"]
    items = pq.read_table(tmp_path / "ingest" / "items.parquet").to_pylist()
    videos = [i for i in items if i["media_kind"] == "video"]
    assert videos and all(v["frame_policy"] == "gveval_code" for v in videos)
    assert all(v["frame_indices"] == [0, 8, 16] for v in videos)  # 24-frame clips
