"""Test-retest and inter-rater reliability: ICC (Shrout & Fleiss) and Krippendorff's alpha.

Each a function of an items x repeats (or units x coders) matrix, NaN marking a missing value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal, TypedDict

import numpy as np

from capjudge.stats.bootstrap import Estimate, bootstrap_rows
from capjudge.stats.correlation import ArrayLike


def complete_rows(matrix: ArrayLike) -> np.ndarray:
    """The rows of an items x repeats matrix with no missing (NaN) value."""
    m = np.asarray(matrix, float)
    if m.ndim != 2:
        raise ValueError("expected an items x repeats matrix")
    # numpy's stubs type a boolean-mask index as Any; it is an array of the complete rows.
    rows: np.ndarray = m[~np.isnan(m).any(axis=1)]
    return rows


def anova_mean_squares(matrix: ArrayLike) -> dict[str, float]:
    """Two-way ANOVA mean squares of a complete n items x k raters matrix.

    Following Shrout & Fleiss 1979, Table 1: ``bms`` between items, ``jms`` between raters
    (here: repeats), ``ems`` residual, ``wms`` within items (raters + residual).
    """
    x = np.asarray(matrix, float)
    n, k = x.shape
    grand = x.mean()
    ss_total = float(((x - grand) ** 2).sum())
    ss_rows = float(k * ((x.mean(axis=1) - grand) ** 2).sum())
    ss_cols = float(n * ((x.mean(axis=0) - grand) ** 2).sum())
    ss_err = ss_total - ss_rows - ss_cols
    return {"bms": ss_rows / (n - 1), "jms": ss_cols / (k - 1),
            "ems": ss_err / ((n - 1) * (k - 1)), "wms": (ss_total - ss_rows) / (n * (k - 1))}


ICCForm = Literal["1,1", "2,1", "3,1", "1,k", "2,k", "3,k"]


def icc(matrix: ArrayLike, form: ICCForm = "2,1") -> float:
    """Shrout & Fleiss intraclass correlation of an items x repeats matrix.

    The report uses ICC(2,1): two-way random effects, absolute agreement, single measurement.
    The repeats are a random sample of the judge's possible runs, and test-retest asks whether
    a second run gives the *same* score, so a systematic shift between runs (a provider
    swapping the model between repeats) must count against reliability; ICC(3,1) (consistency)
    would forgive it. ICC(2,k) is the reliability of the mean of the k repeats, which is the
    item score the report analyses. Items with a missing repeat are left out (complete cases;
    :func:`krippendorff_alpha` uses them).

    Args:
        matrix: n items x k repeats.
        form: ``"1,1"``, ``"2,1"``, ``"3,1"`` or the ``",k"`` (average-measure) variants.

    Returns:
        The coefficient; NaN with fewer than 2 complete items or 2 repeats, or when every
        score is the same (0/0).
    """
    x = complete_rows(matrix)
    if x.shape[0] < 2 or x.shape[1] < 2:
        return math.nan
    n, k = x.shape
    ms = anova_mean_squares(x)
    bms, jms, ems, wms = ms["bms"], ms["jms"], ms["ems"], ms["wms"]
    numerator, denominator = {
        "1,1": (bms - wms, bms + (k - 1) * wms),
        "2,1": (bms - ems, bms + (k - 1) * ems + k * (jms - ems) / n),
        "3,1": (bms - ems, bms + (k - 1) * ems),
        "1,k": (bms - wms, bms),
        "2,k": (bms - ems, bms + (jms - ems) / n),
        "3,k": (bms - ems, bms),
    }[form]
    return numerator / denominator if denominator > 0 else math.nan


def krippendorff_alpha(matrix: ArrayLike, metric: Literal["interval", "nominal"] = "interval"
                       ) -> float:
    """Krippendorff's alpha of a units x coders matrix (NaN = missing).

    ``alpha = 1 - D_o / D_e`` over the pairable values (units with at least two values):
    ``D_o = (1/n) sum_u sum_{i != j in u} delta(v_i, v_j) / (m_u - 1)`` and
    ``D_e = 1/(n (n - 1)) sum_{i != j over all n values} delta(v_i, v_j)``, with
    ``delta = (a - b)^2`` (interval) or ``[a != b]`` (nominal); Krippendorff (2011),
    "Computing Krippendorff's alpha-reliability".

    Returns:
        Alpha; NaN with fewer than two pairable values or no variation at all (D_e = 0).
    """
    m = np.asarray(matrix, float)
    if m.ndim != 2:
        raise ValueError("expected a units x coders matrix")
    present = ~np.isnan(m)
    m = m[present.sum(axis=1) >= 2]  # only pairable units count
    present = ~np.isnan(m)
    counts = present.sum(axis=1)
    values = m[present]
    n = len(values)
    if n < 2:
        return math.nan
    if metric == "interval":
        # Sum of (v_i - v_j)^2 over ordered pairs i != j of a set: 2 (m sum v^2 - (sum v)^2).
        filled = np.where(present, m, 0.0)
        within = 2 * (counts * (filled ** 2).sum(axis=1) - filled.sum(axis=1) ** 2)
        total = 2 * (n * (values ** 2).sum() - values.sum() ** 2)
    else:
        # Ordered pairs with different values: m^2 - sum over values of count^2.
        within = np.array([len(u) ** 2 - (np.unique(u, return_counts=True)[1] ** 2).sum()
                           for u in (row[~np.isnan(row)] for row in m)], float)
        total = n ** 2 - (np.unique(values, return_counts=True)[1] ** 2).sum()
    observed = float((within / (counts - 1)).sum()) / n
    expected = float(total) / (n * (n - 1))
    return 1.0 - observed / expected if expected > 0 else math.nan


class ItemSpread(TypedDict):
    """One item's spread over its test-retest repeats (:func:`item_spread`)."""

    repeats: int
    """Repeats scored."""
    mean: float | None
    sd: float | None
    range: float | None


