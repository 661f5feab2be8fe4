"""Did a judge stage reproduce? Rerun a sample of it from an empty cache and compare (issue 32).

:func:`verify_judge` takes a judge of ``params.yaml``, picks a seeded sample of the items its
stage judged, asks them again with an empty request cache (so the engine really recomputes),
and compares every judgement row with the stage's output by what a user reads (status, score,
printed number, distribution, generated text; floats bit for bit): "reproduced: N/N
identical", or the differences (how many rows, the largest score difference, texts that
differ).

Local engines are deterministic by default (``llamacpp/``: one slot, requests in order;
transformers on one device in a fixed batch order), so anything but N/N means the engine, the
machine or the code changed. An API judge cannot be made deterministic: a rerun is a new
sample, and its differences are set beside the judge's measured test-retest spread (the
report's ``reliability_retest`` table, when ``repeats`` > 1 measured one).
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypedDict

import pyarrow.parquet as pq

from capjudge.item import load_items
from capjudge.judge import config_from_params, judge_items


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

    Args:
        params: the loaded params.yaml.
        name: the judge (``judges`` or ``context_judges``).
        items_path: the ingest stage's ``items.parquet``.
        judge_dir: the judge stage's output folder (its ``judgements.parquet``).
        sample: items to rerun.
        seed: picks the sample.
        retest_sd: the judge's measured mean item SD over repeats, when known (API judges).
    """
    stored = pq.read_table(Path(judge_dir) / "judgements.parquet").to_pylist()
    judged = sorted({r["item_id"] for r in stored if r["status"] != "skipped"})
    chosen = set(sample_ids(judged, sample, seed))
    items = [i for i in load_items(items_path) if i.id in chosen]
    before = {tuple(r.get(k) for k in _KEY): r for r in stored if r["item_id"] in chosen}
    with tempfile.TemporaryDirectory(prefix="capjudge-verify-") as cache:
        config = replace(config_from_params(params, name), cache_dir=cache, limit=None)
        result = judge_items(items, config)
        backend = result.responses[0].model if result.responses else ""
        facts = _facts(config)
    after = {tuple(getattr(r, k) for k in _KEY): r.to_row() for r in result.rows}
    shared = [k for k in before if k in after]
    identical = sum(_read(before[k]) == _read(after[k]) for k in shared)
    diffs = [abs(a - b) for k in shared
             if (a := _number(before[k].get("score"))) is not None
             and (b := _number(after[k].get("score"))) is not None]
    texts = sum(before[k].get("reasoning") != after[k].get("reasoning") for k in shared)
    statuses = sum(before[k].get("status") != after[k].get("status") for k in shared)
    deterministic = facts.get("deterministic", False)
    return {"judge": name, "backend": str(facts.get("backend") or backend),
            "items": len(items), "judgements": len(shared), "identical": identical,
            "max_score_diff": max(diffs, default=0.0), "texts_differing": texts,
            "statuses_differing": statuses, "deterministic": bool(deterministic),
            "retest_mean_item_sd": retest_sd,
            "verdict": _verdict(identical, len(shared), max(diffs, default=0.0),
                                bool(deterministic), retest_sd)}


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _facts(config: Any) -> dict[str, object]:
    """The judge's backend id, and whether its engine promises identical reruns."""
    backend = str(config.backend)
    kind = backend.split("/", 1)[0]
    options = dict(config.backend_options or {})
    deterministic = (kind == "llamacpp" and options.get("determinism", "deterministic")
                     == "deterministic") or kind in ("hf", "embedded", "fake")
    return {"backend": backend, "deterministic": deterministic}


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
