"""Named task suites and whether their data can be read here.

Suites (lm-eval 0.4.13 task names):
- `zero_shot`: the commonsense and language-modelling suite of the papers' tables (LAMBADA,
  PIQA, HellaSwag, WinoGrande, ARC easy and challenge), scored zero-shot by loglikelihood.
- `retrieval`: the in-context recall suite (SWDE, FDA, SQuAD completion, TriviaQA, NQ, DROP),
  scored by generation.

Offline (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE set, or the hub unreachable) a hub dataset must
already be in the local `datasets` cache; `missing_datasets` names every task whose data is not,
and how to provide it, before anything runs.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

SUITES = {
    "zero_shot": ["lambada_openai", "piqa", "hellaswag", "winogrande", "arc_easy", "arc_challenge"],
    "retrieval": ["swde", "fda", "squad_completion", "triviaqa", "nq_open", "drop"],
}
OFFLINE_FLAGS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
LOCAL_BUILDERS = {"json", "csv", "parquet", "text", "arrow", "pandas"}  # read data_files, no hub


def expand(names: list[str]) -> list[str]:
    """Task names with each suite name replaced by its tasks (order kept, duplicates dropped)."""
    out: list[str] = []
    for name in names:
        for task in SUITES.get(name, [name]):
            if task not in out:
                out.append(task)
    return out


# The flags as the user set them, read when this module is first imported: trainers.data.tokenizer
# sets HF_HUB_OFFLINE=1 by default when imported (its tokenizers never need the hub), which must
# not keep lm-eval's `datasets` from downloading a task's data when the hub can be reached.
USER_FLAGS = {f: os.environ.get(f) for f in OFFLINE_FLAGS}


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def ensure_offline_mode(host: str = "huggingface.co", timeout_s: float = 3.0) -> bool:
    """True when offline: the user set a flag, or the hub does not answer within `timeout_s`. Sets
    both flags to say so ("1" offline, "0" online), so that nothing waits on the network and
    nothing else's default decides. Call before importing `datasets`, which reads them once."""
    offline = any(_flag(v) for v in USER_FLAGS.values())
    if not offline:
        try:
            socket.create_connection((host, 443), timeout=timeout_s).close()
        except OSError:
            offline = True
    for f in OFFLINE_FLAGS:
        os.environ[f] = "1" if offline else "0"
    return offline


def task_dataset(task_manager, task: str) -> tuple[str | None, str | None, dict]:
    """(dataset_path, dataset_name, dataset_kwargs) a task reads, from its YAML or its class."""
    from lm_eval.tasks._yaml_loader import load_yaml

    entry = task_manager.task_index.get(task)
    if entry is None or entry.yaml_path is None:
        return None, None, {}
    cfg = load_yaml(entry.yaml_path, resolve_func=True)
    cls = cfg.get("class")
    path = cfg.get("dataset_path", getattr(cls, "DATASET_PATH", None))
    name = cfg.get("dataset_name", getattr(cls, "DATASET_NAME", None))
    return path, name, dict(cfg.get("dataset_kwargs") or {})


def _files(data_files) -> list[str]:
    if isinstance(data_files, str):
        return [data_files]
    if isinstance(data_files, dict):
        return [f for v in data_files.values() for f in _files(v)]
    return [f for v in data_files or [] for f in _files(v)]


def _readable(path: str | None, name: str | None, kwargs: dict) -> str | None:
    """None when the dataset can be read offline; else why not."""
    if path is None:
        return None  # a task that builds its own documents
    if path in LOCAL_BUILDERS:
        absent = [f for f in _files(kwargs.get("data_files")) if not Path(f).exists()]
        return f"its files {absent} do not exist" if absent else None
    if Path(path).is_dir():
        return None
    import datasets

    try:
        datasets.load_dataset_builder(path, name, **kwargs)
    except Exception as err:  # offline and not cached: datasets raises several kinds
        return f"not in the local datasets cache ({type(err).__name__})"
    return None


def missing_datasets(task_manager, tasks: list[str]) -> list[str]:
    """One line per task whose dataset cannot be read offline, with how to provide it."""
    import datasets

    problems = []
    for task in tasks:
        path, name, kwargs = task_dataset(task_manager, task)
        why = _readable(path, name, kwargs)
        if why is None:
            continue
        call = f"datasets.load_dataset({path!r}" + (f", {name!r}" if name else "") + ")"
        problems.append(
            f"task {task}: dataset {path}" + (f" ({name})" if name else "") + f" is offline and {why}. "
            f'Provide it: on a machine with internet run `python -c "import datasets; {call}"` and copy '
            f"its cache ({datasets.config.HF_DATASETS_CACHE}) to the same place here (or point "
            "HF_DATASETS_CACHE at the copy); or write the data as JSONL with a task YAML "
            "(dataset_path: json, dataset_kwargs: {data_files: ...}) in a folder passed as --include-path."
        )
    return problems
