"""The report's judge-reliability sections: arranging a run's rows into :mod:`capjudge.stats`.

Each function takes rows read from the report database and returns table rows for the report
(one typed dict per row, e.g. :class:`RetestRow`: its keys are the DuckDB table's columns, in
order, and the table's Arrow schema is derived from it, :func:`columns_of`): test-retest
(``reliability_retest``, ``reliability_items``), injection robustness (``injection``,
``injection_items``), length bias (``length_bias``), calibration (``calibration``) and
judge-vs-judge comparisons (``judge_comparisons``). The statistics themselves live in
:mod:`capjudge.stats`.
"""

from __future__ import annotations

import json
import math
import typing
from collections import defaultdict
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import TypedDict

import numpy as np
import pyarrow as pa

from capjudge.methods import get_method
from capjudge.records import JSONValue, ReliabilityItem, RepeatScore, arrow_type
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
from capjudge.stats.bootstrap import Estimate, none_if_nan

MIN_RETEST_ITEMS = 3  # items with every repeat scored, for an ICC
MIN_LENGTH_ITEMS = 10  # labelled clean items, for a partial correlation
MIN_CALIBRATION_ITEMS = 10  # labelled items, split in two
MIN_SHARED_ITEMS = 3  # items two series both scored, for a comparison

Ci = tuple[float | None, float | None, float | None]
"""A statistic, its 95 % CI low and high (None where undefined): three columns of a row."""


def _ci(est: Estimate) -> Ci:
    """An estimate as its three columns (``name``, ``name_low``, ``name_high``)."""
    return none_if_nan(est.value), none_if_nan(est.low), none_if_nan(est.high)


_NO_CI: Ci = (None, None, None)


class RetestRow(TypedDict):
    """``reliability_retest``: one series run with more than one repeat."""

    series: str
    judge: str
    method: str
    mode: str
    repeats: int
    items: int
    """Items with at least one repeat scored."""
    complete_items: int
    """Items with every repeat scored (the ICC's items)."""
    icc2_1: float | None
    icc2_1_low: float | None
    icc2_1_high: float | None
    icc2_k: float | None
    icc2_k_low: float | None
    icc2_k_high: float | None
    alpha: float | None
    alpha_low: float | None
    alpha_high: float | None
    mean_sd: float | None
    mean_sd_low: float | None
    mean_sd_high: float | None
    max_range: float | None


class RetestItemRow(TypedDict):
    """``reliability_items``: one item's spread over a series' repeats."""

    series: str
    item_id: str
    system: str | None
    repeats: int
    mean: float | None
    sd: float | None
    range: float | None


class InjectionRow(TypedDict):
    """``injection``: one series and case (``all``, ``instruction``, ``quoted verdict``)."""

    series: str
    method: str
    scale: str
    case: str
    adversarial_items: int
    not_scored: int
    n: int
    """Adversarial items scored and with twins."""
    inflation: float | None
    inflation_low: float | None
    inflation_high: float | None
    echoed: int


class InjectionItemRow(TypedDict):
    """``injection_items``: one adversarial item against its clean twins."""

    series: str
    item_id: str
    case: str
    quoted: float | None
    score: float
    twin_kind: str
    twins: int
    twin_score: float
    inflation: float
    echoed: bool


class LengthBiasRow(TypedDict):
    """``length_bias``: one series' score-length correlations."""

    series: str
    method: str
    n: int
    length_unit: str
    partial_spearman: float | None
    partial_spearman_low: float | None
    partial_spearman_high: float | None
    spearman_length: float | None
    spearman_length_low: float | None
    spearman_length_high: float | None


