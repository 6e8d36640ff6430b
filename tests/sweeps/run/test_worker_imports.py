"""A stand-in trial's worker process imports neither Lightning nor torch: the trial's plain logger
and report hook (sweeps.run.plain_log, sweeps.run.worker.ReportHook) stand in for Lightning's, so
bench.scale's slots measure the launcher rather than seconds of imports per worker (docs/bench/scale.md)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

CODE = """
import sys
import sweeps.run.backends.ray.trainable  # what a Ray worker imports for a trial
from sweeps.run.tracking import client
from sweeps.run.worker import TrialTask, execute
from tests.factories import tiny_trial
from tests.sweeps import fake_fit
from trainers.config import TrialConfig

uri = "sqlite:///" + sys.argv[1]
c = client(uri)  # a new store: a copy of the empty one
run_id = c.create_run(c.create_experiment("t")).info.run_id
task = TrialTask(number=0, run_id=run_id, tracking_uri=uri, config=TrialConfig.from_dict(tiny_trial()))
reports = []
outcome = execute(task, report=reports.append, fit=fake_fit.fit)
print(outcome.status, len(reports), len(c.get_metric_history(run_id, "val_loss")),
      sorted(m for m in ("lightning", "torch") if m in sys.modules), outcome.machine)
"""


def test_a_stand_in_trial_reports_and_logs_without_lightning_or_torch(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", CODE, str(tmp_path / "mlflow.db")], cwd=ROOT, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    assert out.stdout.strip().splitlines()[-1] == "ok 4 4 [] None"  # four evaluations: four reports,
    # four points; and no word of where it ran, which would have imported torch (`Outcome.machine`)


def test_a_fit_that_does_not_say_so_gets_lightnings_logger(tmp_path):
    """In this process (Lightning is imported here anyway): the same stand-in without its marker
    gets Lightning's logger and callback, and reports and logs the same."""
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.loggers import Logger

    from sweeps.run.tracking import client
    from sweeps.run.worker import TrialTask, execute
    from tests.factories import tiny_trial
    from tests.sweeps import fake_fit
    from trainers.config import TrialConfig
    from trainers.machine import where_trials_run

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    c = client(uri)
    run_id = c.create_run(c.create_experiment("t")).info.run_id
    task = TrialTask(number=0, run_id=run_id, tracking_uri=uri, config=TrialConfig.from_dict(tiny_trial()))
    given, reports = {}, []

    def unmarked(config, **kwargs):  # the stand-in, without `without_lightning`
        given.update(kwargs)
        return fake_fit.fit(config, **kwargs)

    outcome = execute(task, report=reports.append, fit=unmarked)
    assert (outcome.status, len(reports), len(c.get_metric_history(run_id, "val_loss"))) == ("ok", 4, 4)
    assert [isinstance(x, Logger) for x in given["loggers"]] == [True]
    assert [isinstance(x, Callback) for x in given["callbacks"]] == [True]
    # torch is imported here: the trial says where it trained, so the launcher need not ask
    assert outcome.machine == where_trials_run(task.config.train.num_threads)


FREEZE = """
import gc
import sys
from sweeps.run.tracking import client
from sweeps.run.worker import TrialTask, execute
from tests.factories import tiny_trial
from tests.sweeps import fake_fit
from trainers.config import TrialConfig

uri = "sqlite:///" + sys.argv[1]
c = client(uri)
task = TrialTask(number=0, run_id=c.create_run(c.create_experiment("t")).info.run_id, tracking_uri=uri,
                 config=TrialConfig.from_dict(tiny_trial()))
before = gc.get_freeze_count()
execute(task, fit=fake_fit.fit)
first = gc.get_freeze_count()
execute(task, fit=fake_fit.fit)
print(before, first > 10_000, gc.get_freeze_count() <= first)  # frozen objects still die
"""


def test_a_worker_freezes_its_imports_once_before_its_first_trial(tmp_path):
    """The objects the imports left are frozen (`gc.freeze`) before the first trial trains, so the
    training loop's collections skip them; once per process, not again at the next trial."""
    out = subprocess.run(
        [sys.executable, "-c", FREEZE, str(tmp_path / "mlflow.db")], cwd=ROOT, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    assert out.stdout.strip().splitlines()[-1] == "0 True True"
