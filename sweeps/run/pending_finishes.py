"""A child run's final MLflow write, held on disk until it lands (results/<name>/mlflow-pending/).

The driver hands a run's end (final metrics, status, the logger's last curve points) to its MLflow
thread and tells Optuna at once (sweeps.run.driver). A launch killed between the two (kill -9, a
lost node) left Optuna's trial COMPLETE and its MLflow run RUNNING: the next launch closed that run
as interrupted, without its final metrics. So the write is put here first, one JSON file a run,
removed once MLflow has it; the next launch writes what is left before it closes orphans.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

FOLDER = "mlflow-pending"


class PendingFinishes:
    def __init__(self, results_dir: Path):
        self.folder = Path(results_dir) / FOLDER

    def hold(self, run_id: str, status: str, metrics: dict, error: str, wall_s: float, curves) -> Path:
        """`Tracker.finish_child`'s arguments on disk (atomically: a file is whole or absent)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        record = {
            "run_id": run_id,
            "status": status,
            "metrics": {k: v for k, v in metrics.items() if isinstance(v, (int, float))},
            "error": error,
            "wall_s": wall_s,
            "curves": [[m.key, m.value, m.timestamp, m.step] for m in curves],
        }
        path = self.folder / f"{run_id}.json"
        part = path.with_suffix(".part")
        part.write_text(json.dumps(record))
        os.replace(part, path)
        return path

    def done(self, path: Path) -> None:
        """The held write has landed."""
        path.unlink(missing_ok=True)

    def write_left(self, tracker) -> list[str]:
        """Every write an earlier launch held and did not make, made now (a run MLflow no longer
        holds as RUNNING had it made, or was closed since: its file is dropped). Returns the run ids
        written."""
        from mlflow.entities import Metric

        written = []
        for part in self.folder.glob("*.part"):  # a hold cut short: Optuna was not told, an orphan
            part.unlink(missing_ok=True)
        for path in sorted(self.folder.glob("*.json")):  # none when the folder is absent
            record = json.loads(path.read_text())
            try:
                running = tracker.client.get_run(record["run_id"]).info.status == "RUNNING"
            except Exception as err:  # deleted from MLflow: nothing to write to
                logging.getLogger(__name__).warning("held MLflow write of %s dropped: %s", path.name, err)
                running = False
            if running:
                record["curves"] = [Metric(*m) for m in record["curves"]]
                tracker.finish_child(**record)
                written.append(record["run_id"])
            path.unlink(missing_ok=True)
        return written
