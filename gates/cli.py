"""`python -m gates <mlflow run id | checkpoint.ckpt>`: what did the gates learn?

Loads a trained trial (its final checkpoint carries the resolved trial config) and its held-out
data, then writes, under `--out` (default `results/analysis/<run or file name>/`) and, for a
run id (or `--log-run ID`), as artifacts under `analysis/` of that MLflow run:

- gate statistics per layer and KV head (mean, fraction exactly zero, quantiles), a heatmap
  (layer x head) and a depth profile;
- gate strength by token category (structural / functional / semantic, see
  `gates.categories`), for text data and for token shards with their tokenizer.json;
- interventions: validation loss and perplexity with the gates as trained, zeroed, replaced by
  their per-layer-per-head mean, and by a constant (`--constant`, default the global mean gate);
- the design's mixing coefficients per layer where it has some (ResFormer's lambdas).

What applies comes from the design itself (`has_gates`, `coefficients()` of arch's designs), so
this module names no design's fields.

At scale: `--tokens N` analyses the first N held-out tokens (whole sequences) in micro-batches
of `--micro-batch` sequences (default the trial's batch, at most 8), on `--device` (default cuda
when there is one) in `--precision` (auto: bf16-mixed on CUDA, fp32 on CPU); the head's logits
are made a chunk of positions at a time (trainers.loss), never for a whole micro-batch at once.

A summary is printed. Exit status 2 when the run or checkpoint cannot be found or read.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import sys
from pathlib import Path

import torch

from gates import plots
from gates.categories import categorize, gate_by_category, piece_decoder
from gates.gate_stats import collect_gates, gate_statistics, summary_rows
from gates.interventions import mean_loss, run_interventions
from trainers.config import TrialConfig
from trainers.data.build import build_datamodule
from trainers.data.tokenizer import FastTokenizer
from trainers.mlflow_names import DEFAULT_TRACKING_URI
from trainers.trained import load_trial, trial_tokenizer


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m gates", description=__doc__.split("\n\n")[0])
    p.add_argument("target", help="an MLflow run id or a checkpoint file")
    p.add_argument("--tracking-uri", default=DEFAULT_TRACKING_URI)
    p.add_argument("--batches", type=int, default=None, help="held-out batches (default: the trial's)")
    p.add_argument(
        "--tokens", type=int, default=None, help="held-out tokens to analyse (default: all of them)"
    )
    p.add_argument(
        "--micro-batch",
        type=int,
        default=None,
        help="sequences per forward (default: the trial's batch, at most 8)",
    )
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when there is one)")
    p.add_argument(
        "--precision", choices=("auto", "32-true", "bf16-mixed", "bf16-true"), default="auto",
        help="auto: bf16-mixed on CUDA, 32-true on CPU",
    )  # fmt: skip
    p.add_argument("--constant", type=float, default=None, help="gate value of the constant intervention")
    p.add_argument("--out", default=None, help="folder for the outputs")
    p.add_argument("--log-run", default=None, help="log the outputs to this MLflow run (default: the target)")
    p.add_argument("--data-root", default=None)
    return p.parse_args(argv)


def held_out_batches(
    cfg: TrialConfig, data_root, n: int | None, tokens: int | None = None, rows: int | None = None
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The trial's validation batches (the first `n`), cut into micro-batches of `rows` sequences
    (default: the trial's batch, at most 8), up to `tokens` input tokens (default: all)."""
    data = build_datamodule(cfg, data_root)
    data.setup("validate")
    rows = rows or min(cfg.train.batch_size, 8)
    out, seen = [], 0
    for i, (inputs, targets) in enumerate(data.val_dataloader()):
        if n and i >= n:
            break
        for x, y in zip(inputs.split(rows), targets.split(rows), strict=True):
            if tokens is not None and seen >= tokens:
                return out
            if tokens is not None and seen + x.numel() > tokens:  # the whole sequences that still fit
                keep = (tokens - seen) // x.shape[1]
                if keep == 0:
                    return out
                x, y = x[:keep], y[:keep]
            out.append((x, y))
            seen += x.numel()
    return out


@contextlib.contextmanager
def on_device(model, device: str, precision: str):
    """The model on `device` in `precision` (trainers' names): bf16-true casts it, bf16-mixed
    runs it under autocast."""
    if precision == "auto":
        precision = "bf16-mixed" if torch.device(device).type == "cuda" else "32-true"
    model.to(device, dtype=torch.bfloat16 if precision == "bf16-true" else None)
    mixed = precision == "bf16-mixed"
    with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=mixed):
        yield precision


