"""`python -m trainers.prepare hf DATASET [--name SUBSET] --tokenizer PATH_OR_NAME --tokens N
[--val-fraction F] [--seed S] --out DIR [--split S] [--text-field F] [--eos-token T]
[--separator eos|bos|both] [--bos-token T] [--dtype auto|uint16|uint32] [--shard-tokens N]
[--batch-docs N]`

Token shards for `data: {kind: tokens, path: DIR}` from a dataset the `datasets` library reads
(the optional extra `hf`): a hub name (`HuggingFaceFW/fineweb-edu --name sample-100BT`) or a local
folder of parquet / jsonl / arrow files in the same layout. The dataset is streamed in order;
each document's `--text-field` is tokenised with a fast tokenizer (`tokenizers`: a tokenizer.json
file, a folder holding one, or a hub name) by the project's one rule (trainers.data.tokenizer: no
special tokens from the tokenizer's post-processor), in batches of `--batch-docs` documents
(encode_batch uses every core), and `--separator` says what goes around each document: the EOS
id after it (eos, the default and the official preparation's), the BOS id before it (bos), or
both. Each batch's documents go to validation with probability `--val-fraction`, drawn by numpy
from (seed, batch number): the split depends only on the seed and the dataset's order
(`--shuffle-buffer N`: the stream shuffled in a buffer of N documents, seeded, as the official
preparation does with 10,000). It stops once
`--tokens` tokens (train and val together) are written: the last document is cut there.

Writes DIR/train_000.bin ..., DIR/val_000.bin ... (little-endian uint16, or uint32 for
vocabularies over 65,536 ids), DIR/tokenizer.json, and DIR/meta.json last (vocab, dtype, EOS and
BOS ids, the separator, token and document counts, source, tokenizer name and sha256, the
command; a trial reads tokenizer and separator back: trainers.data.tokenizer.shard_tokenizer):
its presence means the preparation is complete. Progress (a bar with ETA on stderr) is saved in
DIR/progress.json after every batch; running the same command again resumes from there (shards
cut back to the saved sizes, the documents already read skipped). Exit 2 with the option, the
file and what is allowed on bad input.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import sys
from pathlib import Path

import numpy as np

from trainers.data.cache import save_json
from trainers.data.tokenizer import SEPARATORS, FastTokenizer

DTYPES = {"uint16": 1 << 16, "uint32": 1 << 32}
EOS_CANDIDATES = ("</s>", "<|endoftext|>", "<eos>", "<|end_of_text|>", "[SEP]")
BOS_CANDIDATES = ("<s>", "<|begin_of_text|>", "<bos>", "<|startoftext|>", "[CLS]")
PROGRESS, META, TOKENIZER = "progress.json", "meta.json", "tokenizer.json"


class PrepareError(Exception):
    """Bad input: the option (or file), the value, what is allowed."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m trainers.prepare hf", description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", help="a hub dataset name or a local folder of parquet/jsonl/arrow files")
    p.add_argument("--name", default=None, help="the dataset's subset (configuration), e.g. sample-100BT")
    p.add_argument("--split", default="train")
    p.add_argument("--text-field", default="text")
    p.add_argument("--tokenizer", required=True, help="a tokenizer.json, a folder with one, or a hub name")
    p.add_argument("--eos-token", default=None, help=f"default: the first of {', '.join(EOS_CANDIDATES)}")
    p.add_argument("--separator", choices=SEPARATORS, default="eos",
                   help="around each document: EOS after it, BOS before it, or both")  # fmt: skip
    p.add_argument("--bos-token", default=None, help=f"default: the first of {', '.join(BOS_CANDIDATES)}")
    p.add_argument("--tokens", type=int, required=True, help="tokens to write (train and val together)")
    p.add_argument("--val-fraction", type=float, default=0.005)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument(
        "--shuffle-buffer", type=int, default=0, help="shuffle the stream in a buffer (0: in order)"
    )
    p.add_argument("--out", required=True)
    p.add_argument("--dtype", choices=("auto", *DTYPES), default="auto")
    p.add_argument("--shard-tokens", type=int, default=100_000_000)
    p.add_argument("--batch-docs", type=int, default=1000)
    return p


def load_tokenizer(spec: str):
    """(tokenizers.Tokenizer, its serialised form's sha256) of a file, a folder or a hub name."""
    from tokenizers import Tokenizer

    path = Path(spec).expanduser()
    if path.is_dir():
        path = path / TOKENIZER
        if not path.is_file():
            raise PrepareError(f"--tokenizer: {path} not found (a folder must hold a tokenizer.json)")
    if path.is_file():
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as err:  # noqa: BLE001  (the tokenizers library raises plain Exceptions)
            raise PrepareError(
                f"--tokenizer: {path} is not a tokenizer.json the tokenizers library reads: {err}"
            ) from None
    else:
        try:
            tok = Tokenizer.from_pretrained(spec)
        except Exception as err:  # noqa: BLE001
            raise PrepareError(
                f"--tokenizer: given {spec!r}: no such file or folder, and the hub gave no tokenizer.json "
                f"for it ({type(err).__name__}); allowed: a tokenizer.json, a folder with one, or a hub name "
                "(a gated one needs `huggingface-cli login`)"
            ) from None
    return tok, hashlib.sha256(tok.to_str().encode()).hexdigest()


