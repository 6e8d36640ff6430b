"""`python -m gates claims <study.yaml | study name | run id | checkpoint> ...`: the paper's claims
about SATFormer's gate, each a verdict with its interval over the seeds (`gates.claims`).

A study (its YAML file, or its name as the MLflow experiment's `sweep.study` tag) stands for its
finished trial runs; runs without gates (a baseline in the same study) are left out and named.
Every run is analysed on the same held-out batches of its trial's data (`--batches`, default 16).
Writes `claims.json` (per-run values, per-layer profile, the verdicts) and `claims.md` (the table)
under `--out` (default `results/analysis/claims-<first target>/`); each run's values are kept in
`runs/<run>.json` there and read back on the next call, so a study that gains seeds analyses only
its new runs. Exit status 2 when a target
cannot be found or read, or fewer than two runs with gates remain.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import torch

from gates.categories import categorize
from gates.claims import gate_measures, judge, layer_profile
from gates.cli import held_out_batches, token_decoder
from gates.gate_stats import collect_gates
from gates.interventions import run_interventions
from sweeps.report.stats import interval
from sweeps.study.load import load_study
from trainers.mlflow_names import DEFAULT_TRACKING_URI
from trainers.trained import load_trial


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m gates claims", description=__doc__.split("\n\n")[0])
    p.add_argument("targets", nargs="+", help="a study YAML file or name, MLflow run ids, checkpoint files")
    p.add_argument("--tracking-uri", default=None, help=f"default: the study's, else {DEFAULT_TRACKING_URI}")
    p.add_argument("--batches", type=int, default=16, help="held-out batches per run (default 16)")
    p.add_argument("--level", type=float, default=0.95, help="the claims' family level (Holm; default 0.95)")
    p.add_argument("--out", default=None, help="folder for claims.json and claims.md")
    p.add_argument("--data-root", default=None)
    return p.parse_args(argv)


def study_runs(name: str, tracking_uri: str) -> list[str]:
    """Run ids of a study's finished trials (MLflow tag `sweep.study`), oldest first."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    experiments = client.search_experiments()
    runs = client.search_runs(
        [e.experiment_id for e in experiments],
        filter_string=f"tags.`sweep.study` = '{name}' and tags.`sweep.status` = 'ok'",
        order_by=["attributes.start_time ASC"],
    )
    return [r.info.run_id for r in runs]


def resolve_targets(targets: list[str], tracking_uri: str | None) -> tuple[list[str], str]:
    """(run ids and checkpoint files, the tracking URI) of the command line's targets."""
    out, uri = [], tracking_uri
    for target in targets:
        if target.endswith((".yaml", ".yml")):
            study = load_study(target)
            uri = uri or study.output.mlflow_uri
            found = study_runs(study.name, uri)
            if not found:
                raise ValueError(f"{target}: study {study.name!r} has no finished runs in {uri}")
            out += found
        elif Path(target).is_file():
            out.append(target)
        else:
            found = study_runs(target, uri or DEFAULT_TRACKING_URI)
            out += found or [target]  # not a study's name: a run id
    return out, uri or DEFAULT_TRACKING_URI


def measure_run(target: str, tracking_uri: str, batches_n: int, data_root) -> dict | None:
    """The claims' values of one run (None: its design has no gates)."""
    cfg, model, run_id = load_trial(target, tracking_uri)
    if not model.residual.has_gates:
        return None
    if cfg.train.num_threads:  # as it trained: two threads on a busy machine wait on each other
        torch.set_num_threads(cfg.train.num_threads)
    batches = held_out_batches(cfg, data_root, batches_n)
    gates, _ = collect_gates(model, [x for x, _ in batches])
    decode = token_decoder(cfg, data_root)
    categories = None
    if decode is not None:
        categories = torch.cat([categorize(row.tolist(), decode) for x, _ in batches for row in x])
    values = gate_measures(gates, categories)
    means = {layer: g.mean(0).tolist() for layer, g in gates.items()}
    interventions = {r["intervention"].split("=")[0]: r for r in run_interventions(model, batches, means)}
    values.update(
        val_loss=interventions["trained"]["val_loss"],
        delta_zero=interventions["zero"]["delta_loss"],
        delta_mean=interventions["layer_head_mean"]["delta_loss"],
        delta_constant=interventions["constant"]["delta_loss"],
    )
    return {
        "run": run_id or target,
        "seed": cfg.seed,
        "tokens": sum(x.numel() for x, _ in batches),
        "values": values,
        "layers": layer_profile(gates),
        "category_counts": torch.bincount(categories, minlength=3).tolist()
        if categories is not None
        else None,
    }


