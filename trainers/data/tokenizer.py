"""The one tokenizer rule: every text the project encodes (training and validation text, `prepare
hf` documents, evaluation contexts) goes through `encode` of `ByteTokenizer` (vocab 256, the raw
UTF-8 bytes) or `FastTokenizer` (any tokenizer.json of the `tokenizers` library: the byte-level
BPE trained here, a GPT-2-style or a Llama-2-style one), and `encode` never adds special tokens:
a tokenizer.json's post-processor (Llama's `<s> $A`) is not run. What separates documents is the
data's business (the shards' meta.json, `separator`), and what starts an evaluation context is
`ContextStart`: the token that preceded every document in training.

The project's BPE is trained with `tokenizers` on the train split only and cached under
`<cache>/tokenizers/bpe-<sha256 of the train split>-<vocab>.json`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np

from trainers.data.cache import save_text
from trainers.data.corpora import sha256

HUB_OFFLINE_BY_DEFAULT = "HF_HUB_OFFLINE" not in os.environ  # (python -m trainers.prepare hf undoes it)
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never wait on the hub

CHUNK = 1 << 16
LINE_BREAK = "\n"
TOKENIZER = "tokenizer.json"  # beside token shards
SEPARATORS = ("eos", "bos", "both")  # what `prepare hf` writes around each document
_BYTE_PIECE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")  # SentencePiece byte fallback


def dtype_for(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint8 if vocab_size <= 256 else np.uint16 if vocab_size <= 65536 else np.uint32)


def _text(data: str | bytes) -> str:
    return data if isinstance(data, str) else data.decode("utf-8", errors="replace")


def _chunks(text: str) -> list[str]:
    """Line-aligned pieces of ~64 KiB, so that encode_batch can use every core."""
    out, buf, size = [], [], 0
    for line in text.splitlines(keepends=True):
        buf.append(line)
        size += len(line)
        if size >= CHUNK:
            out.append("".join(buf))
            buf, size = [], 0
    if buf:
        out.append("".join(buf))
    return out


@dataclasses.dataclass(frozen=True)
class ContextStart:
    """The token an evaluation context starts with: the one that preceded every document in
    training (`why` says which rule gave it; evals write both into their results)."""

    id: int
    token: str
    why: str

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


class ByteTokenizer:
    vocab_size = 256

    def __init__(self, start: ContextStart | None = None):
        self.start = start or line_break_start(self)

    def encode(self, data: str | bytes) -> np.ndarray:
        data = data.encode("utf-8") if isinstance(data, str) else data
        return np.frombuffer(data, dtype=np.uint8).copy()

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode(t).tolist() for t in texts]

    def decode(self, ids) -> str:
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")

    def piece(self, token: int) -> str:
        return self.decode([token])

    def token_id(self, token: str) -> int | None:
        ids = self.encode(token)
        return int(ids[0]) if len(ids) == 1 else None

    def byte_lengths(self) -> np.ndarray:
        """UTF-8 bytes each token id stands for: one."""
        return np.ones(self.vocab_size, dtype=np.int64)


class FastTokenizer:
    """A `tokenizers.Tokenizer` (any tokenizer.json) under the one rule: no special tokens added."""

    def __init__(self, tok, start: ContextStart | None = None):
        self.tok = tok
        self.vocab_size = tok.get_vocab_size(with_added_tokens=True)
        self.spec = json.loads(tok.to_str())
        self.start = start

    @classmethod
    def from_file(cls, path: Path, start: ContextStart | None = None) -> FastTokenizer:
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_file(str(path)), start)

    @classmethod
    def train_bpe(cls, train_bytes: bytes, vocab_size: int, cache_dir: Path) -> FastTokenizer:
        """The project's byte-level BPE (GPT-2 style pre-tokenisation, no special tokens)."""
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        path = cache_dir / "tokenizers" / f"bpe-{sha256(train_bytes)[:16]}-{vocab_size}.json"
        if path.is_file():
            return cls.from_file(path)
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            special_tokens=[],
            show_progress=False,
        )
        tok.train_from_iterator(_chunks(train_bytes.decode("utf-8", errors="replace")), trainer=trainer)
        save_text(path, tok.to_str())
        return cls(tok)

    @property
    def sha256(self) -> str:
        """Of the serialised tokenizer (what `prepare hf` writes as tokenizer.json)."""
        return hashlib.sha256(self.tok.to_str().encode()).hexdigest()

    def _splits_at_line_ends(self) -> bool:
        """Whether encoding line-aligned pieces apart gives the ids of the whole: byte-level
        pre-tokenisation without an added prefix space and no normaliser (the project's BPE).
        A Metaspace tokenizer prepends `▁` to each call's first word, so it encodes whole."""
        pre = self.spec.get("pre_tokenizer") or {}
        return (
            self.spec.get("normalizer") is None
            and pre.get("type") == "ByteLevel"
            and not pre.get("add_prefix_space", False)
        )

    def encode(self, data: str | bytes) -> np.ndarray:
        text = _text(data)
        pieces = _chunks(text) if self._splits_at_line_ends() else [text]
        ids = [i for enc in self.tok.encode_batch(pieces, add_special_tokens=False) for i in enc.ids]
        return np.asarray(ids, dtype=dtype_for(self.vocab_size))

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """One id list per text (documents: each encoded whole, the batch on every core)."""
        return [enc.ids for enc in self.tok.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids) -> str:
        return self.tok.decode([int(i) for i in ids])

    def piece(self, token: int) -> str:
        return self.tok.id_to_token(int(token)) or ""

    def token_id(self, token: str) -> int | None:
        return self.tok.token_to_id(token)

    def byte_lengths(self) -> np.ndarray:
        """UTF-8 bytes each token id stands for, as the tokenizer's decoder writes it: a special
        token none; a byte-fallback piece `<0xNN>` one; a byte-level piece one per character
        (GPT-2's byte-to-unicode map); any other piece the bytes its decoder turns it into after
        a plain letter (so Metaspace's `▁` is one byte, the space it stands for, also where the
        decoder drops it at the start of a text)."""
        from tokenizers import pre_tokenizers

        special = {i for i, added in self.tok.get_added_tokens_decoder().items() if added.special}
        fallback = bool((self.spec.get("model") or {}).get("byte_fallback"))
        byte_level = "ByteLevel" in _decoder_types(self.spec.get("decoder"))
        alphabet = set(pre_tokenizers.ByteLevel.alphabet())
        decoder = self.tok.decoder
        out = np.zeros(self.vocab_size, dtype=np.int64)
        for i in range(self.vocab_size):
            piece = self.piece(i)
            if i in special:
                continue
            if fallback and _BYTE_PIECE.match(piece):
                out[i] = 1
            elif byte_level:
                if not set(piece) <= alphabet:
                    raise ValueError(f"token {i} ({piece!r}) is not byte-level: its byte count is unknown")
                out[i] = len(piece)
            elif decoder is None:
                out[i] = len(piece.encode())
            else:
                out[i] = len(decoder.decode(["a", piece]).encode()) - 1
        return out