def special_id(tok, token: str | None, candidates: tuple[str, ...], option: str) -> int:
    """The id of `token`, or of the first of `candidates` the vocabulary has."""
    for name in [token] if token else list(candidates):
        found = tok.token_to_id(name)
        if found is not None:
            return found
    given = f"given {token!r}" if token else "none of " + ", ".join(candidates) + " found"
    raise PrepareError(f"{option}: {given} in the tokenizer's vocabulary; allowed: a token it has")


def pick_dtype(requested: str, vocab: int) -> str:
    if requested == "auto":
        return "uint16" if vocab <= DTYPES["uint16"] else "uint32"
    if vocab > DTYPES[requested]:
        raise PrepareError(
            f"--dtype: given {requested}; the tokenizer has {vocab} ids, more than {requested} holds "
            f"({DTYPES[requested]}); allowed: uint32 or auto"
        )
    return requested


def open_stream(args):
    """The dataset's `--split`, streamed in order."""
    import datasets  # the optional extra `hf`

    source = Path(args.dataset).expanduser()
    looks_local = source.exists() or args.dataset.startswith((".", "/", "~"))
    if looks_local and not source.is_dir():
        raise PrepareError(f"DATASET: {source} not found; allowed: a folder of parquet/jsonl/arrow files")
    try:
        stream = datasets.load_dataset(
            str(source) if looks_local else args.dataset, name=args.name, split=args.split, streaming=True
        )
    except Exception as err:  # noqa: BLE001  (datasets raises many kinds; all mean "cannot be read")
        raise PrepareError(
            f"DATASET: {args.dataset!r} (--name {args.name}, --split {args.split}) cannot be read: "
            f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}; allowed: a local folder "
            "of parquet/jsonl/arrow files or a hub dataset (with network access)"
        ) from None
    if args.shuffle_buffer:
        stream = stream.shuffle(seed=args.seed, buffer_size=args.shuffle_buffer)
    return stream


class ShardWriter:
    """Appends ids to `<split>_NNN.bin` files of at most `shard_tokens` tokens each."""

    def __init__(self, out: Path, split: str, dtype: str, shard_tokens: int, sizes: list[int]):
        self.out, self.split, self.shard_tokens = out, split, shard_tokens
        self.dtype = np.dtype(dtype).newbyteorder("<")
        self.sizes = list(sizes) or [0]
        for i, size in enumerate(self.sizes):  # cut back what was written after the last save
            with open(self.path(i), "ab") as f:
                f.truncate(size * self.dtype.itemsize)

    def path(self, i: int) -> Path:
        return self.out / f"{self.split}_{i:03d}.bin"

    @property
    def tokens(self) -> int:
        return sum(self.sizes)

    def write(self, ids: np.ndarray) -> None:
        while len(ids):
            room = self.shard_tokens - self.sizes[-1]
            if room == 0:
                self.sizes.append(0)
                continue
            part, ids = ids[:room], ids[room:]
            with open(self.path(len(self.sizes) - 1), "ab") as f:
                np.asarray(part, dtype=self.dtype).tofile(f)
            self.sizes[-1] += len(part)

    def flush_to_disk(self) -> None:
        for i in range(len(self.sizes)):
            with open(self.path(i), "ab") as f:
                os.fsync(f.fileno())

    def names(self) -> list[str]:
        return [self.path(i).name for i in range(len(self.sizes))]


def _settings(args) -> dict:
    """What must match for a preparation to resume (or to count as already done)."""
    keys = ("dataset", "name", "split", "text_field", "tokenizer", "eos_token", "tokens", "val_fraction",
            "seed", "shuffle_buffer")  # fmt: skip
    separator = {} if args.separator == "eos" else {"separator": args.separator, "bos_token": args.bos_token}
    return (
        {k: getattr(args, k) for k in keys}
        | separator
        | {
            "shard_tokens": args.shard_tokens,
            "batch_docs": args.batch_docs,
        }
    )


