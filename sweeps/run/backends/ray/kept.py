"""A local Ray kept between launches (`ray: {keep: true}` or `--keep-ray`), said and owned.

Ray's start is the largest part of a launch's fixed cost on a small machine (~6.5 s on 2 cores,
docs/bench/launch_costs.md). With `keep`, the first launch starts a local head that outlives it
(in a process of its own session, so Ctrl-C of the launcher does not reach it) and records it in
`$SWEEPS_KEPT_RAY` (default ~/.cache/sweeps/kept-ray.json): its address, its processes (pid and
start time), CPUs, GPUs, session folder, Ray's version, the Python, the project checkout its
workers import and the environment variables trials read (`trial_env`). The next launch with `keep`
joins it when all of these match (workers take their environment from the Ray that starts them,
not from the launch that joins it), else says why and starts a Ray of its own for that launch.
`python -m sweeps.launch --stop-ray` ends the recorded processes (and what they started), nothing
else; a record whose processes died is removed.

The head is started as the launcher's own (`head.bare_head`: no autoscaler monitor, log monitor or
dashboard API server), in a working folder that outlives any launch: its workers inherit it.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from sweeps.run.backends.ray.head import bare_head

RECORD_ENV = "SWEEPS_KEPT_RAY"
STOP_HINT = "python -m sweeps.launch --stop-ray"
START_TIMEOUT_S = 120


def record_path() -> Path:
    return Path(os.environ.get(RECORD_ENV) or Path.home() / ".cache" / "sweeps" / "kept-ray.json")


@dataclasses.dataclass(frozen=True)
class KeptRay:
    address: str  # the GCS address a driver joins
    processes: dict[str, float]  # pid -> its start time (a reused pid is not ours)
    num_cpus: int
    num_gpus: int
    session_dir: str
    ray_version: str
    python: str
    project: str  # the checkout the workers import (PYTHONPATH's first entry at the start)
    started: float
    env: dict[str, str] = dataclasses.field(default_factory=dict)  # `trial_env` at the start
    startup_concurrency: int = 0  # workers Ray starts at once (`system_config`); 0: older (its CPUs)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)

    def describe(self) -> str:
        pids = ", ".join(sorted(self.processes, key=int)[:3])
        return f"Ray at {self.address} ({self.num_cpus} CPUs, pids {pids}, ...; session {self.session_dir})"


def system_config(startup_concurrency: int) -> dict:
    """The head's Ray settings, the same for the launcher's own local Ray and the kept one."""
    return {
        # Ray prestarts one idle worker a CPU for the first driver; trials run in Tune's actors,
        # which start their own, so those idle workers only took CPU from Ray's start.
        "prestart_worker_first_driver": False,
        # Ray starts at most one worker a CPU at once; fractional-CPU trials need one a slot
        "worker_maximum_startup_concurrency": startup_concurrency,
    }


def wanted(num_cpus: int | None, num_gpus: int | None, startup_concurrency: int = 1) -> dict:
    """What a launch needs of a kept Ray (the fields `mismatch` compares; the startup
    concurrency only as a floor: a kept Ray that starts more workers at once fits)."""
    import ray

    return {
        "num_cpus": num_cpus or os.cpu_count() or 1,
        "startup_concurrency": startup_concurrency,
        "num_gpus": num_gpus if num_gpus is not None else _gpus_here(),
        "ray_version": ray.__version__,
        "python": sys.executable,
        "project": project_root(),
        "env": trial_env(),
    }


# The environment a trial's worker reads (threads, devices, Ray's, torch's, MLflow's, Hugging Face's):
# a kept Ray's workers have the one of the launch that started it, so a launch with another joins none.
TRIAL_ENV_PREFIXES = (
    "RAY_", "OMP_", "MKL_", "CUDA_", "NCCL_", "TORCH", "PYTORCH_", "MLFLOW_", "HF_", "TOKENIZERS_",
)  # fmt: skip


def trial_env() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(TRIAL_ENV_PREFIXES)}


def _gpus_here() -> int:
    """The GPUs Ray would find here (num_gpus: null), without importing torch."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip()])
    return len(list(Path("/dev").glob("nvidia[0-9]*")))


def project_root() -> str:
    return os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]


