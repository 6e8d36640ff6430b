"""Ctrl-C with many trials under way on a local Ray: the launch stops cleanly and the next launch
ends exactly at the study's total (issue 52, "dozens at once"; one at a time:
test_launch.py::test_ray_launch_resumes_after_ctrl_c)."""

import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from optuna.trial import TrialState

from sweeps.run.launch import launch
from sweeps.study import load_study
from sweeps.study.run_record import RunRecord
from tests.sweeps import fake_fit
from tests.sweeps.helpers import mlflow_runs, optuna_trials, start, write_study

AT_ONCE = 8


def wait_for_many_running(study, proc, running: int, timeout=240):
    """Until at least one run is COMPLETE and `running` are RUNNING at once."""
    deadline = time.time() + timeout
    journal = Path(study.storage_url()[len("journal:") :])
    while time.time() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        if journal.exists():
            try:
                states = Counter(t.state for t in optuna_trials(study))
            except KeyError:  # the journal file is there, the study's record not yet
                states = Counter()
            if states[TrialState.COMPLETE] >= 1 and states[TrialState.RUNNING] >= running:
                return states
        time.sleep(0.2)
    raise AssertionError(f"never {running} runs at once")


@pytest.mark.slow
def test_ctrl_c_with_many_trials_running_then_the_resume_ends_at_the_total(tmp_path, shared_ray):
    path = write_study(  # 2 designs x 10 seeds = 20 runs, 8 at once on 2 CPUs (a quarter each)
        tmp_path, repeats=10, backend="ray", max_concurrent=AT_ONCE,
        resources={"cpus": 0.25}, ray={"num_cpus": 2},
    )  # fmt: skip
    study = load_study(path)
    first = start(path)
    states = wait_for_many_running(study, first, running=AT_ONCE // 2)
    first.send_signal(signal.SIGINT)
    out = first.communicate(timeout=120)[0]
    assert first.returncode == 130, out
    assert "interrupted; the same command resumes the study" in out
    interrupted = Counter(t.state for t in optuna_trials(study))
    assert not interrupted[TrialState.RUNNING], interrupted  # every open run closed as it stopped
    assert interrupted[TrialState.COMPLETE] >= states[TrialState.COMPLETE]

    assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    trials = optuna_trials(study)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 20  # exactly the total: nothing run twice, nothing lost
    assert len({(RunRecord.of(t).point, RunRecord.of(t).seed) for t in complete}) == 20
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    runs = mlflow_runs(study, "trial") + mlflow_runs(study, "parent")
    assert not [r for r in runs if r.info.status == "RUNNING"]
    assert [r.data.tags["sweep.status"] for r in mlflow_runs(study, "trial")].count("ok") == 20
