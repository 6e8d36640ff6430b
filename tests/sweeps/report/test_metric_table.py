"""The metric table (trainers.metrics) is the one home of a metric's properties: a metric added
there alone is validated, summarised, decided, shown and reduced as its record says."""

import dataclasses

import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from arch.configtree import ConfigError
from sweeps.report.costs import metric_values
from sweeps.report.fronts import compute
from sweeps.report.outputs import axis_title, conclusions_text
from sweeps.study import load_study
from tests.sweeps.helpers import write_study
from trainers import METRICS, metrics
from trainers.metrics import Metric

BLEU = Metric(
    "bleu", "points", "maximize", "exact", "mean", shown="relative", objective=True, needs_data="mqar"
)


def test_every_record_is_consistent_and_the_old_lists_are_read_from_it():
    assert [p for m in metrics.TABLE.values() for p in m.problems()] == []
    recall = metrics.recall_names("text", "reserved", "curve")  # the probe's, read by the study's checks
    assert recall == tuple(n for n in metrics.TABLE if "recall" in n or n.startswith("copy_"))
    assert set(metrics.objective_names()) == {n for n, m in metrics.TABLE.items() if m.objective}
    assert metrics.objective_names()[0] == "val_loss"  # the first allowed name in errors
    assert "mqar_acc" not in METRICS and "mem_ddp_buckets_mb" not in METRICS and "tokens_per_s" not in METRICS
    assert set(metric_values(0.5, 1000.0)) == set(metrics.probe_names())  # the probe makes what it says
    with pytest.raises(ValueError, match="timing rounds, and only they, are summarised by their median"):
        metrics._table([dataclasses.replace(BLEU, statistic="median")])
    with pytest.raises(ValueError, match="metric bleu is in trainers.metrics twice"):
        metrics._table([BLEU, BLEU])


def _trial(point, value):
    return create_trial(
        state=TrialState.COMPLETE,
        values=[value],
        params={"design": point},
        distributions={"design": CategoricalDistribution(["base", "x"])},
        user_attrs={"point": point, "seed": 0},
    )


def _one_seed_each() -> str:
    """The conclusions of x (bleu 22) against base (bleu 20), one seed each."""
    trials = [_trial("base", 20.0), _trial("x", 22.0)]
    return conclusions_text(compute(trials, [("bleu", "maximize")], "base", None, 20))


def test_a_new_objective_is_one_entry_in_the_table(tmp_path, monkeypatch):
    monkeypatch.setitem(metrics.TABLE, "bleu", BLEU)
    # validated: allowed as an objective, its direction from the table, its data need checked
    study = load_study(write_study(tmp_path, objectives=[{"metric": "bleu"}]))
    assert [(o.metric, o.direction) for o in study.objectives] == [("bleu", "maximize")]
    text = {**study.trial, "data": {"kind": "text", "corpus": "shakespeare", "seq_len": 32}}
    refused = r"objectives\[0\]\.metric: given 'bleu' with trial\.data\.kind 'text'; needs mqar"
    with pytest.raises(ConfigError, match=refused):
        load_study(write_study(tmp_path, name="t2", objectives=[{"metric": "bleu"}], trial=text))
    # exact: one pair decides; shown relative to the reference, with its unit on the axes
    assert "x: bleu 1.100x (better)" in _one_seed_each()
    assert axis_title("bleu", "maximize") == "bleu (points, maximize)"
    # reduced over data-parallel workers as its record says (memory: the max)
    keys = {"val_loss": 3.0, "bleu": 20.0, "peak_mem_mb": 100.0, "params_total": 5.0}
    assert metrics.worker_reductions(keys) == {"mean": ["bleu"], "max": ["peak_mem_mb"]}
    # seed-varying or not decides whether adaptive seeds wait for it
    assert not metrics.varies_with_seed("bleu")
    monkeypatch.setitem(metrics.TABLE, "bleu", dataclasses.replace(BLEU, varies="seed", shown="absolute"))
    assert metrics.varies_with_seed("bleu")
    assert "x: bleu +2.0000 (undecided, 1 seed(s))" in _one_seed_each()


def test_reduce_over_workers_applies_the_tables_operations(monkeypatch):
    """On a one-process gloo group: every operation runs (mean divides by the group's size)."""
    import torch.distributed as dist

    from trainers.distributed import free_port, reduce_over_workers

    monkeypatch.setitem(metrics.TABLE, "bleu", BLEU)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        out = reduce_over_workers({"bleu": 20.0, "peak_mem_mb": 100.5, "val_loss": 3.0})
    finally:
        dist.destroy_process_group()
    assert out == {"bleu": 20.0, "peak_mem_mb": 100.5, "val_loss": 3.0}
