"""Flow for the ``ingest`` stage: ``python -m flows.ingest [--params params.yaml]``.

With more than one worker (``params.yaml: runner``), the frame tiles of the manifest's distinct
videos are made first by parallel ``sample-tiles`` tasks (threads start one decoder process per
video, Dask or Ray workers run on other cores or hosts); the ordered ingest pass then finds
them made, so ``items.parquet`` is the same, row for row, as a serial run's.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict

from prefect import flow, get_run_logger

from capjudge.ingest import IngestConfig, IngestResult, nothing_ingested, video_jobs
from capjudge.manifest import ManifestError
from flows.params import load_params
from flows.runner import RunnerConfig, task_runner
from tasks.ingest import ingest_task, sample_tiles_task


@flow(name="capjudge-ingest")
def ingest_flow(manifest: str, media_root: str, out: str, config: IngestConfig | None = None,
                workers: int = 1) -> IngestResult:
    """Validate a manifest, hash media and sample frames; quarantined rows are reported.

    Args:
        manifest: the manifest file.
        media_root: where relative media paths resolve.
        out: the ingest folder (every worker must see it at this path).
        config: the ingest settings (default: the papers' defaults).
        workers: tasks the runner runs at once; above 1, videos are sampled in parallel first.
    """
    logger = get_run_logger()
    config = config or IngestConfig()
    failures: dict[str, str] = {}
    videos = video_jobs(manifest, media_root, config) if workers > 1 else []
    if len(videos) > 1:
        # A few videos per task: enough tasks to keep every worker busy to the end, few enough
        # that orchestration stays small next to decoding.
        n_tasks = min(len(videos), 4 * workers)
        shards = [videos[k::n_tasks] for k in range(n_tasks)]
        logger.info("ingest: sampling frames of %d videos in %d tasks on %d workers",
                    len(videos), n_tasks, workers)
        futures = [sample_tiles_task.submit(shard, out, config) for shard in shards]
        for future in futures:
            failures.update(future.result())
    result = ingest_task(manifest, media_root, out, config, failures)
    logger.info("ingest: %(n_rows)s rows -> %(n_items)s items, %(n_quarantined)s quarantined",
                asdict(result))
    for reason, count in sorted(result.reasons.items()):
        logger.warning("quarantined: %d x %s", count, reason)
    return result


def main(argv: list[str] | None = None) -> int:
    """Run the ingest stage as a flow (params.yaml: ingest, runner)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    try:
        params = load_params(args.params)  # the schema: a typo fails before anything runs
    except (OSError, ValueError) as exc:
        print(f"ingest: error: {exc}", file=sys.stderr)
        return 2
    p = params["ingest"]
    settings = {k: p[k] for k in ("frame_policy", "uniform_frames", "decode_timeout_s",
                                  "max_candidate_chars", "max_reference_chars",
                                  "max_references", "label_scales") if k in p}
    try:
        config = IngestConfig(**settings)  # every setting checked before Prefect starts
    except (TypeError, ValueError) as exc:
        print(f"ingest: error: {exc}", file=sys.stderr)
        return 2
    try:
        runner = RunnerConfig.from_params(params)
    except ValueError as exc:
        print(f"ingest: error: {exc}", file=sys.stderr)
        return 2
    # Decoding is CPU-bound and runs in child processes: one per core by default.
    workers = runner.workers or os.cpu_count() or 1
    try:
        result = ingest_flow.with_options(task_runner=task_runner(runner, workers))(
            p["manifest"], p["media_root"], p["out"], config, runner.size(workers))
    except (ManifestError, RuntimeError) as exc:
        print(f"ingest: error: {exc}", file=sys.stderr)
        return 2
    empty = nothing_ingested(result, p["media_root"])
    if empty is not None:
        # The stage fails here, not after judges and a report of nothing (dvc repro stops).
        print(f"ingest: error: {empty}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
