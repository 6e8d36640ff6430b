"""A stand-in trial's worker process imports neither Lightning nor torch: the trial's plain logger
and report hook (sweeps.run.plain_log, sweeps.run.worker.ReportHook) stand in for Lightning's, so
bench.scale's slots measure the launcher rather than seconds of imports per worker (docs/bench/scale.md)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

CODE = """
import sys
from mlflow.tracking import MlflowClient
import sweeps.run.backends.ray.trainable  # what a Ray worker imports for a trial
from sweeps.run.worker import TrialTask, execute
from tests.factories import tiny_trial
from tests.sweeps import fake_fit
from trainers.config import TrialConfig

uri = "sqlite:///" + sys.argv[1]
c = MlflowClient(uri)
run_id = c.create_run(c.create_experiment("t")).info.run_id
task = TrialTask(number=0, run_id=run_id, tracking_uri=uri, config=TrialConfig.from_dict(tiny_trial()),
                 keep_checkpoint=False)
reports = []
fit = fake_fit.fit
if sys.argv[2] == "unmarked":  # the same stand-in without its marker
    fit = lambda config, **kwargs: fake_fit.fit(config, **kwargs)
outcome = execute(task, report=reports.append, fit=fit)
print(outcome.status, len(reports), len(c.get_metric_history(run_id, "val_loss")),
      sorted(m for m in ("lightning", "torch") if m in sys.modules))
"""


def run(tmp_path, which: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", CODE, str(tmp_path / "mlflow.db"), which],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.strip().splitlines()[-1]


def test_a_stand_in_trial_reports_and_logs_without_lightning_or_torch(tmp_path):
    assert run(tmp_path, "marked") == "ok 4 4 []"  # four evaluations: four reports, four points logged


def test_a_fit_that_does_not_say_so_gets_lightnings_logger(tmp_path):
    assert run(tmp_path, "unmarked") == "ok 4 4 ['lightning', 'torch']"
