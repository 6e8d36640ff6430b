"""bench.scale's studies are valid studies for every sampler it names, its synthetic search
points form a report, and the sampler meter runs (the launches themselves: `python -m bench.scale`)."""

import pytest
import yaml

from bench import scale
from sweeps.report.fronts import compute
from sweeps.study import load_study


@pytest.mark.parametrize("sampler", ["grid", "tpe", "nsga2", "random", "gp", "asha"])
def test_every_sampler_gives_a_valid_study(tmp_path, sampler):
    backend = "ray" if sampler == "asha" else "local"
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(scale.study_tree(tmp_path, sampler, 40, backend, 3)))
    study = load_study(path)
    assert [o.metric for o in study.objectives] == ["val_loss", "peak_mem_mb", "tokens_per_s"]
    if sampler == "grid":
        assert study.n_points() == 40  # lr rates x two designs


def test_the_synthetic_search_reports_one_row_per_point():
    trials = scale.search_trials(30, objectives=2, seeds=2)
    result = compute(trials, [("val_loss", "minimize"), ("peak_mem_mb", "minimize")], replicates=20)
    assert len(result["points"]) == 30 and all(r["seeds"] == 2 for r in result["points"])
    assert result["front"]


def test_the_sampler_meter_times_suggestions():
    line = scale.measure_sampler("random", 20, asks=2)
    assert line["trials"] == 20 and line["cpu_per_suggestion_s"] >= 0.0
