"""Data-parallel trials on Ray: one Tune trial drives a Ray Train `TorchTrainer` of k workers.

The Tune trial (`sweeps.run.backends.ray.trainable.trainable`) only drives: it holds (almost) no
resources; its k workers each get the study's `resources.cpus` / `resources.gpus` from Ray, on
whichever nodes have them, in the process group Ray Train makes (gloo on CPU, nccl on GPU). Every worker runs
`trainers.fit.fit_process` with Ray's Lightning strategy and environment, under the semantics of
`trainers.distributed` (global batch split by rows, global losses, memory = max over workers).

A worker killed mid-trial: with `train.checkpoint_every`, Ray Train restarts the worker group
(`WORKER_RESTARTS`) and the trial resumes from its newest checkpoint in the same MLflow child run.

Reports: after each validation every worker calls `ray.train.report` (Ray Train synchronises
them); Ray's `TuneReportCallback` hands rank 0's metrics to the Tune trial, so ASHA sees the same
results as from a single-process trial. The final metrics (or the divergence) come back as rank
0's return value (`Result.return_value`: Ray Train V2 keeps reported metrics only with
checkpoints). Rank 0 logs to the MLflow child run and logs the checkpoint there itself (it may
run on another node than the Tune trial).
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path

from sweeps.run.tracking import client
from sweeps.run.worker import report_callback
from trainers.distributed import COLLECTIVE_TIMEOUT
from trainers.errors import TrainingDiverged
from trainers.mlflow_names import CHECKPOINT_ARTIFACT, CHECKPOINT_FOLDER, CHECKPOINT_NAME

DIVERGED = "sweep_diverged"  # rank 0's return value when the run diverged: {DIVERGED: [step, value]}
PLACEMENT_GROUP = "ray_train_placement_group"  # in every report: the workers' placement group (hex id)
# A worker that dies (SIGKILL, a lost node) makes Ray Train restart the worker group this many
# times; each restart resumes from the run's newest checkpoint (`train.checkpoint_every`: fit_process
# reads checkpoint_dir). Without checkpoints nothing would be kept, so no restart. An error of the
# trial's own is retried too (Ray Train cannot tell them apart) and then recorded as before.
WORKER_RESTARTS = 1


def ray_lightning_kwargs() -> dict:
    """Trainer arguments of one Ray Train worker (the process group is Ray Train's, see TorchConfig)."""
    from ray.train.lightning import RayDDPStrategy, RayLightningEnvironment

    return {"devices": "auto", "strategy": RayDDPStrategy(), "plugins": [RayLightningEnvironment()]}


def fit_on_ray_train(task, report_to_tune: bool = True):
    """A `trainers.fit`-like function for `sweeps.run.worker.execute` that trains `task` on Ray Train."""

    def fit(config, *, loggers=(), callbacks=(), data_root=None, checkpoint_path=None, checkpoint_dir=None):
        from ray.train import FailureConfig, RunConfig, ScalingConfig
        from ray.train.torch import TorchConfig, TorchTrainer

        if callbacks:
            raise ValueError("a Ray Train trial reports through its workers (report_to_tune), not callbacks")
        if config.train.num_threads is None:  # Ray's share of a node, not the node's cores
            train = dataclasses.replace(config.train, num_threads=max(1, int(task.worker_cpus)))
            config = dataclasses.replace(config, train=train)
        run_callbacks = []
        if report_to_tune:
            from ray.tune.integration.ray_train import TuneReportCallback

            run_callbacks.append(TuneReportCallback())
        storage = Path(tempfile.mkdtemp(prefix="satsweep-train-"))  # no checkpoints go through Ray
        try:
            trainer = TorchTrainer(
                train_worker,
                train_loop_config={
                    "config": config,
                    "loggers": list(loggers),
                    "data_root": data_root,
                    "checkpoint": checkpoint_path is not None,
                    "checkpoint_dir": checkpoint_dir,  # resumable checkpoints (a shared folder)
                    "report": report_to_tune,
                    "run_id": task.run_id,
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
                    name=f"trial_{task.number:03d}-{task.run_id[:8]}",
                    storage_path=str(storage),
                    callbacks=run_callbacks,
                    failure_config=FailureConfig(max_failures=WORKER_RESTARTS if checkpoint_dir else 0),
                ),
            )
            result = trainer.fit()  # raises TrainingFailedError (the worker's error inside) on a failure
        finally:
            shutil.rmtree(storage, ignore_errors=True)
        metrics = result.return_value
        if not isinstance(metrics, dict):
            raise RuntimeError(f"the Ray Train run ended without rank 0's metrics (returned {metrics!r})")
        if DIVERGED in metrics:
            raise TrainingDiverged(*metrics[DIVERGED])
        if checkpoint_path is not None:  # trainers.fit's contract: the final weights at checkpoint_path
            fetch_final_weights(task, Path(checkpoint_path))
        return metrics

    return fit


def fetch_final_weights(task, path: Path) -> None:
    """Rank 0's final checkpoint (logged to the child run from wherever rank 0 ran) to `path`, for
    what reads it after training (a study's evals:)."""
    import mlflow

    with tempfile.TemporaryDirectory(prefix="satsweep-final-") as folder:
        local = mlflow.artifacts.download_artifacts(
            run_id=task.run_id,
            artifact_path=CHECKPOINT_ARTIFACT,
            dst_path=folder,
            tracking_uri=task.tracking_uri,
        )
        shutil.move(local, path)


def train_worker(config: dict) -> dict | None:
    """One Ray Train worker: its part of the trial (see the module docstring); rank 0 returns the
    final metrics."""
    import ray.train

    from trainers.fit import fit_process  # Lightning: imported by the workers, not by the launcher

    cfg = config["config"]
    rank = ray.train.get_context().get_world_rank()
    tag_worker_nodes(rank, config["tracking_uri"], config["run_id"])
    if rank == 0:
        tag_start_checkpoint(config.get("checkpoint_dir"), config["tracking_uri"], config["run_id"])
    group = ray.util.get_current_placement_group()

    def report_with_group(metrics: dict) -> None:  # the launcher frees the group of a stopped trial
        ray.train.report({**metrics, PLACEMENT_GROUP: group.id.hex() if group else ""})

    with tempfile.TemporaryDirectory(prefix="satsweep-ckpt-") as folder:
        checkpoint = Path(folder) / CHECKPOINT_NAME if config["checkpoint"] else None
        try:
            metrics = fit_process(
                cfg,
                loggers=config["loggers"],
                callbacks=[report_callback(report_with_group)] if config["report"] else [],
                data_root=config["data_root"],
                checkpoint_path=checkpoint,
                lightning=ray_lightning_kwargs(),
                checkpoint_dir=config.get("checkpoint_dir"),
            )
        except TrainingDiverged as err:  # every worker sees it at the same step (the loss is global)
            return {DIVERGED: [err.step, err.value]} if rank == 0 else None
        if rank == 0 and checkpoint is not None and checkpoint.is_file():
            client(config["tracking_uri"]).log_artifact(
                config["run_id"], str(checkpoint), artifact_path=CHECKPOINT_FOLDER
            )
    return metrics if rank == 0 else None


def tag_start_checkpoint(folder: str | None, tracking_uri: str, run_id: str) -> None:
    """The checkpoint the workers start from (a launch's resume, or Ray Train's restart of the
    worker group after a worker died), as the child run's tag `sweep.workers_resumed_from`."""
    # torch: only a data-parallel trial gets here, and every trial's worker imports this module
    from trainers.checkpoint_files import latest_valid

    latest = latest_valid(folder, log=lambda line: None) if folder else None
    if latest is not None:
        client(tracking_uri).set_tag(run_id, "sweep.workers_resumed_from", latest.name)


def tag_worker_nodes(rank: int, tracking_uri: str, run_id: str) -> None:
    """The Ray node of every worker, in rank order, as the child run's tag `ray.worker_nodes`."""
    import ray
    import torch.distributed as dist

    nodes = [None] * dist.get_world_size()
    dist.all_gather_object(nodes, ray.get_runtime_context().get_node_id())
    if rank == 0:
        client(tracking_uri).set_tag(run_id, "ray.worker_nodes", ",".join(nodes))


def free_placement_group(hex_id: str) -> bool:
    """Removes the placement group of a Ray Train run whose trial Tune stopped (ASHA, Ctrl-C).

    Tune ends a stopped trial's process, and with it the Ray Train controller it owns; Ray Train's
    own cleaner then asks the State API whether the controller died, which needs Ray's dashboard
    (off here, and in many clusters): without this the group, and its CPUs/GPUs, stay reserved
    and the next data-parallel trial waits forever. Removing it also ends the workers at once."""
    import ray
    from ray._raylet import PlacementGroupID
    from ray.util.placement_group import PlacementGroup, placement_group_table

    if not hex_id:
        return False
    group = PlacementGroup(PlacementGroupID.from_hex(hex_id))
    if placement_group_table(group).get("state") in (None, "REMOVED"):
        return False
    ray.util.remove_placement_group(group)
    return True
