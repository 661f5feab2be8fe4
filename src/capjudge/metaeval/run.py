"""Meta-evaluation: how well metrics and judges agree with human judgments.

:func:`run_meta_eval` loads a dataset, scores its candidates with the requested metrics
(reference-based baselines and/or a judge), arranges human ratings as the protocol says, and
computes Kendall tau-b/tau-c, Pearson, Spearman (or pairwise accuracy) with bootstrap 95 %
confidence intervals. Every result names its protocol.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NotRequired, TypedDict, final

import numpy as np

from capjudge.metaeval.baselines import BASELINES, baseline_scores
from capjudge.metaeval.datasets import Candidate, DatasetError, MetaDataset, Pair, load
from capjudge.metaeval.protocols import Protocol, get_protocol
from capjudge.stats import (
    STATS,
    bootstrap_ci,
    correlation_matrix,
    kendall_tau_b,
    pairwise_accuracy,
    undefined_reason,
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


@final  # so that ``"accuracy" in entry`` tells a Correlation from a PairwiseEntry
class Correlation(TypedDict):
    """One metric's agreement with the human rows (:func:`correlate`)."""

    n: int
    """Rows scored."""
    failed_candidates: int
    """Candidates the metric gave no score."""
    ci95: dict[str, list[float]]
    """Statistic -> its 95 % bootstrap CI (none under the per-annotator protocol)."""
    n_candidates: NotRequired[int]
    annotators: NotRequired[int]
    kendall_tau_b: NotRequired[float]
    kendall_tau_b_per_annotator: NotRequired[list[float]]
    kendall_tau_c: NotRequired[float]
    kendall_tau_c_per_annotator: NotRequired[list[float]]
    pearson: NotRequired[float]
    pearson_per_annotator: NotRequired[list[float]]
    spearman: NotRequired[float]
    spearman_per_annotator: NotRequired[list[float]]
    note: NotRequired[str]
    references_used: NotRequired[int | None]


@final
class PairwiseEntry(TypedDict):
    """One metric's accuracy on a pairwise dataset (which caption of a pair humans prefer)."""

    accuracy: float
    accuracy_ties_correct: float
    accuracy_ties_half: float
    ties: int
    n: int
    failed_pairs: int
    by_category: dict[str, float]
    mean_over_categories: float
    references_used: NotRequired[int | None]


class MetaEvalResult(TypedDict):
    """What :func:`run_meta_eval` returns (the meta-eval JSON)."""

    dataset: str
    protocol: str
    protocol_description: str
    references_used: int | str | list[int | None]
    """References the metrics saw (``all``), or one number per reported setting."""
    metrics: dict[str, Correlation | PairwiseEntry]
    settings: NotRequired[dict[str, int | None]]
    notes: NotRequired[str]
    n_pairs: NotRequired[int]
    n_candidates: NotRequired[int]
    n_rows: NotRequired[int]
    criterion_matrix_kendall_tau_b: NotRequired[dict[str, dict[str, float]]]
    """Metric -> human criterion -> Kendall tau-b (datasets with several criteria)."""


