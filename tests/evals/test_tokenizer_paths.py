"""One tokenizer rule for any tokenizer.json, end to end: a Llama-2-style tokenizer (BPE with byte
fallback, Metaspace, `<s> $A` post-processor, `<unk> <s> </s>`; trainers.data.llama_style), the
same in the form transformers' conversion of Llama 2 writes (`legacy`: a Prepend/Replace normalizer
and no pre-tokenizer, as the hub's Llama-2 tokenizer.json files have), a GPT-2-style byte-level one
and the byte tokenizer, each through prepare -> train -> evals ->
val_bpb, with the harness's numbers equal to a plain computation from the model's own logits and
val_bpb equal to the validation loss over bytes counted by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

pytest.importorskip("lm_eval")
pytest.importorskip("datasets")  # the optional extra `hf`: prepare hf

import pyarrow as pa  # noqa: E402  (datasets brings it)
import pyarrow.parquet as pq  # noqa: E402

from evals.adapter import SatsweepLM  # noqa: E402
from evals.cli import main as evals_main  # noqa: E402
from evals.harness import score, task_manager  # noqa: E402
from tests.evals.toy import FACTS, ITEMS, toy_trial  # noqa: E402
from trainers.config import TrialConfig  # noqa: E402
from trainers.data import llama_style  # noqa: E402
from trainers.data.build import build_datamodule  # noqa: E402
from trainers.data.corpora import load_corpus  # noqa: E402
from trainers.data.tokenizer import ByteTokenizer, FastTokenizer, shard_tokenizer  # noqa: E402
from trainers.fit import fit  # noqa: E402
from trainers.prepare import main as prepare_main  # noqa: E402
from trainers.trained import load_checkpoint, trial_tokenizer  # noqa: E402

KINDS = ("llama", "gpt2", "byte", "legacy")
# Llama's `<s>` before a document; GPT-2's EOS after it
SEPARATOR = {"llama": "bos", "gpt2": "eos", "legacy": "bos"}
TOKENS = 40_000
UNICODE = "café naïve — ∑ 日本語 🙂"


CHOICE_YAML = """task: path_choice
dataset_path: json
dataset_kwargs:
  data_files:
    test: {folder}/facts.jsonl
output_type: multiple_choice
test_split: test
doc_to_text: "{{{{name}}}}"
doc_to_choice: {choices}
doc_to_target: 0
metric_list:
  - metric: acc
"""
RECALL_YAML = """task: path_recall
dataset_path: json
dataset_kwargs:
  data_files:
    test: {folder}/facts.jsonl
output_type: generate_until
test_split: test
doc_to_text: "{{{{name}}}} has"
doc_to_target: item
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 8
metric_list:
  - metric: exact_match
    regexes_to_ignore: [" "]
