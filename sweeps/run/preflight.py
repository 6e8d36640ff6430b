"""The launch's preflight: what a parsed study needs from this machine, its files and its
environment, checked once right after parsing (which reads none of them, so a study file parses to
the same study anywhere) and before anything is created. Every problem comes back as an Issue with
its key path, as parsing's do; `sweeps.run.launch.load` raises them together (exit 2).

- the backend's resources and the cluster (`sweeps.run.backends.study_issues`);
- each trial's machine and data files (`trainers.preflight`: the fused loss's CUDA and
  liger-kernel, token shards), for the base trial and every point the study's checks parse;
- records in reserved symbols on a byte-level corpus that leaves too few byte values free (the
  corpus read here);
- the folders of SQLite files and MLflow's file store (allowed by the environment only);
- lm-eval installed, the task folder there, and what lm-eval refuses (`sweeps.run.eval_checks`).

The memory plan, which measures the GPU, is a later step of the launch (`sweeps.run.memory`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from arch.configtree import Issue
from sweeps.run import backends
from sweeps.run.eval_checks import eval_issues
from sweeps.study.checks import at_point, checked_points
from sweeps.study.downstream import file_store
from trainers import preflight as trial_preflight
from trainers.data.corpora import CorpusUnavailable, load_corpus


def preflight(study) -> list[Issue]:
    """Every problem of `study` here ([]: none)."""
    return (
        backends.study_issues(study)
        + _trials(study)
        + _reserved_symbols(study)
        + _tracking(study)
        + eval_issues(study)
    )


def _trials(study) -> list[Issue]:
    """The base trial's issues (`trial.<path>`); when it has none, each point's, named at the
    parameter that set the key, each problem once."""
    issues = trial_preflight.issues(study.base, "trial")
    if issues:
        return issues
    seen: set[tuple[str, str]] = set()
    for point in checked_points(study):
        for issue in trial_preflight.issues(study.trial_config(point)):
            if (issue.path, issue.problem) not in seen:
                seen.add((issue.path, issue.problem))
                issues.append(at_point(study.search_space, point, issue))
    return issues


def _reserved_symbols(study) -> list[Issue]:
    """`data.records.symbols: reserved` on a byte-level text that uses too many of the 256 byte
    values (read from the corpus here; a BPE text is checked when its trial tokenizes it)."""
    configs = [study.trial_config(p) for p in checked_points(study)]
    data = [c.data for c in configs if c.data.kind == "text" and c.data.tokenizer == "byte"]
    texts = {
        (d.corpus, d.path, d.max_bytes)
        for d in data
        if d.records.fraction and d.records.symbols == "reserved"
    }
    issues = []
    if texts:
        # imports torch: a launch without reserved records starts without it
        from trainers.data.records import reserved
    for corpus, path, max_bytes in sorted(texts, key=str):
        try:
            reserved([np.frombuffer(load_corpus(corpus, path, max_bytes), dtype=np.uint8)], 256)
        except (CorpusUnavailable, OSError):
            continue  # the corpus's own check names it
        except ValueError as err:
            why = f"{err}; allowed: text, or a corpus that leaves byte values unused"
            issues.append(
                Issue("trial.data.records.symbols", f"given 'reserved' for corpus {corpus!r}; {why}")
            )
    return issues


def _tracking(study) -> list[Issue]:
    uri, issues = study.output.mlflow_uri, []
    if file_store(uri) and not os.environ.get("MLFLOW_ALLOW_FILE_STORE"):
        issues.append(
            Issue("output.mlflow_uri", f"given {uri!r}; allowed: sqlite:///FILE, http(s)://SERVER or a "
                  "database URL (MLflow 3 refuses plain file stores unless MLFLOW_ALLOW_FILE_STORE=true)")
        )  # fmt: skip
    issues += _sqlite_folder_issue("output.mlflow_uri", uri)
    if study.output.storage is not None:
        issues += _sqlite_folder_issue("output.storage", study.output.storage)
    return issues


def _sqlite_folder_issue(key: str, url: str) -> list[Issue]:
    """An SQLite file whose folder does not exist cannot be opened (SQLAlchemy: "unable to open")."""
    if not url.startswith("sqlite:///") or url == "sqlite:///:memory:":
        return []
    folder = Path(url[len("sqlite:///") :]).absolute().parent
    if folder.is_dir():
        return []
    return [Issue(key, f"given {url!r}; the folder {str(folder)!r} does not exist (create it first)")]