def token_decoder(cfg: TrialConfig, data_root):
    """id -> text of one token, for the token categories: the trial's own tokenizer
    (trainers.trained.trial_tokenizer: text data, and token shards whose folder holds the
    tokenizer: `tokenizer.json` or a byte tokenizer in meta.json); None where there is none."""
    try:
        tok = trial_tokenizer(cfg, data_root)
    except (ValueError, FileNotFoundError):  # MQAR, or shards without their tokenizer
        return None
    if isinstance(tok, FastTokenizer):
        return piece_decoder(tok.tok)
    return lambda t: bytes([t]).decode("latin-1")


def write_csv(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def analyze(cfg: TrialConfig, model, batches, decode, out: Path, constant: float | None = None) -> dict:
    """Runs every analysis that applies to the design; writes files to `out`; returns the summary."""
    out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"design": cfg.model.residual.kind, "val_loss": mean_loss(model, batches)}
    coeffs = model.residual.coefficients()
    if coeffs:
        summary["static_coefficients"] = coeffs
        write_csv(out / "static_coefficients.csv", coeffs)
        plots.static_coefficients(coeffs, out / "static_coefficients.png")
    if not model.residual.has_gates:
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
        return summary
    gates, tokens = collect_gates(model, [inputs for inputs, _ in batches])
    stats = gate_statistics(gates)
    rows = summary_rows(stats)
    summary["gate_stats"] = {f"L{layer + 1}": s for layer, s in stats.items()}
    summary["depth_profile"] = rows
    write_csv(out / "gate_depth_profile.csv", rows)
    plots.heatmap(stats, "mean", out / "gate_mean_heatmap.png", "Mean gate (layer x KV head)")
    plots.heatmap(stats, "zero_frac", out / "gate_zero_heatmap.png", "Fraction of gates exactly 0")
    plots.depth_profile(rows, out / "gate_depth_profile.png")
    if decode is not None:
        seq = [inputs for inputs, _ in batches]
        categories = torch.cat([categorize(row.tolist(), decode) for b in seq for row in b])
        by_cat = gate_by_category(gates, categories)
        summary["by_category"] = {f"L{layer + 1}": v for layer, v in by_cat.items()}
        summary["category_counts"] = torch.bincount(categories, minlength=3).tolist()
        plots.categories_by_layer(by_cat, out / "gate_by_category.png")
    means = {layer: s["mean"] for layer, s in stats.items()}
    interventions = run_interventions(model, batches, means, constant)
    summary["interventions"] = interventions
    write_csv(out / "interventions.csv", interventions)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def print_summary(summary: dict) -> None:
    print(f"design {summary['design']}: val_loss {summary['val_loss']:.4f}")
    for c in summary.get("static_coefficients", []):
        print(f"  L{c['layer']}: lambda_tap {c['lambda_tap']:.3f}  lambda_self {c['lambda_self']:.3f}")
    for r in summary.get("depth_profile", []):
        cats = summary.get("by_category", {}).get(f"L{r['layer']}", {})
        cat_text = "  ".join(f"{k} {v:.3f}" for k, v in cats.items())
        print(f"  L{r['layer']}: mean gate {r['mean_gate']:.3f}  zero {r['zero_frac']:.1%}  {cat_text}")
    for row in summary.get("interventions", []):
        print(f"  {row['intervention']:>22s}: val_loss {row['val_loss']:.4f} ({row['delta_loss']:+.4f})")


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        cfg, model, run_id = load_trial(args.target, args.tracking_uri)
    except Exception as err:  # no such file / run / artifact: say which, exit 2
        print(f"gates: cannot load {args.target!r}: {err}", file=sys.stderr)
        return 2
    name = run_id or Path(args.target).stem
    out = Path(args.out) if args.out else Path("results") / "analysis" / name
    batches = held_out_batches(cfg, args.data_root, args.batches, args.tokens, args.micro_batch)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    with on_device(model, device, args.precision) as precision:
        summary = analyze(
            cfg, model, batches, token_decoder(cfg, args.data_root), out.resolve(), args.constant
        )
    summary.update(device=device, precision=precision, tokens=sum(x.numel() for x, _ in batches))
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"{summary['tokens']} held-out tokens on {device}, {precision}")
    print_summary(summary)
    log_run = args.log_run or run_id
    if log_run:  # the client API: adds to the finished run without reopening it
        from mlflow.tracking import MlflowClient

        client = MlflowClient(args.tracking_uri)
        client.log_artifacts(log_run, str(out), artifact_path="analysis")
        for row in summary.get("interventions", []):
            key = row["intervention"].split("=")[0]
            client.log_metric(log_run, f"analysis/val_loss_{key}", row["val_loss"])
    print(f"outputs in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