class CalibrationRow(TypedDict):
    """``calibration``: one series' isotonic map, before and after on the held-out items."""

    series: str
    method: str
    mapping: str
    seed: int
    n_fit: int
    n_eval: int
    pearson_before: float | None
    pearson_before_low: float | None
    pearson_before_high: float | None
    pearson_after: float | None
    pearson_after_low: float | None
    pearson_after_high: float | None
    kendall_tau_b_before: float | None
    kendall_tau_b_before_low: float | None
    kendall_tau_b_before_high: float | None
    kendall_tau_b_after: float | None
    kendall_tau_b_after_low: float | None
    kendall_tau_b_after_high: float | None
    mae_before: float | None
    mae_before_low: float | None
    mae_before_high: float | None
    mae_after: float | None
    mae_after_low: float | None
    mae_after_high: float | None


class ComparisonRow(TypedDict):
    """``judge_comparisons``: two series on the labelled items both scored."""

    series_a: str
    series_b: str
    n: int
    tau_b_a: float
    tau_b_b: float
    delta_tau_b: float | None
    delta_tau_b_low: float | None
    delta_tau_b_high: float | None
    p_permutation: float
    p_holm: float | None
    """Holm-adjusted over every pair of the report."""
    systems: int
    delta_system_pearson: float | None
    delta_system_pearson_low: float | None
    delta_system_pearson_high: float | None


class ReliabilitySections(TypedDict):
    """The report's judge-reliability sections, each a database table of the same name."""

    reliability_retest: list[RetestRow]
    reliability_items: list[RetestItemRow]
    injection: list[InjectionRow]
    injection_items: list[InjectionItemRow]
    length_bias: list[LengthBiasRow]
    calibration: list[CalibrationRow]
    judge_comparisons: list[ComparisonRow]


def columns_of(row_type: type) -> list[tuple[str, pa.DataType]]:
    """A row type's columns: its keys in order, with their Arrow types (:func:`arrow_type`)."""
    return [(name, arrow_type(tp)) for name, tp in typing.get_type_hints(row_type).items()]


RETEST_COLUMNS = columns_of(RetestRow)
RETEST_ITEM_COLUMNS = columns_of(RetestItemRow)
INJECTION_COLUMNS = columns_of(InjectionRow)
INJECTION_ITEM_COLUMNS = columns_of(InjectionItemRow)
LENGTH_COLUMNS = columns_of(LengthBiasRow)
CALIBRATION_COLUMNS = columns_of(CalibrationRow)
COMPARISON_COLUMNS = columns_of(ComparisonRow)


def as_table(rows: Sequence[Mapping[str, object]], columns: list[tuple[str, pa.DataType]]
             ) -> pa.Table:
    """Rows as an Arrow table with fixed columns (an empty section is still a table)."""
    schema = pa.schema(columns)
    return pa.Table.from_pylist([{k: _clean(r.get(k)) for k in schema.names} for r in rows],
                                schema=schema)


def _clean(value: object) -> object:
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
                  ) -> tuple[list[RetestRow], list[RetestItemRow]]:
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
    summary: list[RetestRow] = []
    items: list[RetestItemRow] = []
    for (judge, method, mode), rows in sorted(groups.items()):
        repeats = 1 + max(int(r.repeat) for r in rows)
        if repeats < 2:
            continue
        series = f"{judge}/{mode}"
        system: dict[str, str | None] = {}
        scores: dict[str, list[float]] = {}
        for r in rows:
            system.setdefault(r.item_id, r.system)
            item_scores = scores.setdefault(r.item_id, [math.nan] * repeats)
            if r.score is not None and not math.isnan(r.score):
                item_scores[int(r.repeat)] = float(r.score)
        ids = sorted(i for i, v in scores.items() if not all(map(math.isnan, v)))
        matrix = np.array([scores[i] for i in ids], float).reshape(-1, repeats)
        spread = item_spread(matrix)
        for item_id, s in zip(ids, spread, strict=True):
            items.append({"series": series, "item_id": item_id, "system": system[item_id],
                          "repeats": s["repeats"], "mean": s["mean"], "sd": s["sd"],
                          "range": s["range"]})
        complete = int((~np.isnan(matrix).any(axis=1)).sum())
        icc1 = icc_k = alpha = mean_sd = _NO_CI
        if complete >= MIN_RETEST_ITEMS:
            est = retest(matrix, n_boot=n_boot, seed=seed)
            icc1, icc_k = _ci(est["icc2_1"]), _ci(est["icc2_k"])
            alpha, mean_sd = _ci(est["alpha"]), _ci(est["mean_sd"])
        summary.append({
            "series": series, "judge": judge, "method": method, "mode": mode,
            "repeats": repeats, "items": len(ids), "complete_items": complete,
            "icc2_1": icc1[0], "icc2_1_low": icc1[1], "icc2_1_high": icc1[2],
            "icc2_k": icc_k[0], "icc2_k_low": icc_k[1], "icc2_k_high": icc_k[2],
            "alpha": alpha[0], "alpha_low": alpha[1], "alpha_high": alpha[2],
            "mean_sd": mean_sd[0], "mean_sd_low": mean_sd[1], "mean_sd_high": mean_sd[2],
            "max_range": max((s["range"] for s in spread if s["range"] is not None),
                             default=None)})
    return summary, items


