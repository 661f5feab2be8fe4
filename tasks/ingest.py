"""Task wrappers for the sample and ingest stages."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from prefect import task

from capjudge.ingest import IngestConfig, ingest
from capjudge.sample import generate_sample


@task(name="generate-sample")
def generate_sample_task(out: str, seed: int, images: int) -> dict[str, int]:
    """Write the synthetic sample suite."""
    return generate_sample(out, seed=seed, n_images=images)


@task(name="ingest-manifest")
def ingest_task(manifest: str, media_root: str, out: str, config: dict[str, Any]
                ) -> dict[str, Any]:
    """Validate the manifest and write items/quarantine/tiles (deterministic: no retries)."""
    return asdict(ingest(manifest, media_root, out, IngestConfig(**config)))
