"""Agreement of judges with humans: pure functions over (score, human) pairs.

The statistics themselves (Kendall τ-b/τ-c, Pearson, Spearman, bootstrap CIs, system-level
correlation) live in :mod:`capjudge.stats` and are tested against scipy there; this
module arranges a report's series into them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from capjudge.records import AgreementEntry, ScoredItem
from capjudge.stats import (
    STATS,
    bootstrap_ci,
    kendall_tau_b,
    system_level,
    system_level_ci,
    undefined_reason,
)

MIN_POINTS = 3


def series_agreement(judge: str, method: str, mode: str, rows: Sequence[ScoredItem],
                     n_boot: int, protocol: str) -> AgreementEntry:
    """One judge/mode's agreement with the human label over its items.

    Args:
        judge: the series' judge.
        method: the series' method.
        mode: the series' mode.
        rows: its items (``score``, ``status``, ``human``, ``system``); items without a human
            label are not counted.
        n_boot: bootstrap resamples for the 95 % CIs (0: none); the system-level Pearson's
            CI resamples items within systems (:func:`capjudge.stats.system_level_ci`).
        protocol: the protocol's name, recorded with the numbers.
    """
    labelled = [r for r in rows if r.get("human") is not None]
    scored = [r for r in labelled if r.get("score") is not None]
    not_scored: dict[str, int] = {}
    for r in labelled:
        if r.get("score") is None:
            key = r.get("cause") or r.get("status") or "failed"
            not_scored[key] = not_scored.get(key, 0) + 1
    entry: AgreementEntry = {"judge": judge, "method": method, "mode": mode,
                             "protocol": protocol, "items": len(labelled), "n": len(scored),
                             "not_scored": dict(sorted(not_scored.items())), "ci95": {},
                             # Scored, but from the printed number alone (no distribution).
                             "text_only": sum(r.get("status") == "text_only" for r in scored)}
    x = [float(s) for r in scored if (s := r["score"]) is not None]
    y = [float(h) for r in scored if (h := r["human"]) is not None]
    note = undefined_reason(x, y, len(labelled), MIN_POINTS)
    if note is not None:
        # No statistic rather than a NaN: the report prints the reason where a figure would be.
        entry["note"] = note
        return entry
    value: dict[str, float] = {}
    for name, stat in STATS.items():
        value[name] = stat(x, y)
        if n_boot:
            entry["ci95"][name] = list(bootstrap_ci(x, y, stat, n_boot=n_boot))
    # In STATS' order (the agreement table's column order).
    entry["kendall_tau_b"] = value["kendall_tau_b"]
    entry["kendall_tau_c"] = value["kendall_tau_c"]
    entry["pearson"] = value["pearson"]
    entry["spearman"] = value["spearman"]
    systems = [r.get("system") or "(none)" for r in scored]
    entry["system_pearson"], entry["systems"] = system_level(x, y, systems)
    if n_boot:
        # Items resampled within each system: the handful of systems stays fixed.
        est = system_level_ci(x, y, systems, n_boot=n_boot)
        entry["ci95"]["system_pearson"] = [est.low, est.high]
    return entry


def agreement(rows: Sequence[ScoredItem], n_boot: int, protocol: str
              ) -> list[AgreementEntry]:
    """Per judge and mode (rows from the ``scored_items`` view), the statistics."""
    groups: dict[tuple[str, str, str], list[ScoredItem]] = {}
    for r in rows:
        groups.setdefault((r["judge"], r["method"], r["mode"]), []).append(r)
    return [series_agreement(j, m, mode, g, n_boot, protocol)
            for (j, m, mode), g in sorted(groups.items())]


def criterion_matrices(rows: Sequence[tuple[str, str, str, str, float, str, float]]
                       ) -> dict[str, dict[str, dict[str, float]]]:
    """Kendall τ-b of each judge criterion against each human criterion.

    In HarmonicEval's Table 3 layout, for judges with more than one criterion.
    """
    data: dict[str, dict[str, dict[str, list[tuple[float, float]]]]] = {}
    for judge, mode, crit, _, score, human_crit, human in rows:
        data.setdefault(f"{judge}/{mode}", {}).setdefault(crit, {}).setdefault(
            human_crit, []).append((float(score), float(human)))
    out: dict[str, dict[str, dict[str, float]]] = {}
    for key, by_crit in data.items():
        if len(by_crit) < 2:
            continue
        out[key] = {c: {h: kendall_tau_b([a for a, _ in v], [b for _, b in v])
                        for h, v in sorted(hs.items()) if len(v) >= MIN_POINTS}
                    for c, hs in sorted(by_crit.items())}
    return out


def clean(value: Any) -> Any:
    """NaN -> None (JSON and DVC metrics have no NaN)."""
    return None if isinstance(value, float) and math.isnan(value) else value