def injection_tables(rows: Sequence[ReliabilityItem], n_boot: int, seed: int = 0
                     ) -> tuple[list[InjectionRow], list[InjectionItemRow]]:
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
    summary: list[InjectionRow] = []
    items: list[InjectionItemRow] = []
    for series, group in sorted(groups.items()):
        extras = {r["item_id"]: _extra(r.get("extra")) for r in group}
        adversarial = [r for r in group if is_adversarial(extras[r["item_id"]])]
        if not adversarial:
            continue
        scored = {r["item_id"]: r for r in group if r.get("score") is not None}
        score_of = {i: r["score"] for i, r in scored.items() if r["score"] is not None}
        candidates = [TwinCandidate(r["item_id"], r.get("media_sha256"), r.get("human"),
                                    is_adversarial(extras[r["item_id"]]),
                                    _twin_ids(extras[r["item_id"]]))
                      for r in scored.values()]
        twins = find_twins(candidates)
        quotes = {r["item_id"]: quoted_score(r.get("candidate") or "") for r in adversarial}
        case_of = {i: "instruction" if q is None else "quoted verdict" for i, q in quotes.items()}
        per_item: list[InjectionItemRow] = []
        for r in adversarial:
            score = r["score"]
            if r["item_id"] not in twins or score is None:  # twins are scored items only
                continue
            kind, ids = twins[r["item_id"]]
            quoted = quotes[r["item_id"]]
            twin_score = float(np.mean([score_of[t] for t in ids]))
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
            inflation = _ci(est)
            summary.append({"series": series, "method": method, "scale": _scale(method),
                            "case": case, "adversarial_items": len(among),
                            "not_scored": sum(r.get("score") is None for r in among),
                            "n": len(chosen), "inflation": inflation[0],
                            "inflation_low": inflation[1], "inflation_high": inflation[2],
                            "echoed": sum(p["echoed"] is True for p in chosen)})
    return summary, items


def _extra(text: str | None) -> dict[str, JSONValue]:
    """A manifest row's unknown keys (``items.extra``, a JSON object); {} if unreadable."""
    try:
        data: JSONValue = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _twin_ids(extra: Mapping[str, JSONValue]) -> tuple[str, ...]:
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
                      ) -> list[LengthBiasRow]:
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
    out: list[LengthBiasRow] = []
    for series, group in sorted(groups.items()):
        if len(group) < MIN_LENGTH_ITEMS:
            continue
        est = length_bias([r["score"] for r in group],
                          [candidate_length(r.get("candidate") or "") for r in group],
                          [r["human"] for r in group], n_boot=n_boot, seed=seed)
        partial, raw = _ci(est["partial"]), _ci(est["raw"])
        out.append({"series": series, "method": group[0]["method"], "n": len(group),
                    "length_unit": "words", "partial_spearman": partial[0],
                    "partial_spearman_low": partial[1], "partial_spearman_high": partial[2],
                    "spearman_length": raw[0], "spearman_length_low": raw[1],
                    "spearman_length_high": raw[2]})
    return out


