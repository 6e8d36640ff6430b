"""Data-parallel training of one trial on `train.workers` processes (DDP; gloo on CPU, nccl on CUDA).

Semantics, whoever starts the processes:
- `train.batch_size` is the global batch: every worker draws the same global batch (it depends
  only on the seed and the step) and keeps its own `batch_size / workers` rows, so a k-worker
  run sees exactly the examples of a 1-worker run;
- the token budget, `tokens` and the losses are global (losses are averaged over workers every
  step, which also makes a divergence stop every worker together);
- the final metrics combine over workers as their record in `trainers.metrics` says (`workers`):
  `peak_mem_mb` and its breakdown are the maximum over workers, `train_tokens_per_s` is rank 0's
  clock of the global batch (`reduce_over_workers`);
- rank 0 alone logs to the loggers, reports and writes the checkpoint.

The workers are started by `spawn_fit` (every backend, `python -m trainers.train`): k processes
on one machine, each runs the one-process fit it is handed (`trainers.fit` hands it
`fit_process`) with Lightning's `DDPStrategy` and a `LightningEnvironment` told its rank by the
environment. (Lightning's own script launcher re-runs `sys.argv`, which would start the sweep
launcher k times, and its spawn launcher keeps only rank 0's `callback_metrics`.) The Ray backend
starts them instead through Ray Train (`sweeps.run.backends.ray.train`), which may place them on
several nodes; the semantics are the same.
"""

from __future__ import annotations

import datetime
import multiprocessing
import multiprocessing.connection
import os
import socket
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING

from trainers.metrics import worker_reductions

if TYPE_CHECKING:
    from trainers.config import TrialConfig

# A worker that dies leaves the others waiting in a collective; they give up after this.
COLLECTIVE_TIMEOUT = datetime.timedelta(minutes=5)


def process_group_backend() -> str:
    import torch

    return "nccl" if torch.cuda.is_available() else "gloo"


def worker_threads(workers: int, num_threads: int | None) -> int:
    """Torch threads of one worker: the trial's setting, else this machine's cores shared out."""
    return num_threads or max(1, (os.cpu_count() or 1) // workers)


def lightning_kwargs(workers: int) -> dict:
    """Trainer arguments of one of `workers` processes started by `spawn_fit`."""
    from lightning.pytorch.plugins.environments import LightningEnvironment
    from lightning.pytorch.strategies import DDPStrategy

    return {
        "devices": workers,
        "num_nodes": 1,
        "strategy": DDPStrategy(
            process_group_backend=process_group_backend(),
            cluster_environment=LightningEnvironment(),  # LOCAL_RANK set: processes exist already
            timeout=COLLECTIVE_TIMEOUT,
        ),
    }


def reduce_over_workers(metrics: dict[str, float]) -> dict[str, float]:
    """`metrics` with every key the metric table all-reduces (`trainers.metrics.worker_reductions`:
    max, min, sum, mean) replaced by its value over the process group (when there is one)."""
    import torch
    import torch.distributed as dist

    reductions = worker_reductions(metrics)
    if not reductions or not (dist.is_available() and dist.is_initialized()):
        return metrics
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    op = dist.ReduceOp
    ops = {"max": op.MAX, "min": op.MIN, "sum": op.SUM, "mean": op.SUM}
    out = dict(metrics)
    for name, keys in reductions.items():  # gloo has no AVG: a mean is the sum over the group's size
        values = torch.tensor([metrics[k] for k in keys], dtype=torch.float64, device=device)
        dist.all_reduce(values, op=ops[name])
        if name == "mean":
            values /= dist.get_world_size()
        out.update(zip(keys, values.tolist(), strict=True))
    return out


def close_process_group() -> None:
    """Waits for every worker, then destroys the process group. A gloo group left to the
    interpreter's exit aborts the process now and then ("terminate called without an active
    exception", SIGABRT; how often: docs/bench/README.md) although its run was complete."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WorkerFailed(RuntimeError):
    """A worker process ended without a result (killed, or an error that could not be sent)."""


def spawn_fit(
    fit_process: Callable[..., dict[str, float]], cfg: TrialConfig, **fit_kwargs
) -> dict[str, float]:
    """Trains on `cfg.train.workers` fresh processes of this machine, each running
    `fit_process(cfg, **fit_kwargs, lightning=...)` (a module-level function: it is pickled by name,
    the frozen config by value); returns rank 0's metrics or raises the
    first worker's error (a TrainingDiverged stays one). `fit_kwargs` (loggers, callbacks, ...)
    are pickled to the workers. Every worker is stopped when one fails or this call is
    interrupted (the trial's wall-clock limit included)."""
    workers = cfg.train.workers
    ctx = multiprocessing.get_context("spawn")  # fork would copy this process's threads (MLflow, Ray)
    port = free_port()
    results = ctx.SimpleQueue()
    procs = [
        ctx.Process(
            target=_worker_main,
            args=(fit_process, rank, workers, port, cfg, fit_kwargs, results),
            name=f"satsweep-rank{rank}",
        )
        for rank in range(workers)
    ]
    for p in procs:
        p.start()
    try:
        return _collect(procs, results)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()


def _collect(procs, results) -> dict[str, float]:
    """Reads the workers' results while they run (a payload larger than a pipe's buffer blocks
    its writer until it is read) and raises the first error as soon as it arrives."""
    waiting = {p.sentinel: p for p in procs}
    metrics = None

    def drain():
        nonlocal metrics
        while not results.empty():
            rank, status, payload = results.get()
            if status == "error":
                raise payload
            if rank == 0:
                metrics = payload

    while waiting:
        drain()
        for sentinel in multiprocessing.connection.wait(list(waiting), timeout=0.5):
            proc = waiting.pop(sentinel)
            proc.join()  # the sentinel fires before the exit code is read
            if proc.exitcode != 0:
                drain()
                raise WorkerFailed(f"{proc.name} ended with exit code {proc.exitcode} and no result")
    drain()
    if metrics is None:
        raise WorkerFailed("rank 0 ended without a result")
    return metrics


def _worker_main(
    fit_process: Callable, rank: int, workers: int, port: int, cfg: TrialConfig, fit_kwargs: dict, results
) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(workers),
        NODE_RANK="0", LOCAL_RANK=str(rank), RANK=str(rank),
    )  # fmt: skip
    try:
        metrics = fit_process(cfg, **fit_kwargs, lightning=lightning_kwargs(workers))
        close_process_group()
        results.put((rank, "ok", metrics if rank == 0 else None))
    except BaseException as err:  # sent to the parent, which raises it
        results.put((rank, "error", _picklable(err)))
        raise SystemExit(1) from None


def _picklable(err: BaseException) -> BaseException:
    import pickle

    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:
        text = "".join(traceback.format_exception(err))
        return RuntimeError(f"{type(err).__name__}: {err}\n\n{text}")
