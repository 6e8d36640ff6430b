"""Static figures of the gate analysis (matplotlib, Agg: no screen, no browser)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gates.categories import CATEGORIES  # noqa: E402


def heatmap(stats: dict[int, dict[str, list[float]]], key: str, path: Path, title: str) -> Path:
    """Layer x KV-head grid of one statistic (mean gate, zero fraction)."""
    layers = sorted(stats)
    grid = [stats[layer][key] for layer in layers]
    fig, ax = plt.subplots(figsize=(1.2 + 0.6 * len(grid[0]), 1.0 + 0.45 * len(layers)))
    im = ax.imshow(grid, aspect="auto", cmap="viridis")
    ax.set_yticks(range(len(layers)), [f"L{layer + 1}" for layer in layers])
    ax.set_xticks(range(len(grid[0])), [f"h{j}" for j in range(len(grid[0]))])
    ax.set_xlabel("KV head")
    ax.set_title(title)
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def depth_profile(rows: list[dict[str, float]], path: Path) -> Path:
    """Mean gate and exact-zero fraction against depth."""
    layers = [r["layer"] for r in rows]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(layers, [r["mean_gate"] for r in rows], "o-", label="mean gate")
    ax.set_xlabel("layer")
    ax.set_ylabel("mean gate")
    ax2 = ax.twinx()
    ax2.plot(layers, [r["zero_frac"] for r in rows], "s--", color="tab:red", label="fraction exactly 0")
    ax2.set_ylabel("fraction exactly 0")
    ax2.set_ylim(0, 1)
    fig.legend(loc="upper left", fontsize=8)
    ax.set_title("Gate depth profile")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def categories_by_layer(by_cat: dict[int, dict[str, float]], path: Path) -> Path:
    """Mean gate per token category, one group of bars per layer."""
    layers = sorted(by_cat)
    width = 0.8 / len(CATEGORIES)
    fig, ax = plt.subplots(figsize=(1.5 + 0.9 * len(layers), 3.2))
    for i, cat in enumerate(CATEGORIES):
        xs = [k + i * width for k in range(len(layers))]
        ax.bar(xs, [by_cat[layer][cat] for layer in layers], width, label=cat)
    ax.set_xticks([k + width for k in range(len(layers))], [f"L{layer + 1}" for layer in layers])
    ax.set_ylabel("mean gate")
    ax.set_title("Gate strength by token category")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def static_coefficients(coeffs: list[dict[str, float]], path: Path) -> Path:
    layers = [c["layer"] for c in coeffs]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(layers, [c["lambda_tap"] for c in coeffs], "o-", label="lambda_tap (V_tap)")
    ax.plot(layers, [c["lambda_self"] for c in coeffs], "s-", label="lambda_self (V)")
    ax.set_xlabel("layer")
    ax.set_title("Static value-residual coefficients")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