def _decoder_types(spec: dict | None) -> set[str]:
    if not spec:
        return set()
    if spec.get("type") == "Sequence":
        return set().union(*(_decoder_types(d) for d in spec.get("decoders", [])))
    return {spec["type"]}


def line_break_start(tokenizer) -> ContextStart:
    """Text corpora have no document separator: a line break precedes each line, so a context
    starts with it (it must be one token)."""
    ids = tokenizer.encode(LINE_BREAK)
    if len(ids) != 1:
        raise ValueError(f"a line break is {len(ids)} tokens in this tokenizer; a context start must be one")
    return ContextStart(int(ids[0]), LINE_BREAK, "text corpus without document separators: a line break")


def separator_start(tokenizer, meta: dict, source: str) -> ContextStart:
    """The token before every document of shards written with `separator` (meta.json): BOS when
    documents began with it (bos, both), else the EOS that ended the document before."""
    separator = meta.get("separator", "eos")
    key = "bos_id" if separator in ("bos", "both") else "eos_id"
    if separator not in SEPARATORS or meta.get(key) is None:
        raise ValueError(f"{source}: separator {separator!r} with {key} {meta.get(key)!r}; allowed: "
                         f"{', '.join(SEPARATORS)} with the id of that token")  # fmt: skip
    token = tokenizer.piece(meta[key])
    why = f"the shards' separator {separator}: {token} before every document"
    return ContextStart(int(meta[key]), token, why)


def shard_tokenizer(folder: Path):
    """The tokenizer the shards were written with, read back from the folder, its `start` the
    token before every document (`ContextStart`): meta.json's `tokenizer: byte`, or the folder's
    tokenizer.json (`prepare hf` copies it there with its sha256 and separator in meta.json; corpus
    shards with `tokenizer: bpe` start with a line break, as text data does). None when neither."""
    folder = Path(folder).expanduser()
    meta_path = folder / "meta.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path} not found (build shards with python -m trainers.prepare)")
    meta = json.loads(meta_path.read_text())
    if meta.get("tokenizer") == "byte":
        return ByteTokenizer()
    path = folder / TOKENIZER
    if not path.is_file():
        return None
    tok = FastTokenizer.from_file(path)
    if isinstance(meta.get("tokenizer"), dict):  # prepare hf: documents with separators
        tok.start = separator_start(tok, meta, str(meta_path))
    else:
        tok.start = line_break_start(tok)
    return tok


def make_tokenizer(kind: str, train_bytes: bytes, vocab_size: int, cache_dir: Path):
    """`byte` or `bpe`; the BPE is trained on `train_bytes` (and cached). Both start contexts
    with a line break (text corpora)."""
    if kind == "byte":
        return ByteTokenizer()
    if kind == "bpe":
        tok = FastTokenizer.train_bpe(train_bytes, vocab_size, cache_dir)
        tok.start = line_break_start(tok)
        return tok
    raise ValueError(f"unknown tokenizer {kind!r}; allowed: byte, bpe")