def correlate(metric: Sequence[float | None], rows: Rows, protocol: Protocol, n_boot: int,
              seed: int = 0) -> Correlation:
    """All four statistics (+ CIs) of a metric against the arranged human rows.

    With ``protocol.round_to`` the metric scores are rounded first (``numpy.around``, as
    EMScore's ``compute_correlation_uniquehuman`` does, so near-equal scores tie). Under the
    "per-annotator" protocol each statistic is computed against every annotator's ratings
    separately and averaged over the annotators (EMScore's VATEX-EVAL protocol).
    """
    keep = [j for j, i in enumerate(rows.index) if metric[i] is not None
            and not math.isnan(metric[i])]  # type: ignore[arg-type]
    failed = len({rows.index[j] for j in range(len(rows.index))} - {rows.index[j] for j in keep})
    x = [float(metric[rows.index[j]]) for j in keep]  # type: ignore[arg-type]
    if protocol.round_to is not None:
        # numpy's rounding (scale, round half to even, unscale), not Python's round(): the
        # published numbers were computed with np.around and the two differ on rare ties.
        x = np.around(np.asarray(x, dtype=float), decimals=protocol.round_to).tolist()
    y = [rows.human[j] for j in keep]
    groups = [rows.index[j] for j in keep]
    out: Correlation = {"n": len(x), "failed_candidates": failed, "ci95": {}}
    if protocol.rows == "per-annotator":
        annotators = sorted({rows.annotator[j] for j in keep})
        by_annotator = {a: [k for k, j in enumerate(keep) if rows.annotator[j] == a]
                        for a in annotators}
        out["n_candidates"] = len(set(groups))
        out["annotators"] = len(annotators)
        per = {name: [stat([x[k] for k in idx], [y[k] for k in idx]) if len(idx) > 1
                      else math.nan for idx in by_annotator.values()]
               for name, stat in STATS.items()}
        mean = {name: float(np.mean(v)) if v else math.nan for name, v in per.items()}
        # In STATS' order, each mean then its per-annotator values (the JSON's key order).
        out["kendall_tau_b"] = mean["kendall_tau_b"]
        out["kendall_tau_b_per_annotator"] = per["kendall_tau_b"]
        out["kendall_tau_c"] = mean["kendall_tau_c"]
        out["kendall_tau_c_per_annotator"] = per["kendall_tau_c"]
        out["pearson"] = mean["pearson"]
        out["pearson_per_annotator"] = per["pearson"]
        out["spearman"] = mean["spearman"]
        out["spearman_per_annotator"] = per["spearman"]
        out["ci95"] = {}
        out["note"] = "per-annotator statistics averaged; CIs not computed for this protocol"
        return out
    value: dict[str, float] = {}
    for name, stat in STATS.items():
        value[name] = stat(x, y) if len(x) > 1 else math.nan
        if n_boot > 0 and len(x) > 2:
            lo, hi = bootstrap_ci(x, y, stat, groups=groups, n_boot=n_boot, seed=seed)
            out["ci95"][name] = [lo, hi]
    out["kendall_tau_b"], out["kendall_tau_c"] = value["kendall_tau_b"], value["kendall_tau_c"]
    out["pearson"], out["spearman"] = value["pearson"], value["spearman"]
    why = undefined_reason(x, y, min_points=2)
    if why is not None:
        out["note"] = why  # the NaN statistics' reason, printed beside them
    return out


def judge_scorer(method: str, mode: str | None, backend: str,
                 backend_options: Mapping[str, object],
                 cache_dir: str | None, max_tokens: int = 512) -> Scorer:
    """A text-only judge as a metric (datasets here ship no images: reference modes only).

    It runs the one judge pipeline (:func:`capjudge.judge.judge_items`) and the one
    overall-status rule (:func:`capjudge.methods.verdict`); a candidate without a score is
    None (excluded and counted as failed), never 0.
    """
    def score(candidates: Sequence[str], references: Sequence[Sequence[str]]
              ) -> list[float | None]:
        from capjudge.item import Item
        from capjudge.judge import JudgeConfig, judge_items
        from capjudge.methods import get_method

        m = get_method(method)
        modes = [mode] if mode else [m.default_modes[0]]
        config = JudgeConfig(method=method, backend=backend, modes=modes,
                             max_tokens=max_tokens, backend_options=dict(backend_options),
                             cache_dir=cache_dir)
        items = [Item(id=str(i), candidate=c, references=tuple(r)) for i, (c, r) in
                 enumerate(zip(candidates, references, strict=True))]
        from capjudge.util.progress import Progress

        progress = Progress(f"meta-eval {method}{':' + mode if mode else ''}", "request")
        try:
            result = judge_items(items, config, progress=progress)
        finally:
            progress.close()
        verdicts = result.verdicts(m, {})
        return [verdicts[(item.id, modes[0])].score
                if (item.id, modes[0]) in verdicts else None for item in items]

    return score


