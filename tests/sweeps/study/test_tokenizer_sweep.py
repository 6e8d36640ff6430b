"""A sweep over the tokenizer ranks on val_bpb: val_loss (per token) is refused at load, naming
val_bpb; with val_bpb it loads, and (slow) a real byte-vs-BPE launch ranks both points on it."""

import math

import pytest

from arch.configtree import ConfigError
from sweeps.run import launch as launcher
from sweeps.study import load_study
from tests.factories import text_data, tiny_trial
from tests.sweeps.helpers import mlflow_runs, optuna_trials, write_study

TEXT_TRIAL = {
    **tiny_trial(model={"max_seq_len": 64}, train={"batch_size": 4, "eval_every": 16}),
    "data": text_data(corpus="shakespeare", bpe_vocab_size=300, max_bytes=200000),  # in place of MQAR
}
SPACE = {"data.tokenizer": {"choices": ["byte", "bpe"]}}


def study_file(tmp_path, metric, **extra):
    return write_study(tmp_path, trial=TEXT_TRIAL, space=SPACE, objectives=[{"metric": metric}], **extra)


@pytest.mark.parametrize("metric", ["val_loss", "val_ppl"])
def test_a_per_token_objective_across_tokenizers_is_refused_naming_val_bpb(tmp_path, metric):
    with pytest.raises(ConfigError) as err:
        load_study(study_file(tmp_path, metric))
    assert f"objectives[0].metric: given {metric!r}: per token" in str(err.value)
    assert "(bpe300, byte); allowed: val_bpb" in str(err.value)


def test_an_asha_metric_per_token_is_refused_too(tmp_path):
    scheduler = {"kind": "asha", "metric": "val_loss", "mode": "min", "grace_tokens": 1024}
    with pytest.raises(ConfigError, match=r"scheduler.metric: given 'val_loss': per token"):
        load_study(study_file(tmp_path, "val_bpb", scheduler=scheduler, backend="ray"))


def test_val_bpb_across_tokenizers_loads_and_val_loss_on_one_tokenizer_still_does(tmp_path):
    study = load_study(study_file(tmp_path, "val_bpb"))
    assert [p["data.tokenizer"] for p in study.grid] == ["byte", "bpe"]
    one = write_study(tmp_path, name="one", trial=TEXT_TRIAL, objectives=[{"metric": "val_loss"}])
    assert load_study(one).objectives[0].metric == "val_loss"


def test_val_bpb_needs_text_or_prepared_shards(tmp_path):
    with pytest.raises(
        ConfigError, match=r"given 'val_bpb' with trial.data.kind 'mqar'; needs text or tokens"
    ):
        load_study(write_study(tmp_path, objectives=[{"metric": "val_bpb"}]))


@pytest.mark.slow
def test_a_byte_vs_bpe_launch_ranks_both_on_val_bpb(tmp_path):
    study = load_study(study_file(tmp_path, "val_bpb", repeats=1))
    assert launcher.launch(study) == 0
    trials = optuna_trials(study)
    assert len(trials) == 2 and all(math.isfinite(t.values[0]) for t in trials)
    for run in mlflow_runs(study, "trial"):
        loss, bpb = run.data.metrics["final/val_loss"], run.data.metrics["final/val_bpb"]
        byte = run.data.params["data.tokenizer"] == "byte"
        assert bpb == pytest.approx(loss / math.log(2)) if byte else bpb < loss / math.log(2)
