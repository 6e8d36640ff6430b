"""The recall probe (trainers.recall) on hand-made models whose answers are known, its items,
the data knob that plants repeats, and its metrics in a trial's records."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from arch.configtree import ConfigError
from trainers import TrialConfig, recall
from trainers import metrics as metrics_table
from trainers.config import RecallConfig
from trainers.data.repeats import PlantedRepeats, plant
from trainers.fit import fit

VOCAB = 256
T = 64
WINDOWS = 24


@pytest.fixture(scope="module")
def val():
    """Validation 'text': random tokens 0..199, so an exact earlier match is a planted one."""
    return [np.random.default_rng(7).integers(0, 200, 20_000).astype(np.uint16)]


def uniform(tokens):
    return torch.zeros(*tokens.shape, VOCAB)


def induction(tokens):
    """Copies perfectly: at each position, predicts the token that followed the most recent
    earlier occurrence of the longest suffix of the context (an ideal induction head)."""
    out = torch.zeros(*tokens.shape, VOCAB)
    for b, row in enumerate(tokens.tolist()):
        for t in range(len(row)):
            best, nxt = 0, None
            for j in range(t):
                m = 0
                while m <= j and row[j - m] == row[t - m]:
                    m += 1
                if m > best:
                    best, nxt = m, row[j + 1]
            if nxt is not None:
                out[b, t, nxt] = 20.0
    return out


def test_a_uniform_model_scores_exactly_chance(val):
    m = recall.measure(uniform, val, T, WINDOWS, VOCAB)
    assert m["recall_loss"] == pytest.approx(math.log(VOCAB), abs=1e-5)
    assert m["copy_loss"] == pytest.approx(math.log(VOCAB), abs=1e-5)
    assert m["recall_acc"] == pytest.approx(1 / VOCAB) and m["copy_acc"] == pytest.approx(1 / VOCAB)
    assert m["copy_gain"] == pytest.approx(0.0, abs=1e-6)


def test_a_model_that_knows_the_alphabet_but_not_the_context_scores_its_chance(val):
    symbols = torch.from_numpy(recall.alphabet(val))

    def alphabet_only(tokens):
        out = torch.full((*tokens.shape, VOCAB), -1e4)
        out[..., symbols] = 0.0
        return out

    m = recall.measure(alphabet_only, val, T, WINDOWS, VOCAB)
    assert m["recall_acc"] == pytest.approx(1 / recall.ALPHABET)
    assert m["recall_loss"] == pytest.approx(math.log(recall.ALPHABET), abs=1e-5)


def test_a_model_that_copies_perfectly_gets_recall_acc_1(val):
    m = recall.measure(induction, val, T, WINDOWS, VOCAB)
    assert m["recall_acc"] == 1.0 and m["recall_loss"] < 1e-6
    # the copy's 2nd token follows a match of one token, which the random text before may hold too
    assert m["copy_acc"] > 0.9 and m["copy_loss"] < 1.0
    assert m["copy_gain"] > 5.0  # the first occurrence is random tokens: unpredictable
    assert {f"recall_acc/d{d}" for d in recall.distances(T)} <= m.keys()


def test_items_plant_what_the_docstring_says(val):
    lookup = recall.lookup_items(val, T, WINDOWS)
    symbols = set(recall.alphabet(val).tolist())
    k, v = recall.KEY_TOKENS, recall.VALUE_TOKENS
    query = T + 1 - k - v
    for i, d in enumerate(lookup.distance):
        row = lookup.inputs[i].tolist()
        key = row[query : query + k]
        assert row[query - d : query - d + k] == key  # the queried record, d tokens before
        value = lookup.targets["value"][i][query + k - 1 :].tolist()
        assert len(value) == v and set(key + value) <= symbols
        assert row[query - d + k : query - d + k + v] == value
    assert sorted(set(lookup.distance.tolist())) == list(recall.distances(T))
    copy = recall.copy_items(val, T, WINDOWS)
    span = recall.copy_span(T)
    for i in range(WINDOWS):
        second = copy.targets["second"][i]
        assert (
            (second != recall.IGNORE).sum() == (copy.targets["first"][i] != recall.IGNORE).sum() == span - 1
        )
    again = recall.copy_items(val, T, WINDOWS)
    assert torch.equal(again.inputs, copy.inputs)  # fixed seed: every trial scores the same items


def test_probe_runs_on_text_with_room_only():
    assert RecallConfig(128).issue("text", 128) is None and RecallConfig(8).issue("tokens", 32) is None
    assert "off" in RecallConfig(0).issue("text", 128)
    assert "mqar" in RecallConfig(128).issue("mqar", 128)
    assert ">= 32" in RecallConfig(128).issue("text", 16)


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("recall", {"windows": -1}, "recall.windows"),
        ("recall", {"at": "always"}, "recall.at"),
        ("recall", {"window": 8}, "recall.window"),
        ("data", {"kind": "text", "repeats": 1.5}, "data.repeats"),
        ("data", {"kind": "text", "repeat_tokens": "random"}, "data.repeat_tokens"),
    ],
)
def test_bad_recall_keys_are_refused_naming_the_key(key, value, fragment):
    with pytest.raises(ConfigError) as err:
        TrialConfig.from_dict({key: value}, source="trial.yaml")
    assert "trial.yaml" in str(err.value) and fragment in str(err.value)


def test_plant_repeats_a_span_of_the_rows_own_tokens():
    rows = np.arange(4 * 65).reshape(4, 65)
    before = rows.copy()
    plant(rows, np.random.default_rng(0), 1.0)
    for r in range(4):
        changed = np.nonzero(rows[r] != before[r])[0]
        assert len(changed) >= 2 and set(rows[r]) <= set(before[r])
        values = rows[r].tolist()
        assert any(values[i : i + 4] == values[j : j + 4] for i in range(61) for j in range(i + 1, 61))
    untouched = before.copy()
    plant(untouched, np.random.default_rng(0), 0.0)
    assert np.array_equal(untouched, before)
    uniform = before.copy()
    plant(uniform, np.random.default_rng(0), 1.0, vocab=1000)
    assert (uniform >= 4 * 65).any()  # tokens from the whole vocabulary, not the row
    batches = [(torch.arange(64).repeat(2, 1), torch.arange(1, 65).repeat(2, 1))]
    a, b = PlantedRepeats(batches, 1.0, 3)[0], PlantedRepeats(batches, 1.0, 3)[0]
    assert torch.equal(a[0], b[0]) and torch.equal(a[0][:, 1:], a[1][:, :-1])  # targets still shifted


def test_a_trials_records_hold_the_probes_metrics(tiny_tree):
    metrics = fit(TrialConfig.from_dict(tiny_tree(recall={"windows": 16})))
    for name in metrics_table.recall_names("text"):
        assert name in metrics and math.isfinite(metrics[name]), name
    assert 0 <= metrics["recall_acc"] <= 1 and metrics["recall_loss"] > 0
    off = fit(TrialConfig.from_dict(tiny_tree(recall={"windows": 0})))
    assert not any(name in off for name in metrics_table.recall_names("text"))


def test_lookups_in_reserved_symbols_are_scored_apart(val):
    reserved = np.arange(224, 256)  # ids the validation 'text' (0..199) never uses
    lookups = recall.lookup_items(val, T, WINDOWS, reserved)
    values = lookups.targets["value"][lookups.targets["value"] != recall.IGNORE]
    assert set(values.tolist()) <= set(reserved.tolist())
    m = recall.measure(induction, val, T, WINDOWS, VOCAB, reserved=lookups)
    assert m["reserved_recall_acc"] == 1.0 and m["reserved_recall_loss"] < 1e-6
    assert "reserved_recall_acc" not in recall.measure(uniform, val, T, WINDOWS, VOCAB)


def test_emergence_is_the_first_validation_at_half_accuracy_and_the_mean_of_the_curve():
    curve = [(100, 0.03), (200, 0.04), (300, 0.6), (400, 0.99)]
    got = recall.emergence(curve)
    assert got["reserved_recall_tokens"] == 300 and got["reserved_recall_emerged"] == 1.0
    assert got["reserved_recall_auc"] == pytest.approx((0.03 + 0.04 + 0.6 + 0.99) / 4)
    never = recall.emergence([(100, 0.03), (200, 0.2)])
    assert never["reserved_recall_tokens"] == 200 and never["reserved_recall_emerged"] == 0.0  # censored
    assert recall.emergence([]) == {}


def test_a_trial_on_reserved_records_logs_the_curve_and_its_emergence(tiny_tree):
    tree = tiny_tree(recall={"windows": 8, "at": "every_eval"})
    tree["data"]["records"] = {"fraction": 0.5, "per_window": 1, "symbols": "reserved"}
    metrics = fit(TrialConfig.from_dict(tree))
    for name in metrics_table.recall_names("reserved", "curve"):
        assert name in metrics and math.isfinite(metrics[name]), name
    assert metrics["reserved_recall_tokens"] == tree["train"]["tokens"]  # 20 steps: never emerges
    assert 0 <= metrics["reserved_recall_auc"] <= 1


def test_the_probes_curve_survives_a_checkpoint():
    probe = recall.RecallProbe(8, T, "every_eval", tokens_per_step=10)
    probe.curve = [(10, 0.1), (20, 0.7)]
    again = recall.RecallProbe(8, T, "every_eval", tokens_per_step=10)
    again.load_state_dict(probe.state_dict())
    assert again.curve == probe.curve
