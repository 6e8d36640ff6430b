"""`python -m bench.scale`: the orchestrator at the scale of real searches, phase by phase.

Runs studies of stand-in trials (`tests.sweeps.fake_fit`: no training; `--trial-s` makes each
take that long) through the real launcher, in this process, for each sampler and trial count
asked, each in a fresh temporary folder (its own MLflow database and Optuna journal), and
measures, per launch:

- launcher CPU per trial: this process's CPU time (user + system) from the first trial's start
  to the last trial's end, less the stand-in fits' own CPU, over the trials (the fit calls the
  launcher's own MLflow logger and reports: those count as the launcher's);
- the sampler's CPU per suggestion (its `sample_relative` / `sample_independent` /
  `infer_relative_search_space` calls), and how it grows: first and last tenth of the trials;
- MLflow writes per trial (every `MlflowClient` call during the trials, driver and logger) and
  Optuna storage calls per trial (the journal's writes and reads), CPU seconds;
- the report (fronts, importances, figures, tags, hypervolume history): wall and CPU time, and
  the growth of peak RSS over it;
- a resume's read of the journal: a fresh storage replaying the whole file;
- the stores' sizes: the journal, mlflow.db, the artifacts folder.

Writes one JSON line per launch (`--jsonl`) and, with `--plot`, cost against trials as a PNG.
Backends: `local` (Optuna in this process, one trial at a time) and `ray` (ASHA needs it:
`--sampler asha`): `--concurrency N` trials at once on a local Ray of `--ray-cpus C` CPUs (each
trial asks for C / N of a CPU, so 32 fit on 2 cores). Every trial stamps its start and end
(bench.stamped_fit), from which the slots' use: trials running on average over the trial phase
and over its steady part, the idle fraction, the most at once. With Ray the launcher's CPU is
given in parts: this process (the driver), Ray's daemons, and the trial workers' CPU that was not
the fits' (their start-up and imports apart, per worker). `--real-imports`: the stand-in logs
through Lightning's logger, so its workers import what a real trial's import (Lightning, torch).
Every number is CPU time or wall time on whatever else the machine is doing: say how loaded it was.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import math
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import sweeps.run.launch as launching
from bench import stamped_fit
from sweeps.report.analysis import report_fronts
from sweeps.report.history import history
from sweeps.run.backends.ray.backend import RayBackend
from sweeps.run.driver import Driver
from sweeps.run.storage import load_trials
from sweeps.run.tracking import Tracker
from sweeps.study import load_study, samplers
from sweeps.study.sections import SamplerConfig
from tests.sweeps import fake_fit

SAMPLERS = ("grid", "tpe", "nsga2", "random", "gp", "asha")
LOSS_SHAPES = ("flat", "lr-bowl")


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", default="100,300,1000", help="trial counts, comma-separated")
    p.add_argument("--samplers", default="tpe,grid,nsga2", help=f"of {', '.join(SAMPLERS)}")
    p.add_argument("--backend", default="local", choices=("local", "ray"))
    p.add_argument("--trial-s", type=float, default=0.0, help="each stand-in trial's length")
    p.add_argument("--loss", default="flat", choices=LOSS_SHAPES,
                   help="the stand-in's val_loss: flat in lr (every point of a design ties: the whole "
                   "search is the front), or lr-bowl (best at lr 1e-3: a front of a few points)")  # fmt: skip
    p.add_argument("--concurrency", type=int, default=None, help="ray: trials at once (max_concurrent)")
    p.add_argument("--ray-cpus", type=int, default=None,
                   help="ray: the local Ray's CPUs, split over --concurrency trials")  # fmt: skip
    p.add_argument("--real-imports", action="store_true",
                   help="trials log through Lightning's logger (workers import it, torch)")  # fmt: skip
    p.add_argument("--mlflow-uri", default=None,
                   help="record on this MLflow tracking server (each launch an experiment of its own) "
                   "instead of a new SQLite store")  # fmt: skip
    p.add_argument("--objectives", type=int, default=2, choices=(2, 3), help="val_loss, peak_mem_mb[, tok/s]")
    p.add_argument("--jsonl", default=None, help="append one JSON line per launch here")
    p.add_argument("--plot", default=None, help="cost against trials, PNG (from --jsonl's lines)")
    p.add_argument("--keep", action="store_true", help="keep each launch's folder")
    p.add_argument("--replot", action="store_true", help="only draw --plot from --jsonl's lines")
    p.add_argument("--report-only", default=None, help="points, comma-separated: the report alone")
    p.add_argument("--seeds", type=int, default=1, help="--report-only: seeds per point")
    p.add_argument("--sampler-only", default=None, help="trial counts: each sampler alone (--samplers)")
    return p.parse_args(argv)


def study_tree(
    folder: Path,
    sampler: str,
    n: int,
    backend: str,
    objectives: int,
    concurrency=None,
    ray_cpus=None,
    mlflow_uri=None,
) -> dict:
    """A search over train.lr x two designs (grid: lr on a grid of n / 2 values), one seed a point.
    Ray: `concurrency` trials at once on a local Ray of `ray_cpus` CPUs (each trial asks for
    ray_cpus / concurrency of a CPU, so that all fit)."""
    from tests.factories import tiny_trial

    designs = {"choices": {"baseline": {"kind": "none"}, "sat": {"kind": "value_residual"}}}
    lr = {"low": 1.0e-4, "high": 1.0e-2, "log": True}
    if sampler == "grid":  # n / 2 rates, log-spaced
        k = max(2, n // 2)
        lr = {"choices": [float(f"{1e-4 * 100 ** (i / (k - 1)):.6g}") for i in range(k)]}
    tree = {
        "name": f"scale_{sampler}_{n}",
        "trial": tiny_trial(model={"d_model": 64, "d_ff": 128}),
        "space": {"model.residual": designs, "train.lr": lr},
        "repeats": 1,
        "backend": backend,
        "objectives": [{"metric": "val_loss"}, {"metric": "peak_mem_mb"}]
        + ([{"metric": "tokens_per_s", "direction": "maximize"}] if objectives == 3 else []),
        "hypervolume": {"val_loss": [2.0, 4.0], "peak_mem_mb": [50.0, 150.0]}
        | ({"tokens_per_s": [1000.0, 0.0]} if objectives == 3 else {}),
        "output": {"dir": str(folder / "results"), "mlflow_uri": f"sqlite:///{folder / 'mlflow.db'}"},
    }
    if mlflow_uri:  # a server outlives the launches: each its own experiment
        tree["name"] += f"_{folder.name.rsplit('-', 1)[-1]}"
        tree["output"]["mlflow_uri"] = mlflow_uri
    if backend == "ray" and (concurrency or ray_cpus):
        cpus = ray_cpus or os.cpu_count() or 1
        tree["ray"] = {"num_cpus": cpus}
        if concurrency:
            tree["max_concurrent"] = concurrency
            tree["resources"] = {"cpus": cpus / concurrency}
    if sampler == "asha":
        tree["sampler"] = {"kind": "tpe", "seed": 0}
        tree["scheduler"] = {"kind": "asha", "metric": "val_loss", "mode": "min", "grace_tokens": 1024}
    elif sampler != "grid":
        tree["sampler"] = {"kind": sampler, "seed": 0}
    if sampler != "grid":
        tree["n_trials"] = n
    return tree


class Meter:
    """CPU seconds and calls of the functions it wraps, by name (wrapped on their classes)."""

    def __init__(self):
        self.cpu = defaultdict(float)
        self.calls = defaultdict(int)
        self.undo = []
        self.local = threading.local()  # the driver's MLflow thread calls too (sweeps.run.driver)

    def wrap(self, owner, names, label):
        for name in names:
            original = getattr(owner, name, None)
            if original is None:
                continue

            def timed(*args, _original=original, **kwargs):
                if getattr(self.local, "depth", 0):  # nested in another metered call: counted there
                    return _original(*args, **kwargs)
                self.local.depth = 1
                start = time.thread_time()  # this call's own thread
                try:
                    return _original(*args, **kwargs)
                finally:
                    spent = time.thread_time() - start
                    self.cpu[label] += spent
                    self.calls[label] += 1
                    self.local.depth = 0
                    self.local.cpu = getattr(self.local, "cpu", 0.0) + spent

            setattr(owner, name, timed)
            self.undo.append((owner, name, original))

    def total(self, prefix: str, of=None) -> float:
        """The sum over the labels that start with `prefix` (of `self.cpu`, or `of`)."""
        of = self.cpu if of is None else of
        return sum(v for k, v in of.items() if k.startswith(prefix))

    def own(self) -> float:
        """CPU of the metered calls made on this thread so far (all labels)."""
        return getattr(self.local, "cpu", 0.0)

    def restore(self):
        for owner, name, original in reversed(self.undo):
            setattr(owner, name, original)


def sampler_owners():
    import optuna

    return [optuna.samplers.TPESampler, optuna.samplers.NSGAIISampler, optuna.samplers.RandomSampler,
            optuna.samplers.GPSampler]  # fmt: skip


def _front_size(study) -> int | None:
    """The front's points in the launch's pareto.json (None: no report)."""
    path = study.results_dir() / "pareto" / "pareto.json"
    return len(json.loads(path.read_text())["front"]) if path.is_file() else None


def measure(
    sampler: str,
    n: int,
    backend: str,
    trial_s: float,
    objectives: int,
    keep: bool,
    concurrency=None,
    ray_cpus=None,
    real_imports=False,
    mlflow_uri=None,
    loss="flat",
) -> dict:
    import optuna
    import yaml
    from mlflow.tracking import MlflowClient

    folder = Path(tempfile.mkdtemp(prefix=f"bench-scale-{sampler}-{n}-"))
    path = folder / "study.yaml"
    tree = study_tree(folder, sampler, n, backend, objectives, concurrency, ray_cpus, mlflow_uri)
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    stand_in = {"FAKE_FIT_SLEEP": str(trial_s), "FAKE_FIT_LR_BOWL": "1" if loss == "lr-bowl" else "0"}
    previous = {key: os.environ.get(key) for key in stand_in}
    os.environ.update(stand_in)  # a Ray started by this launch inherits them; restored after it
    stamps = folder / "stamps.jsonl"
    stamped = functools.partial(stamped_fit.fit, stamps=str(stamps))  # pickled by reference for Ray
    # the stand-in's plain logger, or Lightning's (a real trial's worker imports it, and torch)
    stamped.without_lightning = not real_imports
    meter = Meter()
    for owner in sampler_owners():
        meter.wrap(owner, ["infer_relative_search_space", "sample_relative", "sample_independent"], "sampler")
    mlflow_calls = ["create_run", "log_param", "log_batch", "log_metric", "log_metrics", "set_tag",
                    "set_terminated", "log_artifact", "update_run", "get_run"]  # fmt: skip
    for name in mlflow_calls:  # each request kind apart: what a trial's MLflow time is made of
        meter.wrap(MlflowClient, [name], f"mlflow.{name}")
    meter.wrap(Tracker, ["write_artifact"], "mlflow.write_artifact")  # a child's config.yaml
    storage_calls = [m for m in dir(optuna.storages.JournalStorage) if not m.startswith("_")]
    meter.wrap(optuna.storages.JournalStorage, storage_calls, "optuna")
    marks = {"fit_cpu": 0.0, "first": None, "last": None, "sampler_at": []}

    def fit(config, **kwargs):
        start, own, logged = time.process_time(), time.thread_time(), meter.own()
        if marks["first"] is None:
            marks["first"] = start
        try:
            return stamped(config, **kwargs)
        finally:
            marks["last"] = time.process_time()
            # the stand-in's own CPU (this thread: the driver's MLflow thread is the launcher's);
            # the launcher's MLflow logger inside it is the launcher's
            marks["fit_cpu"] += time.thread_time() - own - (meter.own() - logged)
            marks["sampler_at"].append(meter.cpu["sampler"])

    fit.without_lightning = not real_imports
    report = {}
    real = launching.report_fronts

    def timed_report(*args, **kwargs):
        meter.restore()  # the report's own MLflow calls are the report's
        start, cpu = time.time(), time.process_time()
        rss = _peak_rss_mb()
        try:
            return real(*args, **kwargs)
        finally:
            report.update(report_s=time.time() - start, report_cpu_s=time.process_time() - cpu,
                          report_peak_rss_growth_mb=_peak_rss_mb() - rss)  # fmt: skip

    launching.report_fronts = timed_report
    driver = DriverClock()
    wall = time.time()
    try:
        study = load_study(path)
        with driver:
            code = launching.launch(
                study, fit=stamped if backend == "ray" else fit, probe=fake_fit.PROBE, stream=io.StringIO()
            )
    finally:
        launching.report_fronts = real
        meter.restore()
        for key, value in previous.items():  # later stand-in fits in this process: as they were
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    wall = time.time() - wall
    trials_cpu = (marks["last"] or 0) - (marks["first"] or 0)
    start = time.time()
    trials = load_trials(study.name, study.storage_url())  # a resume's first read: the whole journal
    resume_read_s = time.time() - start
    at = marks["sampler_at"]
    tenth = max(1, len(at) // 10)
    grow = [at[i] - at[i - 1] for i in range(1, len(at))]
    url = study.storage_url()
    sizes = {
        "journal_mb": _size(Path(url[len("journal:") :])) if url.startswith("journal:") else None,
        "mlflow_db_mb": _size(folder / "mlflow.db"),
        "artifacts_mb": _size(folder / "mlruns"),
    }  # fmt: skip
    ran = stamped_fit.read(stamps) if stamps.exists() else []
    at_once = concurrency or 1
    out = {
        "sampler": sampler, "backend": backend, "trials": n, "trial_s": trial_s, "objectives": objectives,
        "concurrency": at_once, "ray_cpus": ray_cpus, "real_imports": real_imports,
        "mlflow": "server" if mlflow_uri else "sqlite", "loss": loss, "front_size": _front_size(study),
        "exit": code, "finished": len(trials), "wall_s": wall, "trial_phase_s": driver.wall(),
        **_launcher_cpu(backend, driver, ran, marks, trials_cpu, len(at)),
        "sampler_cpu_per_trial_s": meter.cpu["sampler"] / max(1, driver.ends),
        "sampler_first_tenth_s": sum(grow[:tenth]) / tenth if grow else None,
        "sampler_last_tenth_s": sum(grow[-tenth:]) / tenth if grow else None,
        "mlflow_cpu_per_trial_s": meter.total("mlflow.") / max(1, driver.ends),
        "mlflow_calls_per_trial": meter.total("mlflow.", meter.calls) / max(1, driver.ends),
        "mlflow_calls_by_kind": {k[len("mlflow."):]: round(v / max(1, driver.ends), 3)
                                 for k, v in sorted(meter.calls.items()) if k.startswith("mlflow.")},
        "mlflow_ms_per_trial": {k[len("mlflow."):]: round(1000 * v / max(1, driver.ends), 2)
                                for k, v in sorted(meter.cpu.items()) if k.startswith("mlflow.")},
        "optuna_cpu_per_trial_s": meter.cpu["optuna"] / max(1, driver.ends),
        "optuna_calls_per_trial": meter.calls["optuna"] / max(1, driver.ends),
        **{f"slots_{k}": v for k, v in stamped_fit.slots(ran, at_once).items()},
        # from the driver's first trial on: the wait for the first workers counts as idle
        "slots_busy_phase": sum(s["end"] - s["start"] for s in ran) / (driver.wall() or math.inf),
        **report, "resume_read_s": resume_read_s, **sizes,
        "load_1min": os.getloadavg()[0],
    }  # fmt: skip
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
    else:
        out["folder"] = str(folder)
    return out


def _launcher_cpu(
    backend: str, driver: DriverClock, ran: list[dict], marks: dict, trials_cpu: float, fits: int
):
    """Launcher CPU per trial. Local: this process from the first fit's start to the last one's end,
    less the fits' own CPU, over the trials between (as before). Ray: this process (the driver)
    from the first trial's start to the last one's end over the trials, and apart from it Ray's own
    processes (its daemons: this process's other descendants) and the trial workers' CPU that was
    not the fits' (Ray's worker, Tune's function runner, the trial's MLflow logging, and the
    worker's start-up and imports, given apart per worker)."""
    if backend != "ray":
        per = (trials_cpu - marks["fit_cpu"]) / (fits - 1) if fits > 1 else None
        return {"launcher_cpu_per_trial_s": per}
    n = max(1, driver.ends)
    workers = {}
    for stamp in ran:  # a worker's CPU so far, at the end of each of its fits
        w = workers.setdefault(stamp["pid"], {"cpu": 0.0, "fits": 0.0, "first": None})
        w["cpu"] = max(w["cpu"], stamp["process_cpu"])
        w["fits"] += stamp["cpu"]
        if w["first"] is None or stamp["end"] < w["first"][0]:
            w["first"] = (stamp["end"], stamp["process_cpu"] - stamp["cpu"])
    start_cpu = [w["first"][1] for w in workers.values()]
    workers_cpu = sum(w["cpu"] - w["fits"] for w in workers.values())
    daemons = driver.daemons_cpu(exclude=set(workers))
    return {
        "launcher_cpu_per_trial_s": driver.cpu() / n,
        "ray_daemons_cpu_per_trial_s": daemons / n,
        "workers": len(workers),
        "worker_start_cpu_s": sum(start_cpu) / len(start_cpu) if start_cpu else None,
        "workers_cpu_per_trial_s": (workers_cpu - sum(start_cpu)) / n,
        "ray_total_cpu_per_trial_s": (driver.cpu() + daemons + workers_cpu) / n,
    }


class DriverClock:
    """The launch's trial phase as the driver sees it (`Driver.begin` of the first trial to `end`
    of the last): its wall time, this process's CPU, and the CPU of this process's descendants
    (a local Ray's daemons and workers) at both ends, read with psutil."""

    def __init__(self):
        self.first = self.last = None
        self.ends = 0
        self.tree_first: dict[int, float] = {}
        self.tree_last: dict[int, float] = {}

    def __enter__(self):
        self.begin, self.end = Driver.begin, Driver.end
        clock = self

        def begin(driver, *args, **kwargs):
            if clock.first is None:
                clock.first = (time.time(), time.process_time())
                clock.tree_first = _descendants_cpu()
            return clock.begin(driver, *args, **kwargs)

        def end(driver, *args, **kwargs):
            try:
                return clock.end(driver, *args, **kwargs)
            finally:
                clock.ends += 1
                clock.last = (time.time(), time.process_time())

        Driver.begin, Driver.end = begin, end
        real_disconnect = self.disconnects = {}
        for backend in (RayBackend,):  # before Ray shuts down: its daemons' CPU at the end
            real_disconnect[backend] = backend.disconnect

            def disconnect(this, _real=backend.disconnect):
                clock.tree_last = _descendants_cpu()
                return _real(this)

            backend.disconnect = disconnect
        return self

    def __exit__(self, *exc):
        Driver.begin, Driver.end = self.begin, self.end
        for backend, real in self.disconnects.items():
            backend.disconnect = real

    def wall(self) -> float | None:
        return self.last[0] - self.first[0] if self.first and self.last else None

    def cpu(self) -> float:
        return self.last[1] - self.first[1] if self.first and self.last else 0.0

    def daemons_cpu(self, exclude: set[int]) -> float:
        return sum(
            cpu - self.tree_first.get(pid, 0.0) for pid, cpu in self.tree_last.items() if pid not in exclude
        )


def _descendants_cpu() -> dict[int, float]:
    import psutil

    out = {}
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            times = child.cpu_times()
            out[child.pid] = times.user + times.system
    return out


def search_trials(n: int, objectives: int, seeds: int = 1) -> list:
    """n points shaped like a TPE search over lr x two designs (val_loss a bowl in log lr plus
    noise, memory per design, tokens/s per design), `seeds` completed trials each."""
    import numpy as np
    from optuna.distributions import CategoricalDistribution, FloatDistribution
    from optuna.trial import TrialState, create_trial

    rng = np.random.default_rng(0)
    distributions = {"model.residual": CategoricalDistribution(["baseline", "sat"]),
                     "train.lr": FloatDistribution(1e-4, 1e-2, log=True)}  # fmt: skip
    out = []
    for i in range(n):
        design = ["baseline", "sat"][i % 2]
        lr = float(10 ** rng.uniform(-4, -2))
        loss = 3.0 - 0.2 * (design == "sat") + 0.1 * (np.log10(lr) + 3) ** 2
        values = [loss, 110.0 if design == "sat" else 100.0]
        if objectives == 3:  # the study's order: val_loss, peak_mem_mb, tokens_per_s
            values.append(900.0 if design == "sat" else 1000.0)
        for seed in range(seeds):
            noisy = [values[0] + 0.01 * seed + 0.005 * rng.normal(), *values[1:]]
            out.append(create_trial(
                state=TrialState.COMPLETE, values=noisy, params={"model.residual": design, "train.lr": lr},
                distributions=distributions, user_attrs={"point": f"p{i}", "seed": seed},
            ))  # fmt: skip
    return out


def measure_report(n: int, objectives: int, seeds: int) -> dict:
    """The report alone (fronts, p_front, importances, figures, files; no MLflow: its per-run
    tags and histories are measured by the launches) over n synthetic points."""
    import yaml

    folder = Path(tempfile.mkdtemp(prefix=f"bench-scale-report-{n}-"))
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(study_tree(folder, "tpe", n, "local", objectives), sort_keys=False))
    study = load_study(path)
    trials = search_trials(n, objectives, seeds)
    start, cpu, rss = time.time(), time.process_time(), _peak_rss_mb()
    summary = report_fronts(study, trials, tracker=None, stream=io.StringIO())
    fronts_s, fronts_cpu = time.time() - start, time.process_time() - cpu
    start = time.time()
    history(trials, [o.metric for o in study.objectives], study.hypervolume)
    out = {"mode": "report", "points": n, "seeds": seeds, "objectives": objectives,
           "report_s": fronts_s, "report_cpu_s": fronts_cpu, "history_s": time.time() - start,
           "report_peak_rss_growth_mb": _peak_rss_mb() - rss, "front_size": summary.get("front_size"),
           "load_1min": os.getloadavg()[0]}  # fmt: skip
    shutil.rmtree(folder, ignore_errors=True)
    return out