def run_meta_eval(dataset: str, path: str, *, protocol: str | None = None,
                  metrics: Sequence[str] = BASELINES, judges: dict[str, Scorer] | None = None,
                  refs: int | None = None, n_boot: int = 1000, limit: int | None = None
                  ) -> MetaEvalResult:
    """Score a human-judgment dataset with metrics and judges; return the JSON-able result.

    Args:
        dataset: a registered dataset name (:func:`capjudge.metaeval.datasets.dataset_names`).
        path: the dataset file.
        protocol: a protocol of the dataset (default: the one its registration declares).
        metrics: reference-based baselines to compute (:data:`BASELINES`).
        judges: name -> scorer, e.g. from :func:`judge_scorer`.
        refs: references the metrics see; overrides the protocol (and picks a single setting
            where the protocol reports several, as EMScore's 1 and 9 references).
        n_boot: bootstrap resamples for the 95 % CIs (0: none).
        limit: only the first N candidates/pairs.

    Returns:
        ``{"dataset", "protocol", "protocol_description", "references_used", "metrics": {NAME:
        {...}}}``. Under a protocol with several reference settings every metric is reported
        once per setting, as ``NAME@1ref``, ``NAME@9refs`` (listed in ``"settings"``).

    Raises:
        DatasetError: unknown dataset, a file not in its format, or reference-based baselines
            asked of candidates that have no references (e.g. the Polaris JSON form).
        KeyError: unknown protocol, or a protocol of another dataset.
        ValueError: unknown metric names.
    """
    proto = get_protocol(dataset, protocol)
    base = [m for m in metrics if m in BASELINES]
    unknown = [m for m in metrics if m not in BASELINES]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; baselines are {BASELINES}, judges are "
                         "given with --judge")
    data: MetaDataset = load(dataset, path)
    # (suffix of the metric names, references seen) for every reported setting.
    if refs is not None or not proto.ref_settings:
        settings: list[tuple[str, int | None]] = [("", refs if refs is not None else proto.refs)]
    else:
        settings = [(f"@{n}ref" if n == 1 else f"@{n}refs", n) for n in proto.ref_settings]
    result: MetaEvalResult = {
        "dataset": dataset, "protocol": proto.name, "protocol_description": proto.description,
        "references_used": (settings[0][1] or "all") if len(settings) == 1
        else [n for _, n in settings],
        "metrics": {}}
    if len(settings) > 1:
        result["settings"] = {suffix[1:]: n for suffix, n in settings}
    if data.notes:
        result["notes"] = data.notes

    if proto.pairwise:
        pairs = data.pairs[:limit] if limit else data.pairs
        _require_references(dataset, data, pairs, base)
        result["n_pairs"] = len(pairs)
        for suffix, n_refs in settings:
            _pairwise_setting(result, pairs, suffix, n_refs, base, judges or {})
        return result

    candidates = [c for c in data.candidates if c.system not in proto.exclude_systems]
    if limit:
        candidates = candidates[:limit]
    _require_references(dataset, data, candidates, base)
    rows = arrange(candidates, proto, proto.criterion)
    result["n_candidates"] = len(candidates)
    result["n_rows"] = len(rows.index)
    criteria = sorted({k for c in candidates for k in c.ratings})
    for suffix, n_refs in settings:
        _candidate_setting(result, candidates, rows, criteria, proto, suffix, n_refs, base,
                           judges or {}, n_boot)
    return result


