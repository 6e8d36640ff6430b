"""Models out and back in, bit for bit, one family at a time: an arch model written in the
official code's format (official_state, config.json) and converted back by `python -m
trainers.convert official`; and exported by `python -m trainers.export` and read back by
`python -m trainers.convert satsweep`. Then a converted checkpoint where a trial's goes:
python -m gates, python -m evals and the export."""

import json

import pytest
import torch
import yaml

pytest.importorskip("safetensors", reason="the interop extra (pip install -e '.[interop]')")

from safetensors.torch import save_file  # noqa: E402

from arch import build_model  # noqa: E402
from tests.factories import text_data  # noqa: E402
from trainers.convert import main as convert  # noqa: E402
from trainers.export import main as export  # noqa: E402
from trainers.interop.checkpoints import trial_for, write_checkpoint  # noqa: E402
from trainers.interop.official import (  # noqa: E402
    FAMILIES,
    model_config,
    official_config,
    official_state,
)
from trainers.trained import load_checkpoint  # noqa: E402

SMALL = {"vocab_size": 256, "hidden_size": 32, "num_hidden_layers": 4, "num_heads": 4, "num_kv_heads": 2,
         "intermediate_size": 64, "max_position_embeddings": 32, "qk_norm": True,
         "tie_word_embeddings": True}  # fmt: skip
EXTRA = {
    "satformer": {"value_residual_gate": "sigmoid", "value_residual_proj_bias": True},
    "resformer": {"value_residual_last_k": 2},
    "transformer": {"tie_word_embeddings": False},
    "denseformer": {"dwa_dilation": 2, "dwa_period": 2},
    "muddformer": {"use_pre_post_da_norm": True},
    "hyperconnections": {"expansion_rate": 2, "hc_norm_type": "layer"},
}


def perturbed(family: str):
    """An arch model of the family's official form, every weight moved off its init."""
    model = build_model(model_config(family, {**SMALL, **EXTRA[family]}))
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    return model


def write_official(family: str, model, folder):
    """The model as the official train.py's final folder: config.json and model.safetensors."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(official_config(family, model.cfg)))
    tensors = {k: v.clone() for k, v in official_state(family, model).items()}  # no shared storage
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


def assert_same_weights(model, checkpoint):
    _, back = load_checkpoint(checkpoint)
    mine, theirs = model.state_dict(), back.state_dict()
    assert mine.keys() == theirs.keys()
    for name, tensor in mine.items():
        assert torch.equal(tensor, theirs[name]), name


@pytest.mark.parametrize("family", FAMILIES)
def test_official_format_and_back_is_bit_for_bit(family, tmp_path):
    model = perturbed(family)
    folder = write_official(family, model, tmp_path / "official")
    out = tmp_path / "back.ckpt"
    assert convert(["official", str(folder), "--family", family, "--out", str(out)]) == 0
    assert_same_weights(model, out)


@pytest.mark.parametrize("family", FAMILIES)
def test_export_and_import_is_bit_for_bit(family, tmp_path):
    model = perturbed(family)
    ckpt = write_checkpoint(trial_for(model.cfg.to_dict()), model.state_dict(), tmp_path / "t.ckpt", "test")
    assert export([str(ckpt), "--out", str(tmp_path / "hf")]) == 0
    assert convert(["satsweep", str(tmp_path / "hf"), "--out", str(tmp_path / "back.ckpt")]) == 0
    assert_same_weights(model, tmp_path / "back.ckpt")


def test_refuses_what_arch_cannot_express_naming_the_key(tmp_path, capsys):
    model = perturbed("muddformer")
    folder = write_official("muddformer", model, tmp_path / "official")
    config = json.loads((folder / "config.json").read_text())
    for key, value in (("num_ways", 1), ("window_size", 512), ("qkv_bias", True), ("moe_experts", 8)):
        (folder / "config.json").write_text(json.dumps({**config, key: value}))
        args = ["official", str(folder), "--family", "muddformer", "--out", str(tmp_path / "x.ckpt")]
        assert convert(args) == 2
        assert f"config.json: {key}: " in capsys.readouterr().err
    (folder / "config.json").write_text(json.dumps(config))
    tensors = {k: v.clone() for k, v in official_state("muddformer", model).items()}
    save_file(
        {**tensors, "model.layers.0.attn.q_proj.bias": torch.zeros(32)}, str(folder / "model.safetensors")
    )
    assert (
        convert(["official", str(folder), "--family", "muddformer", "--out", str(tmp_path / "x.ckpt")]) == 2
    )
    assert (
        "model.layers.0.attn.q_proj.bias: an official tensor arch has no place for" in capsys.readouterr().err
    )
    assert not (tmp_path / "x.ckpt").exists()


def test_a_converted_checkpoint_works_with_gates_evals_and_the_export(tmp_path):
    pytest.importorskip("lm_eval", reason="the evals extra (pip install -e '.[evals]')")
    from evals.cli import main as evals
    from gates.cli import main as gates
    from tests.evals.toy import write_tasks

    folder = write_official("satformer", perturbed("satformer"), tmp_path / "official")
    trial = tmp_path / "trial.yaml"
    trial.write_text(yaml.safe_dump({"data": text_data(corpus="shakespeare", max_bytes=100_000)}))
    ckpt = tmp_path / "converted.ckpt"
    assert (
        convert(["official", str(folder), "--family", "satformer", "--trial", str(trial), "--out", str(ckpt)])
        == 0
    )
    out = tmp_path / "analysis"
    assert gates([str(ckpt), "--out", str(out), "--tokens", "2048", "--device", "cpu"]) == 0
    assert set(json.loads((out / "summary.json").read_text())["gate_stats"]) == {"L2", "L3", "L4"}
    (tmp_path / "tasks").mkdir()
    tasks = write_tasks(tmp_path / "tasks")
    argv = [
        str(ckpt),
        "--tasks",
        "toy_choice",
        "--include-path",
        str(tasks),
        "--json",
        str(tmp_path / "r.json"),
    ]
    assert evals(argv) == 0
    assert "acc,none" in json.loads((tmp_path / "r.json").read_text())["results"]["toy_choice"]
    assert export([str(ckpt), "--out", str(tmp_path / "hf")]) == 0
    assert (tmp_path / "hf" / "tokenizer.json").is_file()
