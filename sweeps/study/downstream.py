"""Values the stage that consumes them would refuse, or would take and quietly do nothing with,
refused at load instead: MLflow's tracking URI and experiment name, Optuna's storage URL and
sampler seed, Lightning's seed range, Ray's address, and ASHA's metric and mode. Each would
otherwise surface minutes into a launch (after Ray started and the probe ran), or never. What the
machine decides (an SQLite file's folder, MLflow's file store allowed by the environment) is the
launch's preflight (sweeps.run.preflight)."""

from __future__ import annotations

import re

from arch.configtree import Issue
from trainers import metrics as metrics_table

SEED_MAX = 2**32 - 1  # numpy's RandomState (Optuna's samplers) and Lightning's seed_everything
MLFLOW_SCHEMES = ("sqlite:///", "http://", "https://", "postgresql://", "postgresql+", "mysql://", "mysql+",
                  "databricks")  # fmt: skip
RDB_SCHEMES = ("sqlite:///", "postgresql://", "postgresql+", "mysql://", "mysql+")
RAY_ADDRESS = re.compile(r"auto|ray://[^:/\s]+:\d+|[^:/\s]+:\d+")


def downstream_issues(study) -> list[Issue]:
    """Every problem of this kind in `study` (a parsed Study)."""
    return _seeds(study) + _mlflow(study) + _optuna(study) + _ray(study) + _asha(study)


def _seeds(study) -> list[Issue]:
    issues = []
    if not 0 <= study.sampler.seed <= SEED_MAX:
        why = f"allowed: 0..{SEED_MAX} (numpy's range, which Optuna's samplers use)"
        issues.append(Issue("sampler.seed", f"given {study.sampler.seed}; {why}"))
    first, n = study.base.seed, study.seeds.max
    if first < 0 or first + n - 1 > SEED_MAX:
        given = f"given {first} with up to {n} seed(s), so seeds {first}..{first + n - 1}"
        why = f"allowed: seeds within 0..{SEED_MAX} (Lightning's seed_everything refuses others)"
        issues.append(Issue("trial.seed", f"{given}; {why}"))
    return issues


def file_store(uri: str) -> bool:
    """A plain MLflow file store (a path or file:), which MLflow 3 opens only where the environment
    allows it (checked at the launch's preflight)."""
    return uri.startswith("file:") or "://" not in uri and not uri.startswith("databricks")


def _mlflow(study) -> list[Issue]:
    uri, issues = study.output.mlflow_uri, []
    if not file_store(uri) and not uri.startswith(MLFLOW_SCHEMES):
        shown = ", ".join(s.rstrip(":/+") for s in MLFLOW_SCHEMES)
        issues.append(Issue("output.mlflow_uri", f"given {uri!r}; allowed schemes: {shown}"))
    if study.output.experiment is not None and not study.output.experiment.strip():
        issues.append(
            Issue("output.experiment", "given an empty name; allowed: a name, or null for the study's")
        )
    return issues


def _optuna(study) -> list[Issue]:
    url = study.output.storage
    if url is None or url.startswith("journal:") and len(url) > len("journal:"):
        return []
    if not url.startswith(RDB_SCHEMES):
        return [
            Issue("output.storage", f"given {url!r}; allowed: journal:PATH, or an SQLAlchemy URL "
                  "(sqlite:///FILE, postgresql://..., mysql://...) for Optuna's RDB storage")
        ]  # fmt: skip
    return []


def _ray(study) -> list[Issue]:
    address = study.ray.address
    if address is None or RAY_ADDRESS.fullmatch(address):
        return []
    return [Issue("ray.address", f"given {address!r}; allowed: auto, HOST:PORT or ray://HOST:PORT")]


def _asha(study) -> list[Issue]:
    """ASHA compares the trials' reports at each evaluation: its metric must be one every evaluation
    reports and that differs between trials of one design (a seed-varying trial metric), and its
    mode must be that metric's direction, or it stops the best trials."""
    scheduler = study.scheduler
    record = metrics_table.get(scheduler.metric)
    if scheduler.kind != "asha" or record is None:
        return []  # an unknown metric is reported with the other key paths
    if record.source != "trial" or record.varies != "seed":
        allowed = ", ".join(
            n
            for n in metrics_table.objective_names()
            if metrics_table.varies_with_seed(n) and metrics_table.get(n).source == "trial"
        )
        if record.source == "probe":
            why = "the cost probe's, never reported by a trial"
        elif record.varies == "exact":
            why = "the same for every trial of an architecture"
        else:
            why = "not reported at each evaluation"
        return [Issue("scheduler.metric", f"given {scheduler.metric!r} ({why}); allowed: {allowed}")]
    wanted = {"minimize": "min", "maximize": "max"}.get(record.direction)
    if wanted and scheduler.mode != wanted:
        given = f"given {scheduler.mode!r} for {scheduler.metric} ({record.direction})"
        return [Issue("scheduler.mode", f"{given}; allowed: {wanted}")]
    return []
