"""`python -m trainers.convert official DIR|STATE_DICT --family F --out CKPT`: a model of the
official SATFormer code (any of its six families) as a trial checkpoint of this project.

    official DIR          a folder with config.json and model.safetensors or pytorch_model.bin
                          (the official train.py's final model or checkpoint folder)
    official STATE_DICT   a .safetensors, .bin or .pt state dict; config.json beside it or --config
    satsweep DIR          a folder written by `python -m trainers.export` (back into a checkpoint)

The checkpoint works wherever a trial's does (python -m evals, python -m gates, trainers.export).
`--trial FILE` (YAML) gives the rest of the trial (its `data` section decides the tokenizer evals
and gates use); by default byte-level text. What arch cannot express is refused, naming the key,
with exit status 2 before anything is written (trainers/interop/official.py, docs/interop.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from arch import build_model
from arch.configtree import ConfigError, load_yaml
from trainers.interop.checkpoints import trial_for, write_checkpoint
from trainers.interop.export import WEIGHTS, import_state
from trainers.interop.official import FAMILIES, Refused, arch_state, model_config

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m trainers.convert", description=__doc__.split("\n\n")[0])
    p.add_argument("source_kind", choices=("official", "satsweep"), help="whose format SOURCE is in")
    p.add_argument("source", metavar="DIR|STATE_DICT")
    p.add_argument("--family", choices=FAMILIES, help="the official model family (official only)")
    p.add_argument("--config", default=None, help="the official config.json (default: beside the weights)")
    p.add_argument("--trial", default=None, help="a trial YAML for everything but the model (data, train)")
    p.add_argument("--out", required=True, help="the checkpoint file to write")
    return p.parse_args(argv)


def read_tensors(path: Path) -> dict[str, torch.Tensor]:
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file  # the interop extra

        return load_file(str(path))
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise Refused(f"{path}: not a state dict (a mapping of names to tensors)")
    return state


def locate(source: Path, config: str | None) -> tuple[Path, Path]:
    """(weights file, config.json) of a folder or a state-dict file."""
    if source.is_dir():
        found = [source / name for name in WEIGHT_FILES if (source / name).is_file()]
        if not found:
            raise Refused(f"{source}: no {' or '.join(WEIGHT_FILES)} in this folder")
        weights = found[0]
    elif source.is_file():
        weights = source
    else:
        raise Refused(f"{source}: no such file or folder")
    cfg = Path(config) if config else weights.parent / "config.json"
    if not cfg.is_file():
        raise Refused(f"{cfg}: no config.json (give the official config with --config)")
    return weights, cfg


def convert_official(args) -> tuple[dict, dict, str]:
    if args.family is None:
        raise Refused("--family: required for official sources; allowed: " + ", ".join(FAMILIES))
    weights, cfg_path = locate(Path(args.source), args.config)
    official = json.loads(cfg_path.read_text())
    try:
        model_cfg = model_config(args.family, official)
    except Refused as err:
        raise Refused(f"{cfg_path}: {err}") from None
    model = build_model(model_cfg)
    try:
        state = arch_state(args.family, model, read_tensors(weights))
    except Refused as err:
        raise Refused(f"{weights}: {err}") from None
    return model_cfg, state, f"official {args.family} {weights.resolve()}"


def convert_satsweep(args) -> tuple[dict, dict, str]:
    folder = Path(args.source)
    if not (folder / "config.json").is_file() or not (folder / WEIGHTS).is_file():
        raise Refused(f"{folder}: not an export folder (config.json and {WEIGHTS})")
    model_cfg = json.loads((folder / "config.json").read_text()).get("arch")
    if model_cfg is None:
        raise Refused(f"{folder / 'config.json'}: arch: missing (not written by trainers.export)")
    tied = model_cfg.get("tie_embeddings", True)
    return model_cfg, import_state(read_tensors(folder / WEIGHTS), tied), f"satsweep {folder.resolve()}"


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        trial = load_yaml(Path(args.trial).read_text(), args.trial) if args.trial else None
        convert = convert_official if args.source_kind == "official" else convert_satsweep
        model_cfg, state, source = convert(args)
        cfg = trial_for(model_cfg, trial)
    except (Refused, ConfigError, OSError) as err:
        print(f"trainers.convert: {err}", file=sys.stderr)
        return 2
    out = write_checkpoint(cfg, state, Path(args.out), source)
    print(f"wrote {out} ({source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
