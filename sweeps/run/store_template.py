"""A new SQLite MLflow store starts as a copy of an empty one, not by running MLflow's migrations.

MLflow creates a new SQLite database by running every schema migration, each its own commit: about
a CPU second and, with the disk's syncs on a busy machine, 2-11 s of wall time (measured in
docs/bench/launch_costs.md), on the launch's path once Ray's start is gone (a kept Ray). An empty
database of this MLflow version is made once, kept beside the kept-Ray record
(~/.cache/sweeps/mlflow-<version>-empty.db), and copied; the copy's Default experiment gets the
artifact folder MLflow would have given it (./mlruns/0 of the launch's working folder). The
project's own experiments name their artifact folder themselves (sweeps.run.tracking).

Every client opened through `sweeps.run.tracking.client` (the launcher's, a worker's, the trial
loggers') seeds a new SQLite store this way. The trainers', evals' and gates' command lines open
theirs through MLflow directly, which runs the migrations for a new database.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import tempfile
from importlib import metadata
from pathlib import Path

SQLITE = "sqlite:///"


def quiet_mlflow() -> None:
    """MLflow's INFO lines (a new database's migrations) off; its async logging off unless asked."""
    os.environ.setdefault("MLFLOW_ENABLE_ASYNC_LOGGING", "false")
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)


def template_path() -> Path:
    return Path.home() / ".cache" / "sweeps" / f"mlflow-{metadata.version('mlflow')}-empty.db"


def _template() -> Path:
    """The empty database of this MLflow version, made on first use (MLflow's own migrations)."""
    path = template_path()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            made = Path(tmp) / "empty.db"
            quiet_mlflow()
            from mlflow.tracking import MlflowClient  # MLflow's imports only where a store is made

            with contextlib.suppress(Exception):  # errors: left to the client that opens the copy
                MlflowClient(tracking_uri=SQLITE + str(made)).search_experiments(max_results=1)
            if made.exists():
                made.replace(path)  # atomic: another launch making it too leaves one whole file
    return path


def seed_store(uri: str) -> bool:
    """Creates the SQLite database of `uri` as a copy of the empty one when it does not exist yet;
    True when it did. Any other store (or an existing file) is left to MLflow."""
    if not uri.startswith(SQLITE):
        return False
    name = uri[len(SQLITE) :].split("?")[0]
    if name in ("", ":memory:"):  # SQLite's database in memory: nothing to copy
        return False
    path = Path(name)
    if path.exists() or not path.parent.is_dir():
        return False
    template = _template()
    if not template.exists():
        return False
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    shutil.copyfile(template, tmp)
    with sqlite3.connect(tmp) as db:
        db.execute(
            "UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0",
            (str(Path("mlruns").absolute() / "0"),),
        )
    db.close()
    try:
        os.link(tmp, path)  # never over a database another launch created meanwhile
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    return True
