"""A new SQLite MLflow store starts as a copy of an empty one, not by running MLflow's migrations.

MLflow creates a new SQLite database by running every schema migration, each its own commit: about
a CPU second and, with the disk's syncs on a busy machine, 2-11 s of wall time (measured in
docs/bench/launch_costs.md), on the launch's path once Ray's start is gone (a kept Ray). An empty
database of this MLflow version is made once, kept beside the kept-Ray record
(~/.cache/sweeps/mlflow-<version>-empty.db), and copied; the copy's Default experiment gets the
artifact folder MLflow would have given it (./mlruns/0 of the launch's working folder). The
project's own experiments name their artifact folder themselves (sweeps.run.tracking).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from importlib import metadata
from pathlib import Path

from sweeps.run.tracking import open_store

SQLITE = "sqlite:///"


def template_path() -> Path:
    return Path.home() / ".cache" / "sweeps" / f"mlflow-{metadata.version('mlflow')}-empty.db"


def _template() -> Path:
    """The empty database of this MLflow version, made on first use (MLflow's own migrations)."""
    path = template_path()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            made = Path(tmp) / "empty.db"
            open_store(SQLITE + str(made))
            if made.exists():
                made.replace(path)  # atomic: another launch making it too leaves one whole file
    return path


def seed_store(uri: str) -> bool:
    """Creates the SQLite database of `uri` as a copy of the empty one when it does not exist yet;
    True when it did. Any other store (or an existing file) is left to MLflow."""
    if not uri.startswith(SQLITE):
        return False
    path = Path(uri[len(SQLITE) :])
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


def prepare_store(uri: str) -> None:
    """`seed_store`, then MLflow's store opened once (sweeps.run.tracking.open_store)."""
    seed_store(uri)
    open_store(uri)
