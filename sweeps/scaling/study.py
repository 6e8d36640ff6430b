"""A study's scaling ladder (its `scaling:` section, expanded by sweeps.spec into the grid parameter
`rung`): the dry run's table of rungs, the Ladder of its completed trials, and the analysis at the
end of a launch (files under results/<name>/scaling/, artifacts and tags of the parent MLflow run,
the plain-language summary).

The Ladder's rows: design = the point without its rung (the `model.residual` label when that is
the one other parameter), N = the rung's N (non-embedding parameters of the rung's model on the
base trial's design: the same N for every design of a rung, so that the bootstrap draws the same
seeds for all designs of a rung and their differences stay paired; a design's own parameters,
a gate's under 0.1%, are left out), D = the tokens the rung trained (its budget), loss = val_loss,
seed = the trial's seed.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

# The dry run's CPU estimate without a probe, fitted to the CPU ladder's own 54 trials on this
# project's quiet 2-core machine at 2 threads (`python -m bench.ladder_speeds
# studies/scaling_ladder.yaml --from-runs`; docs/scaling/cpu_ladder.md): a trial's wall seconds =
# TRIAL_START_S + (C0 + C1 N) x its tokens (training, plus evaluations at EVAL_TOKEN_COST), N
# non-embedding parameters. C0 is what a token costs whatever the model (the loop's data, logging
# and Python per step): at 0.1M parameters it is most of the step, so one FLOP rate (6 N FLOPs a
# token) would put the smallest rungs several times too fast.
CPU_SECONDS_PER_TOKEN = (1.6e-5, 6.4e-11)  # (C0 s, C1 s per parameter)
EVAL_TOKEN_COST = 1 / 3  # an evaluation token (forward only) in training tokens
TRIAL_START_S = 1.0  # a trial's fixed cost in a reused Ray worker (the fit: 0.75 s)
PROBE_START_S = 3.0  # the cost probe's fixed cost per size (its processes, building the models)
GPU_FLOPS_PER_S = 3e14  # an assumption, not a measurement: ~35% of an H100's dense bf16 peak
LOSS = "val_loss"
MIN_RUNGS = 2  # fewer completed rungs than this: nothing to fit, said and skipped


STUDY_FILE = "study.yaml"  # results/<name>/study.yaml: the resolved study, for `sweeps.scaling fit <folder>`


def save(study) -> Path:
    """The resolved study (its ladder as `scaling:`, not as the expanded `rung` parameter, and
    absolute output paths) in results/<name>/study.yaml, so that the folder alone can be fitted."""
    import yaml

    tree = study.to_dict()  # the ladder as its scaling: section
    tree["trial"].get("train", {}).pop("workers", None)  # copied there from resources.workers at load
    tree["output"] = {
        **tree["output"],
        "dir": str(study.results_dir().parent),
        "mlflow_uri": study.mlflow_uri(),
    }
    path = study.results_dir() / STUDY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return path


def find_study(name: str):
    """A study from a study file, a results folder (its study.yaml, written by every ladder
    launch) or a name (results/<name>/, else studies/<name>.yaml or studies/**/<name>.yaml);
    None when `name` is none of these."""
    from sweeps.spec import load_study

    path = Path(name)
    if path.is_dir() and (path / STUDY_FILE).is_file():
        return load_study(path / STUDY_FILE)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return load_study(path)
    if path.suffix or path.is_dir():
        return None
    if (Path("results") / name / STUDY_FILE).is_file():
        return load_study(Path("results") / name / STUDY_FILE)
    found = sorted(Path("studies").glob(f"{name}.yaml")) + sorted(Path("studies").glob(f"**/{name}.yaml"))
    return load_study(found[0]) if found else None


def design_of(study, point: dict) -> str:
    from sweeps.spec.rungs import without_rung
    from sweeps.spec.space import point_name

    return point_name(without_rung(point))


def _seconds_text(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 3 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.0f} days"


def effective_tokens(cfg) -> float:
    """A trial's training tokens plus its evaluations' tokens at EVAL_TOKEN_COST (forward only)."""
    steps = cfg.max_steps
    evals = -(-steps // cfg.train.eval_every)  # every eval_every steps, and at the end
    tokens = steps * cfg.tokens_per_step
    return tokens + evals * cfg.train.eval_batches * cfg.train.batch_size * cfg.data.seq_len * EVAL_TOKEN_COST


def trial_seconds(cfg, params: float, tokens_per_s: float | None = None, gpus: float = 0) -> float:
    """Estimated seconds of one trial: its training tokens and its evaluations' (forward only, at
    EVAL_TOKEN_COST) at `tokens_per_s` (the probe's, when cached), else at the calibrated CPU cost
    of a token of a model of `params` non-embedding parameters (on GPUs: 6 N FLOPs a token at
    GPU_FLOPS_PER_S each), plus TRIAL_START_S."""
    return TRIAL_START_S + effective_tokens(cfg) * seconds_per_token(params, tokens_per_s, gpus)


def seconds_per_token(params: float, tokens_per_s: float | None = None, gpus: float = 0) -> float:
    if tokens_per_s:
        return 1.0 / tokens_per_s
    if gpus:
        return 6.0 * params / (GPU_FLOPS_PER_S * gpus)
    c0, c1 = CPU_SECONDS_PER_TOKEN
    return c0 + c1 * params


def probe_seconds(probe, cfg, n_archs: int, params: float, gpus: float = 0) -> float:
    """Estimated seconds of the cost probe of one size's `n_archs` architectures (the baseline
    among them): `probe.rounds` rounds of `probe.steps` steps of each, and the baseline's samples
    alone at the trial's threads (`sweeps.probe`), at the size's cost of a token."""
    import math

    from sweeps.probe import TRIAL_THREADS_SAMPLES_PER_ROUND

    alone = math.ceil(probe.rounds * TRIAL_THREADS_SAMPLES_PER_ROUND)
    steps = (probe.rounds * n_archs * (n_archs > 1) + alone) * probe.steps  # one: no ratio rounds
    return PROBE_START_S + steps * cfg.tokens_per_step * seconds_per_token(params, None, gpus)


def dry_run_lines(study) -> list[str]:
    """The rungs (parameters, tokens, FLOPs, epochs, lr), the epoch warnings and the estimated
    time (`trial_seconds` of every point: the cost probe's cached tokens/s when there is one, else
    the calibrated CPU cost), times the seeds (both ends with adaptive seeds)."""
    from arch.config import presets
    from sweeps.probe import arch_key, architecture, costs_path, load_costs
    from sweeps.scaling.ladder import over_one_epoch, targets

    rungs = study.rungs
    if not rungs:
        return []
    cached = {}
    for table in load_costs(costs_path(study)).values():
        cached.update(table)
    lines = [
        f"scaling      {len(rungs)} rung(s) x {len(study.grid) // len(rungs)} design(s); N non-embedding"
    ]
    lines.append(
        f"  {'rung':4s}  {'N':>9s}  {'D tokens':>9s}  {'FLOPs':>9s}  {'epochs':>6s}  {'lr':>8s}  size"
    )
    for r in rungs:
        model = {k.split(".", 1)[1]: v for k, v in r["overrides"].items() if k.startswith("model.")}
        table = presets().get(model.get("preset"), {})  # a preset's own dimensions go without saying
        size = ", ".join(f"{k}={v}" for k, v in model.items() if table.get(k, object()) != v)
        epochs = "-" if r["epochs"] is None else f"{r['epochs']:.2f}"
        lr = f"{r['lr']:.3g}" if r.get("lr") is not None else f"{study.base.train.lr:.3g}*"
        numbers = f"{r['params']:9.3g}  {r['tokens']:9.3g}  {r['flops']:9.3g}  {epochs:>6s}  {lr:>8s}"
        lines.append(f"  {r['label']:4s}  {numbers}  {size}")
    if any(r.get("lr") is None for r in rungs):
        lines.append("  lr: the size's own (scaling.sizes[i].lr); *: the trial's train.lr")
    lines += [f"  warning: {w}" for w in over_one_epoch(rungs)]
    gpus = study.resources.total_gpus
    seconds, probed, unprobed = 0.0, 0, {}
    for point in study.planned_points():
        cfg = study.trial_config(point)
        params = study.rung_of(point)["params"]
        key = arch_key(architecture(cfg))
        entry = cached.get(key)
        speed = entry.get("tokens_per_s") if entry else None
        probed += bool(speed)
        seconds += trial_seconds(cfg, params, speed, gpus)
        if not speed:  # the probe times this size's architectures, and its baseline, first
            keys = unprobed.setdefault(params, (cfg, {"baseline"}))[1]
            keys.add("baseline" if cfg.model.residual.kind == "none" else key)
    probe = sum(probe_seconds(study.probe, c, len(k), n, gpus) for n, (c, k) in unprobed.items())
    c0, c1 = CPU_SECONDS_PER_TOKEN
    unit = (
        f"{GPU_FLOPS_PER_S:.0e} FLOP/s a GPU x {gpus:g} (assumed, ~35% of an H100's bf16 peak)"
        if gpus
        else f"{c0:.3g} s + {c1:.3g} s x N a token, calibrated at 2 threads (docs/scaling/cpu_ladder.md)"
    )
    how = (
        f"the cost probe's cached speed for {probed} of {len(study.planned_points())} point(s), else "
        if probed
        else ""
    )
    how += f"{unit}; evaluations, and {TRIAL_START_S:.0f} s a trial to start" + (
        f"; the cost probe of {len(unprobed)} size(s) {_seconds_text(probe)}" if unprobed else ""
    )
    flops = sum(study.rung_of(p)["flops"] for p in study.planned_points())
    total = _seconds_text(seconds * study.repeats + probe)
    if study.repeats_max:
        total += f" to {_seconds_text(seconds * study.repeats_max + probe)}"
    kind = "GPU" if gpus else "CPU"
    lines.append(
        f"  {flops * study.repeats:.3g} training FLOPs; estimated {kind} time {total}, one trial at a "
        f"time ({how})"
    )
    shown = ", ".join(
        f"{t.name} ({t.params:.3g} params, {t.tokens:.3g} tokens)" for t in targets(study.scaling)
    )
    lines.append(f"  targets: {shown}")
    return lines


def ladder_of(study, trials):
    """The Ladder of the completed trials (None when none has completed)."""
    from optuna.trial import TrialState

    from sweeps.scaling.table import Ladder

    index = [o.metric for o in study.objectives].index(LOSS)
    rows = {"design": [], "params": [], "tokens": [], "loss": [], "seed": []}
    for t in trials:
        if t.state != TrialState.COMPLETE or t.values is None:
            continue
        point = dict(t.params)
        rung = study.rung_of(point)
        if rung is None:
            continue
        rows["design"].append(design_of(study, point))
        rows["params"].append(rung["params"])
        rows["tokens"].append(study.trial_config(point).train.tokens)
        rows["loss"].append(t.values[index])
        rows["seed"].append(str(t.user_attrs.get("seed", t.number)))
    if not rows["loss"]:
        return None
    return Ladder(**rows, source=f"study {study.name}")


def reference_design(study, ladder) -> str:
    """The name of the study's reference design (`sweeps.pareto.analysis.reference_design`: the
    study's reference point, else the first baseline design), else the first design."""
    from sweeps.pareto.analysis import reference_design as design_params
    from sweeps.spec.space import point_name

    params = design_params(study)
    name = None if params is None else point_name(params)
    return name if name in ladder.designs else ladder.designs[0]


