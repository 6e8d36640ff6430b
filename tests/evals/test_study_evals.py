"""A study with `evals:` end to end through `sweeps.launch` (backend local, real training): two
designs x 2 seeds of the toy model, the toy multiple-choice task scored on each run's final
weights in its worker, its accuracy an objective with a paired verdict."""

import pytest
from optuna.trial import TrialState

pytest.importorskip("lm_eval")

from sweeps.run import launch as launcher  # noqa: E402
from tests.evals.toy import toy_trial, write_corpus  # noqa: E402
from tests.sweeps.fake_fit import PROBE  # noqa: E402
from tests.sweeps.helpers import mlflow_runs, optuna_trials, write_study  # noqa: E402

ACC = "eval/toy_choice/acc"
DESIGNS = {"baseline": {"kind": "none"}, "satformer": {"kind": "value_residual", "mode": "gated"}}


def evals_study(folder, tasks, **extra):
    corpus = write_corpus(folder / "corpus")
    return write_study(
        folder,
        name="evals_e2e",
        trial=toy_trial(corpus, tokens=40_000),
        space={"model.residual": {"choices": DESIGNS}},
        objectives=[{"metric": "val_loss"}, {"metric": ACC, "direction": "maximize"}],
        evals={"tasks": ["toy_choice"], "include_path": str(tasks), "batch_size": 8},
        **extra,
    )


def test_a_study_scores_every_run_and_judges_the_eval_metric(tmp_path, tasks, capsys):
    study = launcher.load(evals_study(tmp_path, tasks))  # the launch's own checks, lm-eval's included
    assert launcher.launch(study, probe=PROBE) == 0
    out = capsys.readouterr().out
    print(out)
    trials = optuna_trials(study)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 4
    runs = {r.info.run_id: r for r in mlflow_runs(study, "trial")}
    for t in trials:
        run = runs[t.user_attrs["mlflow_run_id"]]
        acc = run.data.metrics[ACC]  # logged by the harness in the worker, and the run's final value
        assert acc == t.values[1] == run.data.metrics[f"final/{ACC}"]
        assert 0 <= acc <= 1 and f"{ACC}_stderr" in run.data.metrics
    assert f"{ACC} " in out  # the verdict line names it
