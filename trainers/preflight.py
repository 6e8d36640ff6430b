"""What a trial needs from this machine and its files, checked once after its config parses
(parsing reads neither: `TrialConfig.from_dict` gives the same object on any machine) and before
anything is built:

- `train.loss: fused`: CUDA and the liger-kernel package here;
- token shards (`data.kind: tokens`): the folder intact (`trainers.data.shard_folder.folder_defects`),
  its meta.json readable, its vocabulary within `model.vocab_size`.

`load` is the trial's whole load (`python -m trainers.train`, `trainers.fit` given a mapping): a
trial file that names token shards and no `model.vocab_size` takes the shards' vocabulary, then it
parses and is checked here. A study's trials are checked by the launcher's preflight
(`sweeps.run.preflight`), which reports each issue at its point of the study.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping

from arch.configtree import ConfigError, Issue, join
from trainers.config import TokenDataConfig, TrialConfig
from trainers.data.shard_folder import folder_defects


def issues(cfg: TrialConfig, path: str = "") -> list[Issue]:
    """Every problem of `cfg` on this machine and with its files ([]: none); `path` prefixes the
    key paths (`trial` in a study)."""
    found = _fused_loss_issues(cfg, join(path, "train.loss"))
    if isinstance(cfg.data, TokenDataConfig):
        found += _shard_issues(cfg, path)
    return found


def check(cfg: TrialConfig, source: str | None = None) -> TrialConfig:
    """`cfg` when it can run here; raises ConfigError (naming `source`) otherwise."""
    found = issues(cfg)
    if found:
        raise ConfigError(found, source)
    return cfg


def load(tree: Mapping, source: str | None = None) -> TrialConfig:
    """A trial's plain tree (a trial file's) parsed with the shards' vocabulary filled in, then
    checked here; raises ConfigError."""
    return check(TrialConfig.from_dict(with_data_vocab(tree), source), source)


def with_data_vocab(tree: Mapping) -> dict:
    """`tree` with `model.vocab_size` set to its token shards' (meta.json's) when it gives none;
    unchanged for other data, or when meta.json cannot be read (then `issues` says why)."""
    out = copy.deepcopy(dict(tree))
    data, model = out.get("data"), out.get("model")  # a trial without model: keeps the defaults
    if not isinstance(data, Mapping) or data.get("kind") != "tokens" or not isinstance(model, Mapping):
        return out
    if "vocab_size" in model or not isinstance(data.get("path", ""), str):
        return out
    vocab, _ = shard_vocab(TokenDataConfig(path=data.get("path", "")))
    if vocab is not None:
        out["model"] = {**model, "vocab_size": vocab}
    return out


def shard_vocab(data: TokenDataConfig) -> tuple[int | None, str | None]:
    """(the vocabulary size meta.json gives, None) or (None, why it cannot be read)."""
    meta = data.meta_path
    if not meta.is_file():
        return None, f"given {data.path!r}; no meta.json there (run python -m trainers.prepare)"
    try:
        vocab = json.loads(meta.read_text())["vocab_size"]
        if not isinstance(vocab, int) or vocab < 1:
            raise ValueError(f"vocab_size {vocab!r} is not a positive integer")
    except (OSError, ValueError, KeyError, TypeError) as err:
        detail = f"no key {err}" if isinstance(err, KeyError) else str(err)
        return None, f"given {data.path!r}; {meta} is unreadable: {detail}"
    return vocab, None


def _shard_issues(cfg: TrialConfig, path: str) -> list[Issue]:
    data_path = join(path, "data.path")
    defects = folder_defects(cfg.data.meta_path.parent)
    if defects:
        return [Issue(data_path, defect) for defect in defects]
    vocab, why = shard_vocab(cfg.data)
    if why:
        return [Issue(data_path, why)]
    if cfg.model.vocab_size < vocab:
        return [
            Issue(
                join(path, "model.vocab_size"),
                f"given {cfg.model.vocab_size}; the data needs at least {vocab} ({cfg.data.meta_path})",
            )
        ]
    return []


def _fused_loss_issues(cfg: TrialConfig, path: str) -> list[Issue]:
    """`train.loss: fused` needs CUDA and liger-kernel on the machine that loads the config."""
    if cfg.train.loss != "fused":
        return []
    import torch  # only for the fused loss: the launcher's preflight otherwise runs without torch

    from trainers.loss import FUSED_PACKAGE, fused_available  # (imports torch)

    if not torch.cuda.is_available():
        return [
            Issue(
                path,
                "given 'fused'; needs CUDA, which this machine lacks; allowed here: auto, plain, chunked",
            )
        ]
    if not fused_available():
        return [
            Issue(
                path,
                f"given 'fused'; needs the package {FUSED_PACKAGE} (pip install -e '.[fused-loss]'); "
                "allowed without it: auto, plain, chunked",
            )
        ]
    return []