def _pairwise_setting(result: MetaEvalResult, pairs: Sequence[Pair], suffix: str,
                      n_refs: int | None, base: Sequence[str], judges: dict[str, Scorer]
                      ) -> None:
    """Score the pairs under one reference setting; each metric's accuracy into ``result``."""
    texts = [p.a for p in pairs] + [p.b for p in pairs]
    references = [(p.references[:n_refs] if n_refs else p.references)
                  for p in pairs] * 2
    scores = _score_all(texts, references, base, judges)
    for name, values in scores.items():
        a, b = values[:len(pairs)], values[len(pairs):]
        ok = [k for k in range(len(pairs)) if a[k] is not None and b[k] is not None]
        res = pairwise_accuracy([a[k] for k in ok],  # type: ignore[misc]
                                [b[k] for k in ok],  # type: ignore[misc]
                                [pairs[k].prefers_a for k in ok])
        by_category: dict[str, float] = {}
        for cat in sorted({pairs[k].category for k in ok}):
            idx = [k for k in ok if pairs[k].category == cat]
            by_category[cat] = pairwise_accuracy(
                [a[k] for k in idx], [b[k] for k in idx],  # type: ignore[misc]
                [pairs[k].prefers_a for k in idx]).accuracy
        entry: PairwiseEntry = {
            "accuracy": res.accuracy,
            "accuracy_ties_correct": res.accuracy_ties_correct,
            "accuracy_ties_half": res.accuracy_ties_half, "ties": res.ties, "n": res.n,
            "failed_pairs": len(pairs) - len(ok), "by_category": by_category,
            "mean_over_categories": float(np.mean(list(by_category.values())))
            if by_category else math.nan}
        if suffix:
            entry["references_used"] = n_refs
        result["metrics"][name + suffix] = entry


def _candidate_setting(result: MetaEvalResult, candidates: Sequence[Candidate], rows: Rows,
                       criteria: Sequence[str], proto: Protocol, suffix: str,
                       n_refs: int | None, base: Sequence[str], judges: dict[str, Scorer],
                       n_boot: int) -> None:
    """Score the candidates under one reference setting; each metric's correlations in."""
    remaining = base
    if proto.rows == "ratings" and base:
        # Reference-based baselines are scored on the row list itself (one entry per
        # rating row), as CLIPScore does: CIDEr's document frequencies then match the
        # published ones.
        texts = [candidates[i].candidate for i in rows.index]
        references = [(candidates[i].references[:n_refs] if n_refs
                       else candidates[i].references) for i in rows.index]
        base_scores = _score_all(texts, references, base, {})
        row_rows = Rows(list(range(len(rows.index))), rows.human, rows.annotator)
        for name, values in base_scores.items():
            result["metrics"][name + suffix] = correlate(values, row_rows, proto, n_boot)
        remaining = []
    texts = [c.candidate for c in candidates]
    references = [(c.references[:n_refs] if n_refs else c.references) for c in candidates]
    scores = _score_all(texts, references, remaining, judges)
    for name, values in scores.items():
        result["metrics"][name + suffix] = correlate(values, rows, proto, n_boot)
    if suffix:
        for name in [*base, *judges]:
            if name + suffix in result["metrics"]:
                result["metrics"][name + suffix]["references_used"] = n_refs
    if len(criteria) > 1 and scores:
        human = {}
        for crit in criteria:
            r = arrange(candidates, proto, crit)
            if len(r.index) == len(rows.index):
                human[crit] = r
        result.setdefault("criterion_matrix_kendall_tau_b", {}).update({
            name + suffix: {crit: kendall_tau_b([values[i] for i in r.index], r.human)
                            for crit, r in human.items()
                            if all(values[i] is not None for i in r.index)}
            for name, values in scores.items()})


def _require_references(dataset: str, data: MetaDataset, items: Sequence[Candidate | Pair],
                        base: Sequence[str]) -> None:
    """Reference-based baselines on items without references: a clear error, not a zero."""
    if not base:
        return
    missing = [item.key for item in items if not item.references]
    if missing:
        why = f" ({data.notes})" if data.notes else ""
        raise DatasetError(
            f"{dataset}: the reference-based metrics {', '.join(base)} need references, but "
            f"{len(missing)} of {len(items)} items have none (first: {missing[0]!r}){why}; "
            "score this dataset with reference-free judges instead")


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