"""
TASKS = ["path_choice", "path_recall"]
CHOICES = ["has", *ITEMS[:3]]  # what follows a name: "has", as every document says (a short
# training learns the documents' form well before which name has which item)


def documents() -> list[str]:
    """One fact a document ending in a line break (a piece no merge of these tokenizers joins to
    the item, so " red" is the same tokens in a task as in training), every fact 300 times,
    shuffled (seeded); a few with non-ASCII text."""
    rng = np.random.default_rng(0)
    docs = [f"{name} has {item}\n" for name, item in FACTS.items() for _ in range(300)]
    docs = [docs[i] for i in rng.permutation(len(docs))]
    return docs + [f"{UNICODE} {i}\n" for i in range(10)]


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    """The documents' form as a 4-way multiple choice (a name, then " has") and their facts as a
    generation until the line break."""
    folder = tmp_path_factory.mktemp("path_tasks")
    docs = [{"name": n, "item": i, "answer": ITEMS.index(i)} for n, i in FACTS.items()]
    (folder / "facts.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    choices = json.dumps(CHOICES)
    (folder / "path_choice.yaml").write_text(CHOICE_YAML.format(folder=folder, choices=choices))
    (folder / "path_recall.yaml").write_text(RECALL_YAML.format(folder=folder))
    return folder


def small_text() -> str:
    """A small text the project has (Shakespeare's first 60 kB) and the toy facts."""
    try:
        head = load_corpus("shakespeare", None, 60_000).decode("utf-8", errors="ignore")
    except FileNotFoundError:  # CorpusUnavailable: the toy facts alone still train a tokenizer
        head = ""
    return head + "\n".join(documents())


def gpt2_style(text: str, vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tok.train_from_iterator(text.splitlines(keepends=True), trainer=trainer)
    return tok


def legacy(tok):
    """Llama 2's tokenizer.json as transformers converted it: a Prepend/Replace normalizer, no
    pre-tokenizer, a Replace/ByteFallback/Fuse/Strip decoder."""
    from tokenizers import Tokenizer

    tree = json.loads(tok.to_str())
    tree["normalizer"] = {
        "type": "Sequence",
        "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        ],
    }
    tree["pre_tokenizer"] = None
    tree["decoder"] = {
        "type": "Sequence",
        "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ],
    }
    return Tokenizer.from_str(json.dumps(tree))


def hand_bytes(kind: str, piece: str, special: bool) -> int:
    """UTF-8 bytes one token stands for, by the rule of its kind of tokenizer (not its decoder)."""
    if kind == "byte":
        return 1
    if special:
        return 0
    kind = "llama" if kind == "legacy" else kind
    if kind == "llama" and piece.startswith("<0x") and piece.endswith(">") and len(piece) == 6:
        return 1
    if kind == "llama":
        return len(piece.replace("\u2581", " ").encode())
    return len(piece)  # byte-level: one alphabet character per byte


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A local parquet folder in the hub's layout (data/train-0000N-of-00002.parquet)."""
    folder = tmp_path_factory.mktemp("hf_dataset")
    (folder / "data").mkdir()
    docs = documents()
    for i, part in enumerate((docs[: len(docs) // 2], docs[len(docs) // 2 :])):
        pq.write_table(pa.table({"text": part}), folder / "data" / f"train-{i:05d}-of-00002.parquet")
    return folder


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory) -> dict:
    """kind -> a tokenizer.json trained here on `small_text`."""
    folder = tmp_path_factory.mktemp("tokenizers")
    text = small_text()
    llama = llama_style.build(text.splitlines(), 600)
    built = {"llama": llama, "legacy": legacy(llama), "gpt2": gpt2_style(text, 600)}
    for kind, tok in built.items():
        tok.save(str(folder / f"{kind}.json"))
    return {kind: folder / f"{kind}.json" for kind in built}


@pytest.fixture(scope="module", params=KINDS)
def trial(request, dataset, tokenizers, tmp_path_factory):
    """(kind, shard folder, trial config, checkpoint, metrics) of a toy trial on prepared shards."""
    kind = request.param
    root = tmp_path_factory.mktemp(kind)
    shards = root / "shards"
    if kind == "byte":  # the byte tokenizer has no tokenizer.json: the corpus preparation
        corpus = root / "corpus"
        corpus.mkdir()
        (corpus / "facts.txt").write_text("".join(documents()))
        argv = [str(corpus), str(shards), "--tokenizer", "byte", "--data-root", str(root / "cache")]
    else:
        tok = (
            llama_style.build(small_text().splitlines(), 600)
            if kind == "llama"
            else legacy(llama_style.build(small_text().splitlines(), 600))
            if kind == "legacy"
            else gpt2_style(small_text(), 600)
        )
        path = root / "tokenizer.json"
        tok.save(str(path))
        argv = ["hf", str(dataset), "--tokenizer", str(path), "--tokens", "10000000", "--val-fraction", "0.1",
                "--separator", SEPARATOR[kind], "--out", str(shards)]  # fmt: skip
    assert prepare_main(argv) == 0
    vocab = json.loads((shards / "meta.json").read_text())["vocab_size"]
    tree = toy_trial(shards, tokens=TOKENS)
    tree["model"]["vocab_size"] = vocab
    tree["data"] = {"kind": "tokens", "path": str(shards), "seq_len": 64}
    tree["train"] |= {"eval_batches": 4, "lr": 3e-2}  # a few passes over ~9k tokens of facts
    cfg = TrialConfig.from_dict(tree)
    checkpoint = root / "final.ckpt"
    metrics = fit(cfg, data_root=root / "cache", checkpoint_path=checkpoint)
    return kind, shards, cfg, checkpoint, metrics


def test_shards_hold_no_special_token_but_the_separator_and_meta_names_it(trial, dataset):
    kind, shards, *_ = trial
    if kind == "byte":
        pytest.skip("corpus shards: one text, no documents")
    meta = json.loads((shards / "meta.json").read_text())
    tok = FastTokenizer.from_file(shards / "tokenizer.json")
    assert meta["separator"] == SEPARATOR[kind] and meta["tokenizer"]["sha256"] == tok.sha256
    sep = meta["bos_id"] if kind in ("llama", "legacy") else meta["eos_id"]
    assert tok.piece(sep) == {"llama": "<s>", "legacy": "<s>", "gpt2": "<|endoftext|>"}[kind]
    ids = np.fromfile(shards / meta["train_shards"][0], dtype=np.uint16)
    specials = set(tok.tok.get_added_tokens_decoder())
    assert set(np.unique(ids).tolist()) & specials == {sep}  # no `<s>` of the post-processor
    doc = "zor has red\n"
    one = [
        *([sep] if kind in ("llama", "legacy") else []),
        *tok.encode(doc).tolist(),
        *([sep] if kind == "gpt2" else []),
    ]
    assert tok.tok.encode(doc).ids[0] == (
        1 if kind in ("llama", "legacy") else tok.encode(doc)[0]
    )  # what encode leaves out
    assert any(ids[i : i + len(one)].tolist() == one for i in range(200))
    read_back = shard_tokenizer(shards)
    assert read_back.start.id == sep and SEPARATOR[kind] in read_back.start.why


def test_byte_counts_are_the_documents_bytes(trial):
    """Every document's tokens add up to its UTF-8 bytes (Metaspace's prepended `▁`: one more)."""
    kind, shards, cfg, *_ = trial
    tok = trial_tokenizer(cfg)
    table = tok.byte_lengths()
    specials = set(tok.tok.get_added_tokens_decoder()) if kind != "byte" else set()
    assert [table[i] for i in range(tok.vocab_size)] == [
        hand_bytes(kind, tok.piece(i), i in specials) for i in range(tok.vocab_size)
    ]
    for doc in [*documents()[:20], *documents()[-3:], "two  spaces\nand a line"]:
        ids = tok.encode(doc).astype(np.int64)
        assert int(table[ids].sum()) == len(doc.encode()) + (kind in ("llama", "legacy"))


def test_val_bpb_is_the_validation_loss_over_bytes_counted_by_hand(trial):
    kind, shards, cfg, _, metrics = trial
    tok = trial_tokenizer(cfg)
    specials = set(tok.tok.get_added_tokens_decoder()) if kind != "byte" else set()
    data = build_datamodule(cfg)
    data.setup("validate")
    n = nbytes = 0
    for _, targets in data.val_dataloader():
        for t in targets.flatten().tolist():
            n += 1
            nbytes += hand_bytes(kind, tok.piece(t), t in specials)
    assert metrics["val_bpb"] == pytest.approx(metrics["val_loss"] * n / math.log(2) / nbytes, rel=1e-6)


def plain_loglikelihood(model, start: int, tok, context: str, continuation: str) -> float:
    """log p(continuation | start + context) from one forward of the model over the whole."""
    ctx = [start, *tok.encode(context).tolist()]
    whole = [start, *tok.encode(context + continuation).tolist()]
    assert whole[: len(ctx)] == ctx
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([whole[:-1]]))[0].double(), -1)
    return sum(logp[i - 1, whole[i]].item() for i in range(len(ctx), len(whole)))


def plain_greedy(model, start: int, tok, context: str, steps: int, stop: str) -> str:
    """Greedy decoding by a full forward per token (no cache), cut at the stop string."""
    seq = [start, *tok.encode(context).tolist()]
    prompt = len(seq)
    with torch.no_grad():
        for _ in range(steps):
            seq.append(int(model(torch.tensor([seq]))[0, -1].argmax()))
    return tok.decode(seq[prompt:]).split(stop, 1)[0]


def test_the_harness_equals_the_models_own_logits_from_the_training_separator(trial, tasks):
    kind, shards, cfg, checkpoint, _ = trial
    _, model = load_checkpoint(checkpoint)
    tok = trial_tokenizer(cfg)
    lm = SatsweepLM.from_model(model, tok, batch_size=3)
    results = score(lm, task_manager(str(tasks), TASKS), TASKS, log_samples=True)
    start = results["satsweep"]["context_start"]
    want = {"llama": "<s>", "legacy": "<s>", "gpt2": "<|endoftext|>", "byte": "\n"}[kind]
    assert start["token"] == want and start["id"] == tok.start.id
    right = 0
    for sample in results["samples"]["path_choice"]:
        plain = [
            plain_loglikelihood(model, start["id"], tok, sample["doc"]["name"], f" {c}") for c in CHOICES
        ]
        got = [float(r[0][0]) for r in sample["resps"]]
        assert got == pytest.approx(plain, abs=1e-4)
        right += int(np.argmax(plain) == 0)
    assert results["results"]["path_choice"]["acc,none"] == pytest.approx(right / len(FACTS))
    hits = 0
    for sample in results["samples"]["path_recall"]:
        text = plain_greedy(model, start["id"], tok, f"{sample['doc']['name']} has", 8, "\n")
        assert sample["resps"][0][0] == text
        hits += int(text.replace(" ", "") == sample["doc"]["item"])
    assert results["results"]["path_recall"]["exact_match,none"] == pytest.approx(hits / len(FACTS))


def test_python_m_evals_scores_the_trial_and_says_how_contexts_start(trial, tasks, tmp_path):
    """The command that died on a Llama-style trial (`prefix '\\n' is 3 tokens`)."""
    kind, _, _, checkpoint, _ = trial
    if kind not in ("llama", "legacy"):
        pytest.skip("the harness test above scores the other kinds")
    out = tmp_path / "r.json"
    argv = [str(checkpoint), "--tasks", "path_choice", "--include-path", str(tasks), "--json", str(out)]
    assert evals_main(argv) == 0
    results = json.loads(out.read_text())
    assert results["satsweep"]["context_start"]["why"]
    assert results["results"]["path_choice"]["acc,none"] > 0.5  # chance 0.25: it learned the form


def test_long_texts_encode_as_one_call_does(tokenizers):
    """Line-aligned chunks (the project's BPE) must not change the ids: a Metaspace tokenizer
    would get a `▁` at each chunk's start, so it encodes whole."""
    long = (small_text() + "\n") * 2
    assert len(long) > 1 << 16
    for path in tokenizers.values():
        fast = FastTokenizer.from_file(path)
        assert fast.encode(long).tolist() == fast.tok.encode(long, add_special_tokens=False).ids
    assert ByteTokenizer().encode(long).tolist() == list(long.encode())
