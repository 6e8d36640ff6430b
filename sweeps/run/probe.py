"""The fronts' throughput axis: every architecture of a launch timed side by side in one process.

A trial's own clock (`train_tokens_per_s`) shares the machine with whatever else runs, and trials
run one after another, so a slow minute lands on one design. Instead, once per distinct
architecture (the point's model and batch shape, without the seed), the probe builds it and the
baseline of the same shape (`model.residual: {kind: none}`) once and times their training steps
side by side in one process, in interleaved rounds (`trainers.timing`: round r runs every
architecture `steps` times, in a rotated order, and keeps its fastest step, since interference
only ever adds time):

    tokens_per_s_ratio = median over rounds of (baseline seconds per step / its seconds per step)
    tokens_per_s       = tokens_per_s_ratio x the baseline's tokens/s (median of its rounds)

Drift and a busy neighbour hit every architecture of a round alike, so the ratios hold where
absolute speeds do not (how well, launch against launch, quiet and beside a busy loop:
docs/fronts/README.md, "Throughput"); designs closer than that agreement are a tie, which the
fronts' throughput intervals over the rounds show. On CPU the rounds run on one thread each, shared among one
process per thread of the trial (see `time_architectures`), and the baseline's absolute speed
is timed at the trial's thread count. Results are cached in results/<name>/costs.json by
architecture hash and machine (host, CPU or GPU model, threads), so a resumed or extended study
re-times nothing; each run's child in MLflow gets both values. A study of one architecture (the
baseline alone) has no ratio to pair: its probe times only the absolute speed. It runs where
trials run: in the launcher for backend local, as a Ray task with one trial's resources for
backend ray (on the trial's kind of device).

A study whose runs all share one architecture and that needs no speed before its runs
(`speed_from_trials`) times nothing before its trials: with one design there is no ratio to pair,
and the absolute speed alone cost seconds of every launch's fixed cost (docs/bench/launch_costs.md),
where its trials measure it themselves over every training step. Its tokens_per_s is then the
trials' own `train_tokens_per_s` (entry clock `trials`): the median over its completed trials, the
interval theirs, recorded in the same cache as a probe's.

A data-parallel trial (`resources.workers` k) is probed as one worker's step on its share of the
batch, and `tokens_per_s` is k times that worker's: the compute a design costs at that scale,
without the gradient all-reduce (the trial's own `train_tokens_per_s` includes it).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from arch.configtree import ConfigError
from sweeps.report.costs import (
    OWN_SPEED,
    TRIALS_CLOCK,
    costs_path,
    entry,
    load_costs,
    metric_values,
    save_costs,
)
from sweeps.run.probe_device import DoesNotFit, Guarded, refusal
from sweeps.study.architecture import arch_key, architecture, tokens_per_step, train_of, without_split
from sweeps.study.reference import baseline_of
from trainers.host import keep_freed_memory
from trainers.machine import kernels, machine_key, resolve_precision, where_trials_run
from trainers.timing import interleaved

TRIAL_THREADS = "baseline@trial_threads"  # the baseline's step timed at the trial's thread count
# ... in ceil(rounds / 2) samples: one absolute median needs fewer samples than the paired ratios
# (it scales every design's tokens/s alike)
TRIAL_THREADS_SAMPLES_PER_ROUND = 0.5


def time_architectures(
    archs: dict[str, dict],
    rounds: int,
    steps: int,
    base_key: str,
    max_models: int | None = None,
    resident: bool = False,
) -> dict:
    """Seconds per training step of each architecture, per round, interleaved
    (`trainers.timing.interleaved`: every model built once); runs anywhere (a Ray task included):
    plain data in, plain data out.

    `max_models`: how many models are built at once (None: all). With fewer, the architectures
    are timed in groups, each with the baseline, and each ratio pairs with its own group's
    baseline rounds (`base_seconds_per_step`). `resident` (CUDA): one model on the device at a time,
    the others' weights and optimizer state parked in host memory between their turns (moved
    outside the timed steps), for models that do not fit the device together.

    A step that runs out of device memory ends the probe with `{"does_not_fit": ...}` (the
    architecture's key, how many models were on the device), which `Probe` turns into a refusal.

    On CPU the rounds run on one thread: a step on two threads waits at every parallel region
    for the slower thread, so another job on one core of a small machine moves every ratio (it
    more than doubled a two-thread step, and left a one-thread step as it was). A one-thread
    step is timed by its thread's CPU time, which a neighbour sharing the core cannot lengthen;
    so the trial's cores can all time rounds at once: the rounds are shared among as many
    one-thread processes as the trial has threads (this one and children started here), each
    pairing its own rounds, which halves the probe's time on two cores without moving the
    ratios, quiet or busy (the measurements: docs/fronts/README.md, "Throughput"). Then the baseline
    alone is timed at the trial's thread count (wall), for the absolute tokens/s
    (`trial_threads_seconds`); for a one-thread trial its rounds give it (thread CPU: its speed
    on a core of its own). On a GPU every timing runs in this process at the trial's setting
    (wall), and the baseline's own rounds give the absolute tokens/s.
    """

    import torch

    trial_threads = archs[base_key]["num_threads"] or torch.get_num_threads()
    device = _device()
    try:
        return _time_architectures(
            archs, rounds, steps, base_key, max_models, resident, trial_threads, device
        )
    except DoesNotFit as err:
        return {"does_not_fit": {"key": err.key, "models": err.models, "device": _device_name(device)},
                "machine": machine_key(trial_threads)}  # fmt: skip


def _time_architectures(archs, rounds, steps, base_key, max_models, resident, trial_threads, device) -> dict:
    if len(archs) == 1:  # the baseline alone: no ratio to pair, only its absolute speed to time
        samples = math.ceil(rounds * TRIAL_THREADS_SAMPLES_PER_ROUND)
        return _time_baseline_alone(archs[base_key], base_key, samples, steps, trial_threads, device)
    if device.type == "cuda":
        seconds, base_seconds = time_rounds(
            archs, range(rounds), steps, base_key, max_models, trial_threads, resident
        )
        trial_seconds, processes = seconds[base_key], 1
    else:
        processes = max(1, min(trial_threads, rounds, _usable_cpus()))
        shares = [range(i, rounds, processes) for i in range(processes)]
        seconds, base_seconds = _time_shares(archs, shares, steps, base_key, max_models)
        trial_seconds = seconds[base_key]
        if trial_threads > 1:  # alone now: every core the trial has is free
            baseline = {TRIAL_THREADS: _guarded(base_key, archs[base_key], device, 1)}
            samples = math.ceil(rounds * TRIAL_THREADS_SAMPLES_PER_ROUND)
            trial_seconds = _interleaved(baseline, range(samples), steps, trial_threads, device)[
                TRIAL_THREADS
            ]
    return {
        "seconds_per_step": seconds,
        "base_seconds_per_step": base_seconds,
        "trial_threads_seconds": trial_seconds,
        "processes": processes,
        "clock": "wall" if device.type == "cuda" else "thread_cpu",  # of the ratio rounds
        "machine": machine_key(trial_threads),
        "kernels": kernels(),  # what the trials' digits depend on (trainers.machine)
    }


def _time_baseline_alone(arch: dict, key: str, samples: int, steps: int, threads: int, device) -> dict:
    """`time_architectures` of a study with one architecture: its ratio to itself is 1 in every
    round, so only its absolute speed is timed, in `samples` samples at the trial's threads, here
    (one process: no child process, no model built twice)."""
    keep_freed_memory()  # as the trials run
    seconds = _interleaved({key: _guarded(key, arch, device, 1)}, range(samples), steps, threads, device)[key]
    one_thread_cpu = device.type == "cpu" and threads == 1
    return {
        "seconds_per_step": {key: seconds},
        "base_seconds_per_step": {key: seconds},
        "trial_threads_seconds": seconds,
        "processes": 1,
        "clock": "thread_cpu" if one_thread_cpu else "wall",
        "machine": machine_key(threads),
        "kernels": kernels(),
    }


def speed_from_trials(plan) -> bool:
    """True when the study of `plan` (a StudyPlan) takes its tokens_per_s from its trials' own
    clock instead of timing it first (see the module docstring): every run of its grid has the
    same architecture. Not for `budget.time` (each run's tokens come from the speed, before the
    run), data-parallel trials (the probe times one worker's compute, the trial's own clock
    includes the all-reduce), or a sampled space (its architectures come with its trials)."""
    study = plan.study
    if study.budget.time is not None or study.resources.workers > 1 or study.sampler.kind != "grid":
        return False
    return len({arch_key(architecture(plan.config(run))) for run in plan.grid}) == 1


def _device():
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _device_name(device) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def _guarded(key: str, arch: dict, device, models: int, park: bool = False) -> Guarded:
    """`_warm_step` of `arch`, its out-of-memory error (building or warming up) named."""
    import torch

    try:
        return Guarded(key, _warm_step(arch, device), device, models, park)
    except torch.cuda.OutOfMemoryError as err:
        raise DoesNotFit(key, models) from err


def time_rounds(
    archs: dict[str, dict],
    rounds: range,
    steps: int,
    base_key: str,
    max_models: int | None,
    threads: int,
    resident: bool = False,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """The interleaved `rounds` of every architecture at `threads` torch threads, in this process:
    (seconds per step of each, seconds per step of the baseline paired with each)."""
    import gc

    import torch

    keep_freed_memory()  # as the trials run
    device = _device()
    others = [k for k in archs if k != base_key]
    size = max(1, len(others) if max_models is None else max_models - 1)
    groups = [others[i : i + size] for i in range(0, len(others), size)] or [[]]
    seconds: dict[str, list[float]] = {}
    base_seconds: dict[str, list[float]] = {}
    park = resident and device.type == "cuda"
    for i, group in enumerate(groups):
        built = {}
        for k in (base_key, *group):  # parked: one on the device; else all of the group
            built[k] = _guarded(k, archs[k], device, 1 if park else len(group) + 1, park)
        wall = _interleaved(built, rounds, steps, threads, device)
        if i == 0:
            seconds[base_key] = base_seconds[base_key] = wall[base_key]
        for k in group:
            seconds[k], base_seconds[k] = wall[k], wall[base_key]
        del built
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return seconds, base_seconds


def _interleaved(built: dict, rounds: range, steps: int, threads: int, device) -> dict[str, list[float]]:
    """Seconds per step of each round: on one CPU thread the thread's CPU time (what a busy
    neighbour sharing the core cannot add to, `trainers.timing.Timings`), else wall time."""
    timings = interleaved(built, rounds, steps, device, dict.fromkeys(built, threads))
    return timings.thread if device.type == "cpu" and threads == 1 else timings.wall


def _time_shares(archs, shares: list[range], steps, base_key, max_models):
    """`time_rounds` of each share of the rounds on one thread, concurrently: the first share here,
    the others in child processes; their lists joined share after share (pairs stay pairs)."""
    args = [[archs, [s.start, s.stop, s.step], steps, base_key, max_models] for s in shares[1:]]
    children = [_RoundsChild(a) for a in args]
    try:
        parts = [time_rounds(archs, shares[0], steps, base_key, max_models, 1)]
        parts += [child.result() for child in children]
    finally:
        for child in children:
            child.close()
    seconds = {k: [t for part in parts for t in part[0][k]] for k in archs}
    base_seconds = {k: [t for part in parts for t in part[1][k]] for k in archs}
    return seconds, base_seconds


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class _RoundsChild:
    """A share of the probe's rounds in a child process (`python -c`, the same interpreter and
    import path): JSON arguments on its stdin, its `time_rounds` result as JSON in a file."""

    def __init__(self, args: list):
        import subprocess
        import sys
        import tempfile

        self.dir = Path(tempfile.mkdtemp(prefix="probe-rounds-"))
        code = "from sweeps.run.probe import _rounds_child_main; _rounds_child_main()"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        with open(self.dir / "stderr", "w") as err:  # a file, not a pipe: a full pipe stalls the child
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code, str(self.dir / "result.json")],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, text=True, env=env,
            )  # fmt: skip
        self.proc.stdin.write(json.dumps(args))
        self.proc.stdin.close()

    def result(self) -> tuple[dict, dict]:
        if self.proc.wait() != 0:
            stderr = (self.dir / "stderr").read_text()[-4000:]
            raise RuntimeError(f"cost probe: a child process timing rounds failed:\n{stderr}")
        seconds, base_seconds = json.loads((self.dir / "result.json").read_text())
        return seconds, base_seconds

    def close(self) -> None:
        """Stops the child if it still runs, removes its folder."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def _rounds_child_main() -> None:
    import sys
    import threading

    import torch

    parent = os.getppid()

    def end_with_parent():  # a killed probe (Ctrl-C, a cancelled Ray task) leaves no timing child
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=end_with_parent, daemon=True).start()
    archs, (start, stop, step), steps, base_key, max_models = json.loads(sys.stdin.read())
    torch.set_num_threads(1)
    result = time_rounds(archs, range(start, stop, step), steps, base_key, max_models, 1)
    Path(sys.argv[1]).write_text(json.dumps(result))