def prepare_hf(args, command: str) -> dict:
    if args.tokens < 1:
        raise PrepareError(f"--tokens: given {args.tokens}; allowed: a positive number of tokens")
    if not 0 <= args.val_fraction < 0.5:
        raise PrepareError(f"--val-fraction: given {args.val_fraction}; allowed: 0 <= F < 0.5")
    tok, tok_hash = load_tokenizer(args.tokenizer)
    encoder = FastTokenizer(tok)
    vocab = encoder.vocab_size
    dtype = pick_dtype(args.dtype, vocab)
    eos = special_id(tok, args.eos_token, EOS_CANDIDATES, "--eos-token")
    bos = special_id(tok, args.bos_token, BOS_CANDIDATES, "--bos-token") if args.separator != "eos" else None
    before = [bos] if args.separator in ("bos", "both") else []
    after = [eos] if args.separator in ("eos", "both") else []
    out = Path(args.out).expanduser().absolute()
    out.mkdir(parents=True, exist_ok=True)
    settings = _settings(args)
    meta_path, progress_path = out / META, out / PROGRESS
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        if meta.get("settings") == settings:
            print(f"{out}: already prepared ({META} is there); nothing to do", file=sys.stderr)
            return meta
        raise PrepareError(
            f"--out: {meta_path} exists from another preparation; allowed: an empty or new folder"
        )
    state = {"documents": 0, "batches": 0, "train": [], "val": []}
    if progress_path.is_file():
        saved = json.loads(progress_path.read_text())
        if saved.get("settings") != settings:
            raise PrepareError(
                f"--out: {progress_path} is from a preparation with other options ({saved.get('settings')}); "
                "allowed: the same command, or a new folder"
            )
        state = saved["state"]
        print(f"resuming after {state['documents']} documents", file=sys.stderr)
    writers = {s: ShardWriter(out, s, dtype, args.shard_tokens, state[s]) for s in ("train", "val")}
    stream = open_stream(args)
    if state["documents"]:
        stream = stream.skip(state["documents"])
    from tqdm import tqdm

    done = sum(w.tokens for w in writers.values())
    bar = tqdm(total=args.tokens, initial=done, unit="tok", unit_scale=True, desc="tokens", file=sys.stderr)
    batch: list[str] = []
    documents, batches = state["documents"], state["batches"]

    def flush() -> bool:
        """Tokenises and writes `batch`; True when the budget is reached."""
        nonlocal documents, batches
        rng = np.random.default_rng([args.seed, batches])
        to_val = rng.random(len(batch)) < args.val_fraction
        encoded = encoder.encode_batch(batch)
        for i, (enc, val) in enumerate(zip(encoded, to_val, strict=True)):
            ids = np.asarray([*before, *enc, *after], dtype=np.int64)
            room = args.tokens - sum(w.tokens for w in writers.values())
            writers["val" if val else "train"].write(ids[:room])
            bar.update(min(len(ids), room))
            if room <= len(ids):
                documents += i + 1
                return True
        documents, batches = documents + len(batch), batches + 1
        for w in writers.values():
            w.flush_to_disk()
        progress = {"documents": documents, "batches": batches, **{s: w.sizes for s, w in writers.items()}}
        save_json(progress_path, {"settings": settings, "state": progress})
        batch.clear()
        return False

    finished = False
    for row in stream:
        if args.text_field not in row:
            raise PrepareError(
                f"--text-field: given {args.text_field!r}; the dataset's fields are {', '.join(row)}"
            )
        batch.append(row[args.text_field])
        if len(batch) == args.batch_docs and flush():
            finished = True
            break
    if not finished and batch:
        finished = flush()
    bar.close()
    meta = {
        "vocab_size": vocab,
        "dtype": dtype,
        "eos_id": eos,
        "bos_id": bos,
        "separator": args.separator,  # eos: EOS after each document; bos: BOS before; both
        "train_tokens": writers["train"].tokens,
        "val_tokens": writers["val"].tokens,
        "train_shards": writers["train"].names(),
        "val_shards": writers["val"].names(),
        "documents": documents,  # read, the last one possibly cut
        "complete_budget": finished,  # False: the dataset ended before --tokens
        "source": {
            "dataset": args.dataset,
            "name": args.name,
            "split": args.split,
            "text_field": args.text_field,
        },
        "tokenizer": {"name": args.tokenizer, "sha256": tok_hash, "file": TOKENIZER},
        "val_fraction": args.val_fraction,
        "seed": args.seed,
        "command": command,
        "settings": settings,
    }
    for w in writers.values():
        w.flush_to_disk()
    (out / TOKENIZER).write_bytes(tok.to_str().encode())  # the bytes tok_hash is of
    save_json(meta_path, meta)  # last: its presence means the shards are complete
    progress_path.unlink(missing_ok=True)
    return meta


def main(argv: list[str]) -> int:
    from trainers.data import tokenizer  # noqa: F401  (it turns hub look-ups off unless the user chose)

    if tokenizer.HUB_OFFLINE_BY_DEFAULT:  # this command reads the hub unless the user said offline
        os.environ.pop("HF_HUB_OFFLINE", None)
    args = _parser().parse_args(argv)
    command = "python -m trainers.prepare hf " + shlex.join(argv)
    try:
        meta = prepare_hf(args, command)
    except PrepareError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except ImportError as err:
        print(f"error: python -m trainers.prepare hf needs the optional extra hf ({err}): "
              "pip install -e '.[hf]'", file=sys.stderr)  # fmt: skip
        return 2
    print(
        f"{args.out}: vocab {meta['vocab_size']} {meta['dtype']}, separator {meta['separator']} "
        f"(EOS {meta['eos_id']}, BOS {meta['bos_id']}), "
        f"train {meta['train_tokens']} tokens, val {meta['val_tokens']} tokens, {meta['documents']} documents"
    )
    return 0
