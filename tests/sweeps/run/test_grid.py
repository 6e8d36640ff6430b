"""One grid per study: validation, the point count, --dry-run and the launcher see the same points.

Regression: a `when:` on a trial-config path (model.n_layers) used to be evaluated against an
empty base by validation and the count, and against the trial by the launcher, so the study
counted 2 points, queued the first 2 of the real 4 (kind none with a mode) and never ran the rest.
"""

from collections import Counter

import pytest
from optuna.trial import TrialState

from arch.configtree import ConfigError
from sweeps.run import launch
from sweeps.study import load_study
from tests.sweeps import fake_fit
from tests.sweeps.helpers import TRIAL, mlflow_runs, optuna_trials, write_study


def trial_with(n_layers: int) -> dict:
    return {**TRIAL, "model": {**TRIAL["model"], "n_layers": n_layers}}


def test_when_on_a_trial_path_that_opens_an_untrainable_point_is_refused_at_load(tmp_path):
    path = write_study(
        tmp_path,
        trial=trial_with(6),
        space={
            "model.residual.kind": ["none", "value_residual"],
            "model.residual.mode": {"choices": ["static", "gated"], "when": {"model.n_layers": 6}},
        },
    )
    with pytest.raises(ConfigError) as err:
        load_study(path)
    text = str(err.value)
    assert "space.model.residual.mode: at point {model.residual.kind='none', model.residual.mode=" in text
    assert "unknown key" in text


def test_validation_count_dry_run_and_launcher_share_one_grid(tmp_path, capsys):
    path = write_study(
        tmp_path,
        trial=trial_with(3),
        space={
            "model.residual.kind": ["none", "value_residual"],
            "model.residual.mode": {
                "choices": ["static", "gated"],
                "when": {"model.n_layers": 3, "model.residual.kind": "value_residual"},
            },
        },
        repeats=1,
    )
    study = load_study(path)
    expected = [
        {"model.residual.kind": "none"},
        {"model.residual.kind": "value_residual", "model.residual.mode": "static"},
        {"model.residual.kind": "value_residual", "model.residual.mode": "gated"},
    ]
    assert study.grid == expected
    assert study.n_points() == 3 and study.n_runs() == 3

    assert launch.main([str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "grid         3 point(s)" in out and "point   2  model.residual.kind=value_residual" in out

    assert launch.launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    trials = optuna_trials(study)
    assert Counter(t.state for t in trials) == {TrialState.COMPLETE: 3}
    assert sorted(map(str, (t.params for t in trials))) == sorted(map(str, expected))
    modes = Counter(r.data.tags.get("mode") for r in mlflow_runs(study, "trial"))
    assert modes == {None: 1, "static": 1, "gated": 1}
