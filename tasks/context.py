"""Task wrappers for a method's context stage (VisCE² step 1: visual-context extraction)."""

from __future__ import annotations

from collections.abc import Mapping

from prefect import task
from prefect.cache_policies import NO_CACHE

from capjudge.item import load_items
from capjudge.judge.parts import shard_by_picture
from capjudge.methods import get_method
from capjudge.records import ContextSummary


@task(name="extract-context", retries=1, retry_delay_seconds=10, cache_policy=NO_CACHE)
def extract_task(method: str, items_path: str, out_dir: str, section: Mapping[str, object]
                 ) -> ContextSummary:
    """Run ``method``'s context stage over the ingested items (answers come from the request
    cache when already extracted)."""
    return get_method(method).run_context(load_items(items_path), out_dir, section)


@task(name="extract-context-shard", retries=1, retry_delay_seconds=10, cache_policy=NO_CACHE)
def extract_shard_task(method: str, items_path: str, part_dir: str,
                       section: Mapping[str, object], index: int, count: int
                       ) -> ContextSummary:
    """Run ``method``'s context stage on shard ``index`` of ``count`` (a contiguous range of
    the distinct pictures: :func:`capjudge.judge.parts.shard_by_picture`) into ``part_dir``. The
    task picks its own items, so no item list travels as a parameter."""
    items = shard_by_picture(load_items(items_path), index, count)
    return get_method(method).run_context(items, part_dir, section)
