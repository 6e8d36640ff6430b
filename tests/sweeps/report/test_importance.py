"""Importances over points with their seed means (PED-ANOVA), per objective; too small to tell."""

import json

from optuna.distributions import CategoricalDistribution

from sweeps.report import importance
from sweeps.run.launch import launch
from sweeps.study import load_study
from tests.sweeps import fake_fit
from tests.sweeps.helpers import artifacts, mlflow_runs, write_study

LRS = [0.001 * k for k in range(1, 11)]
DISTS = {
    "model.residual": CategoricalDistribution(["baseline", "sat"]),
    "train.lr": CategoricalDistribution(LRS),
}


def result_of(n_lrs=10):
    """val_loss is set by the design alone, peak memory by the learning rate alone."""
    rows = [
        {"point": f"{design}-{lr}", "params": {"model.residual": design, "train.lr": lr},
         "val_loss": 3.0 - 0.2 * (design == "sat"), "peak_mem_mb": 100.0 + 1000 * lr}
        for design in ("baseline", "sat") for lr in LRS[:n_lrs]
    ]  # fmt: skip
    objectives = [
        {"metric": "val_loss", "direction": "minimize"},
        {"metric": "peak_mem_mb", "direction": "minimize"},
    ]
    return {"points": rows, "objectives": objectives}


def test_each_objective_is_driven_by_its_own_parameter():
    result = result_of()
    found = importance.importances(result, {r["point"]: DISTS for r in result["points"]})
    assert found["note"] is None and found["points"] == 20
    loss, memory = found["objectives"]["val_loss"], found["objectives"]["peak_mem_mb"]
    assert loss["model.residual"] > 0.9 > loss["train.lr"]
    assert memory["train.lr"] > 0.9 > memory["model.residual"]
    shown = importance.tags(found)
    assert shown["importance.val_loss"].startswith("model.residual ")
    assert shown["importance.peak_mem_mb"].startswith("train.lr ")


def test_too_few_points_or_one_varying_parameter_is_too_small_to_tell(tmp_path):
    few = result_of(n_lrs=4)  # 8 points
    found = importance.importances(few, {r["point"]: DISTS for r in few["points"]})
    assert found["note"] == "too small to tell: 8 point(s); importances need at least 10"
    assert found["objectives"] == {"val_loss": None, "peak_mem_mb": None}
    one = result_of()
    for row in one["points"]:
        row["params"] = {"train.lr": row["params"]["train.lr"], "fixed": 1}
    assert "1 parameter(s) vary" in importance.importances(one, {})["note"]
    paths = importance.write(found, tmp_path)
    assert [p.name for p in paths] == ["importances.json", "importances.csv"]  # no figure of nothing
    assert "too small to tell" in (tmp_path / "importances.csv").read_text()


def test_the_launch_puts_the_table_figure_and_tags_in_the_parent_run(tmp_path):
    space = {
        "model.residual": {"choices": {"baseline": {"kind": "none"}, "sat": {"kind": "value_residual"}}},
        "train.lr": {"choices": LRS[:5]},
    }
    study = load_study(write_study(tmp_path, space=space, repeats=1))  # 10 points x 1 seed
    assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    (parent,) = mlflow_runs(study, "parent")
    files = artifacts(study, parent)
    assert {"importance/importances.csv", "importance/importances.png", "importance/importances.json"} <= set(
        files
    )
    assert parent.data.tags["importance.val_loss"].startswith("model.residual ")  # the fake fit's loss
    saved = json.loads((study.results_dir() / "importance" / "importances.json").read_text())
    assert saved["points"] == 10 and saved["note"] is None
