"""bench.default_odds runs the default study's rule over simulated machines, and its numbers add up."""

import json

import pytest

from bench import default_odds, recall_verdicts


def _shares(words: dict) -> float:
    return sum(v["p"] for v in words.values())


def test_it_runs_and_its_odds_are_consistent(tmp_path):
    out = tmp_path / "odds.json"
    report = default_odds.main(["--machines", "40", "--json", str(out)])
    assert json.loads(out.read_text())["machines"] == 40
    assert set(report["words"]) == {"val_loss", "tokens_per_s", "peak_mem_mb"}
    allowed = {"better", "worse", "equivalent", "undecided", "indistinguishable"}
    for words in report["words"].values():
        assert _shares(words) == pytest.approx(1) and set(words) <= allowed
    assert _shares(report["lines"]) == pytest.approx(1) and _shares(report["seeds_run"]) == pytest.approx(1)
    modal = report["all_modal"]
    assert modal["p"] <= min(max(v["p"] for v in w.values()) for w in report["words"].values()) + 1e-12
    assert report["seeds_run"] == {"6": {"p": 1.0, "se": 0.0}}  # the default's fixed six seeds
    assert report["words"]["peak_mem_mb"] == {"equivalent": {"p": 1.0, "se": 0.0}}  # exact, inside 5%
    assert {name.split(" seeds")[0] for name in report["replay"]} == {"AMD EPYC", "Intel Xeon"}


def test_without_rounding_the_recorded_seeds_give_one_val_loss_word():
    """No rounding and the recorded seeds: every machine trains the same digits, so one word."""
    study = default_odds.load_study(default_odds.STUDY)
    report = default_odds.simulate(study, 20, rounding_scale=0.0)
    assert list(report["words"]["val_loss"].values()) == [{"p": 1.0, "se": 0.0}]
    assert report["mode"] == "seeds 0..5 as recorded"
    fresh = default_odds.simulate(study, 20, fresh_seeds=True)
    assert fresh["mode"] == "fresh seeds"


def test_the_recorded_runs_are_read_as_recorded():
    diffs = default_odds.recorded_diffs()
    assert sorted(diffs) == list(range(12))
    assert diffs[0] == pytest.approx(1.7419052124023438 - 1.7637985944747925)
    moved = default_odds.cross_machine()  # issue 50's table: the Intel's difference minus the EPYC's
    assert moved == pytest.approx([-0.0003, -0.0018, -0.0048, -0.0042, -0.0016, -0.0001], abs=1.1e-4)


def test_the_recall_study_is_judged_by_each_metrics_test():
    report = recall_verdicts.main([])
    tests = {(c["design"], c["metric"]): c["test"] for c in report["comparisons"]}
    assert tests[("satformer", "reserved_recall_auc")] == "permutation"
    assert tests[("satformer", "reserved_recall_tokens")] == "logrank"
    assert tests[("satformer", "val_loss")] == "t"
    auc = [c for c in report["comparisons"] if c["metric"] == "reserved_recall_auc"]
    assert all(-1 <= c["lo"] <= c["hi"] <= 1 for c in auc)  # not the t interval's +-1.9
