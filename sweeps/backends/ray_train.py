"""Data-parallel trials on Ray: one Tune trial drives a Ray Train `TorchTrainer` of k workers.

The Tune trial (`sweeps.backends.ray.trainable`) holds no CPU of its own; its k workers each get
the study's `resources.cpus` / `resources.gpus` from Ray, on any node, with the process group Ray
Train makes (gloo on CPU, nccl on GPU). Every worker runs `trainers.fit.fit_process` with Ray's
Lightning strategy and environment (`trainers.distributed.ray_lightning_kwargs`) and reports
after each validation with `ray.train.report` (a barrier: every worker reports, rank 0's metrics
count); Ray's `TuneReportCallback` hands those reports to Tune, so ASHA sees the same results as
from a single-process trial. The last report carries the final metrics (or the divergence), which
the driver takes from `Result.metrics`. Rank 0 logs to the MLflow child run and the checkpoint.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

DIVERGED = ("sweep_diverged_step", "sweep_diverged_value")
FINAL = "sweep_final_metrics"


def fit_on_ray_train(task):
    """A `trainers.fit`-like function for `sweeps.trial.execute` that trains `task` on Ray Train."""

    def fit(config, *, loggers=(), callbacks=(), data_root=None, checkpoint_path=None):
        from ray.train import RunConfig, ScalingConfig
        from ray.train.torch import TorchConfig, TorchTrainer
        from ray.tune.integration.ray_train import TuneReportCallback

        from trainers.distributed import COLLECTIVE_TIMEOUT
        from trainers.errors import TrainingDiverged

        storage = Path(task.results_dir or tempfile.gettempdir()) / "ray" / "train"
        trainer = TorchTrainer(
            train_worker,
            train_loop_config={
                "tree": config.to_dict(), "loggers": list(loggers), "data_root": data_root,
                "checkpoint": checkpoint_path is not None, "run_id": task.run_id,
                "tracking_uri": task.tracking_uri,
            },  # fmt: skip
            scaling_config=ScalingConfig(
                num_workers=task.workers,
                use_gpu=task.worker_gpus > 0,
                resources_per_worker={"CPU": task.worker_cpus, "GPU": task.worker_gpus},
            ),
            torch_config=TorchConfig(
                backend="nccl" if task.worker_gpus > 0 else "gloo",
                timeout_s=int(COLLECTIVE_TIMEOUT.total_seconds()),
            ),
            run_config=RunConfig(
                name=f"trial_{task.number:03d}-{task.run_id[:8]}",  # a retried trial is a new run
                storage_path=str(storage),
                callbacks=[TuneReportCallback()],
            ),
        )
        metrics = dict(trainer.fit().metrics or {})  # raises TrainingFailedError when a worker failed
        if DIVERGED[0] in metrics:
            raise TrainingDiverged(int(metrics[DIVERGED[0]]), float(metrics[DIVERGED[1]]))
        if FINAL not in metrics:
            raise RuntimeError("the Ray Train run ended without its final report")
        return {k: metrics[k] for k in json.loads(metrics[FINAL])}

    return fit


def train_worker(config: dict) -> None:
    """One Ray Train worker: its part of the trial (see the module docstring)."""
    import ray.train

    from sweeps.trial import report_callback
    from trainers.config import TrialConfig
    from trainers.distributed import ray_lightning_kwargs
    from trainers.errors import TrainingDiverged
    from trainers.fit import fit_process
    from trainers.records import CHECKPOINT_FOLDER, CHECKPOINT_NAME

    cfg = TrialConfig.from_dict(config["tree"])
    rank = ray.train.get_context().get_world_rank()
    with tempfile.TemporaryDirectory(prefix="satsweep-ckpt-") as folder:
        checkpoint = Path(folder) / CHECKPOINT_NAME if config["checkpoint"] else None
        try:
            metrics = fit_process(
                cfg,
                loggers=config["loggers"],
                callbacks=[report_callback(ray.train.report)],
                data_root=config["data_root"],
                checkpoint_path=checkpoint,
                lightning=ray_lightning_kwargs(),
            )
        except TrainingDiverged as err:  # every worker sees it at the same step (global loss)
            ray.train.report(dict(zip(DIVERGED, (err.step, err.value), strict=True)))
            return
        if rank == 0 and checkpoint is not None and checkpoint.is_file():
            from sweeps.tracking import client

            client(config["tracking_uri"]).log_artifact(
                config["run_id"], str(checkpoint), artifact_path=CHECKPOINT_FOLDER
            )
    ray.train.report({**metrics, FINAL: json.dumps(sorted(metrics))})
