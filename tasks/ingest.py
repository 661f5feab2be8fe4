"""Task wrappers for the sample and ingest stages."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from capjudge.ingest import IngestConfig, IngestResult, ingest, sample_tiles
from capjudge.sample import generate_sample


@task(name="generate-sample")
def generate_sample_task(out: str, seed: int, images: int) -> dict[str, int]:
    """Write the synthetic sample suite."""
    return generate_sample(out, seed=seed, n_images=images)


@task(name="ingest-manifest")
def ingest_task(manifest: str, media_root: str, out: str, config: IngestConfig,
                video_failures: dict[str, str] | None = None) -> IngestResult:
    """Validate the manifest and write items/quarantine/tiles (deterministic: no retries).
    ``video_failures``: videos whose sampling failed in :func:`sample_tiles_task`."""
    return ingest(manifest, media_root, out, config, video_failures=video_failures)


@task(name="sample-tiles", cache_policy=NO_CACHE)
def sample_tiles_task(videos: list[str], out: str, config: IngestConfig) -> dict[str, str]:
    """Make the frame tiles of ``videos`` in ``out/tiles`` (each decode in its own child
    process); returns content hash -> reason for the ones that failed."""
    return sample_tiles(videos, out, config)
