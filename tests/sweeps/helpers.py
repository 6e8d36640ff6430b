"""Tiny studies written into a test's folder, and readers of what a launch recorded."""

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import yaml

from sweeps.run.storage import load_trials
from sweeps.run.tracking import client

TRIAL = {
    "model": {"preset": "tiny", "n_layers": 2, "d_model": 64, "n_heads": 2, "d_ff": 128, "max_seq_len": 32},
    "data": {"kind": "mqar", "seq_len": 32, "vocab": 64, "num_kv_pairs": 4, "train_examples": 256,
             "val_examples": 64},
    "train": {"tokens": 4096, "batch_size": 8, "eval_every": 4, "eval_batches": 2, "log_every": 2,
              "num_threads": 1},
}  # fmt: skip


@functools.cache
def _empty_mlflow_db() -> Path:
    """An MLflow database with its tables and nothing else, made once per test process: creating
    the tables takes 2-4 s (17 s on a busy machine), once per test otherwise."""
    folder = Path(tempfile.mkdtemp(prefix="satsweep-mlflow-template-"))
    atexit.register(shutil.rmtree, folder, True)
    client(f"sqlite:///{folder / 'mlflow.db'}").search_experiments()
    return folder / "mlflow.db"


def write_study(folder: Path, name: str = "t", **extra) -> Path:
    """The study file; beside it an MLflow database with its tables (a copy of an empty one),
    unless the folder has one already. A study's own `output` still decides where it records."""
    tree = {
        "name": name,
        "trial": TRIAL,
        "space": {
            "model.residual": {"choices": {"baseline": {"kind": "none"}, "sat": {"kind": "value_residual"}}}
        },
        "repeats": 2,
        "backend": "local",
        "output": {"dir": str(folder / "results"), "mlflow_uri": f"sqlite:///{folder / 'mlflow.db'}"},
        **extra,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    if not (folder / "mlflow.db").exists():
        shutil.copyfile(_empty_mlflow_db(), folder / "mlflow.db")
    return path


def optuna_trials(study):
    return load_trials(study.name, study.storage_url())


def mlflow_runs(study, role: str):
    c = client(study.mlflow_uri())
    exp = c.get_experiment_by_name(study.experiment_name)
    return c.search_runs([exp.experiment_id], filter_string=f"tags.`sweep.role` = '{role}'", max_results=1000)


def artifacts(study, run) -> list[str]:
    c = client(study.mlflow_uri())
    out = []
    for item in c.list_artifacts(run.info.run_id):
        if item.is_dir:
            out += [f.path for f in c.list_artifacts(run.info.run_id, item.path)]
        else:
            out.append(item.path)
    return out
