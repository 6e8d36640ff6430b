"""`fit(config) -> metrics`: one full training run of a trial config, any residual design."""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Iterable, Mapping

import lightning.pytorch as pl
import torch

from arch.configtree import ConfigError, Issue
from trainers import preflight
from trainers.callbacks import GateStats, ModelStats, StepMemory, Throughput
from trainers.checkpoint_files import latest_valid
from trainers.config import TrialConfig
from trainers.data.build import build_datamodule
from trainers.distributed import reduce_over_workers, spawn_fit, worker_threads
from trainers.host import keep_freed_memory
from trainers.machine import resolve_precision
from trainers.module import LanguageModel
from trainers.recall import RecallProbe
from trainers.resume import AtomicCheckpointIO, every_steps, periodic_checkpoint

_QUIET = (
    "lightning.pytorch.utilities.rank_zero",
    "lightning.pytorch.accelerators.cuda",
    "lightning.fabric.utilities.seed",
    "lightning.pytorch.utilities.seed",
)
_WARNINGS = (
    r".*does not have many workers.*",
    r".*The number of training batches.*log_every_n_steps.*",
    r".*Checkpoint directory.*exists and is not empty.*",
    r".*treat the model as a generator.*",
    r".*isinstance\(treespec, LeafSpec\).*",
    r".*sync_dist=True.*",  # data-parallel: what the module logs is reduced over workers already
)


def _quiet_lightning() -> None:
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
    for pattern in _WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)


def _as_float(value) -> float:
    return float(value.item() if isinstance(value, torch.Tensor) else value)


def fit(
    config: TrialConfig | Mapping,
    *,
    loggers: Iterable = (),
    callbacks: Iterable = (),
    data_root=None,
    checkpoint_path=None,
    progress_bar: bool = False,
    checkpoint_dir=None,
) -> dict[str, float]:
    """Trains `config` for its full token budget (`cfg.max_steps` optimizer steps).

    Validates every `train.eval_every` steps and at the end. `loggers` / `callbacks` are
    extra Lightning loggers and callbacks (the sweep launcher passes an MLFlowLogger and a Ray
    Tune reporting callback). `data_root` overrides the data cache root ($SATSWEEP_DATA).
    `checkpoint_path`: where to save the final checkpoint (none is written otherwise).
    `checkpoint_dir`: the trial's folder of resumable checkpoints, written every
    `train.checkpoint_every` tokens (trainers.resume); when it holds a valid one, training resumes
    from the newest (the same run continues: same losses, bit for bit).
    With `train.workers` > 1 the run is data-parallel on that many fresh processes of this
    machine (`trainers.distributed`; loggers and callbacks must then pickle).

    Returns the final metrics: those in `METRICS`, `mqar_acc` for MQAR, the memory breakdown,
    `lr`, and the latest gate statistics of gated designs. Raises `TrainingDiverged` on a
    NaN/inf loss and `ConfigError` on an invalid mapping.
    """
    # the machine and the data files checked here, at the trial (a launcher checked them at its own)
    cfg = preflight.check(config) if isinstance(config, TrialConfig) else preflight.load(config)
    if cfg.train.micro_batch == "auto":
        raise ConfigError(
            [
                Issue(
                    "train.micro_batch",
                    "given 'auto', which the launcher's memory plan resolves (python -m sweeps.launch); "
                    "allowed here: null (batch_size and grad_accum as given)",
                )
            ]
        )
    kwargs = dict(
        loggers=list(loggers), callbacks=list(callbacks), data_root=data_root,
        checkpoint_path=checkpoint_path, progress_bar=progress_bar, checkpoint_dir=checkpoint_dir,
    )  # fmt: skip
    if cfg.train.workers == 1:
        return fit_process(cfg, **kwargs)
    return spawn_fit(fit_process, cfg, **kwargs)