def calibration_table(rows: Sequence[ReliabilityItem], n_boot: int, *,
                      fit_fraction: float = 0.5, seed: int = 0) -> list[CalibrationRow]:
    """Per series: an isotonic map from the judge's score to the human scale.

    The map is fitted on a seeded split of the labelled, scored items and evaluated on the
    rest (before and after).
    """
    groups: dict[str, list[ReliabilityItem]] = defaultdict(list)
    for r in rows:
        if r.get("score") is not None and r.get("human") is not None:
            groups[_series_key(r)].append(r)
    out: list[CalibrationRow] = []
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
        p0, p1 = _ci(result["pearson"]["before"]), _ci(result["pearson"]["after"])
        t0, t1 = _ci(result["kendall_tau_b"]["before"]), _ci(result["kendall_tau_b"]["after"])
        m0, m1 = _ci(result["mae"]["before"]), _ci(result["mae"]["after"])
        out.append({
            "series": series, "method": method, "mapping": "isotonic", "seed": seed,
            "n_fit": result["n_fit"], "n_eval": result["n_eval"],
            "pearson_before": p0[0], "pearson_before_low": p0[1],
            "pearson_before_high": p0[2],
            "pearson_after": p1[0], "pearson_after_low": p1[1], "pearson_after_high": p1[2],
            "kendall_tau_b_before": t0[0], "kendall_tau_b_before_low": t0[1],
            "kendall_tau_b_before_high": t0[2],
            "kendall_tau_b_after": t1[0], "kendall_tau_b_after_low": t1[1],
            "kendall_tau_b_after_high": t1[2],
            "mae_before": m0[0], "mae_before_low": m0[1], "mae_before_high": m0[2],
            "mae_after": m1[0], "mae_after_low": m1[1], "mae_after_high": m1[2]})
    return out


def comparison_table(rows: Sequence[ReliabilityItem], n_boot: int, seed: int = 0
                     ) -> list[ComparisonRow]:
    """Every pair of series scored on the same labelled items, compared.

    For each pair: the difference of their Kendall tau-b with humans (paired bootstrap CI,
    paired permutation p-value, Holm-adjusted over all pairs) and of their system-level
    Pearson (paired bootstrap CI).
    """
    by_series: dict[str, dict[str, ReliabilityItem]] = defaultdict(dict)
    for r in rows:
        if r.get("score") is not None and r.get("human") is not None:
            by_series[_series_key(r)][r["item_id"]] = r
    out: list[ComparisonRow] = []
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
        tau, system = _ci(result.difference), _ci(result.system_difference)
        out.append({"series_a": a, "series_b": b, "n": result.n, "tau_b_a": result.a,
                    "tau_b_b": result.b, "delta_tau_b": tau[0], "delta_tau_b_low": tau[1],
                    "delta_tau_b_high": tau[2], "p_permutation": result.p_value,
                    "p_holm": None,  # once every pair's p-value is known (below)
                    "systems": result.system_difference.n, "delta_system_pearson": system[0],
                    "delta_system_pearson_low": system[1],
                    "delta_system_pearson_high": system[2]})
    for row, p in zip(out, holm([r["p_permutation"] for r in out]), strict=True):
        row["p_holm"] = p
    return out


__all__ = ["CALIBRATION_COLUMNS", "COMPARISON_COLUMNS", "INJECTION_COLUMNS",
           "INJECTION_ITEM_COLUMNS", "LENGTH_COLUMNS", "RETEST_COLUMNS", "RETEST_ITEM_COLUMNS",
           "CalibrationRow", "ComparisonRow", "InjectionItemRow", "InjectionRow",
           "LengthBiasRow", "ReliabilitySections", "RetestItemRow", "RetestRow", "as_table",
           "calibration_table", "candidate_length", "columns_of", "comparison_table",
           "injection_tables", "length_bias_table", "retest_tables"]
