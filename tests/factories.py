"""Tiny trial configs for tests: one base, each test changing only what it is about.

`tiny_trial(**sections)` merges its arguments into the base (mappings key by key, anything else
replaced): `tiny_trial(model={"n_layers": 3})` is the base with three layers."""

import copy

TINY = {
    "seed": 0,
    "model": {"preset": "tiny", "n_layers": 2, "d_model": 32, "n_heads": 2, "d_ff": 64, "max_seq_len": 32},
    "data": {"kind": "mqar", "seq_len": 32, "vocab": 64, "num_kv_pairs": 4, "train_examples": 256,
             "val_examples": 64},
    "train": {"tokens": 4096, "batch_size": 8, "eval_every": 4, "eval_batches": 2, "log_every": 2,
              "num_threads": 1},
}  # fmt: skip


def merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in over.items():
        out[key] = (
            merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
        )
    return out


def tiny_trial(**sections) -> dict:
    return merge(TINY, sections)


def text_data(**data) -> dict:
    """A text corpus section in place of MQAR (a `data` mapping replaces the base's whole)."""
    return {"kind": "text", "seq_len": 32, **data}
