"""`--dry-run`: what a launch would do, printed before anything starts: the study's sampler, space,
points and seeds, the verdicts' rule and looks, budgets, scheduler, backend, resources and where
results go; for a scaling ladder its rungs and an estimate of its time."""

from __future__ import annotations

import math

from arch.config import presets
from sweeps.report.costs import costs_path, load_costs
from sweeps.report.verdicts import looks_text, rule_for
from sweeps.run import backends
from sweeps.run.memory import table_lines
from sweeps.run.probe import TRIAL_THREADS_SAMPLES_PER_ROUND
from sweeps.run.progress import duration
from sweeps.study import Study, tuning
from sweeps.study.architecture import arch_key, architecture
from sweeps.study.checks import eval_tasks
from sweeps.study.ladder import over_one_epoch, targets
from sweeps.study.reference import TOLERANCE, multiple_of
from sweeps.study.study_plan import StudyPlan, resolve
from trainers.metrics import is_exact, is_timed


def _resources_text(resources) -> str:
    each = f"{resources.cpus:g} CPU, {resources.gpus:g} GPU"
    if resources.workers == 1:
        return f"{each} per trial"
    return f"{resources.workers} data-parallel workers x ({each}) per trial"


def plan_text(plan: StudyPlan | Study) -> str:
    """The dry run of `plan` (a Study is resolved here, without the memory plan that `load` adds)."""
    plan = plan if isinstance(plan, StudyPlan) else resolve(plan)
    study = plan.study
    backend = backends.get(study.backend)
    shown = [n for n, p in study.search_space.params.items() if not p.planned_only]  # tune: below
    lines = [
        f"study        {study.name}: {study.description}".rstrip(": "),
        f"sampler      {study.sampler.kind} (seed {study.sampler.seed})",
        f"space        {len(shown)} parameter(s): {', '.join(shown) or '-'}",
    ]
    if study.sampler.kind == "grid":
        lines.append(f"grid         {len(study.grid)} point(s)")
    lines += [
        f"points       {study.n_points()} x {study.seeds.describe()} = {study.n_runs()} trial(s)"
        if not study.seeds.adaptive
        else f"points       {study.n_points()} x {study.seeds.describe()} ="
        f" {study.n_runs()} to {study.n_runs_max()} trial(s)",
        f"objectives   {', '.join(f'{o.metric} ({o.direction})' for o in study.objectives)}",
        _hypervolume_text(study),
        *_verdicts_lines(study),
        _budget_text(study),
        _scheduler_text(study),
        *_evals_lines(study),
        f"backend      {backend.describe(study)}",
        f"resources    {_resources_text(study.resources)}; {backend.concurrency(study)} at a time",
        f"mlflow       {study.mlflow_uri()} experiment {study.experiment_name!r}; system metrics "
        f"{study.output.system_metrics}" + (" (off: CPU trials)" if study.resources.gpus == 0 else ""),
        f"optuna       {study.storage_url()} study {study.name!r}",
        f"results      {study.results_dir()}",
    ]
    lines += ladder_lines(plan) + matched_lines(study) + tune_lines(study)
    lines += table_lines(study, plan.memory)
    varies = len(set(study.budgets)) > 1
    for i, key in enumerate(plan.grid):
        cfg = plan.config(key)
        budget = f"  ({cfg.train.tokens} tokens)" if varies else ""
        shown = ", ".join(f"{k}={v}" for k, v in key.point.items())
        lines.append(f"  point {i:3d}  {shown}{budget}{_split(study, cfg)}")
    return "\n".join(lines)


def _evals_lines(study: Study) -> list[str]:
    """The lm-eval tasks each run's final weights are scored on (none without evals:)."""
    evals = study.evals
    if evals is None:
        return []
    limit = f"{evals.limit} document(s) a task" if evals.limit else "every document"
    where = f", tasks from {evals.include_path}" if evals.include_path else ""
    return [f"evals        {', '.join(eval_tasks(study))} at the end of each run ({limit}{where})"]


def _split(study: Study, cfg) -> str:
    """The split `train.micro_batch: auto` chose (`cfg`: a run's config), the global batch beside it."""
    if study.base.train.micro_batch != "auto":
        return ""
    t = cfg.train
    return (
        f"  (micro_batch auto: train.batch_size {t.batch_size} x grad_accum {t.grad_accum} = global batch "
        f"{t.batch_size * t.grad_accum}, as given {study.base.train.batch_size} x "
        f"{study.base.train.grad_accum}; "
        f"eval_batches {t.eval_batches})"
    )


def _verdicts_lines(study: Study) -> list[str]:
    """The verdicts' rule and each planned look's boundary (sweeps.report.verdicts)."""
    tested = [o for o in study.objectives if not is_exact(o.metric)]  # exact: no test
    widened = [m for m in study.matches if m.label is not None]  # reference.match: its own baselines
    family = max(study.n_points() - 1 - len({m.label for m in widened}), 0) * len(tested)
    family += len(widened) * len([o for o in tested if not is_timed(o.metric)])  # timed: not paired
    first, *looks = looks_text(rule_for(study), family)
    return [f"verdicts     {first}", *(f"           {line}" for line in looks)]


def _budget_text(study: Study) -> str:
    """Each run trains for its own point's `train.tokens`: one number, or the range and where."""
    budgets = study.budgets
    time = study.budget.time
    if time is not None:  # sweeps.run.time_budget: resolved at the launch's probe
        seconds = (
            f"the time the reference needs for {budgets[0]} tokens" if time == "reference" else f"{time:g} s"
        )
        return (
            f"budget       equal time: {seconds} of training steps at the cost probe's speed, each design's "
            "tokens set from it at the launch (each over its own whole schedule)"
        )
    if len(set(budgets)) == 1:
        base = study.base
        return (
            f"budget       {budgets[0]} tokens per trial = {base.max_steps} steps of {base.tokens_per_step}"
        )
    where = "each point's below" if study.sampler.kind == "grid" else "over the corners of the space"
    return f"budget       {min(budgets)}..{max(budgets)} tokens per trial ({where})"


