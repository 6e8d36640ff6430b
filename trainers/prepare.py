"""`python -m trainers.prepare <folder of text files | corpus name> <out dir> [--tokenizer byte|bpe]
[--vocab-size N] [--val-fraction F] [--shard-tokens N] [--max-bytes N]`, or
`python -m trainers.prepare hf DATASET ...` for a dataset of the `datasets` library with a fast
tokenizer (trainers.prepare_hf: the paper's FineWeb-Edu, docs/paper_data.md).

Writes pre-tokenised shards for `data: {kind: tokens, path: <out dir>}`:
`train_000.bin ...`, `val_000.bin ...` (raw little-endian uint16, or uint32 for vocabularies
over 65536), `meta.json` (vocab_size, dtype, token counts, corpus sha256) and, for BPE,
`tokenizer.json`. The corpus, split and tokenizer are exactly those of `data: {kind: text}`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from trainers import prepare_hf
from trainers.config import TextDataConfig
from trainers.data.cache import cache_root, save_json
from trainers.data.corpora import CORPORA, CorpusUnavailable, load_corpus
from trainers.data.text import split, tokenized_corpus
from trainers.data.tokenizer import make_tokenizer


def write_shards(array: np.ndarray, out: Path, split: str, dtype: np.dtype, shard_tokens: int) -> list[str]:
    names = []
    for i, start in enumerate(range(0, max(1, len(array)), shard_tokens)):
        name = f"{split}_{i:03d}.bin"
        np.asarray(array[start : start + shard_tokens], dtype=dtype.newbyteorder("<")).tofile(out / name)
        names.append(name)
    return names


def prepare(
    source: str,
    out: str | Path,
    tokenizer: str = "byte",
    vocab_size: int = 4096,
    val_fraction: float = 0.05,
    shard_tokens: int = 100_000_000,
    max_bytes: int | None = None,
    data_root=None,
) -> dict:
    """Builds the shards of `source` (a corpus name or a folder of *.txt) in `out`; returns meta."""
    named = source in CORPORA and source != "folder"
    cfg = TextDataConfig(
        corpus=source if named else "folder",
        path=None if named else str(Path(source).expanduser().absolute()),
        tokenizer=tokenizer,
        bpe_vocab_size=vocab_size,
        val_fraction=val_fraction,
        max_bytes=max_bytes,
    )
    root = cache_root(data_root)
    train, val, meta = tokenized_corpus(cfg, root)
    out = Path(out).expanduser().absolute()
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("train_*.bin"), *out.glob("val_*.bin")]:
        old.unlink()
    dtype = np.dtype(np.uint16 if meta["vocab_size"] <= 65536 else np.uint32)
    meta = {
        **meta,
        "dtype": dtype.name,
        "train_shards": write_shards(train, out, "train", dtype, shard_tokens),
        "val_shards": write_shards(val, out, "val", dtype, shard_tokens),
    }
    if tokenizer == "bpe":  # the corpus's own (cached) BPE, as the text data trained with it
        train_bytes, _ = split(load_corpus(cfg.corpus, cfg.path, cfg.max_bytes), cfg.val_fraction)
        tok = make_tokenizer("bpe", train_bytes, vocab_size, root)
        (out / "tokenizer.json").write_bytes(tok.tok.to_str().encode())
    save_json(out / "meta.json", meta)
    return meta


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["hf"]:
        return prepare_hf.main(argv[1:])
    p = argparse.ArgumentParser(prog="python -m trainers.prepare", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "source",
        help=f"a folder of *.txt files or a corpus: {', '.join(c for c in CORPORA if c != 'folder')}",
    )
    p.add_argument("out", help="output folder")
    p.add_argument("--tokenizer", choices=("byte", "bpe"), default="byte")
    p.add_argument("--vocab-size", type=int, default=4096, help="BPE vocabulary size")
    p.add_argument("--val-fraction", type=float, default=0.05)
    p.add_argument("--shard-tokens", type=int, default=100_000_000)
    p.add_argument("--max-bytes", type=int, default=None)
    p.add_argument("--data-root", default=None)
    args = p.parse_args(argv)
    try:
        meta = prepare(
            args.source,
            args.out,
            args.tokenizer,
            args.vocab_size,
            args.val_fraction,
            args.shard_tokens,
            args.max_bytes,
            args.data_root,
        )
    except CorpusUnavailable as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(
        f"{args.out}: vocab {meta['vocab_size']} {meta['dtype']}, train {meta['train_tokens']} tokens, "
        f"val {meta['val_tokens']} tokens"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