def cached_measure(folder: Path, target: str, tracking_uri: str, batches_n: int, data_root) -> dict | None:
    """`measure_run`, kept in `folder/<run>.json` and read back on the next call with the same
    `--batches` (a study that gains seeds analyses only its new runs)."""
    path = folder / f"{Path(target).stem}.json"
    if path.is_file():
        kept = json.loads(path.read_text())
        if kept.get("batches") == batches_n:
            return kept["measured"]
    measured = measure_run(target, tracking_uri, batches_n, data_root)
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"batches": batches_n, "measured": measured}, indent=2))
    return measured


def profile_table(runs: list[dict]) -> list[str]:
    """Per layer: mean gate, fraction zero and head share, mean and 95% t interval over the runs."""
    lines = [
        "Per consuming layer, the mean over seeds [95% t interval]:",
        "",
        "| layer | mean gate | exactly 0 | head share |",
        "|---|---|---|---|",
    ]
    for i, row in enumerate(runs[0]["layers"]):
        cells = []
        for key in ("mean_gate", "zero_frac", "head_share"):
            iv = interval([r["layers"][i][key] for r in runs])
            cells.append(f"{iv['mean']:.3f} [{iv['lo']:.3f}, {iv['hi']:.3f}]")
        lines.append(f"| {row['layer']} | " + " | ".join(cells) + " |")
    return lines


def claims_table(rows: list[dict]) -> list[str]:
    lines = ["| claim | verdict | mean over seeds | interval (level) | per seed |", "|---|---|---|---|---|"]
    for r in rows:
        interval = f"[{r['lo']:+.4g}, {r['hi']:+.4g}] ({r['level']:.1%})" if math.isfinite(r["lo"]) else "-"
        seeds = ", ".join(f"{v:+.4g}" for v in r["values"])
        lines.append(
            f"| {r['text']} | **{r['verdict']}** | {r['mean']:+.4g}{r['unit']} | {interval} | {seeds} |"
        )
    return lines


def main(argv=None) -> int:
    args = parse_args(argv)
    out = (
        Path(args.out) if args.out else Path("results") / "analysis" / f"claims-{Path(args.targets[0]).stem}"
    )
    try:
        targets, uri = resolve_targets(args.targets, args.tracking_uri)
        runs, skipped = [], []
        for target in targets:
            measured = cached_measure(out / "runs", target, uri, args.batches, args.data_root)
            (runs.append(measured) if measured else skipped.append(target))
    except Exception as err:  # no such study / run / checkpoint: say which, exit 2
        print(f"gates claims: cannot read {args.targets}: {err}", file=sys.stderr)
        return 2
    if skipped:
        print(f"left out (no gates): {', '.join(skipped)}")
    if len(runs) < 2:
        print(
            f"gates claims: {len(runs)} run(s) with gates; intervals over seeds need at least 2",
            file=sys.stderr,
        )
        return 2
    rows = judge([r["values"] for r in runs], level=args.level)
    val = [r["values"]["val_loss"] for r in runs]
    seeds = ", ".join(str(r["seed"]) for r in runs)
    print(f"{len(runs)} runs (seeds {seeds}), {runs[0]['tokens']} held-out tokens each, val_loss "
          f"{np.mean(val):.4f}; claims judged as one Holm family at {args.level:.0%}:")  # fmt: skip
    for line in claims_table(rows)[2:]:
        print("  " + line)
    out.mkdir(parents=True, exist_ok=True)
    (out / "claims.json").write_text(json.dumps({"runs": runs, "claims": rows}, indent=2))
    md = claims_table(rows) + [""] + profile_table(runs)
    (out / "claims.md").write_text("\n".join(md) + "\n")
    print("\n".join(profile_table(runs)))
    print(f"outputs in {out}")
    return 0
