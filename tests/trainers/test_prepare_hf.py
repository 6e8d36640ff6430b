"""`python -m trainers.prepare hf`, offline: a local parquet folder in the hub's layout and a BPE
tokenizer trained here; counts, EOS placement, the seeded split, resume, and exit 2 on bad input."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # nothing may wait on the network
pytest.importorskip("datasets")  # the optional extra `hf`; CI installs it

import pyarrow as pa  # noqa: E402  (datasets brings it)
import pyarrow.parquet as pq  # noqa: E402

from trainers import prepare_hf  # noqa: E402
from trainers.prepare import main  # noqa: E402

EOS = "<|endoftext|>"
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
]


def _documents(n: int) -> list[str]:
    rng = np.random.default_rng(7)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 40)))) + f" doc{i}." for i in range(n)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """(folder, documents): 200 documents in two parquet files, data/train-0000{0,1}-of-00002."""
    folder = tmp_path_factory.mktemp("hf_dataset")
    docs = _documents(200)
    (folder / "data").mkdir()
    for i, part in enumerate((docs[:120], docs[120:])):
        table = pa.table({"text": part, "id": list(range(len(part)))})
        pq.write_table(table, folder / "data" / f"train-{i:05d}-of-00002.parquet")
    return folder, docs


@pytest.fixture(scope="module")
def tokenizer_file(corpus, tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus[1], trainer=trainer)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return path


def _run(corpus, tok, out, *extra, tokens=10**6, seed=42):
    argv = ["hf", str(corpus[0]), "--tokenizer", str(tok), "--tokens", str(tokens), "--val-fraction", "0.2"]
    return main([*argv, "--seed", str(seed), "--out", str(out), "--batch-docs", "50", *extra])


def _ids(out, split):
    meta = json.loads((out / "meta.json").read_text())
    return np.concatenate(
        [np.fromfile(out / name, dtype=np.dtype(meta["dtype"])) for name in meta[f"{split}_shards"]]
    )


def _docs_of(ids: np.ndarray, eos: int) -> list[list[int]]:
    ends = np.flatnonzero(ids == eos)
    starts = np.concatenate([[0], ends[:-1] + 1])
    return [ids[s:e].tolist() for s, e in zip(starts, ends, strict=True)]


def test_counts_eos_placement_and_the_seeded_split(corpus, tokenizer_file, tmp_path, capsys):
    from tokenizers import Tokenizer

    assert _run(corpus, tokenizer_file, tmp_path / "a") == 0
    out = tmp_path / "a"
    meta = json.loads((out / "meta.json").read_text())
    tok = Tokenizer.from_file(str(tokenizer_file))
    eos = tok.token_to_id(EOS)
    encoded = [tok.encode(d, add_special_tokens=False).ids for d in corpus[1]]
    assert meta["eos_id"] == eos and meta["vocab_size"] == tok.get_vocab_size() and meta["dtype"] == "uint16"
    assert meta["documents"] == 200 and not meta["complete_budget"]  # the dataset ended first
    train, val = _ids(out, "train"), _ids(out, "val")
    assert meta["train_tokens"] == len(train) and meta["val_tokens"] == len(val)
    assert len(train) + len(val) == sum(len(e) + 1 for e in encoded)  # every document, one EOS each
    assert train[-1] == eos and val[-1] == eos
    train_docs, val_docs = _docs_of(train, eos), _docs_of(val, eos)
    # the split: documents in their order, each whole, in the split numpy drew from (seed, batch)
    to_val = np.concatenate([np.random.default_rng([42, b]).random(50) < 0.2 for b in range(4)])
    assert train_docs == [e for e, v in zip(encoded, to_val, strict=True) if not v]
    assert val_docs == [e for e, v in zip(encoded, to_val, strict=True) if v]
    assert 20 <= len(val_docs) <= 60
    assert meta["tokenizer"]["sha256"] and meta["source"]["dataset"] == str(corpus[0])
    assert meta["command"].startswith("python -m trainers.prepare hf ") and (out / "tokenizer.json").is_file()
    assert not (out / "progress.json").exists()
    # the same command again: the same bytes; another seed: another split
    assert _run(corpus, tokenizer_file, tmp_path / "b") == 0
    assert (out / "train_000.bin").read_bytes() == (tmp_path / "b" / "train_000.bin").read_bytes()
    assert _run(corpus, tokenizer_file, tmp_path / "c", seed=1) == 0
    assert not np.array_equal(_ids(tmp_path / "c", "val"), val)


def test_the_budget_cuts_the_last_document_and_shards_roll_over(corpus, tokenizer_file, tmp_path):
    out = tmp_path / "cut"
    assert _run(corpus, tokenizer_file, out, "--shard-tokens", "300", tokens=1000) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["train_tokens"] + meta["val_tokens"] == 1000 and meta["complete_budget"]
    assert meta["train_shards"][:2] == ["train_000.bin", "train_001.bin"]
    assert all((out / n).stat().st_size <= 300 * 2 for n in meta["train_shards"] + meta["val_shards"])


def test_an_interrupted_preparation_resumes_to_the_same_bytes(corpus, tokenizer_file, tmp_path, monkeypatch):
    assert _run(corpus, tokenizer_file, tmp_path / "whole") == 0
    out = tmp_path / "part"
    real = prepare_hf.open_stream

    def interrupted(args):  # the process dies while reading document 130 (after 2 saved batches)
        for i, row in enumerate(real(args)):
            if i == 130:
                raise KeyboardInterrupt
            yield row

    monkeypatch.setattr(prepare_hf, "open_stream", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _run(corpus, tokenizer_file, out)
    monkeypatch.setattr(prepare_hf, "open_stream", real)
    progress = json.loads((out / "progress.json").read_text())
    assert progress["state"]["documents"] == 100 and not (out / "meta.json").exists()
    with open(out / "train_000.bin", "ab") as f:
        f.write(b"\x01\x02\x03")  # a half-written batch past the last save
    assert _run(corpus, tokenizer_file, out) == 0
    for name in ("train_000.bin", "val_000.bin"):
        assert (out / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()
    whole = json.loads((tmp_path / "whole" / "meta.json").read_text())
    assert json.loads((out / "meta.json").read_text())["train_tokens"] == whole["train_tokens"]


def test_a_missing_dataset_exits_2_naming_it(tokenizer_file, tmp_path, capsys):
    missing = tmp_path / "nowhere"
    argv = [
        "hf",
        str(missing),
        "--tokenizer",
        str(tokenizer_file),
        "--tokens",
        "10",
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"DATASET: {missing} not found; allowed: a folder of parquet/jsonl/arrow files" in err


def test_a_vocabulary_too_big_for_the_dtype_exits_2(corpus, tmp_path, capsys):
    from tokenizers import Tokenizer, models

    vocab = {f"w{i}": i for i in range(70_000)} | {"[UNK]": 70_000, EOS: 70_001}
    big = tmp_path / "big.json"
    Tokenizer(models.WordLevel(vocab, unk_token="[UNK]")).save(str(big))
    assert _run(corpus, big, tmp_path / "o", "--dtype", "uint16") == 2
    err = capsys.readouterr().err
    assert "--dtype: given uint16; the tokenizer has 70002 ids" in err and "allowed: uint32 or auto" in err
    assert _run(corpus, big, tmp_path / "auto", tokens=50) == 0
    assert json.loads((tmp_path / "auto" / "meta.json").read_text())["dtype"] == "uint32"


def test_a_missing_eos_token_exits_2(corpus, tokenizer_file, tmp_path, capsys):
    assert _run(corpus, tokenizer_file, tmp_path / "o", "--eos-token", "</s>") == 2
    assert (
        "--eos-token: given '</s>' in the tokenizer's vocabulary; allowed: a token it has"
        in capsys.readouterr().err
    )


def test_shards_whose_vocab_disagrees_with_the_model_exit_2(corpus, tokenizer_file, tmp_path, capsys):
    from trainers.train import main as train

    out = tmp_path / "shards"
    assert _run(corpus, tokenizer_file, out) == 0
    vocab = json.loads((out / "meta.json").read_text())["vocab_size"]
    trial = tmp_path / "trial.yaml"
    trial.write_text(json.dumps({"model": {"vocab_size": 256}, "data": {"kind": "tokens", "path": str(out)}}))
    assert train([str(trial), "--no-mlflow"]) == 2
    err = capsys.readouterr().err
    assert f"model.vocab_size: given 256; the data needs at least {vocab} ({out / 'meta.json'})" in err


def test_a_llama_style_tokenizer_with_bos_and_eos_around_each_document(corpus, tmp_path):
    """`--separator both`: `<s> doc </s>`, the document's ids without the post-processor's `<s>`;
    meta.json names the tokenizer, both ids and the separator, and the folder gives them back."""
    from trainers.data import llama_style
    from trainers.data.tokenizer import shard_tokenizer

    path = llama_style.write(corpus[1], 400, tmp_path / "llama.json")
    assert _run(corpus, path, tmp_path / "o", "--separator", "both") == 0
    meta = json.loads((tmp_path / "o" / "meta.json").read_text())
    assert (meta["separator"], meta["bos_id"], meta["eos_id"]) == ("both", 1, 2)
    ids = np.concatenate([_ids(tmp_path / "o", "train"), _ids(tmp_path / "o", "val")])
    tok = shard_tokenizer(tmp_path / "o")
    assert tok.sha256 == meta["tokenizer"]["sha256"] and tok.start.id == 1 and tok.start.token == "<s>"
    docs = _docs_of(ids, 2)
    assert len(docs) == 200 and all(d[0] == 1 and 1 not in d[1:] for d in docs)
    assert sorted(d[1:] for d in docs) == sorted(tok.encode(t).tolist() for t in corpus[1])


def test_a_tokenizer_json_that_is_not_the_one_the_shards_name_is_refused(corpus, tokenizer_file, tmp_path):
    from trainers import preflight

    out = tmp_path / "o"
    assert _run(corpus, tokenizer_file, out) == 0
    trial = {"data": {"kind": "tokens", "path": str(out)}, "model": {"preset": "tiny"}}
    cfg = preflight.load(trial)  # the trial runs on the folder as written
    (out / "tokenizer.json").write_text((out / "tokenizer.json").read_text().replace("alpha", "alpha "))
    (issue,) = preflight.issues(cfg)
    assert issue.path == "data.path" and "not the tokenizer these shards were written with" in issue.problem
