"""A trained trial, back from its records: the model of a checkpoint or of an MLflow run, and the
tokenizer its data used.

A trial's final checkpoint (`trainers.fit`, `checkpoint_path`; a sweep logs it as the run's
artifact `trainers.mlflow_names.CHECKPOINT_ARTIFACT`) carries the resolved trial config beside the
weights, so the checkpoint alone rebuilds the model. The tokenizer is rebuilt from the config's
data section, as training built it: `byte`, or the byte-level BPE trained on the corpus's train
split (cached under the data root; retrained, deterministically, where the cache is gone), or a
token-shard folder's `tokenizer.json` (`python -m trainers.prepare`).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import torch

from arch import build_model
from trainers.config import TextDataConfig, TokenDataConfig, TrialConfig
from trainers.data.cache import cache_root
from trainers.data.corpora import load_corpus
from trainers.data.tokenizer import ByteTokenizer, make_tokenizer, shard_tokenizer
from trainers.mlflow_names import CHECKPOINT_ARTIFACT, DEFAULT_TRACKING_URI

RUN_ID = re.compile(r"[0-9a-f]{32}")  # how MLflow names a run
SQLITE = "sqlite:///"


class TrialNotFound(ValueError):
    """The target is neither a readable checkpoint file nor a run with a checkpoint artifact."""


def checkpoint_file(target: str, tracking_uri: str = DEFAULT_TRACKING_URI) -> tuple[Path, str | None]:
    """(local checkpoint path, MLflow run id or None) of a checkpoint path or a run id."""
    path = Path(target)
    if path.is_file():
        return path, None
    if path.suffix == ".ckpt" or "/" in target:
        raise TrialNotFound(f"{target}: no such checkpoint file")
    if not RUN_ID.fullmatch(target):
        raise TrialNotFound(f"{target}: neither a checkpoint file nor an MLflow run id (32 hex digits)")
    store = tracking_uri[len(SQLITE) :].split("?", 1)[0] if tracking_uri.startswith(SQLITE) else None
    if store not in (None, ":memory:") and not Path(store).is_file():
        # asking MLflow would make an empty store there, where the user stands
        raise TrialNotFound(f"{target}: no MLflow store at {tracking_uri} to find the run in")
    import mlflow  # the MLflow client: only for run ids

    mlflow.set_tracking_uri(tracking_uri)
    try:
        local = mlflow.artifacts.download_artifacts(
            run_id=target,
            artifact_path=CHECKPOINT_ARTIFACT,
            dst_path=tempfile.mkdtemp(prefix="satsweep-trial-"),
        )
    except Exception as err:  # MLflow raises its own and OS errors for a missing run or artifact
        raise TrialNotFound(
            f"{target}: not a file, and not an MLflow run with artifact {CHECKPOINT_ARTIFACT} in "
            f"{tracking_uri} ({err})"
        ) from err
    return Path(local), target


def load_checkpoint(path: Path) -> tuple[TrialConfig, torch.nn.Module]:
    """(trial config, model with the trained weights, in eval mode) of a `trainers.fit` checkpoint."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # not a torch file, truncated, ...
        raise TrialNotFound(f"{path}: not a readable checkpoint ({err})") from err
    if not isinstance(ckpt, dict) or "trial_config" not in ckpt:
        raise TrialNotFound(f"{path}: no trial_config in this checkpoint (not written by trainers.fit)")
    cfg = TrialConfig.from_dict(ckpt["trial_config"], source=str(path))
    model = build_model(cfg.model)
    state = {k.removeprefix("model."): v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    model.load_state_dict(state)
    return cfg, model.eval()


def load_trial(target: str, tracking_uri: str = DEFAULT_TRACKING_URI):
    """(config, model, run id or None) of a checkpoint file or an MLflow run id."""
    path, run_id = checkpoint_file(target, tracking_uri)
    cfg, model = load_checkpoint(path)
    return cfg, model, run_id


def trial_tokenizer(cfg: TrialConfig, data_root=None):
    """The tokenizer the trial trained with (trainers.data.tokenizer: `encode(text) -> ids` without
    special tokens, `decode(ids) -> str`, `vocab_size`, `start` the token before every document in
    training, which an evaluation context starts with). Raises ValueError for data without text
    (MQAR) or shards without a tokenizer."""
    data = cfg.data
    if isinstance(data, TextDataConfig):
        if data.tokenizer == "byte":
            return ByteTokenizer()
        # trainers.data.text loads Lightning (its data module): only a BPE text trial needs it here
        from trainers.data.text import split

        train_bytes, _ = split(load_corpus(data.corpus, data.path, data.max_bytes), data.val_fraction)
        return make_tokenizer("bpe", train_bytes, data.bpe_vocab_size, cache_root(data_root))
    if isinstance(data, TokenDataConfig):
        tok = shard_tokenizer(Path(data.path))
        if tok is None:
            raise ValueError(f"{data.path}: no tokenizer.json beside the shards; pass the tokenizer's file")
        return tok
    raise ValueError(f"data kind {data.kind!r} has no text tokenizer; allowed: text, tokens")