def mismatch(kept: KeptRay, want: dict) -> list[str]:
    """What differs between the kept Ray and what this launch needs, in words ([] = it matches)."""
    out = [
        f"{k} {want[k]} here, {getattr(kept, k)} kept"
        for k in want
        if k not in ("env", "startup_concurrency") and getattr(kept, k) != want[k]
    ]
    starts = kept.startup_concurrency or kept.num_cpus  # an older record: Ray's own limit, its CPUs
    if starts < want.get("startup_concurrency", 0):
        out.append(f"{want['startup_concurrency']} trial slots here, the kept Ray starts "
                   f"{starts} workers at once")  # fmt: skip
    here, there = want.get("env", {}), kept.env
    if names := sorted(k for k in here.keys() | there.keys() if here.get(k) != there.get(k)):
        out.append(f"environment variables {', '.join(names)} differ")
    return out


def read(path: Path | None = None) -> KeptRay | None:
    """The record, None when there is none or it lacks a field. Fields it does not know (a record
    written by another version of this project) are left out: its Ray can still be stopped, and a
    launch compares what both know (`mismatch`)."""
    try:
        data = json.loads((path or record_path()).read_text())
        known = {f.name for f in dataclasses.fields(KeptRay)}
        return KeptRay(**{k: v for k, v in data.items() if k in known})
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def _ours(pid: str, started: float) -> psutil.Process | None:
    """The recorded process when it still runs (the same pid and start time), else None."""
    try:
        proc = psutil.Process(int(pid))
        same = abs(proc.create_time() - started) < 1e-2 and proc.status() != psutil.STATUS_ZOMBIE
        return proc if same else None
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None


def alive(kept: KeptRay) -> bool:
    """Every recorded process runs and the session folder is there (Ray's GCS and raylet among them)."""
    return Path(kept.session_dir).is_dir() and all(_ours(p, t) for p, t in kept.processes.items())


def stop(path: Path | None = None, grace_s: float = 5.0) -> str:
    """Ends the recorded processes and what they started (workers, agents), removes the record;
    returns what it did, in words."""
    path = path or record_path()
    kept = read(path)
    if kept is None:
        path.unlink(missing_ok=True)
        return f"no kept Ray recorded ({path})"
    procs = [p for p in (_ours(pid, t) for pid, t in kept.processes.items()) if p is not None]
    family = {p.pid: p for p in procs}
    for proc in procs:
        try:
            family.update((c.pid, c) for c in proc.children(recursive=True))
        except psutil.NoSuchProcess:
            continue
    alive = end_in_ray_order(family.values(), grace_s)
    path.unlink(missing_ok=True)
    if alive:
        pids = ", ".join(str(p.pid) for p in alive)
        return f"stopped the kept {kept.describe()}: {len(family)} process(es), of which {pids} still ending"
    return f"stopped the kept {kept.describe()}: {len(family)} process(es)"


def end_in_ray_order(procs, grace_s: float = 5.0) -> list[psutil.Process]:
    """Ends a Ray node's processes in `ray stop`'s order: the raylets (their agents share their
    fate), the rest, the GCS; what outlives SIGTERM by `grace_s` gets SIGKILL. Sent SIGTERM all at
    once, the raylet and the GCS outlived it, every time (stop 63: 5 s of grace each stop). Returns
    what is still ending `grace_s` after its SIGKILL (a loaded machine tears a large process down
    slowly), so that a caller says "stopped" only when it is true."""
    killed = []
    for bucket in _in_ray_order(procs):
        for proc in bucket:
            try:
                proc.terminate()
            except psutil.NoSuchProcess:
                continue
        for proc in _wait_ended(bucket, grace_s):  # left: Ray's agents ignore SIGTERM for a while
            try:
                proc.kill()
                killed.append(proc)
            except psutil.NoSuchProcess:
                continue
    return _wait_ended(killed, grace_s)


def _in_ray_order(procs) -> list[list[psutil.Process]]:
    """`procs` in the buckets `ray stop` ends one after the other: raylets, the rest, GCS servers."""
    buckets: list[list[psutil.Process]] = [[], [], []]
    for proc in procs:
        try:
            name = proc.name()
        except psutil.NoSuchProcess:
            continue
        buckets[0 if name == "raylet" else 2 if name == "gcs_server" else 1].append(proc)
    return [b for b in buckets if b]