def _hypervolume_text(study: Study) -> str:
    if study.hypervolume is None:
        return "hypervolume  no history (no `hypervolume:` bounds)"
    bounds = ", ".join(f"{m} [{b:g}, {w:g}]" for m, (b, w) in study.hypervolume.items())
    return f"hypervolume  history on fixed bounds [best, worst]: {bounds}"


def _scheduler_text(study: Study) -> str:
    if study.scheduler.kind != "asha":
        return f"scheduler    {study.scheduler.kind}"
    grace, horizon = study.asha_rungs()
    return (
        f"scheduler    asha on {study.scheduler.metric} ({study.scheduler.mode}): grace {grace} tokens, "
        f"horizon {horizon - 1} tokens (the largest budget: one horizon for every run)"
    )


# A ladder's CPU estimate without a probe: a trial's wall seconds = TRIAL_START_S + (C0 + C1 N) x its
# tokens (training, plus evaluations at EVAL_TOKEN_COST), N non-embedding parameters, refitted with
# `python -m bench.ladder_speeds studies/scaling_ladder.yaml --from-runs` (the fit and the machine it
# was made on: docs/scaling/cpu_ladder.md). C0 is what a token costs whatever the model (the loop's
# data, logging and Python per step): at 0.1M parameters it is most of the step, so one FLOP rate
# (6 N FLOPs a token) would put the smallest rungs several times too fast.
CPU_SECONDS_PER_TOKEN = (1.6e-5, 6.4e-11)  # (C0 s, C1 s per parameter)
EVAL_TOKEN_COST = 1 / 3  # an evaluation token (forward only) in training tokens
TRIAL_START_S = 1.0  # a trial's fixed cost in a reused Ray worker (docs/scaling/cpu_ladder.md)
PROBE_START_S = 3.0  # the cost probe's fixed cost per size (its processes, building the models)
GPU_FLOPS_PER_S = 3e14  # an assumption, not a measurement: ~35% of an H100's dense bf16 peak


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
    alone at the trial's threads (`sweeps.run.probe`), at the size's cost of a token."""
    alone = math.ceil(probe.rounds * TRIAL_THREADS_SAMPLES_PER_ROUND)
    steps = (probe.rounds * n_archs * (n_archs > 1) + alone) * probe.steps  # one: no ratio rounds
    return PROBE_START_S + steps * cfg.tokens_per_step * seconds_per_token(params, None, gpus)


def ladder_lines(plan: StudyPlan) -> list[str]:
    """The rungs (parameters, tokens, FLOPs, epochs, lr), the epoch warnings and the estimated
    time (`trial_seconds` of every point: the cost probe's cached tokens/s when there is one, else
    the calibrated CPU cost), times the seeds (both ends with adaptive seeds)."""
    study = plan.study
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
    for run in plan.grid:
        cfg = plan.config(run)
        params = study.rung_of(run.point)["params"]
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
    how = f"the cost probe's cached speed for {probed} of {len(plan.grid)} point(s), else " if probed else ""
    how += f"{unit}; evaluations, and {TRIAL_START_S:.0f} s a trial to start" + (
        f"; the cost probe of {len(unprobed)} size(s) {duration(probe)}" if unprobed else ""
    )
    flops = sum(study.rung_of(run.point)["flops"] for run in plan.grid)
    total = duration(seconds * study.seeds.min + probe)
    if study.seeds.adaptive:
        total += f" to {duration(seconds * study.seeds.max + probe)}"
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


def matched_lines(study: Study) -> list[str]:
    """`reference.match`: each design's matched baseline, its shape and its parameter and FLOP gaps
    to the design (sweeps.study.reference)."""
    if study.reference_match is None:
        return []
    match = study.reference_match.match
    what = "non-embedding parameters" if match == "params" else "training FLOPs per token"
    lines = [
        f"matched      reference.match {match}: each design also against a baseline within "
        f"{TOLERANCE:.0%} of its {what}"
        f" (d_ff, then d_model, in multiples of {multiple_of(study)})",
        f"  {'design':24s}  {'params':>9s}  {'FLOPs/token':>11s}  baseline (d_model, d_ff)"
        f"  {'params gap':>10s}  {'FLOPs gap':>9s}",
    ]
    for m in study.matches:
        which = f"{m.label} ({m.d_model}, {m.d_ff})" if m.label else f"the plain one ({m.d_model}, {m.d_ff})"
        lines.append(
            f"  {m.name[:24]:24s}  {m.design_params:9d}  {m.design_flops:11.4g}  {which:24s}"
            f"  {m.gap('params'):+10.2%}  {m.gap('flops'):+9.2%}"
        )
    return lines


def tune_lines(study: Study) -> list[str]:
    """`tune:`: the tuned values, the tune stage's runs and the confirming seeds (sweeps.study.tuning)."""
    tune = study.tune
    if tune is None:
        return []
    metric, direction = tuning.metric_of(study)
    values = ", ".join(f"{v:g}" for v in tune.range.values()) + (" (log)" if tune.range.log else "")
    runs, confirming = study.n_tune_runs(), f"{study.n_points()} x {study.repeats} confirming seed(s)"
    return [
        f"tune         {tune.path} at {values} x {tune.seeds} seed(s) a point,"
        f" best mean {metric} ({direction})",
        f"             {runs} tune run(s), then {confirming} from seed {study.seed_of(0)} at each point's"
        " best value (split sample: the verdicts read only these)",
    ]
