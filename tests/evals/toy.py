"""The toy world of the evals tests: a corpus of "<name> has <item>." lines a tiny model learns in
seconds, and two local lm-eval tasks on its facts (a 4-way multiple choice and a generation)."""

import json
import random
from pathlib import Path

NAMES = ["zor", "kip", "mav", "tul", "bex", "dru", "fen", "gol"]
ITEMS = ["red", "blue", "gold", "green"]
FACTS = {name: ITEMS[i % len(ITEMS)] for i, name in enumerate(NAMES)}

CHOICE_YAML = """task: toy_choice
dataset_path: json
dataset_kwargs:
  data_files:
    test: {folder}/toy.jsonl
output_type: multiple_choice
test_split: test
doc_to_text: "{{{{name}}}} has"
doc_to_choice: {items}
doc_to_target: answer
metric_list:
  - metric: acc
"""
RECALL_YAML = """task: toy_recall
dataset_path: json
dataset_kwargs:
  data_files:
    test: {folder}/toy.jsonl
output_type: generate_until
test_split: test
doc_to_text: "{{{{name}}}} has"
doc_to_target: item
generation_kwargs:
  until: ["."]
  max_gen_toks: 8
metric_list:
  - metric: exact_match
    regexes_to_ignore: [" "]
"""


def write_corpus(folder: Path, repeats: int = 400) -> Path:
    """A text corpus folder: every fact `repeats` times, shuffled."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"{name} has {item}.\n" for name, item in FACTS.items() for _ in range(repeats)]
    random.Random(0).shuffle(lines)
    (folder / "facts.txt").write_text("".join(lines))
    return folder


def write_tasks(folder: Path) -> Path:
    """toy_choice and toy_recall (task YAMLs reading a local JSONL) in `folder`."""
    docs = [{"name": n, "item": i, "answer": ITEMS.index(i)} for n, i in FACTS.items()]
    (folder / "toy.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "toy_choice.yaml").write_text(CHOICE_YAML.format(folder=folder, items=json.dumps(ITEMS)))
    (folder / "toy_recall.yaml").write_text(RECALL_YAML.format(folder=folder))
    return folder


def toy_trial(corpus: Path, tokens: int = 100_000, residual: dict | None = None) -> dict:
    """A 2-layer d64 byte-level trial on the corpus (SATFormer unless `residual` says otherwise):
    at 100k tokens (3.3 s of CPU) it knows every fact."""
    return {
        "seed": 0,
        "model": {"vocab_size": 256, "d_model": 64, "n_layers": 2, "n_heads": 2, "d_ff": 128,
                  "max_seq_len": 64, "residual": residual or {"kind": "value_residual", "mode": "gated"}},
        "data": {"kind": "text", "corpus": "folder", "path": str(corpus), "tokenizer": "byte", "seq_len": 64},
        "train": {"tokens": tokens, "batch_size": 16, "lr": 1e-2, "eval_every": 10_000, "eval_batches": 1,
                  "log_every": 10_000, "num_threads": 1},
    }  # fmt: skip