def _wait_ended(procs, timeout: float) -> list[psutil.Process]:
    """Those of `procs` still running after up to `timeout` seconds. Not psutil.wait_procs: for a
    process that is not ours, it waits until the pid is gone, so an ended process that its parent
    has not reaped yet (a zombie) held it for the whole timeout."""
    alive, deadline = list(procs), time.monotonic() + timeout
    while alive:
        alive = [p for p in alive if not _ended(p)]
        if not alive or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    return alive


def _ended(proc: psutil.Process) -> bool:
    """Gone, or a zombie: it has ended and waits for its parent (an init that reaps slowly or not
    at all, in some containers) to read its exit status."""
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def clean_stale(path: Path | None = None) -> KeptRay | None:
    """The record when its Ray runs; a record whose processes died is removed (with whatever of
    them is left), and None returned."""
    path = path or record_path()
    kept = read(path)
    if kept is None:
        return None
    if alive(kept):
        return kept
    stop(path, grace_s=1.0)
    return None


class _RecordLock:
    """One launch at a time starts or judges the kept Ray (two launches at once: one head)."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = open(path.with_suffix(".lock"), "a")  # noqa: SIM115 (held for the block)

    def __enter__(self):
        fcntl.flock(self.handle, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


def join_or_start(want: dict, temp_dir: str | None, say) -> KeptRay | None:
    """The kept Ray this launch joins: the recorded one when it runs and matches `want`, else a new
    one started for this and later launches; None (after saying why) when a running one does not
    match: the caller starts a Ray of its own, as without `keep`."""
    path = record_path()
    with _RecordLock(path):
        kept = clean_stale(path)
        if kept is not None:
            if differs := mismatch(kept, want):
                say(f"the kept Ray does not fit this launch ({'; '.join(differs)}): this launch starts "
                    f"its own Ray; `{STOP_HINT}` ends the kept one")  # fmt: skip
                return None
            say(f"joining the kept {kept.describe()}; `{STOP_HINT}` ends it")
            return kept
        kept = start(want, temp_dir, path)
        say(f"started a kept {kept.describe()} for this and later launches (record {path}); "
            f"`{STOP_HINT}` ends it")  # fmt: skip
        return kept


def start(want: dict, temp_dir: str | None, path: Path) -> KeptRay:
    """Starts the head in a process of its own session (this module's `main`), which records it
    in `path` and exits; the head's processes outlive it and the launch."""
    args = json.dumps({**want, "temp_dir": temp_dir})
    cmd = [sys.executable, "-m", "sweeps.run.backends.ray.kept", str(path), args]
    log = path.with_suffix(".log")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    with open(log, "w") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=out, cwd=path.parent, env=env,
                              start_new_session=True, timeout=START_TIMEOUT_S)  # fmt: skip
    kept = read(path)
    if proc.returncode != 0 or kept is None:
        tail = log.read_text()[-3000:]
        raise RuntimeError(f"could not start the kept Ray (exit {proc.returncode}):\n{tail}")
    return kept


def main() -> None:
    """The kept head's start: a head node as `ray start --head` makes one (its processes are not
    ended with this one), without the launcher's idle daemons, recorded in `sys.argv[1]`."""
    import ray
    import ray._private.node as node_module
    from ray._private.parameter import RayParams

    path, want = Path(sys.argv[1]), json.loads(sys.argv[2])
    params = RayParams(
        num_cpus=want["num_cpus"],
        num_gpus=want["num_gpus"],
        include_dashboard=False,
        temp_dir=want["temp_dir"],
        _system_config=system_config(want["startup_concurrency"]),  # as the launcher's own local Ray
    )
    with bare_head():
        node = node_module.Node(params, head=True, shutdown_at_exit=False, spawn_reaper=False)
    procs = psutil.Process().children(recursive=True)
    kept = KeptRay(
        address=node.address,
        processes={str(p.pid): p.create_time() for p in procs},
        num_cpus=want["num_cpus"],
        num_gpus=want["num_gpus"],
        session_dir=node.get_session_dir_path(),
        ray_version=ray.__version__,
        python=want["python"],
        project=want["project"],
        started=time.time(),
        env=want["env"],
        startup_concurrency=want["startup_concurrency"],
    )
    tmp = path.with_suffix(".tmp")
    tmp.write_text(kept.to_json())
    tmp.replace(path)


if __name__ == "__main__":
    main()
