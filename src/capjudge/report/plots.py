"""Report plots: per judge/mode a scatter (human label vs score) and a heatmap.

The heatmap's rows are normalised as in VisCE² Fig. 3. The score axis spans the method's
declared overall scale.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from capjudge.methods import get_method
from capjudge.records import HistoryEntry, ScoredItem
from capjudge.report.agreement import MIN_POINTS


def axis_range(method: str, scores: Sequence[float]) -> tuple[float, float]:
    """The method's overall scale; an open upper end is taken from the data."""
    scale = get_method(method).overall_scale
    high = scale.high if scale.high is not None else max([scale.low + 1, *scores])
    return float(scale.low), float(high)


def make_plots(rows: Sequence[ScoredItem], out_dir: Path, criterion: str
               ) -> dict[str, list[dict[str, str]]]:
    """PNG files per judge/mode with at least 3 scored, labelled items.

    Returns:
        ``{series: [{"path": ..., "caption": ...}, ...]}``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[str, list[tuple[str, float, float]]] = {}
    for r in rows:
        s, h = r["score"], r["human"]
        if s is not None and h is not None:
            series.setdefault(r["series"], []).append((r["method"], float(s), float(h)))
    files: dict[str, list[dict[str, str]]] = {}
    plot_dir = out_dir / "plots"
    plot_dir.mkdir(parents=True, exist_ok=True)
    for key, points in sorted(series.items()):
        if len(points) < MIN_POINTS:
            continue
        scores = np.array([p[1] for p in points])
        human = np.array([p[2] for p in points])
        low, high = axis_range(points[0][0], scores.tolist())
        name = key.replace("/", "__")
        fig, ax = plt.subplots(figsize=(4.5, 3.5), dpi=100)
        ax.scatter(human, scores, s=14, alpha=0.6)
        ax.set_xlabel(f"human {criterion} (mean of annotators)")
        ax.set_ylabel(f"{key} score")
        ax.set_ylim(low - 0.05 * (high - low), high + 0.05 * (high - low))
        ax.set_title(f"{key} (n={len(points)})", fontsize=9)
        fig.tight_layout()
        scatter = plot_dir / f"{name}-scatter.png"
        fig.savefig(scatter, metadata={"Software": None})
        plt.close(fig)
        levels = sorted(set(np.round(human).astype(int)))
        bins = np.linspace(low, high, 11)
        matrix = np.zeros((len(levels), 10))
        for i, level in enumerate(levels):
            sel = scores[np.round(human).astype(int) == level]
            counts, _ = np.histogram(sel, bins=bins)
            matrix[i] = counts / max(1, counts.sum())  # rows sum to 1 (VisCE² Fig. 3)
        fig, ax = plt.subplots(figsize=(5, 3), dpi=100)
        im = ax.imshow(matrix, aspect="auto", cmap="viridis", origin="lower",
                       extent=(low, high, levels[0] - 0.5, levels[-1] + 0.5))
        ax.set_xlabel(f"{key} score")
        ax.set_ylabel(f"human {criterion} (rounded)")
        fig.colorbar(im, ax=ax, fraction=0.05, label="share of the row")
        fig.tight_layout()
        heat = plot_dir / f"{name}-heatmap.png"
        fig.savefig(heat, metadata={"Software": None})
        plt.close(fig)
        files[key] = [
            {"path": str(heat), "caption": f"{key}: distribution of scores per human "
             f"{criterion} level (each row sums to 1)"},
            {"path": str(scatter), "caption": f"{key}: score against the human {criterion} "
             f"label, n = {len(points)}"}]
    return files


def history_plots(history: Mapping[str, Sequence[HistoryEntry]], out_dir: Path
                  ) -> dict[str, list[dict[str, str]]]:
    """Per series with at least two runs: τ-b with its CI per run, and mean score per system.

    A dashed line marks each run whose model snapshot differs from the run before.

    Returns:
        ``{series: [{"path": ..., "caption": ...}]}``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files: dict[str, list[dict[str, str]]] = {}
    plot_dir = out_dir / "plots"
    for key, points in history.items():
        if len(points) < 2:
            continue
        plot_dir.mkdir(parents=True, exist_ok=True)
        x = np.arange(len(points))
        tau = np.array([np.nan if p["kendall_tau_b"] is None else p["kendall_tau_b"]
                        for p in points])
        low = np.array([(p.get("ci95") or [np.nan])[0] or np.nan for p in points])
        high = np.array([(p.get("ci95") or [np.nan, np.nan])[1] or np.nan for p in points])
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(9, 3.2), dpi=100)
        ax.errorbar(x, tau, yerr=[np.nan_to_num(tau - low), np.nan_to_num(high - tau)],
                    fmt="o-", capsize=3)
        ax.set_ylabel("Kendall tau-b (95 % CI)")
        ax.set_title(f"{key}: agreement per run", fontsize=9)
        systems = sorted({s for p in points for s in p.get("system_means") or {}})
        for system in systems:
            ys = [np.nan if (p.get("system_means") or {}).get(system) is None
                  else p["system_means"][system] for p in points]
            ax2.plot(x, ys, "o-", label=system, markersize=3)
        ax2.set_ylabel("mean score")
        ax2.set_title(f"{key}: mean score per system", fontsize=9)
        if 0 < len(systems) <= 8:
            ax2.legend(fontsize=7)
        labels = [p["time"][5:16].replace("T", " ") for p in points]
        for axis in (ax, ax2):
            for i, p in enumerate(points):
                if p.get("snapshot_changed"):
                    axis.axvline(i - 0.5, color="#a00", linestyle="--", linewidth=1)
            axis.set_xticks(x, labels, rotation=30, fontsize=7)
        fig.tight_layout()
        path = plot_dir / f"{key.replace('/', '__')}-history.png"
        fig.savefig(path, metadata={"Software": None})
        plt.close(fig)
        files[key] = [{"path": str(path), "caption": f"{key}: Kendall tau-b per run with its "
                       "95 % CI, and the mean score per system; a dashed red line marks a "
                       "changed model snapshot"}]
    return files
