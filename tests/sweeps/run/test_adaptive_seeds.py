"""Adaptive seeds (`repeats: {min, max}`): seeds only where the verdict or front is undecided.

Stand-in fit: `sat` beats the baseline by exactly 0.2 on every seed (decided at min), `noisy`
differs from it by +-0.05 alternating with the seed (never decided): with min 2, max 4 the
noisy point and the reference go to 4 seeds, sat stays at 2: 10 runs.
"""

import signal
from collections import Counter

import pytest
from optuna.trial import TrialState

from sweeps.run import adaptive, launch
from sweeps.study import load_study
from sweeps.study.run_record import RunRecord
from sweeps.study.space import point_id
from sweeps.study.study_plan import resolve
from tests.sweeps import fake_fit
from tests.sweeps.helpers import mlflow_runs, optuna_trials, start, wait_for_complete, write_study

DESIGNS = {
    "baseline": {"kind": "none"},
    "sat": {"kind": "value_residual"},
    "noisy": {"kind": "value_residual", "activation": "tanh"},
}
EXPECTED = {"baseline": 4, "sat": 2, "noisy": 4}


def adaptive_study(tmp_path, **extra):
    return write_study(
        tmp_path, space={"model.residual": {"choices": DESIGNS}}, repeats={"min": 2, "max": 4}, **extra
    )


def seeds_per_design(study) -> dict[str, list[int]]:
    names = {point_id({"model.residual": n}): n for n in DESIGNS}
    out = {}
    for t in optuna_trials(study):
        if t.state == TrialState.COMPLETE:
            out.setdefault(names[RunRecord.of(t).point], []).append(RunRecord.of(t).seed)
    return {n: sorted(s) for n, s in out.items()}


def test_only_undecided_points_and_the_reference_get_more_seeds(tmp_path, capsys):
    study = load_study(adaptive_study(tmp_path))
    assert "3 x 2 to 4 seeds (adaptive) = 6 to 12 trial(s)" in launch.plan_text(study)
    assert launch.launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    seeds = seeds_per_design(study)
    assert {n: len(s) for n, s in seeds.items()} == EXPECTED
    assert all(s == list(range(len(s))) for s in seeds.values())  # seeds 0.., each once
    trials = optuna_trials(study)
    assert not [t for t in trials if t.state != TrialState.COMPLETE]
    assert len(mlflow_runs(study, "trial")) == 10
    out = capsys.readouterr().out
    assert "10/10 done" in out  # the progress total follows the decisions


def test_an_equivalent_point_stops_too(tmp_path, capsys):
    """With a margin wider than the noisy point's interval at 2 seeds, it is equivalent: no point
    is open after round 1, so nothing grows (6 runs, not 10), and the report says the margin."""
    study = load_study(adaptive_study(tmp_path, margins={"val_loss": 10.0}))
    assert launch.launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    assert {n: len(s) for n, s in seeds_per_design(study).items()} == {n: 2 for n in DESIGNS}
    out = capsys.readouterr().out
    assert "(equivalent, 2 seed(s))" in out and "margins val_loss +-10" in out
    assert "looks at 2..4 seeds, Lan-DeMets O'Brien-Fleming-type alpha spending" in out


def test_min_equal_max_is_a_fixed_count_and_bad_ranges_are_refused(tmp_path):
    study = load_study(
        write_study(tmp_path, space={"model.residual": {"choices": DESIGNS}}, repeats={"min": 2, "max": 2})
    )
    assert launch.launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    assert {n: len(s) for n, s in seeds_per_design(study).items()} == {n: 2 for n in DESIGNS}
    from arch.configtree import ConfigError

    with pytest.raises(ConfigError, match=r"repeats\.max: given 1; allowed: at least min 2"):
        load_study(write_study(tmp_path, name="bad1", repeats={"min": 2, "max": 1}))
    with pytest.raises(
        ConfigError, match=r"repeats: given \{'min': 2\}; allowed: an integer or \{min: m, max: M\}"
    ):
        load_study(write_study(tmp_path, name="bad2", repeats={"min": 2}))
    with pytest.raises(ConfigError, match=r"repeats: adaptive seeds with sampler 'tpe'; allowed: grid"):
        load_study(write_study(tmp_path, name="bad3", repeats={"min": 2, "max": 3}, sampler={"kind": "tpe"}))


def test_decisions_are_stored_and_survive_kill_9(tmp_path):
    path = adaptive_study(tmp_path)
    study = load_study(path)
    first = start(path)
    wait_for_complete(study, 7, first)  # past the first decision (after 6 runs), inside round 2
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    from sweeps.run.plan import Plan

    decided = adaptive.seed_counts(Plan(resolve(study), "look"))
    assert sorted(decided.values()) == [2, 3, 3]  # round 2: the noisy point and the reference

    assert launch.launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    seeds = seeds_per_design(study)
    assert {n: len(s) for n, s in seeds.items()} == EXPECTED
    assert all(s == list(range(len(s))) for s in seeds.values())  # none twice after the kill
    states = Counter(t.state for t in optuna_trials(study))
    assert (
        states[TrialState.COMPLETE] == 10
        and not states[TrialState.RUNNING]
        and not states[TrialState.WAITING]
    )


def fake_values(plan, run) -> list[float]:
    """What the stand-in fit and probe report for a run: val_loss, tokens_per_s, peak_mem_mb."""
    config = plan.trial_config(run)
    final = fake_fit.fit(config)
    return [final["val_loss"], fake_fit.PROBE.metrics(config)["tokens_per_s"], final["peak_mem_mb"]]


def test_two_launchers_on_one_rdb_study_make_the_same_decisions_once(tmp_path):
    from sweeps.run.plan import WAIT, Plan

    output = {"dir": str(tmp_path / "results"), "storage": f"sqlite:///{tmp_path / 'o.db'}",
              "mlflow_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"}  # fmt: skip
    path = adaptive_study(tmp_path, output=output)
    study = load_study(path)
    a, b = Plan(resolve(study), "a"), Plan(resolve(study), "b")
    assert a.shared
    a.recover(), b.recover()
    pending, turn = [], 0
    while True:
        plan = (a, b)[turn % 2]
        turn += 1
        run = plan.claim()
        if run is None and not pending:
            break
        if run is None or run == WAIT:  # nothing to claim until a running run is told
            if pending:
                owner, done = pending.pop(0)
                owner.optuna.tell(done.trial, fake_values(owner, done))
            continue
        pending.append((plan, run))
        if len(pending) > 2:  # at most a few runs in flight, told oldest first
            owner, done = pending.pop(0)
            owner.optuna.tell(done.trial, fake_values(owner, done))
    seeds = seeds_per_design(study)
    assert {n: len(s) for n, s in seeds.items()} == EXPECTED
    assert all(s == list(range(len(s))) for s in seeds.values())
    assert a.claim() is None and b.claim() is None


def test_ray_backend_gives_the_same_adaptive_counts(tmp_path, shared_ray):
    ray = {"num_cpus": 2, "reuse_actors": True}
    path = adaptive_study(tmp_path, backend="ray", max_concurrent=2, ray=ray)
    study = load_study(path)
    assert launch.launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    assert {n: len(s) for n, s in seeds_per_design(study).items()} == EXPECTED