def _resumable(cfg: TrialConfig, checkpoint_dir) -> tuple[list, list, str | None]:
    """(the periodic checkpoint callback, the atomic checkpoint IO, the checkpoint to resume from)."""
    if cfg.train.checkpoint_every is None:
        return [], [], None
    if checkpoint_dir is None:
        raise ValueError("train.checkpoint_every is set but no checkpoint folder was given (checkpoint_dir)")
    steps = every_steps(cfg.train.checkpoint_every, cfg.tokens_per_step)
    latest = latest_valid(checkpoint_dir)
    return [periodic_checkpoint(checkpoint_dir, steps)], [AtomicCheckpointIO()], latest and str(latest)


def fit_process(
    cfg: TrialConfig,
    *,
    loggers: Iterable = (),
    callbacks: Iterable = (),
    data_root=None,
    checkpoint_path=None,
    progress_bar: bool = False,
    lightning: Mapping | None = None,
    checkpoint_dir=None,
) -> dict[str, float]:
    """`fit` in this process: the whole run, or one worker's part of a data-parallel run
    (`lightning`: the Trainer's devices/strategy/plugins for it, `trainers.distributed`)."""
    _quiet_lightning()
    keep_freed_memory()  # no page faults on every step's activations (trainers.host)
    threads = cfg.train.num_threads
    if cfg.train.workers > 1:
        threads = worker_threads(cfg.train.workers, threads)
    if threads is not None:
        torch.set_num_threads(threads)
    pl.seed_everything(cfg.seed, workers=True, verbose=False)

    data = build_datamodule(cfg, data_root)
    module = LanguageModel(cfg, accuracy_metric=data.accuracy_metric)
    own = [
        ModelStats(cfg.data.seq_len),
        Throughput(cfg.tokens_per_step),
        StepMemory(),
        GateStats(cfg.train.gate_stats_every, cfg.train.grad_accum),
    ]
    if cfg.recall.issue(cfg.data.kind, cfg.data.seq_len) is None:
        own.append(RecallProbe(cfg.recall.windows, cfg.data.seq_len, cfg.recall.at, cfg.tokens_per_step))
    loggers = list(loggers)
    periodic, plugins, resume_from = _resumable(cfg, checkpoint_dir)
    lightning = dict(lightning or {"devices": 1})
    lightning["plugins"] = [*lightning.get("plugins", []), *plugins]
    trainer = pl.Trainer(
        max_steps=cfg.max_steps,
        max_epochs=-1,
        accelerator="auto",
        **lightning,
        use_distributed_sampler=False,  # every worker keeps its rows of the global batch (data module)
        precision=resolve_precision(cfg.train.precision),
        accumulate_grad_batches=cfg.train.grad_accum,
        gradient_clip_val=cfg.train.grad_clip,
        gradient_clip_algorithm="norm",
        val_check_interval=cfg.train.eval_every * cfg.train.grad_accum,
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
        log_every_n_steps=cfg.train.log_every,
        logger=loggers or False,
        callbacks=[*own, *periodic, *callbacks],
        enable_checkpointing=bool(periodic),
        enable_progress_bar=progress_bar,
        enable_model_summary=False,
        deterministic=True,
        default_root_dir=None,
    )
    trainer.fit(module, datamodule=data, ckpt_path=resume_from)
    metrics = {k: _as_float(v) for k, v in trainer.callback_metrics.items()}
    if module.last_val_step != trainer.global_step:  # the final evaluation, when not just done
        trainer.validate(module, datamodule=data, verbose=False)
        metrics.update({k: _as_float(v) for k, v in trainer.callback_metrics.items()})
    if checkpoint_path is not None:
        trainer.save_checkpoint(checkpoint_path)

    for cb in own:
        metrics.update(cb.metrics())
    if trainer.world_size > 1:
        metrics = reduce_over_workers(metrics)
    metrics["tokens"] = float(module.tokens_seen)
    metrics["steps"] = float(trainer.global_step)
    for logger in loggers:
        logger.log_metrics({k: v for k, v in metrics.items() if math.isfinite(v)}, step=trainer.global_step)
        logger.finalize("success")
    return metrics
