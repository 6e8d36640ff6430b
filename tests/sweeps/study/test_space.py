"""Search space: grid completeness with conditional entries, Optuna sampling, resolved trees."""

import optuna

from sweeps.study import study_from_dict
from sweeps.study.space import SearchSpace
from tests.factories import tiny_trial

TRIAL = tiny_trial(model={"n_layers": 3, "d_model": 64, "d_ff": 128})


def study(space, **extra):
    return study_from_dict({"name": "s", "trial": TRIAL, "space": space, **extra})


CONDITIONAL = {
    "model.residual.kind": ["none", "value_residual"],
    "model.residual.mode": {
        "choices": ["static", "gated"],
        "when": {"model.residual.kind": "value_residual"},
    },
    "model.residual.granularity": {"choices": ["layer", "head"], "when": {"model.residual.mode": "static"}},
    "model.residual.activation": {"choices": ["relu", "tanh"], "when": {"model.residual.mode": "gated"}},
    "model.residual.tap_layer": {"low": 1, "high": 2, "when": {"model.residual.kind": "value_residual"}},
}


def test_conditional_grid_enumerates_every_point_exactly_once():
    grid = study(CONDITIONAL).grid
    # none: 1; value_residual: (static x 2 granularities + gated x 2 activations) x 2 tap layers = 8
    assert len(grid) == 9
    assert len({tuple(sorted(p.items())) for p in grid}) == 9
    assert grid[0] == {"model.residual.kind": "none"}
    assert {"model.residual.kind": "value_residual", "model.residual.mode": "gated",
            "model.residual.activation": "tanh", "model.residual.tap_layer": 2} in grid  # fmt: skip
    assert all("model.residual.activation" not in p for p in grid if p.get("model.residual.mode") == "static")


def test_when_sees_defaults_of_the_trial_config():
    # mode defaults to gated in the value-residual config: activation is active without writing mode
    space = {
        "model.residual.kind": ["none", "value_residual"],
        "model.residual.activation": {"choices": ["relu", "tanh"], "when": {"model.residual.mode": "gated"}},
    }
    assert len(study(space).grid) == 3


def test_labelled_choices_set_whole_subtrees():
    s = study({"model.residual": {"choices": {"base": {"kind": "none"}, "sat": {"kind": "value_residual"}}}})
    tree = s.search_space.apply({"model.residual": "sat"})
    assert tree["model"]["residual"] == {"kind": "value_residual"}
    assert TRIAL["model"].get("residual") is None  # the base tree is not touched


def test_optuna_sampling_follows_conditions_and_ranges():
    s = study(
        {**CONDITIONAL, "train.lr": {"low": 1e-4, "high": 1e-2, "log": True}},
        sampler={"kind": "random"},
        n_trials=30,
    )
    opt = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    seen = set()
    for _ in range(30):
        trial = opt.ask()
        point = s.search_space.suggest(trial)
        assert 1e-4 <= point["train.lr"] <= 1e-2
        assert ("model.residual.activation" in point) == (point.get("model.residual.mode") == "gated")
        assert ("model.residual.mode" in point) == (point["model.residual.kind"] == "value_residual")
        seen.add(point["model.residual.kind"])
        opt.tell(trial, 0.0)
    assert seen == {"none", "value_residual"}


def test_float_step_is_a_finite_grid():
    space = SearchSpace(study({"train.lr": {"low": 0.001, "high": 0.003, "step": 0.001}}).space)
    assert [p["train.lr"] for p in space.grid()] == [0.001, 0.002, 0.003]
