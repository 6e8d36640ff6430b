"""The records mix (`data.records`, trainers.data.records): its config errors, its draws per
seed, where the planted records sit against the loss mask, validation untouched, off by
default, and the probe's records apart from the training ones."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from arch.configtree import ConfigError
from sweeps.study.fingerprint import LATER_DEFAULTS
from trainers import TrialConfig, recall
from trainers.config import RecordsConfig, TextDataConfig
from trainers.data.record_layout import max_per_window
from trainers.data.records import (
    IGNORE,
    KEY_TOKENS,
    RECORD,
    VALUE_TOKENS,
    PlantedRecords,
    alphabet,
    plant_records,
    reserved,
)
from trainers.data.text import TextDataModule
from trainers.data.windows import WindowBatches

T = 64
SYMBOLS = np.arange(100, 132)  # an alphabet apart from the text's tokens 0..99


def text_batches(n: int = 8, rows: int = 8):
    """`n` batches of random 'text' (tokens 0..99), as (inputs, targets) shifted by one."""
    out = []
    for i in range(n):
        r = torch.from_numpy(np.random.default_rng([5, i]).integers(0, 100, (rows, T + 1)))
        out.append((r[:, :-1], r[:, 1:]))
    return out


def answers(inputs: torch.Tensor, targets: torch.Tensor, r: int) -> list[tuple[int, tuple, tuple]]:
    """(position, key, value) of every scored query of row `r`: the runs of VALUE_TOKENS scored
    targets, with the KEY_TOKENS inputs ending at the first one."""
    scored = torch.nonzero(targets[r] != IGNORE).flatten().tolist()
    assert len(scored) % VALUE_TOKENS == 0
    out = []
    for j in scored[::VALUE_TOKENS]:
        value = tuple(targets[r, j : j + VALUE_TOKENS].tolist())
        out.append((j, tuple(inputs[r, j - KEY_TOKENS + 1 : j + 1].tolist()), value))
    return out


@pytest.mark.parametrize(
    ("records", "fragment"),
    [
        ({"fraction": 1.5}, "data.records.fraction"),
        ({"fraction": -0.1}, "data.records.fraction"),
        ({"per_window": 0}, "data.records.per_window"),
        ({"fraction": 0.5, "per_window": 9}, "data.records.per_window"),  # 8 fit at seq_len 128
        ({"loss": "keys"}, "data.records.loss"),
        ({"fraction": 0.01}, "data.records.fraction"),  # no window of a batch of 16
        ({"windows": 4}, "data.records.windows"),
    ],
)
def test_bad_records_keys_are_refused_naming_the_key(records, fragment):
    with pytest.raises(ConfigError) as err:
        TrialConfig.from_dict({"data": {"kind": "text", "records": records}}, source="trial.yaml")
    assert "trial.yaml" in str(err.value) and fragment in str(err.value)
    if fragment == "data.records.per_window" and "fraction" in records:
        assert "at most 8" in str(err.value)


def test_the_records_fit_with_text_left_over():
    assert max_per_window(128) == 8 and max_per_window(64) == 4 and max_per_window(32) == 2
    ok = TrialConfig.from_dict({"data": {"kind": "text", "records": {"fraction": 0.5, "per_window": 8}}})
    assert ok.data.records == RecordsConfig(fraction=0.5, per_window=8, loss="values")


def test_the_scored_targets_are_the_queried_values_of_records_planted_earlier():
    batches = text_batches()
    mixed = PlantedRecords(batches, SYMBOLS, 0.5, 4, "values", seed=3)
    for i in range(len(batches)):
        inputs, targets = mixed[i]
        planted = [r for r in range(len(inputs)) if (targets[r] == IGNORE).any()]
        assert len(planted) == 4  # planted_count(0.5, 8) = 4 windows of every batch
        for r in range(len(inputs)):
            if r not in planted:  # the other windows: the text, scored on every token
                assert torch.equal(inputs[r], batches[i][0][r]) and torch.equal(targets[r], batches[i][1][r])
                continue
            row = inputs[r].tolist()
            queries = answers(inputs, targets, r)
            assert len(queries) == 4 and len({k for _, k, _ in queries}) == 4  # each record asked once
            for j, key, value in queries:
                assert set(key + value) <= set(SYMBOLS.tolist())
                record = list(key + value)
                earlier = [s for s in range(j - RECORD) if row[s : s + RECORD] == record]
                assert earlier, f"batch {i} row {r}: the record of the query at {j} is not before it"
            scored = targets[r, :-1] != IGNORE
            assert torch.equal(inputs[r, 1:][scored], targets[r, :-1][scored])  # still shifted by one


def test_loss_all_scores_every_token_of_the_planted_windows():
    batches = text_batches(1)
    inputs, targets = PlantedRecords(batches, SYMBOLS, 1.0, 4, "all", seed=3)[0]
    assert torch.equal(inputs[:, 1:], targets[:, :-1]) and (targets != IGNORE).all()
    planted = np.isin(inputs.numpy(), SYMBOLS).sum(axis=1)
    assert planted.min() >= 2 * 4 * RECORD - 1  # records and queries (the last may end past the inputs)


def test_the_draws_depend_on_the_seed_and_the_batch_only():
    batches = text_batches()
    a, b, c = (PlantedRecords(batches, SYMBOLS, 0.5, 4, "values", seed=s) for s in (3, 3, 4))
    for i in (5, 0, 5):  # out of order, as a resumed run asks for them
        assert torch.equal(a[i][0], b[i][0]) and torch.equal(a[i][1], b[i][1])
    assert not torch.equal(a[5][0], c[5][0])
    assert not torch.equal(a[5][0], a[6][0])
    rows = torch.cat([batches[0][0], batches[0][1][:, -1:]], dim=1).numpy().copy()
    before = rows.copy()
    targets = plant_records(rows, np.random.default_rng(0), SYMBOLS, 0, 4, "values")
    assert np.array_equal(rows, before) and np.array_equal(targets, before[:, 1:])  # count 0: untouched


@pytest.fixture
def text_cfg(corpus_dir):
    return lambda **records: TextDataConfig(
        corpus="folder", path=str(corpus_dir), seq_len=32, records=RecordsConfig(**records)
    )


def module(cfg, seed=0):
    dm = TextDataModule(cfg, batch_size=8, train_batches=6, val_batches=3, seed=seed)
    dm.setup()
    return dm


def test_validation_stays_text_and_training_carries_records(text_cfg, data_cache):
    plain, mixed = module(text_cfg()), module(text_cfg(fraction=0.5, per_window=2))
    for i in range(3):
        assert torch.equal(plain.val_set[i][0], mixed.val_set[i][0])
        assert torch.equal(plain.val_set[i][1], mixed.val_set[i][1])
    assert all((mixed.val_set[i][1] != IGNORE).all() for i in range(3))
    x, y = mixed.train_set[2]
    assert (y == IGNORE).any(dim=1).sum() == 4 and not torch.equal(x, plain.train_set[2][0])
    symbols = set(alphabet(mixed.train_arrays).tolist())
    assert all(set(key + value) <= symbols for r in range(8) if (y[r] == IGNORE).any()
               for _, key, value in answers(x, y, r))  # fmt: skip


def test_off_by_default_the_batches_are_the_plain_windows(text_cfg, data_cache):
    assert TextDataConfig().records.fraction == 0.0
    dm = module(text_cfg())
    assert type(dm.train_set) is WindowBatches  # nothing wraps the plain batches
    fresh = WindowBatches(dm.train_set.sampler, 8, 6, seed=0)
    assert all(torch.equal(dm.train_set[i][0], fresh[i][0]) for i in range(6))
    defaults = TrialConfig().to_dict()["data"]["records"]
    for key, value in defaults.items():  # so a study's fingerprint does not change (older ones resume)
        assert LATER_DEFAULTS[f"trial.data.records.{key}"] == value, key
    assert json.dumps(LATER_DEFAULTS["trial.data.records.fraction"]) == "0.0"


def test_the_probe_scores_records_the_training_never_drew():
    """The probe's queried records (fixed seed) against every record the mix plants in 200
    batches (3200 records): keys alone meet by chance (32^3 of them), whole records must not
    (32^6: ~0.001 expected), unless the training drew from the probe's own stream."""
    val = [np.random.default_rng(11).integers(0, 100, 30_000).astype(np.int64)]
    symbols = recall.alphabet(val)
    items = recall.lookup_items(val, T, 128)
    q = T + 1 - RECORD  # the query's start: it ends the window
    probe = {tuple(items.inputs[i, q : q + RECORD - 1].tolist()) + (int(items.targets["value"][i, -1]),)
             for i in range(128)}  # fmt: skip
    mixed = PlantedRecords(text_batches(200, 4), symbols, 1.0, 4, "values", seed=0)
    trained = set()
    for i in range(len(mixed)):
        inputs, targets = mixed[i]
        for r in range(len(inputs)):
            trained |= {key + value for _, key, value in answers(inputs, targets, r)}
    assert len(probe) == 128 and len(trained) == 200 * 4 * 4
    assert not probe & trained


