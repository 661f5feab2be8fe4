"""Did a judge stage reproduce? Rerun a sample of it from an empty cache and compare (issue 32).

:func:`verify_judge` takes a judge of ``params.yaml``, picks a seeded sample of the items its
stage judged, asks them again with an empty request cache (so the engine really recomputes),
and compares every judgement row with the stage's output by what a user reads (status, score,
printed number, distribution, generated text; floats bit for bit): "reproduced: N/N
identical", or the differences (how many rows, the largest score difference, texts that
differ).

Local engines are deterministic by default (``llamacpp/``: one slot, the prompt split the same
way every time; transformers on one device in a fixed batch order), so anything but N/N means
the engine, the machine or the code changed. What is rerun is what the backend says decides its
numerics (:meth:`~capjudge.backends.base.Backend.rerun_identity`): llama.cpp's answers depend
on each request alone, so a sample of items is rerun; a transformers score's last bits depend
on what else is in its batch and on the request cache, so the stage's own chunks are rerun in
its order (a sample alone measured 2 of 30 identical, 1.3e-4 apart, on a run that two fresh
clones reproduced bit for bit). An API judge cannot be made deterministic: a rerun is a new
sample, and its differences are set beside the judge's measured test-retest spread (the
report's ``reliability_retest`` table, when ``repeats`` > 1 measured one).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypedDict

import pyarrow.parquet as pq

from capjudge.backends import backend_class, default_concurrency
from capjudge.item import load_items
from capjudge.judge import adaptive_chunk_size, chunk_bounds, config_from_params, judge_items
from capjudge.stage_files import judgements_file, summary_file


class Reproduction(TypedDict):
    """What :func:`verify_judge` found."""

    judge: str
    backend: str
    items: int
    judgements: int
    identical: int
    max_score_diff: float
    texts_differing: int
    statuses_differing: int
    deterministic: bool
    rerun: str
    retest_mean_item_sd: float | None
    verdict: str


_KEY = ("item_id", "mode", "criterion", "repeat")


def _read(row: Mapping[str, Any]) -> tuple[object, ...]:
    probs = row.get("probs")
    return (row.get("status"), None if row.get("score") is None else float(row["score"]).hex(),
            row.get("printed"), None if probs is None else [float(p).hex() for p in probs],
            row.get("reasoning"))


def sample_ids(ids: list[str], n: int, seed: int = 0) -> list[str]:
    """``n`` of ``ids``, chosen by a seeded hash (the same sample every time)."""
    ranked = sorted(ids, key=lambda i: hashlib.sha256(f"{seed}|{i}".encode()).hexdigest())
    return sorted(ranked[:n])


def verify_judge(params: Mapping[str, Any], name: str, items_path: str | Path,
                 judge_dir: str | Path, sample: int = 20, seed: int = 0,
                 retest_sd: float | None = None) -> Reproduction:
    """Rerun ``sample`` of judge ``name``'s items from an empty cache; compare the rows.

    What is rerun follows the backend's :meth:`~capjudge.backends.base.Backend.rerun_identity`:
    a backend whose answers depend on each request alone (``request``), or that promises
    nothing (``none``), reruns the sampled items; one whose numerics depend on what is batched
    together and on the request cache (``run``: transformers) reruns the stage's chunks in the
    stage's order, from the first to the last that holds a sampled item, and every row of them
    is compared.

    Args:
        params: the loaded params.yaml.
        name: the judge (``judges`` or ``context_judges``).
        items_path: the ingest stage's ``items.parquet``.
        judge_dir: the judge stage's output folder (its ``judgements.parquet`` and
            ``summary.json``).
        sample: items to rerun.
        seed: picks the sample.
        retest_sd: the judge's measured mean item SD over repeats, when known (API judges).
    """
    stored = pq.read_table(judgements_file(judge_dir)).to_pylist()
    judged = sorted({r["item_id"] for r in stored if r["status"] != "skipped"})
    chosen = set(sample_ids(judged, sample, seed))
    config = replace(config_from_params(params, name), limit=None)
    options = dict(config.backend_options or {})
    identity = backend_class(config.backend).rerun_identity(options)
    if identity == "run":
        batches, how = _stage_chunks(Path(judge_dir), items_path, config, chosen)
    else:
        batches = [[i for i in load_items(items_path) if i.id in chosen]]
        how = f"a sample of {len(batches[0])} items"
    rerun_ids = {i.id for batch in batches for i in batch}
    before = {tuple(r.get(k) for k in _KEY): r for r in stored if r["item_id"] in rerun_ids}
    after: dict[tuple[object, ...], dict[str, Any]] = {}
    backend = ""
    with tempfile.TemporaryDirectory(prefix="capjudge-verify-") as cache:
        config = replace(config, cache_dir=cache)
        for batch in batches:  # one cache across the chunks, as in the stage
            result = judge_items(batch, config)
            backend = backend or (result.responses[0].model if result.responses else "")
            after.update({tuple(getattr(r, k) for k in _KEY): r.to_row() for r in result.rows})
    shared = [k for k in before if k in after]
    identical = sum(_read(before[k]) == _read(after[k]) for k in shared)
    diffs = [abs(a - b) for k in shared
             if (a := _number(before[k].get("score"))) is not None
             and (b := _number(after[k].get("score"))) is not None]
    texts = sum(before[k].get("reasoning") != after[k].get("reasoning") for k in shared)
    statuses = sum(before[k].get("status") != after[k].get("status") for k in shared)
    deterministic = identity != "none"
    return {"judge": name, "backend": config.backend or backend,
            "items": len(rerun_ids), "judgements": len(shared), "identical": identical,
            "max_score_diff": max(diffs, default=0.0), "texts_differing": texts,
            "statuses_differing": statuses, "deterministic": deterministic,
            "rerun": how, "retest_mean_item_sd": retest_sd,
            "verdict": _verdict(identical, len(shared), max(diffs, default=0.0),
                                deterministic, retest_sd)}


def _stage_chunks(judge_dir: Path, items_path: str | Path, config: Any, chosen: set[str]
                  ) -> tuple[list[list[Any]], str]:
    """The stage's chunks, in order, up to the last that holds a sampled item; and a note.

    The chunk size is the one the stage recorded in ``summary.json``; a stage written before
    it was recorded gets the size the flow picks by default, and the note says so.
    """
    summary_path = summary_file(judge_dir)
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    counts = summary.get("items") or {}
    items = load_items(items_path)  # read once; the chunks are slices of it
    n = int(counts.get("judged") or len(items))
    recorded = summary.get("chunk_size")
    assumed = not isinstance(recorded, int)
    size = recorded if isinstance(recorded, int) else adaptive_chunk_size(
        n, default_concurrency(config.backend, config.backend_options or {}))
    bounds = chunk_bounds(n, size)
    last = max((k for k, (lo, hi) in enumerate(bounds)
                if any(i.id in chosen for i in items[lo:hi])), default=-1)
    how = (f"chunks 1-{last + 1} of {len(bounds)} ({size} items each) in the stage's order: "
           "this engine's numerics depend on what is batched together")
    if assumed:
        how += " (the stage recorded no chunk size; the flow's default assumed)"
    return [items[lo:hi] for lo, hi in bounds[: last + 1]], how


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _verdict(identical: int, total: int, worst: float, deterministic: bool,
             retest_sd: float | None) -> str:
    if total and identical == total:
        return f"reproduced: {identical}/{total} identical"
    head = f"not reproduced: {identical}/{total} identical, largest score difference {worst:.4g}"
    if deterministic:
        return head + " (a deterministic engine: the engine, machine or code changed)"
    if retest_sd is not None:
        return head + (f" (an API judge: within its test-retest spread, mean item SD "
                       f"{retest_sd:.3g})" if worst <= 3 * retest_sd else
                       f" (an API judge: beyond 3x its test-retest mean item SD "
                       f"{retest_sd:.3g})")
    return head + " (not a deterministic engine; measure its spread with repeats > 1)"
