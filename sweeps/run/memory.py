"""The memory plan of a GPU study: each planned point's predicted peak tensor memory on one GPU at
its real per-worker micro-batch, precision, loss path and activation checkpointing, measured on
this machine's CPU with the exact meter at small micro-batches and extrapolated in tokens
(trainers.memory_probe, trainers.memory_fit; docs/memory_plan.md).

- `--dry-run` prints `table_lines` (every point, with its breakdown); the launch prints it before
  any trial starts.
- `resources.gpu_memory_gb` (else the CUDA device's own size) makes it a check at load
  (`memory_plan`): a point whose peak exceeds `HEADROOM` of the GPU is refused, naming the largest
  micro-batch (and grad_accum) that fits and whether `activation_checkpointing: blocks` would.
- `train.micro_batch: auto` picks that micro-batch itself, for every run the study makes (grid
  points, tune and confirming runs, and a sampler's points as they come): `memory_plan` returns a
  new StudyPlan with each run's split (sweeps.study.study_plan).

A CPU study (resources.gpus 0, no gpu_memory_gb, no micro_batch auto) has no plan: nothing is
measured. The measurements are cached in results/<name>/memory.json (as the cost probe's
costs.json), keyed by everything they depend on, so a second dry run reads them.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING

from arch.configtree import ConfigError, Issue
from sweeps.study.study_plan import Split

if TYPE_CHECKING:
    from trainers.memory_fit import MemoryFit, Prediction

GIB = 1 << 30  # trainers.memory_fit's, which imports torch (see _torch)

# The share of a GPU the predicted peak may use. The CPU meter counts tensors only: the CUDA context
# (~0.5-1 GiB), the caching allocator's fragmentation (reserved above allocated), cuBLAS and attention
# kernels' workspaces, NCCL's buffers, and CUDA autocast's own casts are not in it. 0.85 is a choice,
# not a measurement (no GPU here); the rule that sets it: docs/memory_plan.md ("What the CPU cannot
# see"), from bench/gpu_check.py's `headroom_needed` on the first GPU.
HEADROOM = 0.85
CACHE_VERSION = 2  # 2: measured with trainers.train_step (no disabled autocast context around fp32 steps)


@dataclasses.dataclass(frozen=True)
class Setup:
    """What one point's step is measured as: on the GPU the trial will use."""

    precision: str
    loss: str  # plain | chunked (fused is planned as chunked: neither makes the whole logits)
    loss_asked: str
    blocks: bool


@dataclasses.dataclass(frozen=True)
class PointPlan:
    index: int
    point: dict
    cfg: object
    setup: Setup
    fit: MemoryFit
    prediction: Prediction
    rows_per_step: int  # one worker's rows of an optimizer step (the global batch / workers)


def gpu_planned(study) -> bool:
    return bool(
        study.resources.gpus > 0
        or study.resources.gpu_memory_gb is not None
        or study.base.train.micro_batch == "auto"
    )


def gpu_budget(study) -> tuple[float | None, str]:
    """(bytes the predicted peak may use, where the GPU's size comes from), (None, why) without one."""
    if study.resources.gpu_memory_gb is not None:
        size, where = study.resources.gpu_memory_gb * GIB, "resources.gpu_memory_gb"
    else:
        cuda = _torch().cuda
        if not cuda.is_available():
            return None, "no resources.gpu_memory_gb and no CUDA device here: not checked"
        size, where = cuda.get_device_properties(0).total_memory, cuda.get_device_name(0)
    return size * HEADROOM, f"{size / GIB:g} GiB ({where}) x {HEADROOM} headroom"


def _torch():
    """torch, imported when a plan is made or a GPU asked about: a launch that needs neither (a CPU
    study on Ray) starts without it (2.4 s of its imports, docs/bench/launch_costs.md)."""
    import torch

    return torch


def setup_of(cfg, blocks: bool | None = None) -> Setup:
    from trainers.loss import resolve_loss  # imports torch: see _torch

    torch = _torch()
    rows = cfg.train.batch_size // cfg.train.workers
    precision = "bf16-mixed" if cfg.train.precision == "auto" else cfg.train.precision
    asked = resolve_loss(cfg.train.loss, torch.device("cuda"), rows, cfg.data.seq_len, cfg.model.vocab_size)
    loss = "chunked" if asked == "fused" else asked
    if blocks is None:
        blocks = cfg.train.activation_checkpointing == "blocks"
    return Setup(precision, loss, asked, blocks)


def rows_per_step(cfg) -> int:
    return cfg.train.batch_size * cfg.train.grad_accum // cfg.train.workers


def cache_path(study) -> Path:
    return study.results_dir() / "memory.json"