def measure_sampler(kind: str, n: int, asks: int = 10) -> dict:
    """The sampler alone: CPU per suggestion (ask + the study's two parameters) for a study that
    already holds n completed trials (added directly, random points), two objectives."""
    import numpy as np
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution
    from optuna.trial import TrialState, create_trial

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    rng = np.random.default_rng(0)
    distributions = {"model.residual": CategoricalDistribution(["baseline", "sat"]),
                     "train.lr": FloatDistribution(1e-4, 1e-2, log=True)}  # fmt: skip
    study = optuna.create_study(
        directions=["minimize", "minimize"], sampler=samplers.build(SamplerConfig(kind=kind))
    )
    for i in range(n):
        design, lr = ["baseline", "sat"][i % 2], float(10 ** rng.uniform(-4, -2))
        loss = 3.0 - 0.2 * (design == "sat") + 0.1 * (np.log10(lr) + 3) ** 2 + 0.01 * rng.normal()
        study.add_trial(create_trial(state=TrialState.COMPLETE, values=[loss, 100.0 + 10 * (design == "sat")],
                                     params={"model.residual": design, "train.lr": lr},
                                     distributions=distributions))  # fmt: skip
    cpu = time.process_time()
    for _ in range(asks):
        trial = study.ask()
        trial.suggest_categorical("model.residual", ["baseline", "sat"])
        trial.suggest_float("train.lr", 1e-4, 1e-2, log=True)
        study.tell(trial, [3.0, 100.0])
    per = (time.process_time() - cpu) / asks
    return {"mode": "sampler", "sampler": kind, "trials": n, "cpu_per_suggestion_s": per,
            "load_1min": os.getloadavg()[0]}  # fmt: skip


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _size(path: Path) -> float:
    if path.is_file():
        return path.stat().st_size / 2**20
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20 if path.exists() else 0.0


