"""Meta-evaluation: how well metrics and judges agree with human judgments.

:func:`run_meta_eval` loads a dataset, scores its candidates with the requested metrics
(reference-based baselines and/or a judge), arranges human ratings as the protocol says, and
computes Kendall tau-b/tau-c, Pearson, Spearman (or pairwise accuracy) with bootstrap 95 %
confidence intervals. Every result names its protocol.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from capjudge.metaeval.baselines import BASELINES, baseline_scores
from capjudge.metaeval.datasets import Candidate, MetaDataset, load
from capjudge.metaeval.protocols import Protocol, get_protocol
from capjudge.metaeval.stats import (
    STATS,
    bootstrap_ci,
    correlation_matrix,
    kendall_tau_b,
    pairwise_accuracy,
)

log = logging.getLogger(__name__)

# A scorer maps (candidates, references) to one score per candidate (None: failed, excluded).
Scorer = Callable[[Sequence[str], Sequence[Sequence[str]]], list[float | None]]


@dataclass
class Rows:
    """Candidate index and human rating per row, as a protocol arranges them."""

    index: list[int]
    human: list[float]
    annotator: list[int]


def arrange(candidates: Sequence[Candidate], protocol: Protocol, criterion: str) -> Rows:
    """Rows of (candidate, human rating) for one criterion under a protocol."""
    index, human, annotator = [], [], []
    for i, c in enumerate(candidates):
        ratings = c.ratings.get(criterion, [])
        if not ratings:
            continue
        if protocol.rows == "mean":
            index.append(i)
            human.append(float(np.mean(ratings)))
            annotator.append(0)
        else:
            for k, r in enumerate(ratings):
                index.append(i)
                human.append(float(r))
                annotator.append(k)
    return Rows(index, human, annotator)


def correlate(metric: Sequence[float | None], rows: Rows, protocol: Protocol, n_boot: int,
              seed: int = 0) -> dict[str, Any]:
    """All four statistics (+ CIs) of a metric against the arranged human rows."""
    keep = [j for j, i in enumerate(rows.index) if metric[i] is not None
            and not math.isnan(metric[i])]  # type: ignore[arg-type]
    failed = len({rows.index[j] for j in range(len(rows.index))} - {rows.index[j] for j in keep})
    x = [float(metric[rows.index[j]]) for j in keep]  # type: ignore[arg-type]
    if protocol.round_to is not None:
        x = [round(v, protocol.round_to) for v in x]
    y = [rows.human[j] for j in keep]
    groups = [rows.index[j] for j in keep]
    out: dict[str, Any] = {"n": len(x), "failed_candidates": failed, "ci95": {}}
    if protocol.rows == "per-annotator":
        annotators = sorted({rows.annotator[j] for j in keep})
        for name, stat in STATS.items():
            per = []
            for a in annotators:
                idx = [k for k, j in enumerate(keep) if rows.annotator[j] == a]
                per.append(stat([x[k] for k in idx], [y[k] for k in idx]))
            out[name] = float(np.mean(per))
            out[f"{name}_per_annotator"] = per
        out["ci95"] = {}
        out["note"] = "per-annotator statistics averaged; CIs not computed for this protocol"
        return out
    for name, stat in STATS.items():
        out[name] = stat(x, y) if len(x) > 1 else math.nan
        if n_boot > 0 and len(x) > 2:
            lo, hi = bootstrap_ci(x, y, stat, groups=groups, n_boot=n_boot, seed=seed)
            out["ci95"][name] = [lo, hi]
    return out


def judge_scorer(method: str, mode: str | None, backend: str, backend_options: dict[str, Any],
                 cache_dir: str | None, max_tokens: int = 512) -> Scorer:
    """A text-only judge as a metric (datasets here ship no images: reference modes only)."""
    def score(candidates: Sequence[str], references: Sequence[Sequence[str]]
              ) -> list[float | None]:
        from capjudge.judge import JudgeConfig, make_backend, make_client, plan
        from capjudge.methods import get_method

        m = get_method(method)
        config = JudgeConfig(method=method, backend=backend,
                             modes=[mode] if mode else None, max_tokens=max_tokens,
                             backend_options=backend_options, cache_dir=cache_dir)
        items = [{"id": str(i), "task": "caption", "media_kind": "none", "candidate": c,
                  "references": list(r), "media_sha256": None} for i, (c, r) in
                 enumerate(zip(candidates, references, strict=True))]
        be = make_backend(config)
        planned, _ = plan(items, config, vision=False)
        client = make_client(config, be)
        responses = client.run([p.request for p in planned])
        crit: dict[str, list[Any]] = {}
        for p, r in zip(planned, responses, strict=True):
            crit.setdefault(p.item_id, []).extend(m.interpret(p, r))
        out: list[float | None] = []
        for i in range(len(items)):
            value, _ = m.overall(crit.get(str(i), []), {})
            out.append(value)
        return out

    return score


def run_meta_eval(dataset: str, path: str, *, protocol: str | None = None,
                  metrics: Sequence[str] = BASELINES, judges: dict[str, Scorer] | None = None,
                  refs: int | None = None, n_boot: int = 1000, limit: int | None = None
                  ) -> dict[str, Any]:
    """Score a human-judgment dataset with metrics and judges; return the JSON-able result."""
    proto = get_protocol(dataset, protocol)
    data: MetaDataset = load(dataset, path)
    n_refs = refs if refs is not None else proto.refs
    result: dict[str, Any] = {"dataset": dataset, "protocol": proto.name,
                              "protocol_description": proto.description,
                              "references_used": n_refs or "all", "metrics": {}}
    base = [m for m in metrics if m in BASELINES]
    unknown = [m for m in metrics if m not in BASELINES]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; baselines are {BASELINES}, judges are "
                         "given with --judge")
    if proto.pairwise:
        pairs = data.pairs[:limit] if limit else data.pairs
        texts = [p.a for p in pairs] + [p.b for p in pairs]
        references = [(p.references[:n_refs] if n_refs else p.references) for p in pairs] * 2
        scores = _score_all(texts, references, base, judges or {})
        result["n_pairs"] = len(pairs)
        for name, values in scores.items():
            a, b = values[:len(pairs)], values[len(pairs):]
            ok = [k for k in range(len(pairs)) if a[k] is not None and b[k] is not None]
            res = pairwise_accuracy([a[k] for k in ok], [b[k] for k in ok],  # type: ignore[misc]
                                    [pairs[k].prefers_a for k in ok])
            by_category = {}
            for cat in sorted({pairs[k].category for k in ok}):
                idx = [k for k in ok if pairs[k].category == cat]
                by_category[cat] = pairwise_accuracy(
                    [a[k] for k in idx], [b[k] for k in idx],  # type: ignore[misc]
                    [pairs[k].prefers_a for k in idx]).accuracy
            result["metrics"][name] = {
                "accuracy": res.accuracy, "accuracy_ties_correct": res.accuracy_ties_correct,
                "accuracy_ties_half": res.accuracy_ties_half, "ties": res.ties, "n": res.n,
                "failed_pairs": len(pairs) - len(ok), "by_category": by_category,
                "mean_over_categories": float(np.mean(list(by_category.values())))
                if by_category else math.nan}
        return result

    candidates = [c for c in data.candidates if c.system not in proto.exclude_systems]
    if limit:
        candidates = candidates[:limit]
    rows = arrange(candidates, proto, proto.criterion)
    result["n_candidates"] = len(candidates)
    result["n_rows"] = len(rows.index)
    if proto.rows == "ratings" and base:
        # Reference-based baselines are scored on the row list itself (one entry per rating
        # row), as CLIPScore does: CIDEr's document frequencies then match the published ones.
        texts = [candidates[i].candidate for i in rows.index]
        references = [(candidates[i].references[:n_refs] if n_refs
                       else candidates[i].references) for i in rows.index]
        base_scores = _score_all(texts, references, base, {})
        row_rows = Rows(list(range(len(rows.index))), rows.human, rows.annotator)
        for name, values in base_scores.items():
            result["metrics"][name] = correlate(values, row_rows, proto, n_boot)
        base = []
    texts = [c.candidate for c in candidates]
    references = [(c.references[:n_refs] if n_refs else c.references) for c in candidates]
    scores = _score_all(texts, references, base, judges or {})
    for name, values in scores.items():
        result["metrics"][name] = correlate(values, rows, proto, n_boot)
    criteria = sorted({k for c in candidates for k in c.ratings})
    if len(criteria) > 1 and scores:
        human = {}
        for crit in criteria:
            r = arrange(candidates, get_protocol(dataset, proto.name), crit)
            if len(r.index) == len(rows.index):
                human[crit] = r
        result["criterion_matrix_kendall_tau_b"] = {
            name: {crit: kendall_tau_b([values[i] for i in r.index], r.human)
                   for crit, r in human.items()
                   if all(values[i] is not None for i in r.index)}
            for name, values in scores.items()}
    return result


def _score_all(texts: Sequence[str], references: Sequence[Sequence[str]],
               base: Sequence[str], judges: dict[str, Scorer]) -> dict[str, list[float | None]]:
    out: dict[str, list[float | None]] = {}
    if base:
        for name, values in baseline_scores(texts, references, base).items():
            out[name] = list(values)
    for name, scorer in judges.items():
        out[name] = scorer(texts, references)
    return out


__all__ = ["run_meta_eval", "judge_scorer", "correlation_matrix"]