def test_reserved_symbols_are_the_highest_ids_the_text_never_uses():
    text = [np.arange(0, 200), np.array([250, 3])]  # uses 0..199 and 250
    ids = reserved(text, 256)
    assert ids.tolist() == [*range(223, 250), *range(251, 256)]
    with pytest.raises(ValueError, match="leaving 55 free; reserved symbols need 64"):
        reserved(text, 256, size=64)


def test_records_in_reserved_symbols_use_only_ids_the_text_never_does(text_cfg, data_cache):
    dm = module(text_cfg(fraction=0.5, per_window=2, symbols="reserved"))
    text = set(np.concatenate([*dm.train_arrays, *dm.val_arrays]).tolist())
    assert dm.reserved_symbols is not None and not text & set(dm.reserved_symbols.tolist())
    x, y = dm.train_set[1]
    planted = [answers(x, y, r) for r in range(8) if (y[r] == IGNORE).any()]
    assert len(planted) == 4
    assert all(
        set(key + value) <= set(dm.reserved_symbols.tolist()) for rows in planted for _, key, value in rows
    )
    assert module(text_cfg(fraction=0.5, per_window=2)).reserved_symbols is None  # text symbols: none


def test_a_text_without_free_ids_is_refused_naming_the_key(tmp_path, data_cache):
    (tmp_path / "all.txt").write_bytes(bytes(range(256)) * 40)  # every byte value: no id is free
    records = RecordsConfig(fraction=0.5, per_window=2, symbols="reserved")
    cfg = TextDataConfig(corpus="folder", path=str(tmp_path), seq_len=32, records=records)
    with pytest.raises(ConfigError, match=r"data.records.symbols: given 'reserved'; the text uses 256 of"):
        module(cfg)