def _warm_step(arch: dict, device):
    """The architecture's training step as its trial runs it (`trainers.train_step` through
    `synthetic_step`: the trial's precision, loss path, activation checkpointing, micro-batch and
    grad_accum, clipping and AdamW groups: `sweeps.study.architecture.train_of`), built and run once
    (optimizer state, allocator warm-up, compile)."""
    import torch

    # here: a launch whose probe runs elsewhere (or not at all) starts without torch
    from trainers.synthetic_step import synthetic_step

    train = train_of(arch)
    precision = resolve_precision(train.precision)
    autocast = torch.bfloat16 if precision == "bf16-mixed" else None
    cast = torch.bfloat16 if precision == "bf16-true" else None
    step = synthetic_step(
        arch["model"], arch["batch_size"], arch["seq_len"], device, autocast, train.compile,
        param_dtype=cast, train=train,
    ).step  # fmt: skip
    step()
    return step


class Probe:
    """The cost probe of one study (see the module docstring).

    `run_task(fn, *args)` runs `fn` where trials run (the backend's). `ensure(configs)` times the
    architectures of `configs` not cached yet; `metrics(config)` gives the probe's values.
    `resident`: one model on the device at a time (`time_architectures`; `resident_on_device`).

    Under `train.micro_batch: auto` designs may run other micro-batch splits of the same global
    batch; a design is timed against the baseline at the baseline's own split (the one its trial
    runs, when a baseline config of the same global batch is among those ensured), and a probe
    step is one optimizer step (all its micro-batches), so the two cover the same tokens."""

    def __init__(
        self, study, run_task: Callable | None = None, stream=None, resident: bool = False, from_trials=False
    ):
        self.from_trials = from_trials  # `speed_from_trials`: `record` takes each trial's own speed
        self.path = costs_path(study)
        self.rounds, self.steps = study.probe.rounds, study.probe.steps
        self.max_models = study.probe.max_models
        self.resident = resident
        self.run_task = run_task or (lambda fn, *args: fn(*args))
        self.stream = stream
        self.machine = None
        self.kernels: dict | None = None
        self.entries = load_costs(self.path)
        self.seconds = 0.0
        self.baselines: dict[str, dict] = {}  # split-free key -> the baseline trial's own architecture

    def __getstate__(self):  # Ray Tune pickles its search algorithm (and so the driver and this)
        return {**self.__dict__, "stream": None, "run_task": None}

    def _cached(self, key: str) -> dict | None:
        return self.entries.get(self.machine, {}).get(key)

    def baseline_for(self, arch: dict) -> dict:
        """The probe's baseline of `arch`: the baseline residual at the baseline trial's own split
        when one was ensured, else at `arch`'s."""
        base = baseline_of(arch)
        return self.baselines.get(arch_key(without_split(base)), base)

    def ensure(self, configs: Iterable) -> None:
        if self.from_trials:  # nothing to time before the trials (`record`)
            return
        configs = list(configs)
        archs = [architecture(cfg) for cfg in configs]
        for arch in archs:
            if arch == baseline_of(arch):  # a baseline trial: its split is the one to pair with
                self.baselines.setdefault(arch_key(without_split(arch)), arch)
        groups: dict[str, dict] = {}
        for cfg, arch in zip(configs, archs, strict=True):
            if self.machine is None:  # where trials run, asked once (a Ray task for backend ray)
                self.machine = self.run_task(machine_key, cfg.train.num_threads)
            base = self.baseline_for(arch)
            group = groups.setdefault(arch_key(base), {"baseline": base, "archs": {}})
            group["archs"][arch_key(arch)] = arch
        for base_key, group in groups.items():
            missing = {k: a for k, a in group["archs"].items() if self._cached(k) is None}
            if missing:
                self._measure(base_key, group["baseline"], missing)

    def _measure(self, base_key: str, baseline: dict, missing: dict[str, dict]) -> None:
        start = time.time()
        archs = {base_key: baseline, **missing}
        result = self.run_task(
            time_architectures, archs, self.rounds, self.steps, base_key, self.max_models, self.resident
        )
        self.seconds += time.time() - start
        if "does_not_fit" in result:
            raise ConfigError([refusal(archs, result["does_not_fit"])])
        table = self.entries.setdefault(result["machine"], {})
        base_s = result["seconds_per_step"][base_key]
        paired = result["base_seconds_per_step"]
        tokens = tokens_per_step(baseline)
        if base_key not in table:
            base_tps = tokens / statistics.median(result["trial_threads_seconds"])
            table[base_key] = entry(baseline, base_s, base_s, base_tps, result["clock"])
            # the absolute scale every entry's tokens_per_s multiplies: its own timings' spread
            table[base_key]["baseline_tokens_per_s_samples"] = [
                tokens / s for s in result["trial_threads_seconds"]
            ]
        base_tps = table[base_key]["baseline_tokens_per_s"]
        for key, arch in missing.items():
            if key != base_key:
                seconds = result["seconds_per_step"][key]
                table[key] = entry(arch, seconds, paired[key], base_tps, result["clock"])
        for key in archs:
            if "kernels" in result:  # the report prints it with the verdicts
                table[key]["kernels"] = result["kernels"]
        save_costs(self.path, self.entries)
        if self.stream is not None:
            timed = (
                f"{len(archs)} architecture(s), {self.rounds} interleaved rounds of {self.steps} steps in "
                f"{result['processes']} process(es)"
                if len(archs) > 1
                else f"the baseline alone, {len(base_s)} samples of {self.steps} steps (no ratio to pair)"
            )
            took = f"{time.time() - start:.0f}s"
            print(f"cost probe: {timed}, {took} ({self.path})", file=self.stream, flush=True)

    def record(self, cfg, metrics: dict, where: tuple[str, dict] | None = None) -> None:
        """A completed trial's own speed (`train_tokens_per_s` in its `metrics`) joins its
        architecture's entry, for a study whose speed comes from its trials (`from_trials`); an
        entry a probe timed (a study probed by an earlier launch) is kept as it is. `where`: the
        machine the trial said it trained on (`Outcome.machine`), else asked where trials run."""
        own = metrics.get(OWN_SPEED)
        if not self.from_trials or own is None or not math.isfinite(own) or own <= 0:
            return
        if self.machine is None:  # the first trial's word, else a Ray task (once) or this process
            self.machine, self.kernels = where or self.run_task(where_trials_run, cfg.train.num_threads)
        arch = architecture(cfg)
        key = arch_key(arch)
        table = self.entries.setdefault(self.machine, {})
        found = table.get(key)
        if found is not None and found.get("clock") != TRIALS_CLOCK:
            return
        speeds = [*(found or {}).get("baseline_tokens_per_s_samples", []), own]
        seconds = [tokens_per_step(arch) / v for v in speeds]
        table[key] = entry(arch, seconds, seconds, statistics.median(speeds), TRIALS_CLOCK)
        table[key].update(baseline_tokens_per_s_samples=speeds, kernels=self.kernels)
        save_costs(self.path, self.entries)

    def metrics(self, cfg) -> dict[str, float]:
        entry = self._cached(arch_key(architecture(cfg)))
        if entry is None:
            return {}
        return metric_values(entry["tokens_per_s_ratio"], entry["baseline_tokens_per_s"])
