"""A trained model as a Hugging Face transformers folder.

    DIR/config.json               model_type satsweep, auto_map, the arch config under `arch`
    DIR/configuration_satsweep.py, modeling_satsweep.py   (trainers/interop/remote)
    DIR/arch*.py                  arch itself (trainers.interop.vendor)
    DIR/model.safetensors         arch's state dict under `model.` (the tied head left out)
    DIR/generation_config.json
    DIR/tokenizer.json, tokenizer_config.json   where the trial has a text tokenizer

`AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)` loads it without this project.
"""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path

import torch

from trainers.interop.tokenizer_files import write_tokenizer
from trainers.interop.vendor import write_vendored

MODEL_TYPE = "satsweep"
PREFIX = "model."  # SatsweepForCausalLM.model is the arch Transformer
REMOTE_FILES = ("configuration_satsweep.py", "modeling_satsweep.py")
AUTO_MAP = {
    "AutoConfig": "configuration_satsweep.SatsweepConfig",
    "AutoModelForCausalLM": "modeling_satsweep.SatsweepForCausalLM",
}
WEIGHTS = "model.safetensors"


def arch_config(model_cfg) -> dict:
    """The model config as plain data, its preset expanded (every key is written out; the
    vendored arch has no presets file)."""
    data = model_cfg.to_dict()
    data["preset"] = None
    return data


def export_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """arch's state dict under `model.`, the tied head left out (it is the embedding; safetensors
    refuses shared tensors, and transformers ties them again on load)."""
    state = model.state_dict()
    if model.cfg.tie_embeddings:
        state.pop("head.weight")
    return {PREFIX + k: v.detach().contiguous() for k, v in state.items()}


def import_state(tensors: dict[str, torch.Tensor], tie_embeddings: bool) -> dict[str, torch.Tensor]:
    """The inverse of `export_state`: arch's state dict (the tied head is the embedding)."""
    state = {k.removeprefix(PREFIX): v for k, v in tensors.items()}
    if tie_embeddings:
        state["head.weight"] = state["embed.weight"]
    return state


def write_export(model: torch.nn.Module, out: Path, tokenizer: tuple | None = None,
                 source: str = "") -> Path:  # fmt: skip
    """Writes the folder for an arch `model`; `tokenizer`: the trial's (tokenizer.json text, its
    `ContextStart` or None), None: no tokenizer."""
    from safetensors.torch import save_file  # the interop extra: only exports need it

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = model.cfg
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    config = {
        "model_type": MODEL_TYPE,
        "architectures": ["SatsweepForCausalLM"],
        "auto_map": AUTO_MAP,
        "arch": arch_config(cfg),
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": cfg.n_kv_heads,
        "intermediate_size": cfg.d_ff,
        "max_position_embeddings": cfg.max_seq_len,
        "tie_word_embeddings": cfg.tie_embeddings,
        "dtype": dtype,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    generation = {"do_sample": False}
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    remote = resources.files("trainers.interop.remote")
    for name in REMOTE_FILES:
        shutil.copyfile(str(remote.joinpath(name)), out / name)
    write_vendored(out)
    save_file(export_state(model), str(out / WEIGHTS), metadata={"format": "pt", "source": source})
    if tokenizer is not None:
        write_tokenizer(out, *tokenizer, max_length=cfg.max_seq_len)
    return out
