"""The SATFormer paper's mechanistic claims about its gate (arXiv 2605.03953), judged over seeds.

Each trained run (one seed) gives one value per claim (`gate_measures`; the interventions'
deltas come from `gates.interventions`, in `gates.claims_cli`); `judge` tests every
claim's values over the seeds against its null with a one-sample t test, the claims together as
one Holm family (`sweeps.report.verdicts.holm`), and gives the t interval of the mean at the
level the claim was judged at (so an interval that excludes the null is a decided claim):

- sparse: the fraction of gates exactly zero (every consuming layer, KV head and token); holds
  above 0.5;
- rises with depth: the OLS slope of each consuming layer's mean gate against its layer number;
  holds above 0 (the gate scales the same V1 in every layer, so its mean is the use of V1);
- head-specific: the share of a layer's gate variance (over tokens and heads) that the KV head
  explains (between-head variance / total), mean over layers; holds above `HEAD_SHARE`;
- semantic > functional, semantic > structural: log(mean gate on semantic tokens / on the other
  kind), over layers and heads; holds above 0;
- zeroing costs loss: val_loss with the gates zeroed (the baseline from the same weights) minus
  as trained; mean-replacing costs loss: with each layer-head's gates replaced by their mean
  (the amount of V1 kept, the selectivity dropped) minus as trained; hold above 0.

Verdicts: `holds` (the interval lies on the claim's side of the null), `contradicted` (on the
other side), `undecided` (it covers the null). Token categories: `gates.categories`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from gates.categories import CATEGORIES
from sweeps.report.verdicts import holm

HEAD_SHARE = 0.1  # "head-specific": the KV head explains at least a tenth of a layer's gate variance


@dataclasses.dataclass(frozen=True)
class Claim:
    key: str  # the per-run value's name
    text: str  # the paper's claim, as printed
    null: float
    unit: str = ""


CLAIMS = (
    Claim("zero_frac", "the gate is sparse (fraction exactly 0 above 0.5)", 0.5),
    Claim("depth_slope", "use of V1 rises with depth (slope of mean gate per layer above 0)", 0.0, "/layer"),
    Claim(
        "head_share", f"it is head-specific (head explains above {HEAD_SHARE:g} of the variance)", HEAD_SHARE
    ),
    Claim("log_sem_vs_func", "semantic tokens gate more than functional ones (log ratio above 0)", 0.0),
    Claim("log_sem_vs_struct", "semantic tokens gate more than structural ones (log ratio above 0)", 0.0),
    Claim("delta_zero", "zeroing the gate raises the loss (delta above 0)", 0.0, " nats"),
    Claim("delta_mean", "mean-replacing the gate raises the loss (delta above 0)", 0.0, " nats"),
)


def gate_measures(gates: Mapping[int, torch.Tensor], categories: torch.Tensor | None) -> dict[str, float]:
    """The gate-only claims' values of one run: gates {layer (0-based): [N, heads]} over the same
    N held-out tokens, categories [N] (indices into CATEGORIES) or None."""
    layers = sorted(gates)
    g = torch.stack([gates[layer].double() for layer in layers])  # [L, N, H]
    layer_means = g.mean(dim=(1, 2))
    depth = torch.tensor([layer + 1.0 for layer in layers], dtype=torch.float64)
    centred = depth - depth.mean()
    slope = (
        float((centred * (layer_means - layer_means.mean())).sum() / (centred**2).sum())
        if len(layers) > 1
        else math.nan
    )
    head_means = g.mean(dim=1)  # [L, H]
    between = ((head_means - layer_means[:, None]) ** 2).mean(dim=1)  # [L]
    total = g.var(dim=(1, 2), unbiased=False)
    share = torch.where(total > 0, between / total, torch.zeros_like(total))
    out = {
        "zero_frac": float((g == 0).double().mean()),
        "depth_slope": slope,
        "head_share": float(share.mean()),
        "mean_gate": float(g.mean()),
    }
    if categories is not None:
        per_token = g.mean(dim=(0, 2))  # [N]: over layers and heads
        means = {
            name: float(per_token[categories == i].mean()) if (categories == i).any() else math.nan
            for i, name in enumerate(CATEGORIES)
        }
        out.update({f"gate_{name}": v for name, v in means.items()})
        out["log_sem_vs_func"] = _log_ratio(means["semantic"], means["functional"])
        out["log_sem_vs_struct"] = _log_ratio(means["semantic"], means["structural"])
    return out


def _log_ratio(a: float, b: float) -> float:
    return math.log(a / b) if a > 0 and b > 0 else math.nan


def layer_profile(gates: Mapping[int, torch.Tensor]) -> list[dict[str, float]]:
    """Per consuming layer (1-based): mean gate, fraction exactly zero, and the head share."""
    rows = []
    for layer in sorted(gates):
        g = gates[layer].double()
        total = float(g.var(unbiased=False))
        between = float(((g.mean(0) - g.mean()) ** 2).mean())
        rows.append(
            {
                "layer": layer + 1,
                "mean_gate": float(g.mean()),
                "zero_frac": float((g == 0).double().mean()),
                "head_share": between / total if total > 0 else 0.0,
            }
        )
    return rows


def judge(per_run: Sequence[Mapping[str, float]], level: float = 0.95, family: str = "holm") -> list[dict]:
    """One row per claim with values in every run: mean, its t interval at the level the claim was
    judged at (Holm over the claims), p, n and the verdict word."""
    from scipy.stats import t as student_t

    rows = []
    for claim in CLAIMS:
        values = [float(r[claim.key]) for r in per_run if claim.key in r and math.isfinite(r[claim.key])]
        n = len(values)
        mean = float(np.mean(values)) if values else math.nan
        sd = float(np.std(values, ddof=1)) if n > 1 else math.nan
        if n > 1 and sd > 0:
            p = float(2 * student_t.sf(abs(mean - claim.null) / (sd / math.sqrt(n)), n - 1))
        elif n > 1:  # identical values: decided unless they sit on the null
            p = 1.0 if mean == claim.null else 0.0
        else:
            p = math.nan
        rows.append({"claim": claim.key, "text": claim.text, "null": claim.null, "unit": claim.unit,
                     "n": n, "mean": mean, "sd": sd, "p": p, "values": values})  # fmt: skip
    testable = [r for r in rows if math.isfinite(r["p"])]
    if testable:
        levels, rejected = holm([r["p"] for r in testable], 1 - level, family)
        for row, alpha, rej in zip(testable, levels, rejected, strict=True):
            half = float(student_t.ppf(1 - alpha / 2, row["n"] - 1)) * row["sd"] / math.sqrt(row["n"])
            row.update(level=1 - float(alpha), lo=row["mean"] - half, hi=row["mean"] + half)
            row["verdict"] = (
                ("holds" if row["mean"] > row["null"] else "contradicted") if rej else "undecided"
            )
    for row in rows:
        row.setdefault("verdict", "undecided")
        row.setdefault("level", math.nan)
        row.setdefault("lo", math.nan)
        row.setdefault("hi", math.nan)
    return rows


def format_rows(rows: Sequence[Mapping]) -> list[str]:
    """One line per claim: verdict, mean, interval (level), seeds."""
    out = []
    for r in rows:
        interval = (
            f"[{r['lo']:+.4g}, {r['hi']:+.4g}] ({r['level']:.1%})"
            if math.isfinite(r["lo"])
            else "(no interval)"
        )
        out.append(
            f"{r['verdict']:>12s}  {r['text']}: {r['mean']:+.4g}{r['unit']} {interval}, {r['n']} seed(s)"
        )
    return out
