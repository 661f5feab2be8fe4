"""Task wrappers for the context stage (VisCE² step 1)."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from capjudge.context import ContextConfig, run_context


@task(name="extract-visual-context", retries=1, retry_delay_seconds=10, cache_policy=NO_CACHE)
def extract_task(items_path: str, out_dir: str, config: ContextConfig) -> dict[str, Any]:
    """Extract (or fetch from the request cache) every picture's context and description."""
    return run_context(items_path, out_dir, config)
