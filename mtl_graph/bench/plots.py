"""PNG plots of a report (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mtl_graph.bench.records import ZERO_SHOT


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def format_comparison(data: dict[str, Any], path: Path) -> Path:
    """Grouped bars: pass@k per suite for zero-shot and each format on the whole pool."""
    plt = _pyplot()
    conditions = [ZERO_SHOT] + list(data["formats"])
    suites = data["suites"] + ["average"]
    width = 0.8 / max(1, len(conditions))
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(suites)), 4))
    for i, cond in enumerate(conditions):
        ys = [data["table"].get(cond, {}).get(s, {}).get("pass_at_k", 0.0) for s in suites]
        ax.bar([x + i * width for x in range(len(suites))], ys, width, label=cond)
    ax.set_xticks([x + width * (len(conditions) - 1) / 2 for x in range(len(suites))], suites)
    ax.set_ylabel(f"pass@{data['k']}")
    ax.set_ylim(0, 1.05)
    ax.set_title("Zero-shot vs memory formats (hold-one-out)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def scaling_curve(curves: dict[str, list[list[float]]], baseline: float | None, xlabel: str, title: str,
                  k: int, path: Path) -> Path:
    """One line per format: average pass@k against a scaling variable, zero-shot as a dashed line."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for fmt, points in curves.items():
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="o", label=fmt)
    if baseline is not None:
        ax.axhline(baseline, linestyle="--", color="grey", label=ZERO_SHOT)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"average pass@{k}")
    ax.set_title(title)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