def item_spread(matrix: ArrayLike) -> list[ItemSpread]:
    """Per item (row) the repeats scored, their mean, sample SD and range (NaN = missing).

    SD and range are None for an item with fewer than two scored repeats.
    """
    out: list[ItemSpread] = []
    for row in np.asarray(matrix, float):
        v = row[~np.isnan(row)]
        out.append({"repeats": len(v), "mean": float(v.mean()) if len(v) else None,
                    "sd": float(v.std(ddof=1)) if len(v) >= 2 else None,
                    "range": float(v.max() - v.min()) if len(v) >= 2 else None})
    return out


def retest(matrix: ArrayLike, *, n_boot: int = 1000, level: float = 0.95, seed: int = 0
           ) -> dict[str, Estimate]:
    """Test-retest summary of an items x repeats matrix, each with a bootstrap CI over items.

    Returns:
        ``icc2_1``, ``icc2_k``, ``alpha`` (interval) and ``mean_sd`` (the mean over items of
        the within-item SD, in score points).
    """
    m = np.asarray(matrix, float)
    complete = complete_rows(m)

    def mean_sd(rows: np.ndarray) -> float:
        rows = rows[(~np.isnan(rows)).sum(axis=1) >= 2]
        return float(np.nanstd(rows, axis=1, ddof=1).mean()) if len(rows) else math.nan

    stats_: dict[str, tuple[np.ndarray, Callable[[np.ndarray], float]]] = {
        "icc2_1": (complete, lambda r: icc(r, "2,1")),
        "icc2_k": (complete, lambda r: icc(r, "2,k")),
        "alpha": (m, krippendorff_alpha),
        "mean_sd": (m, mean_sd),
    }
    out = {}
    for offset, (name, (data, fn)) in enumerate(stats_.items()):
        low, high = bootstrap_rows(data, fn, n_boot=n_boot, level=level, seed=seed + offset)
        out[name] = Estimate(fn(data) if len(data) else math.nan, low, high, len(data))
    return out
