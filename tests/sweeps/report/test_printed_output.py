"""Golden output: what a launch prints, word for word, in one place. The other tests read the typed
records (sweeps.study.run_record), the plan and the fronts' result; rewording a printed line
changes this file only."""

import io
from types import SimpleNamespace

from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from sweeps.report.fronts import compute
from sweeps.report.outputs import table_text, tuned_text
from sweeps.run.launch import say_links
from sweeps.run.progress import Progress
from sweeps.study.tuning import Choice


def _trial(point: str, seed: int, value: float):
    return create_trial(
        state=TrialState.COMPLETE,
        values=[value],
        params={"model.residual": point},
        distributions={"model.residual": CategoricalDistribution(["baseline", "sat"])},
        user_attrs={"point": point, "seed": seed, "repeat": seed},
    )


def tuned_result() -> dict:
    """Two designs, three seeds each, sat clearly better; each at its own tuned rate."""
    trials = [_trial("baseline", s, 3.0 + s / 100) for s in range(3)]
    trials += [_trial("sat", s, 2.8 + s / 100 + (s % 2) / 1000) for s in range(3)]
    result = compute(trials, [("val_loss", "minimize")], reference="baseline", replicates=200)
    choices = {
        "baseline": Choice(0.01, {0.001: 3.5, 0.01: 3.0, 0.1: 3.25}, "val_loss", "minimize"),
        "sat": Choice(0.001, {0.001: 2.8, 0.01: 3.1, 0.1: 3.3}, "val_loss", "minimize"),
    }
    points = {pid: c.to_dict() for pid, c in choices.items()}
    result["tuned"] = {"path": "train.lr", "seeds": 2, "first_seed": 2, "points": points}
    return result


TABLE = """\
rank  p_front  point     seeds  train.lr  val_loss    vs reference  params
0     1.00     sat       3      0.001     2.81±0.025  better        model.residual=sat
1     0.00     baseline  3      0.01      3.01±0.025  reference     model.residual=baseline
values: mean ± half-width of the 95% t interval over seeds; vs reference: the paired verdict per \
objective (95%, 1 comparison (nothing to adjust), one look (t test); tests: val_loss t)
hypervolume (normalised, ref 1.1): 1.0000; front: 1 point(s)"""

TUNED = """\
tuned train.lr (tune stage: each point's best mean over seeds 0..1; every row above and the verdicts \
below: its own best value, fresh seeds from 2, split sample):
  baseline: train.lr 0.01 (neighbours worse by +0.5, +0.25 val_loss; curve 0.001:3.5 0.01:3 0.1:3.25)
  sat: train.lr 0.001 (neighbours worse by +0.3 val_loss; curve 0.001:2.8 0.01:3.1 0.1:3.3); \
warning: best at the edge of the range, the optimum may lie beyond it"""


def test_the_fronts_table_with_the_tuned_column():
    assert table_text(tuned_result()) == TABLE


def test_the_tuned_values_their_curves_and_the_edge_warning():
    assert tuned_text(tuned_result()) == TUNED


def test_the_progress_summary():
    progress = Progress(6, 0, [("val_loss", "minimize")], 1, io.StringIO())
    for number, status in enumerate(["ok"] * 4 + ["diverged"] * 2):
        progress.finished(number, {"model.residual": "sat"}, status, {"val_loss": 3.0 - number / 10}, 0.0)
    assert (
        progress.summary()
        == "6/6 done (4 ok, 2 failed, 0 pruned), 0 running | best val_loss 2.7 (trial 3: sat)"
    )


def test_the_mlflow_links(tmp_path):
    out = io.StringIO()
    say_links(
        SimpleNamespace(uri=f"sqlite:///{tmp_path / 'mlflow.db'}", experiment_id="1", parent_id="abc"), out
    )
    assert out.getvalue().splitlines() == [
        "MLflow runs:       http://127.0.0.1:5000/#/experiments/1/runs?workflowType=machine_learning",
        "MLflow parent run: http://127.0.0.1:5000/#/experiments/1/runs/abc?workflowType=machine_learning",
        f"  (start the UI first: make mlflow-ui MLFLOW_URI=sqlite:///{tmp_path / 'mlflow.db'})",
    ]
