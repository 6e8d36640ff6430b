"""`python -m trainers.train <trial.yaml> [--set key.path=value ...] [--tracking-uri URI]
[--experiment NAME] [--no-mlflow]`: one training run, logged to MLflow, final metrics printed.

The config is validated before anything runs: on a ConfigError it is printed and the exit
status is 2. MLflow: Lightning's MLFlowLogger on a local SQLite file by default; params are the
flattened resolved config (key paths), and the resolved config is an artifact (trial.yaml).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import yaml

from arch.configtree import ConfigError, Issue, load_yaml, parse_override, set_path
from trainers import preflight
from trainers.config import TrialConfig
from trainers.errors import TrainingDiverged
from trainers.mlflow_names import DEFAULT_TRACKING_URI, EXPERIMENT_TAGS


def flatten(tree, prefix: str = "") -> dict[str, str]:
    """{"model.residual.kind": "value_residual", ...}: MLflow params named by config key paths."""
    out: dict[str, str] = {}
    for key, value in tree.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            out.update(flatten(value, path))
        else:
            out[path] = json.dumps(value) if isinstance(value, list) else str(value)
    return out


def load_config(path: str, overrides: list[str]) -> TrialConfig:
    """YAML file + `key.path=value` overrides -> validated TrialConfig (raises ConfigError)."""
    try:
        tree = load_yaml(Path(path).read_text(), path)
    except OSError as err:
        raise ConfigError([Issue("", f"cannot read {path!r}: {err.strerror}")], source=path) from None
    except yaml.YAMLError as err:
        raise ConfigError([Issue("", f"not valid YAML: {err}")], source=path) from None
    if tree is None:
        tree = {}
    for text in overrides:
        key, value = parse_override(text)
        set_path(tree, key, value)
    return preflight.load(tree, source=path)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m trainers.train", description=__doc__.split("\n\n")[0])
    p.add_argument("config", help="trial YAML file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    p.add_argument("--tracking-uri", default=DEFAULT_TRACKING_URI)
    p.add_argument("--experiment", default="trainers")
    p.add_argument("--run-name", default=None)
    p.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")
    p.add_argument("--data-root", default=None, help="data cache root (default $SATSWEEP_DATA)")
    p.add_argument("--checkpoint", default=None, help="save the final checkpoint here")
    p.add_argument(
        "--checkpoint-dir",
        default=None,
        help="the run's resumable checkpoints (train.checkpoint_every); resumes from the newest valid one",
    )
    p.add_argument("--progress", action="store_true", help="show Lightning's progress bar")
    return p


def _mlflow_logger(args, cfg: TrialConfig):
    from lightning.pytorch.loggers import MLFlowLogger

    logger = MLFlowLogger(
        experiment_name=args.experiment,
        tracking_uri=args.tracking_uri,
        run_name=args.run_name or Path(args.config).stem,
    )
    for key, value in EXPERIMENT_TAGS.items():  # the UI's model-training view, not GenAI traces
        logger.experiment.set_experiment_tag(logger.experiment_id, key, value)
    logger.log_hyperparams(flatten(cfg.to_dict()))
    with tempfile.TemporaryDirectory() as tmp:
        resolved = Path(tmp) / "trial.yaml"
        resolved.write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
        logger.experiment.log_artifact(logger.run_id, str(resolved))
    return logger


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        cfg = load_config(args.config, args.overrides)
    except ConfigError as err:
        print(f"config error:\n{err}", file=sys.stderr)
        return 2

    if cfg.train.checkpoint_every is not None and args.checkpoint_dir is None:
        print(
            f"config error:\n{args.config}: train.checkpoint_every: given {cfg.train.checkpoint_every}; "
            "needs --checkpoint-dir DIR (the folder of the run's resumable checkpoints)",
            file=sys.stderr,
        )
        return 2

    # torch and Lightning (~10 s of imports on 2 cores) only once the config is valid: bad input
    # fails in a second, before any work starts
    from trainers.fit import fit

    loggers = [] if args.no_mlflow else [_mlflow_logger(args, cfg)]
    try:
        metrics = fit(
            cfg,
            loggers=loggers,
            data_root=args.data_root,
            checkpoint_path=args.checkpoint,
            checkpoint_dir=args.checkpoint_dir,
        )
    except TrainingDiverged as err:
        print(f"diverged: {err}", file=sys.stderr)
        return 3
    width = max(map(len, metrics))
    for key in sorted(metrics):
        print(f"{key:<{width}}  {metrics[key]:.6g}")
    if loggers:
        print(f"mlflow run {loggers[0].run_id} in {args.tracking_uri} (experiment {args.experiment!r})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
