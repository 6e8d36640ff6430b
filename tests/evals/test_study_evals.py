"""A study with `evals:` end to end through `sweeps.launch` (real training, backends local and
Ray): two designs x 2 seeds of the toy model, the toy multiple-choice task scored on each run's
final weights in its worker, its accuracy an objective with a paired verdict; and what the launch
refuses in the section before it creates anything."""

import json

import pytest
from optuna.trial import TrialState

pytest.importorskip("lm_eval")

from arch.configtree import ConfigError  # noqa: E402
from evals.cli import main as evals_main  # noqa: E402
from sweeps.run import launch as launcher  # noqa: E402
from sweeps.study.run_record import RunRecord
from tests.evals.toy import toy_trial, write_corpus  # noqa: E402
from tests.sweeps.fake_fit import PROBE  # noqa: E402
from tests.sweeps.helpers import mlflow_runs, optuna_trials, write_study  # noqa: E402

ACC = "eval/toy_choice/acc"
DESIGNS = {"baseline": {"kind": "none"}, "satformer": {"kind": "value_residual", "mode": "gated"}}


def evals_study(folder, tasks, objectives=None, evals=None, **extra):
    """At 100k tokens the toy model scores 0.5-1.0 on toy_choice (chance 0.25), seed by seed."""
    corpus = write_corpus(folder / "corpus")
    objectives = objectives or [{"metric": "val_loss"}, {"metric": ACC, "direction": "maximize"}]
    return write_study(
        folder,
        name="evals_e2e",
        trial=toy_trial(corpus, tokens=100_000),
        space={"model.residual": {"choices": DESIGNS}},
        objectives=objectives,
        evals=evals or {"tasks": ["toy_choice"], "include_path": str(tasks), "batch_size": 8},
        **extra,
    )


def check_launch(study, out: str, tasks=None):
    """Every run completed with the harness's accuracy as its objective value, logged to its child
    run; the table and the verdict line name it."""
    trials = optuna_trials(study)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 4
    runs = {r.info.run_id: r for r in mlflow_runs(study, "trial")}
    scores = []
    for t in trials:
        run = runs[RunRecord.of(t).mlflow_run_id]
        acc = run.data.metrics[ACC]  # logged by the harness in the worker
        assert acc == t.values[1] == run.data.metrics[f"final/{ACC}"]
        assert f"{ACC}_stderr" in run.data.metrics and run.data.metrics["final/evals_s"] > 0
        scores.append(acc)
    assert sum(scores) / len(scores) > 0.5  # trained weights, not the initial ones (chance 0.25)
    line = next(x for x in out.splitlines() if x.strip().startswith("satformer: val_loss"))
    assert f"; {ACC} " in line and "2 seed(s)" in line.split(ACC)[1]  # its paired verdict
    return trials, runs


def test_a_local_study_scores_every_run_and_judges_the_eval_metric(tmp_path, tasks, capsys):
    path = evals_study(tmp_path, tasks, output={"dir": str(tmp_path / "results"),
                       "mlflow_uri": f"sqlite:///{tmp_path / 'mlflow.db'}", "checkpoints": True})  # fmt: skip
    plan = launcher.load(path)  # the launch's own checks, lm-eval's included
    assert launcher.launch(plan, probe=PROBE) == 0
    study = plan.study
    trials, runs = check_launch(study, capsys.readouterr().out)
    # the score is the final weights': `python -m evals` on the run's kept checkpoint agrees
    run_id = RunRecord.of(trials[1]).mlflow_run_id
    out = tmp_path / "again.json"
    argv = [run_id, "--tasks", "toy_choice", "--include-path", str(tasks), "--json", str(out)]
    assert evals_main([*argv, "--tracking-uri", study.mlflow_uri()]) == 0
    assert json.loads(out.read_text())["results"]["toy_choice"]["acc,none"] == trials[1].values[1]


def test_the_launch_refuses_what_lm_eval_cannot_score_here(tmp_path, tasks):
    (tmp_path / "hub").mkdir()
    (tmp_path / "hub" / "hub_task.yaml").write_text(
        "task: hub_task\ndataset_path: someone/not_cached\noutput_type: multiple_choice\n"
        "test_split: test\ndoc_to_text: q\ndoc_to_choice: [a, b]\ndoc_to_target: 0\n"
    )
    offline = {"tasks": ["hub_task"], "include_path": str(tmp_path / "hub")}
    path = evals_study(tmp_path, tasks, objectives=[{"metric": "val_loss"}], evals=offline)
    with pytest.raises(ConfigError) as err:
        launcher.load(path)
    assert f"{path}: evals.tasks: task hub_task: dataset someone/not_cached is offline" in str(err.value)

    backwards = [{"metric": ACC, "direction": "minimize"}]
    with pytest.raises(ConfigError) as err:
        launcher.load(evals_study(tmp_path, tasks, objectives=backwards))
    assert f"objective {ACC}: given direction minimize; allowed: maximize" in str(err.value)


def test_the_cli_exits_2_and_creates_nothing(tmp_path, tasks, monkeypatch, capsys):
    path = evals_study(tmp_path, tasks, objectives=[{"metric": ACC, "direction": "minimize"}])
    before = sorted(tmp_path.rglob("*"))
    monkeypatch.chdir(tmp_path)
    assert launcher.main([str(path), "--dry-run"]) == 2
    assert "allowed: maximize" in capsys.readouterr().err
    assert sorted(tmp_path.rglob("*")) == before


def test_the_dry_run_names_the_tasks(tmp_path, tasks, capsys):
    assert launcher.main([str(evals_study(tmp_path, tasks)), "--dry-run"]) == 0
    assert f"evals        toy_choice at the end of each run (every document, tasks from {tasks})" in (
        capsys.readouterr().out
    )


@pytest.mark.slow  # Ray's start and a fresh worker importing torch, Lightning and lm-eval: see docs/evals
def test_a_ray_study_scores_every_run_in_its_worker(tmp_path, tasks, capsys):
    ray = {"num_cpus": 2, "reuse_actors": True}
    plan = launcher.load(evals_study(tmp_path, tasks, backend="ray", max_concurrent=2, ray=ray))
    assert launcher.launch(plan, probe=PROBE) == 0
    study = plan.study
    _, runs = check_launch(study, capsys.readouterr().out)
    assert all(r.data.tags["ray.pid"] for r in runs.values())  # scored where Ray ran the trial


def test_a_run_whose_scoring_fails_is_recorded_as_failed_with_why(tmp_path, tasks, capsys):
    from tests.sweeps import fake_fit  # trains nothing and writes no weights

    plan = launcher.load(evals_study(tmp_path, tasks, repeats=1))
    assert launcher.launch(plan, fit=fake_fit.fit, probe=PROBE) == 4  # no run completed
    study = plan.study
    for run in mlflow_runs(study, "trial"):
        assert run.data.tags["sweep.status"] == "error" and run.info.status == "FAILED"
        assert run.data.tags["sweep.error"].startswith("evals: RuntimeError: training left no final weights")
