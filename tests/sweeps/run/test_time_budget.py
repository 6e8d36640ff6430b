"""Equal time (`budget: {time: reference | S}`): every design trains its own whole schedule in the
same probe time, and the report labels its verdicts as equal-time ones; the curve view stays a
curve."""

from __future__ import annotations

import json
import re

import pytest

from arch.configtree import ConfigError
from sweeps.run.launch import launch
from sweeps.run.time_budget import TimeBudget, tokens_for
from sweeps.study import load_study
from tests.sweeps import fake_fit
from tests.sweeps.helpers import mlflow_runs, write_study

# tests.sweeps.helpers.TRIAL: 4096 tokens of 8 x 32 (256 a step, 16 steps); the stand-in probe:
# the baseline 1000 tokens/s, every other design 900.
STEP = 256
SAT = {"kind": "value_residual"}


def final_tokens(study) -> dict[str, set[float]]:
    by_design: dict[str, set[float]] = {}
    for run in mlflow_runs(study, "trial"):
        by_design.setdefault(run.data.tags["kind"], set()).add(run.data.metrics["final/tokens"])
    return by_design


def test_tokens_are_whole_steps_of_the_time_at_the_speed():
    assert tokens_for(4.096, 900.0, STEP) == 14 * STEP  # 14.4 steps
    assert tokens_for(4.096, 1000.0, STEP) == 16 * STEP
    assert tokens_for(0.001, 900.0, STEP) == STEP  # at least one step


def test_reference_time_gives_the_slower_design_fewer_tokens_and_finished_runs(tmp_path, capsys):
    study = load_study(write_study(tmp_path, budget={"time": "reference"}))
    assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    out = capsys.readouterr().out
    assert final_tokens(study) == {"none": {4096.0}, "value_residual": {14.0 * STEP}}
    record = json.loads((study.results_dir() / "time_budget.json").read_text())
    assert record["time"] == "reference" and record["seconds"] == pytest.approx(4.096)
    assert sorted(d["steps"] for d in record["designs"].values()) == [14, 16]
    assert "equal time (budget.time reference): every design trained 4.1 s" in out
    assert "the verdicts compare these finished runs" in out
    assert "curves, not a verdict" in out
    # each run's config (the one MLflow holds) carries its own budget; the study is unchanged
    assert study.trial_config(study.grid[1]).train.tokens == 4096


def test_a_resumed_study_keeps_the_tokens_it_resolved(tmp_path):
    study = load_study(write_study(tmp_path, budget={"time": 2.0}))
    first = TimeBudget(study, fake_fit.PROBE).config(study.trial_config(study.grid[1]))
    assert first.train.tokens == tokens_for(2.0, 900.0, STEP) == 7 * STEP

    class SlowerProbe(fake_fit.FakeProbe):
        def metrics(self, config):
            return {"tokens_per_s": 100.0}

    again = TimeBudget(study, SlowerProbe()).config(study.trial_config(study.grid[1]))
    assert again.train.tokens == first.train.tokens


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({"budget": {"time": -1}}, "budget.time: given -1.0; allowed: seconds > 0 or 'reference'"),
        ({"budget": {"time": "reference"}, "space": {"model.residual": {"choices": {"sat": SAT}}}},
         "budget.time: given 'reference' but the study has no reference design"),
        ({"budget": {"time": 60}, "scheduler": {"kind": "asha"}, "backend": "ray"},
         "budget.time: scheduler 'asha' stops runs at token rungs"),
    ],
)  # fmt: skip
def test_a_time_budget_that_cannot_hold_fails_at_load(tmp_path, extra, problem):
    with pytest.raises(ConfigError, match=re.escape(problem)):
        load_study(write_study(tmp_path, **extra))


def test_the_dry_run_and_the_fingerprint_name_the_time_budget(tmp_path):
    from sweeps.run.dry_run import plan_text

    plain = load_study(write_study(tmp_path, name="plain"))
    timed = load_study(write_study(tmp_path, name="timed", budget={"time": "reference"}))
    assert "equal time: the time the reference needs for 4096 tokens" in plan_text(timed)
    assert "budget" not in plain.fingerprint() and timed.fingerprint()["budget.time"] == '"reference"'