def _key(cfg, setup: Setup, up_to: int) -> str:
    what = {
        "version": CACHE_VERSION,
        "torch": _torch().__version__,
        "model": cfg.model.to_dict() if hasattr(cfg.model, "to_dict") else dataclasses.asdict(cfg.model),
        "precision": setup.precision,
        "loss": setup.loss,
        "blocks": setup.blocks,
        "grad_clip": cfg.train.grad_clip,
        "up_to": up_to,
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


class Plans:
    """Measures (or reads from the cache) and fits each point's memory; one per launch."""

    def __init__(self, study, stream=None):
        self.study, self.stream = study, stream
        self.path = cache_path(study)
        try:
            self.cache = json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError):  # not measured yet, or cut mid-write
            self.cache = {}
        self.measured_s = 0.0

    def fit_of(self, cfg, setup: Setup) -> MemoryFit:
        # imports torch: see _torch
        from trainers.memory_fit import fit
        from trainers.memory_probe import Measurements, measure

        up_to = rows_per_step(cfg) * cfg.data.seq_len
        key = _key(cfg, setup, up_to)
        if key not in self.cache:
            if self.stream is not None:
                print(
                    f"memory plan: measuring {cfg.model.residual.kind} ({setup}) on this CPU ...",
                    file=self.stream,
                )
            start = time.time()
            m = measure(cfg, setup.precision, setup.loss, setup.blocks, up_to)
            self.measured_s += time.time() - start
            self.cache[key] = m.to_dict()
            self._save()
        return fit(Measurements.from_dict(self.cache[key]), setup.loss)

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.cache))
        tmp.replace(self.path)  # atomic: a crash leaves the old file or the new one

    def points(self, plan) -> tuple[PointPlan, ...]:
        """One row per grid point of `plan` (a StudyPlan), at its config (its split)."""
        out = []
        for i, key in enumerate(plan.grid):
            cfg = plan.config(key)
            setup = setup_of(cfg)
            f = self.fit_of(cfg, setup)
            rows = cfg.train.batch_size // cfg.train.workers
            p = f.predict(rows, cfg.data.seq_len, cfg.train.grad_accum, cfg.train.workers)
            out.append(PointPlan(i, key.point, cfg, setup, f, p, rows_per_step(cfg)))
        return tuple(out)


def _gib(n: float) -> str:
    return f"{n / GIB:.2f}"


def table_lines(study, plans: list[PointPlan] | None, stream=None) -> list[str]:
    """The dry run's memory section: one row per point (GiB per GPU)."""
    if plans is None:
        return ["memory       no plan: a CPU study (resources.gpus 0; resources.gpu_memory_gb sets one)"]
    budget, where = gpu_budget(study)
    lines = [
        "memory       per GPU at each point's per-worker micro-batch, GiB (CPU exact meter at 2-4 rows "
        "x 64-128 positions, extrapolated in tokens; docs/memory_plan.md)",
        f"  budget: {_gib(budget) + ' GiB = ' if budget else ''}{where}",
        f"  {'point':5s} {'micro x T':>11s} {'accum':>5s} {'precision':>10s} {'loss':>8s} {'ckpt':>6s} "
        f"{'params':>7s} {'grads':>7s} {'adamw':>7s} {'activ':>8s} {'loss':>7s} {'ddp':>6s} "
        f"{'PEAK':>8s}  check (held-out batch: predicted/measured)",
    ]
    for pp in plans:
        p, s = pp.prediction, pp.setup
        check = pp.fit.check
        held = (
            f"{check['rows']}x{check['seq_len']}: {check['predicted'] / check['measured']:.4f}"
            if check
            else "-"
        )
        if not pp.fit.aligned:
            held += " (events not lined up: approximate)"
        loss = s.loss if s.loss == s.loss_asked else f"{s.loss_asked}*"
        verdict = ""
        if budget:
            verdict = "  fits" if p.peak <= budget else "  DOES NOT FIT"
        lines.append(
            f"  {pp.index:5d} {f'{p.rows}x{p.seq_len}':>11s} {p.grad_accum:5d} {s.precision:>10s} {loss:>8s} "
            f"{'blocks' if s.blocks else 'none':>6s} {_gib(p.params):>7s} {_gib(p.grads):>7s} "
            f"{_gib(p.optimizer):>7s} {_gib(p.activations):>8s} {_gib(p.loss):>7s} {_gib(p.ddp_buckets):>6s} "
            f"{_gib(p.peak):>8s}  {held}{verdict}"
        )
    if any(pp.setup.loss != pp.setup.loss_asked for pp in plans):
        lines.append("  *: fused (liger-kernel) planned as chunked: neither makes the whole logits")
    return lines


