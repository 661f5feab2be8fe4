"""Task wrappers for the judge stage: judge one chunk of items, writing its own output part.

A chunk task reads its slice of ``items.parquet`` itself and writes its rows to a part file;
only small statistics travel back to the flow, so the flow's memory and Prefect's parameter
handling do not grow with the rows, and the task runs the same on threads, processes or other
hosts (a shared filesystem).
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from capjudge.item import load_items
from capjudge.judge import JudgeConfig, judge_items, shared_client, write_part
from capjudge.judge.parts import ChunkResult
from capjudge.judge.selection import selected


@task(name="judge-chunk", retries=2, retry_delay_seconds=5, cache_policy=NO_CACHE)
def judge_chunk(config: JudgeConfig, items_path: str, start: int, stop: int,
                part_path: str, shared_dir: str | None = None) -> ChunkResult:
    """Judge items ``[start, stop)``; write their rows to ``part_path``; return statistics.

    Per-request failures are statuses, not exceptions; a retry here covers a crash of the
    whole chunk, and answered requests then come from the cache. ``shared_dir``: where the
    rate limit and ``Retry-After`` pause shared with other processes live (None: this
    process's own).
    """
    # load_items: relative media paths resolve against the items file's folder, wherever the
    # worker runs.
    # A sampled judge (item_fraction) keeps its own rows of the chunk: each item decides alone.
    items = selected(load_items(items_path, start, stop), config)
    # The shared backend is built (a model loaded, an engine started) only when the chunk
    # has something to ask: a chunk of recorded skips needs none.
    result = judge_items(items, config, connect=lambda: shared_client(config, shared_dir))
    write_part(part_path, result.rows)
    return {"stats": result.stats.to_dict(), "rows": len(result.rows),
            "planned": len(result.planned), "skipped": len(result.skips),
            "backend": result.backend_facts()}
