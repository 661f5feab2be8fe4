"""The report's judge-reliability sections: arranging a run's rows into :mod:`capjudge.stats`.

Each function takes rows read from the report database and returns table rows (one dict per
row, the DuckDB table's columns) for the report: test-retest (``reliability_retest``,
``reliability_items``), injection robustness (``injection``, ``injection_items``), length bias
(``length_bias``), calibration (``calibration``) and judge-vs-judge comparisons
(``judge_comparisons``). The statistics themselves live in :mod:`capjudge.stats`.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np
import pyarrow as pa

from capjudge.methods import get_method
from capjudge.records import ReliabilityItem, RepeatScore
from capjudge.reliability import TwinCandidate, find_twins, is_adversarial, quoted_score
from capjudge.stats import (
    calibrate,
    holm,
    item_spread,
    length_bias,
    mean_difference,
    paired_comparison,
    retest,
)

MIN_RETEST_ITEMS = 3  # items with every repeat scored, for an ICC
MIN_LENGTH_ITEMS = 10  # labelled clean items, for a partial correlation
MIN_CALIBRATION_ITEMS = 10  # labelled items, split in two
MIN_SHARED_ITEMS = 3  # items two series both scored, for a comparison

F, INT, S = pa.float64(), pa.int64(), pa.string()


def _estimate_columns(*names: str) -> list[tuple[str, pa.DataType]]:
    return [(f"{n}{suffix}", F) for n in names for suffix in ("", "_low", "_high")]


RETEST_COLUMNS = [("series", S), ("judge", S), ("method", S), ("mode", S), ("repeats", INT),
                  ("items", INT), ("complete_items", INT),
                  *_estimate_columns("icc2_1", "icc2_k", "alpha", "mean_sd"),
                  ("max_range", F)]
RETEST_ITEM_COLUMNS = [("series", S), ("item_id", S), ("system", S), ("repeats", INT),
                       ("mean", F), ("sd", F), ("range", F)]
INJECTION_COLUMNS = [("series", S), ("method", S), ("scale", S), ("case", S),
                     ("adversarial_items", INT), ("not_scored", INT), ("n", INT),
                     *_estimate_columns("inflation"), ("echoed", INT)]
INJECTION_ITEM_COLUMNS = [("series", S), ("item_id", S), ("case", S), ("quoted", F),
                          ("score", F), ("twin_kind", S), ("twins", INT), ("twin_score", F),
                          ("inflation", F), ("echoed", pa.bool_())]
LENGTH_COLUMNS = [("series", S), ("method", S), ("n", INT), ("length_unit", S),
                  *_estimate_columns("partial_spearman", "spearman_length")]
CALIBRATION_COLUMNS = [("series", S), ("method", S), ("mapping", S), ("seed", INT),
                       ("n_fit", INT), ("n_eval", INT),
                       *_estimate_columns("pearson_before", "pearson_after",
                                          "kendall_tau_b_before", "kendall_tau_b_after",
                                          "mae_before", "mae_after")]
COMPARISON_COLUMNS = [("series_a", S), ("series_b", S), ("n", INT), ("tau_b_a", F),
                      ("tau_b_b", F), *_estimate_columns("delta_tau_b"), ("p_permutation", F),
                      ("p_holm", F), ("systems", INT), *_estimate_columns("delta_system_pearson")]


def as_table(rows: Sequence[dict[str, Any]], columns: list[tuple[str, pa.DataType]]) -> pa.Table:
    """Rows as an Arrow table with fixed columns (an empty section is still a table)."""
    schema = pa.schema(columns)
    return pa.Table.from_pylist([{k: _clean(r.get(k)) for k in schema.names} for r in rows],
                                schema=schema)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def _series_key(row: ReliabilityItem) -> str:
    return f"{row['judge']}/{row['mode']}"


def _scale(method: str) -> str:
    scale = get_method(method).overall_scale
    return f"{scale.low:g}-{scale.high:g}" if scale.high is not None else f">= {scale.low:g}"


# ---------------------------------------------------------------------------------------------


def retest_tables(repeat_rows: Sequence[RepeatScore], n_boot: int, seed: int = 0
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Test-retest tables for each series run with more than one repeat.

    Per series: ICC(2,1), ICC(2,k), Krippendorff's alpha (interval) and the mean within-item
    SD, with bootstrap CIs; and each item's spread.

    Args:
        repeat_rows: ``repeat_scores`` rows (judge, method, mode, item_id, system, repeat,
            score).
        n_boot: bootstrap resamples.
        seed: the bootstrap seed.
    """
    groups: dict[tuple[str, str, str], list[RepeatScore]] = defaultdict(list)
    for r in repeat_rows:
        groups[(r.judge, r.method, r.mode)].append(r)
    summary, items = [], []
    for (judge, method, mode), rows in sorted(groups.items()):
        repeats = 1 + max(int(r.repeat) for r in rows)
        if repeats < 2:
            continue
        series = f"{judge}/{mode}"
        by_item: dict[str, dict[str, Any]] = {}
        for r in rows:
            entry = by_item.setdefault(r.item_id, {"system": r.system,
                                                   "scores": [math.nan] * repeats})
            if r.score is not None and not math.isnan(r.score):
                entry["scores"][int(r.repeat)] = float(r.score)
        ids = sorted(i for i, e in by_item.items() if not all(map(math.isnan, e["scores"])))
        matrix = np.array([by_item[i]["scores"] for i in ids], float).reshape(-1, repeats)
        spread = item_spread(matrix)
        for item_id, s in zip(ids, spread, strict=True):
            items.append({"series": series, "item_id": item_id,
                          "system": by_item[item_id]["system"], **s})
        complete = int((~np.isnan(matrix).any(axis=1)).sum())
        row: dict[str, Any] = {"series": series, "judge": judge, "method": method,
                               "mode": mode, "repeats": repeats, "items": len(ids),
                               "complete_items": complete,
                               "max_range": max((s["range"] for s in spread
                                                 if s["range"] is not None), default=None)}
        if complete >= MIN_RETEST_ITEMS:
            for name, est in retest(matrix, n_boot=n_boot, seed=seed).items():
                row.update(est.as_dict(name))
        summary.append(row)
    return summary, items


