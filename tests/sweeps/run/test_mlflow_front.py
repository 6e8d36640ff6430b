"""What MLflow shows of a finished launch (stand-in fit, three designs, one seed, one of them
dominated): the parent run's summary and description, and the children's tags with which the UI's
search box finds the front's runs; a second report writes nothing new to the children."""

import io
import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState

from sweeps import pareto
from sweeps.report.summary import FRONT_SEARCH, NOTE
from sweeps.run.launch import launch
from sweeps.run.tracking import client
from sweeps.study import load_study
from sweeps.study.run_record import RunRecord
from tests.sweeps import fake_fit
from tests.sweeps.helpers import artifacts, mlflow_runs, optuna_trials, write_study

# tanh: val_loss 3.0 +- 0.05 at the others' 900 tokens/s (fake_fit): dominated by sat (2.8, 900)
DESIGNS = {
    "baseline": {"kind": "none"},
    "sat": {"kind": "value_residual"},
    "tanh": {"kind": "value_residual", "activation": "tanh"},
}


pytestmark = pytest.mark.xdist_group("mlflow-front")  # one worker builds the fixture (conftest)


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    folder = tmp_path_factory.mktemp("front")
    path = write_study(folder, name="front", space={"model.residual": {"choices": DESIGNS}}, repeats=1)
    study = load_study(path)
    out = io.StringIO()
    assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE, stream=out) == 0
    return path, study, out.getvalue()


def experiment(study) -> str:
    return client(study.mlflow_uri()).get_experiment_by_name(study.experiment_name).experiment_id


def front_runs(study) -> set[str]:
    """The runs of the points pareto.json puts on the front, from the Optuna records."""
    front = set(json.loads((study.results_dir() / "pareto" / "pareto.json").read_text())["front"])
    records = [RunRecord.of(t) for t in optuna_trials(study) if t.state == TrialState.COMPLETE]
    return {r.mlflow_run_id for r in records if r.point in front}


def test_the_ui_search_finds_exactly_the_fronts_runs(launched):
    _, study, _ = launched
    c = client(study.mlflow_uri())
    found = c.search_runs([experiment(study)], filter_string=FRONT_SEARCH)
    expected = front_runs(study)
    assert len(expected) == 2  # baseline and sat; tanh is dominated
    assert {r.info.run_id for r in found} == expected
    others = c.search_runs([experiment(study)], filter_string="tags.on_front = 'false'")
    assert len(others) == 1 and {r.data.tags["mlflow.runName"].split("/")[0] for r in others} == {"tanh"}
    assert all(r.data.tags["pareto_rank"] == "1" for r in others)
    # rank and p_front as metrics too: sortable as numbers in the runs table
    trials = "tags.`sweep.role` = 'trial'"
    ranked = c.search_runs([experiment(study)], trials, order_by=["metrics.p_front DESC"])
    p_front = [r.data.metrics["p_front"] for r in ranked]
    assert p_front == sorted(p_front, reverse=True) and p_front[-1] < p_front[0]
    assert all(r.data.metrics["p_front"] == float(r.data.tags["p_front"]) for r in ranked)
    assert {r.data.metrics["pareto_rank"] for r in ranked} == {0.0, 1.0}


def test_the_parent_run_reads_as_the_printed_report(launched):
    _, study, printed = launched
    (parent,) = mlflow_runs(study, "parent")
    note = parent.data.tags[NOTE]
    table = printed[printed.index("rank  p_front") : printed.index("hypervolume (normalised")]
    assert table and table in note  # the printed table, verbatim
    assert "against baseline (paired over shared seeds" in note  # the verdicts
    assert f"search `{FRONT_SEARCH}`" in note
    assert sorted(parent.data.tags["front"].split("; ")) == ["baseline", "sat"]
    local = study.results_dir() / "pareto" / "summary.md"
    assert "summary.md" in artifacts(study, parent)  # at the root of the parent's artifacts
    shown = client(study.mlflow_uri()).download_artifacts(parent.info.run_id, "summary.md")
    assert Path(shown).read_text() == local.read_text() and table in local.read_text()


def test_a_second_report_writes_nothing_new_to_the_children(launched, monkeypatch, capsys):
    path, study, _ = launched
    children = {r.info.run_id for r in mlflow_runs(study, "trial")}
    before = {r.info.run_id: r.data.tags for r in mlflow_runs(study, "trial")}
    written = []
    log_batch = MlflowClient.log_batch

    def counted(self, run_id, *args, **kwargs):  # the real call, counted
        written.append(run_id)
        return log_batch(self, run_id, *args, **kwargs)

    monkeypatch.setattr(MlflowClient, "log_batch", counted)
    assert pareto.main([str(path)]) == 0
    assert written and not children & set(written)  # the parent's description is written again
    assert {r.info.run_id: r.data.tags for r in mlflow_runs(study, "trial")} == before
    history = client(study.mlflow_uri()).get_metric_history(next(iter(children)), "p_front")
    assert len(history) == 1


def test_past_the_cap_only_the_runs_a_reader_looks_for_first_are_tagged(tmp_path, monkeypatch):
    from sweeps.report import analysis

    monkeypatch.setattr(analysis, "CHILD_TAG_CAP", 2)  # three points: the front's two are tagged
    path = write_study(tmp_path, name="capped", space={"model.residual": {"choices": DESIGNS}}, repeats=1)
    study = load_study(path)
    assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE, stream=io.StringIO()) == 0
    tagged = {r.data.tags["mlflow.runName"].split("/")[0]: r.data.tags for r in mlflow_runs(study, "trial")}
    assert {name for name, tags in tagged.items() if "pareto_rank" in tags} == {"baseline", "sat"}
    assert not {"on_front", "p_front", "verdict"} & set(tagged["tanh"])
    assert tagged["sat"]["on_front"] == "true" and tagged["sat"]["pareto_rank"] == "0"


def test_a_run_outside_the_cap_is_brought_up_to_date_only_where_a_report_tagged_it(tmp_path):
    from sweeps.run.tracking import Tracker

    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "e", "s", "l")
    tracker.start_parent({}, {})
    a, b, c = (tracker.start_child(i, {"train.lr": 0.1}, 0, f"p{i}", {}, {}) for i in range(3))
    first = {run: {"pareto_rank": "0", "on_front": "true"} for run in (a, b, c)}
    assert tracker.update_runs(first, mark="pareto_rank", tail={c}) == 2
    then = {run: {"pareto_rank": "3", "on_front": "false"} for run in (a, b, c)}
    assert tracker.update_runs(then, mark="pareto_rank", tail={b, c}) == 2  # a, and b: tagged before
    tags = {run: tracker.client.get_run(run).data.tags for run in (a, b, c)}
    assert tags[a]["pareto_rank"] == tags[b]["pareto_rank"] == "3" and tags[b]["on_front"] == "false"
    assert "pareto_rank" not in tags[c] and "on_front" not in tags[c]
    assert tracker.update_runs(then, mark="pareto_rank", tail={c}) == 0  # nothing changed