def plot(lines: list[dict], path: Path) -> Path:
    """Cost against trials, log-log: launcher CPU per trial (launches), the sampler's CPU per
    suggestion (--sampler-only), the report's CPU (--report-only), from the JSON lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("launch", "trials", "launcher_cpu_per_trial_s", "sampler", "launcher CPU per trial (s)"),
        ("sampler", "trials", "cpu_per_suggestion_s", "sampler", "sampler CPU per suggestion (s)"),
        ("report", "points", "report_cpu_s", "objectives", "report CPU (s), no MLflow"),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, (mode, x, y, by, title) in zip(axes, panels, strict=True):
        mine = [line for line in lines if line.get("mode", "launch") == mode and line.get(y) is not None]
        for group in dict.fromkeys(str(line[by]) for line in mine):
            points = sorted((line[x], line[y]) for line in mine if str(line[by]) == group)
            label = f"{group} objectives" if by == "objectives" else group
            ax.plot(*zip(*points, strict=True), marker="o", label=label)
        ax.set_xscale("log")
        if mode == "launch":  # against the target, from 0: the per-trial cost is flat or it is not
            ax.set_ylim(0, max([0.15] + [line[y] * 1.2 for line in mine]))
            ax.axhline(0.1, color="black", lw=0.8, ls="--")
        else:
            ax.set_yscale("log")
        ax.set_xlabel(x)
        ax.set_title(title, fontsize=9)
        if mine:
            ax.legend(fontsize=7)
    fig.suptitle("bench.scale: stand-in trials, backend local, 2 cores shared with other work (CPU seconds)",
                 fontsize=9)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    for sampler in args.samplers.split(","):
        if sampler not in SAMPLERS:
            print(f"--samplers: {sampler!r} is not one of {', '.join(SAMPLERS)}", file=sys.stderr)
            return 2
    if args.backend == "local" and (args.concurrency or 0) > 1:
        print("--concurrency: the local backend runs one trial at a time", file=sys.stderr)
        return 2
    if args.replot:
        lines = [json.loads(x) for x in Path(args.jsonl).read_text().splitlines() if x.strip()]
        print(plot(lines, Path(args.plot)))
        return 0
    if args.sampler_only:
        for n in (int(x) for x in args.sampler_only.split(",")):
            for kind in args.samplers.split(","):
                line = measure_sampler(kind, n)
                print(json.dumps(line), flush=True)
                if args.jsonl:
                    with open(args.jsonl, "a") as handle:
                        handle.write(json.dumps(line) + "\n")
        return 0
    if args.report_only:
        for n in (int(x) for x in args.report_only.split(",")):
            line = measure_report(n, args.objectives, args.seeds)
            print(json.dumps(line), flush=True)
            if args.jsonl:
                with open(args.jsonl, "a") as handle:
                    handle.write(json.dumps(line) + "\n")
        return 0
    for n in (int(x) for x in args.trials.split(",")):
        for sampler in args.samplers.split(","):
            line = measure(sampler, n, args.backend, args.trial_s, args.objectives, args.keep,
                           args.concurrency, args.ray_cpus, args.real_imports, args.mlflow_uri,
                           args.loss)  # fmt: skip
            print(json.dumps(line), flush=True)
            if args.jsonl:
                with open(args.jsonl, "a") as handle:
                    handle.write(json.dumps(line) + "\n")
    if args.plot and args.jsonl:
        with contextlib.suppress(FileNotFoundError):
            lines = [json.loads(x) for x in Path(args.jsonl).read_text().splitlines() if x.strip()]
            print(plot(lines, Path(args.plot)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