def analyse(
    study, trials, tracker=None, stream=None, replicates: int = 200, out=None, plots: bool = True
) -> list[str]:
    """Fits the ladder of the completed trials, writes results/<name>/scaling/, logs the files
    (artifacts under `scaling/`) and the target verdicts (tags) to the parent run; returns the
    summary lines to print at the end of the launch. A ladder that cannot be fitted yet (too few
    completed rungs) says why and returns that line: it never fails the launch."""
    from sweeps.scaling import analyse as fit_and_predict
    from sweeps.scaling.ladder import targets
    from sweeps.scaling.predict import backtest_line, summary_lines
    from sweeps.scaling.table import LadderError

    stream = stream or sys.stdout
    ladder = ladder_of(study, trials)
    rungs = 0 if ladder is None else len(ladder.rung_keys())
    if rungs < MIN_RUNGS:
        line = f"scaling: {rungs} of {len(study.rungs)} rungs completed; too few to fit a law (no fit)"
        print(line, file=stream)
        return [line]
    out = Path(out or study.results_dir() / "scaling")
    reference = reference_design(study, ladder)
    print(f"scaling ladder: {rungs} of {len(study.rungs)} rungs, reference {reference}", file=stream)
    text = io.StringIO()
    try:
        result = fit_and_predict(
            ladder,
            out,
            targets(study.scaling),
            reference=reference,
            replicates=replicates,
            plots=plots,
            stream=text,
        )
    except Exception as err:  # the runs are recorded; a fit that fails must not lose the launch
        print(text.getvalue(), end="", file=stream)
        why = str(err) if isinstance(err, LadderError) else f"{type(err).__name__}: {err}"
        line = f"scaling: no fit: {why} (again, once fixed: python -m sweeps.scaling fit {study.name})"
        print(line, file=stream)
        return [line]
    print(text.getvalue(), end="", file=stream)
    for path in result["files"].values():
        print(f"  {path}", file=stream)
    if tracker is not None:
        _log(tracker, result)
    lines = summary_lines(result["predictions"], reference)
    test = result["fits"].get("backtest") or {}
    if test.get("possible"):
        lines.append(backtest_line(test, reference))
    return lines or [f"scaling: fitted {', '.join(ladder.designs)} (one design: no differences to report)"]


def _log(tracker, result) -> None:
    for path in result["files"].values():
        tracker.log_file(tracker.parent_id, Path(path), "scaling")
    tags = {}
    for row in result["predictions"]:
        if row["verdict"] == "reference":
            continue
        tags[f"scaling.{row['target']}.{row['design']}"] = (
            f"{row['verdict']}: {row['diff']:+.4f} [{row['diff_lo']:+.4f}, {row['diff_hi']:+.4f}], "
            f"{row['extrapolation']:.3g}x beyond the largest rung"
        )
    fit = result["fit"]
    tags["scaling.law"] = fit.law + (" (shared exponents)" if fit.shared else "")
    tracker.set_tags(tracker.parent_id, tags)