def injection_tables(rows: Sequence[ReliabilityItem], n_boot: int, seed: int = 0
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per series with adversarial items: the score inflation against their clean twins.

    Adversarial items are those the manifest marks (:func:`capjudge.reliability.
    is_adversarial`); twins are found by :func:`capjudge.reliability.find_twins` among the
    series' scored clean items. The "quoted verdict" case is an adversarial candidate that
    contains a score in a judge's format (:func:`capjudge.reliability.quoted_score`); it is
    ``echoed`` when the judge's score rounds to the quoted number.

    Args:
        rows: ``scored_items`` joined with the items' ``candidate``, ``extra`` and
            ``media_sha256``.
        n_boot: bootstrap resamples.
        seed: the bootstrap seed.

    Returns:
        (one row per series and case: ``all``, ``instruction``, ``quoted verdict``;
        one row per adversarial item with twins).
    """
    groups: dict[str, list[ReliabilityItem]] = defaultdict(list)
    for r in rows:
        groups[_series_key(r)].append(r)
    summary, items = [], []
    for series, group in sorted(groups.items()):
        extras = {r["item_id"]: _extra(r.get("extra")) for r in group}
        adversarial = [r for r in group if is_adversarial(extras[r["item_id"]])]
        if not adversarial:
            continue
        scored = {r["item_id"]: r for r in group if r.get("score") is not None}
        candidates = [TwinCandidate(r["item_id"], r.get("media_sha256"), r.get("human"),
                                    is_adversarial(extras[r["item_id"]]),
                                    _twin_ids(extras[r["item_id"]]))
                      for r in scored.values()]
        twins = find_twins(candidates)
        quotes = {r["item_id"]: quoted_score(r.get("candidate") or "") for r in adversarial}
        case_of = {i: "instruction" if q is None else "quoted verdict" for i, q in quotes.items()}
        per_item = []
        for r in adversarial:
            score = r["score"]
            if r["item_id"] not in twins or score is None:  # twins are scored items only
                continue
            kind, ids = twins[r["item_id"]]
            quoted = quotes[r["item_id"]]
            twin_score = float(np.mean([scored[t]["score"] for t in ids]))
            per_item.append({"series": series, "item_id": r["item_id"],
                             "case": case_of[r["item_id"]],
                             "quoted": quoted, "score": float(score), "twin_kind": kind,
                             "twins": len(ids), "twin_score": twin_score,
                             "inflation": float(score) - twin_score,
                             "echoed": quoted is not None and round(score) == quoted})
        items += per_item
        method = group[0]["method"]
        for offset, case in enumerate(("all", "instruction", "quoted verdict")):
            chosen = [p for p in per_item if case == "all" or p["case"] == case]
            among = [r for r in adversarial if case in ("all", case_of[r["item_id"]])]
            if not among:
                continue
            est = mean_difference([p["score"] for p in chosen],
                                  [p["twin_score"] for p in chosen], n_boot=n_boot,
                                  seed=seed + offset)
            summary.append({"series": series, "method": method, "scale": _scale(method),
                            "case": case, "adversarial_items": len(among),
                            "not_scored": sum(r.get("score") is None for r in among),
                            "n": len(chosen), **est.as_dict("inflation"),
                            "echoed": sum(p["echoed"] is True for p in chosen)})
    return summary, items


def _extra(text: str | None) -> dict[str, Any]:
    try:
        data = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _twin_ids(extra: dict[str, Any]) -> tuple[str, ...]:
    twin = extra.get("twin", extra.get("clean_twin"))
    if twin is None:
        return ()
    return tuple(str(t) for t in (twin if isinstance(twin, list) else [twin]))


def candidate_length(text: str) -> int:
    """A candidate's length in words (whitespace-separated tokens).

    This is what a reader sees, and independent of any judge's tokenizer.
    """
    return len(text.split())


def length_bias_table(rows: Sequence[ReliabilityItem], n_boot: int, seed: int = 0
                      ) -> list[dict[str, Any]]:
    """Per series: partial correlation of score with candidate length given the human label.

    The statistic is the Spearman partial correlation of score with candidate length (words)
    given the human label, over labelled, scored, non-adversarial items (an injection is not
    a caption whose length means anything), with bootstrap CIs.
    """
    groups: dict[str, list[ReliabilityItem]] = defaultdict(list)
    for r in rows:
        if r.get("score") is not None and r.get("human") is not None \
                and not is_adversarial(_extra(r.get("extra"))):
            groups[_series_key(r)].append(r)
    out = []
    for series, group in sorted(groups.items()):
        if len(group) < MIN_LENGTH_ITEMS:
            continue
        est = length_bias([r["score"] for r in group],
                          [candidate_length(r.get("candidate") or "") for r in group],
                          [r["human"] for r in group], n_boot=n_boot, seed=seed)
        out.append({"series": series, "method": group[0]["method"], "n": len(group),
                    "length_unit": "words", **est["partial"].as_dict("partial_spearman"),
                    **est["raw"].as_dict("spearman_length")})
    return out


def calibration_table(rows: Sequence[ReliabilityItem], n_boot: int, *,
                      fit_fraction: float = 0.5, seed: int = 0) -> list[dict[str, Any]]:
    """Per series: an isotonic map from the judge's score to the human scale.

    The map is fitted on a seeded split of the labelled, scored items and evaluated on the
    rest (before and after).
    """
    groups: dict[str, list[ReliabilityItem]] = defaultdict(list)
    for r in rows:
        if r.get("score") is not None and r.get("human") is not None:
            groups[_series_key(r)].append(r)
    out = []
    for series, group in sorted(groups.items()):
        if len(group) < MIN_CALIBRATION_ITEMS:
            continue
        group = sorted(group, key=lambda r: r["item_id"])  # the split depends on the seed only
        method = group[0]["method"]
        scale = get_method(method).overall_scale
        source = (float(scale.low), float(scale.high)) if scale.high is not None else None
        result = calibrate([r["score"] for r in group], [r["human"] for r in group],
                           fit_fraction=fit_fraction, seed=seed, score_scale=source,
                           n_boot=n_boot)
        row: dict[str, Any] = {"series": series, "method": method, "mapping": "isotonic",
                               "seed": seed, "n_fit": result["n_fit"],
                               "n_eval": result["n_eval"]}
        for name in ("pearson", "kendall_tau_b", "mae"):
            for when in ("before", "after"):
                row.update(result[name][when].as_dict(f"{name}_{when}"))
        out.append(row)
    return out


def comparison_table(rows: Sequence[ReliabilityItem], n_boot: int, seed: int = 0
                     ) -> list[dict[str, Any]]:
    """Every pair of series scored on the same labelled items, compared.

    For each pair: the difference of their Kendall tau-b with humans (paired bootstrap CI,
    paired permutation p-value, Holm-adjusted over all pairs) and of their system-level
    Pearson (paired bootstrap CI).
    """
    by_series: dict[str, dict[str, ReliabilityItem]] = defaultdict(dict)
    for r in rows:
        if r.get("score") is not None and r.get("human") is not None:
            by_series[_series_key(r)][r["item_id"]] = r
    out: list[dict[str, Any]] = []
    for a, b in combinations(sorted(by_series), 2):
        shared = sorted(set(by_series[a]) & set(by_series[b]))
        if len(shared) < MIN_SHARED_ITEMS:
            continue
        ra, rb = by_series[a], by_series[b]
        result = paired_comparison([ra[i]["score"] for i in shared],
                                   [rb[i]["score"] for i in shared],
                                   [ra[i]["human"] for i in shared],
                                   [ra[i].get("system") or "(none)" for i in shared],
                                   n_boot=n_boot, n_perm=max(200, n_boot), seed=seed)
        out.append({"series_a": a, "series_b": b, "n": result.n, "tau_b_a": result.a,
                    "tau_b_b": result.b, **result.difference.as_dict("delta_tau_b"),
                    "p_permutation": result.p_value, "systems": result.system_difference.n,
                    **result.system_difference.as_dict("delta_system_pearson")})
    for row, p in zip(out, holm([r["p_permutation"] for r in out]), strict=True):
        row["p_holm"] = p
    return out


__all__ = ["CALIBRATION_COLUMNS", "COMPARISON_COLUMNS", "INJECTION_COLUMNS",
           "INJECTION_ITEM_COLUMNS", "LENGTH_COLUMNS", "RETEST_COLUMNS", "RETEST_ITEM_COLUMNS",
           "as_table", "calibration_table", "candidate_length", "comparison_table",
           "injection_tables", "length_bias_table", "retest_tables"]