def _suggestion(study, pp: PointPlan, budget: float, plans: Plans) -> str:
    cfg = pp.cfg
    workers, seq = cfg.train.workers, cfg.data.seq_len
    best = pp.fit.largest_fitting(budget, pp.rows_per_step, seq, workers)
    parts = []
    if best is not None:
        parts.append(
            f"micro-batch {best.rows} with grad_accum {best.grad_accum} fits ({_gib(best.peak)} GiB): "
            f"train.batch_size {best.rows * workers}, train.grad_accum {best.grad_accum}"
        )
    else:
        parts.append("not even a micro-batch of 1 fits without activation checkpointing")
    if not pp.setup.blocks:
        blocks = plans.fit_of(cfg, setup_of(cfg, blocks=True))
        same = blocks.predict(pp.prediction.rows, seq, cfg.train.grad_accum, workers)
        if same.peak <= budget:
            parts.append(f"activation_checkpointing: blocks fits as it is ({_gib(same.peak)} GiB)")
        else:
            with_blocks = blocks.largest_fitting(budget, pp.rows_per_step, seq, workers)
            parts.append(
                "activation_checkpointing: blocks fits at micro-batch "
                f"{with_blocks.rows} with grad_accum {with_blocks.grad_accum} ({_gib(with_blocks.peak)} GiB)"
                if with_blocks
                else "activation_checkpointing: blocks does not make it fit either"
            )
    return "; ".join(parts) + "; or train.micro_batch: auto"


def memory_plan(plan, stream=None):
    """(what the GPU cannot hold, the StudyPlan with its memory plan) at load: a new plan, with
    each run's split where `train.micro_batch: auto` asks for one; the plan as given for a CPU
    study (nothing measured)."""
    study = plan.study
    if not gpu_planned(study):
        return [], plan
    plans = Plans(study, stream)
    budget, where = gpu_budget(study)
    auto = study.base.train.micro_batch == "auto"
    if auto and budget is None:
        issue = Issue("trial.train.micro_batch", f"given 'auto'; needs the GPU's size: {where}")
        return [issue], plan
    sized = None
    if auto:
        issues, splits = resolve_micro_batches(plan, plans, budget)
        if issues:
            return issues, plan
        if study.sampler.kind != "grid":  # a sampled point's split, found as it comes
            sized = functools.partial(_sized, plans=plans, budget=budget)
        plan = plan.with_splits(splits, None, sized)
    points = plans.points(plan)
    plan = plan.with_splits(plan.splits, points, sized)
    if budget is None:
        return [], plan
    issues = []
    for pp in points:
        if pp.prediction.peak > budget:
            label = ", ".join(f"{k}={v}" for k, v in pp.point.items())
            p = pp.prediction
            issues.append(
                Issue(
                    "trial.train.batch_size",
                    f"point {pp.index} ({label}): one worker's micro-batch {p.rows} x {p.seq_len} "
                    f"(grad_accum {p.grad_accum}, {pp.setup.precision}, loss {pp.setup.loss}, "
                    f"activation_checkpointing {'blocks' if pp.setup.blocks else 'none'}) needs "
                    f"{_gib(p.peak)} GiB predicted; allowed: {_gib(budget)} GiB = {where}. "
                    + _suggestion(study, pp, budget, plans),
                )
            )
    return issues, plan


def split_of(cfg, plans: Plans, budget: float) -> Split | None:
    """`train.micro_batch: auto` for one config: the largest per-worker micro-batch that fits (a
    divisor of its rows per optimizer step), grad_accum so that the global batch is unchanged, and
    eval_batches so that an evaluation covers the same tokens; None when not even 1 row fits."""
    best = plans.fit_of(cfg, setup_of(cfg)).largest_fitting(
        budget, rows_per_step(cfg), cfg.data.seq_len, cfg.train.workers
    )
    if best is None:
        return None
    batch = best.rows * cfg.train.workers
    evals = math.ceil(cfg.train.eval_batches * cfg.train.batch_size / batch)
    return Split(batch, best.grad_accum, evals)


def _refusal(cfg, plans: Plans, budget: float, which: str) -> str:
    f = plans.fit_of(cfg, setup_of(cfg))
    return (
        f"given 'auto'; {which}: not even a micro-batch of 1 x {cfg.data.seq_len} fits "
        f"{_gib(budget)} GiB (predicted {_gib(f.predict(1, cfg.data.seq_len, 2).peak)} GiB); "
        "try train.activation_checkpointing: blocks"
    )


def _sized(cfg, plans: Plans, budget: float) -> Split:
    """A sampled run's split (a sampler other than the grid proposes its points as it runs)."""
    split = split_of(cfg, plans, budget)
    if split is None:
        raise ConfigError([Issue("trial.train.micro_batch", _refusal(cfg, plans, budget, "a sampled point"))])
    return split


def resolve_micro_batches(plan, plans: Plans, budget: float) -> tuple[list[Issue], dict]:
    """(issues, {RunKey: Split}) for every run `plan` knows: grid points, tune runs and every
    confirming run a tune stage can choose (their models are the grid points': measured once)."""
    issues, splits = [], {}
    for i, key in enumerate(plan.runs()):
        cfg = plan.study.trial_config(key.point, overrides=key.overrides)
        split = split_of(cfg, plans, budget)
        if split is not None:
            splits[key] = split
        elif i < len(plan.grid):
            issues.append(Issue("trial.train.micro_batch", _refusal(cfg, plans, budget, f"point {i}")))
        elif not issues:  # a tune or confirming run trains its point's model: refused with it
            issues.append(Issue("trial.train.micro_batch", _refusal(cfg, plans, budget, f"run {key.point}")))
    return issues, splits
