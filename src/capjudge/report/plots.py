"""Report plots: per judge/mode a scatter (human label vs score) and a heatmap.

The heatmap's rows are normalised as in VisCE² Fig. 3. The score axis spans the method's
declared overall scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from capjudge.methods import get_method
from capjudge.report.agreement import MIN_POINTS


def axis_range(method: str, scores: Sequence[float]) -> tuple[float, float]:
    """The method's overall scale; an open upper end is taken from the data."""
    scale = get_method(method).overall_scale
    high = scale.high if scale.high is not None else max([scale.low + 1, *scores])
    return float(scale.low), float(high)


def make_plots(rows: Sequence[dict[str, Any]], out_dir: Path, criterion: str
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
        if r.get("score") is not None and r.get("human") is not None:
            series.setdefault(r["series"], []).append((r["method"], float(r["score"]),
                                                       float(r["human"])))
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
