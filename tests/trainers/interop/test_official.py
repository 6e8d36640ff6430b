"""The official SATFormer code's models, converted, give the official classes' logits.

The official modeling files (github.com/SkyeGunasekaran/SATFormer; CC BY 4.0 by its README, and
no licence file in the repository) are not copied here: SATFORMER_OFFICIAL names a checkout (or
`git archive` of it), and these tests skip without one. They run on CPU through plain-torch
stand-ins for fla's fused kernels and flash-attn (official_shim/, tests only). Each family: the
official model at a small config with random weights moved off their init, saved as its train.py
saves a final model (save_pretrained: config.json, model.safetensors), converted by
`python -m trainers.convert official`, loaded as a trial checkpoint; then the logits compared."""

import importlib
import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers", reason="the interop extra (pip install -e '.[interop]')")
pytest.importorskip("safetensors", reason="the interop extra (pip install -e '.[interop]')")

from trainers.convert import main as convert  # noqa: E402
from trainers.trained import load_checkpoint  # noqa: E402

OFFICIAL = os.environ.get("SATFORMER_OFFICIAL")
SHIM = Path(__file__).parent / "official_shim"
pytestmark = pytest.mark.skipif(
    not OFFICIAL or not (Path(OFFICIAL) / "models").is_dir(),
    reason="SATFORMER_OFFICIAL is not a checkout of github.com/SkyeGunasekaran/SATFormer (not vendored: "
    "its licence, CC BY 4.0 in its README, has no file in the repository)",
)

SMALL = {"vocab_size": 256, "hidden_size": 64, "num_hidden_layers": 4, "num_heads": 4, "num_kv_heads": 2,
         "intermediate_size": 96, "max_position_embeddings": 64, "qk_norm": True, "norm_eps": 1e-6,
         "tie_word_embeddings": False, "use_cache": False}  # fmt: skip
# family -> (module, config class, model class, what the family adds to SMALL)
FAMILIES = {
    "transformer": ("transformer", "TransformerConfig", "TransformerForCausalLM", {}),
    "satformer": ("satformer", "SATFormerConfig", "SATFormerForCausalLM",
                  {"value_residual_gate": "softmax_sigmoid", "value_residual_proj_bias": True}),
    "resformer": ("resformer", "ResFormerConfig", "ResFormerForCausalLM", {"value_residual_last_k": 2}),
    "denseformer": ("denseformer", "DenseFormerConfig", "DenseFormerForCausalLM",
                    {"dwa_dilation": 2, "dwa_period": 1}),
    "muddformer": ("muddformer", "MUDDFormerConfig", "MUDDFormerForCausalLM", {}),
    "hyperconnections": ("hyperconnections", "HyperConnectionsConfig", "HyperConnectionsForCausalLM",
                         {"expansion_rate": 2, "hc_norm_type": "layer", "tie_word_embeddings": True}),
}  # fmt: skip


@pytest.fixture(scope="module")
def official():
    """Imports the official packages with the shim on the path; undoes both afterwards."""
    paths = [str(SHIM), OFFICIAL]
    if importlib.util.find_spec("einops") is None:
        paths.append(str(SHIM / "einops_fallback"))
    before = set(sys.modules)
    sys.path[:0] = paths
    # The official resformer model imports models.resformer.attn; the file is attn_resformer.py.
    attn = importlib.import_module("models.resformer.attn_resformer")
    sys.modules["models.resformer.attn"] = attn
    try:
        yield lambda name: importlib.import_module(name)
    finally:
        del sys.path[: len(paths)]
        for name in set(sys.modules) - before:
            del sys.modules[name]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_converted_logits_equal_the_official_models(official, family, tmp_path):
    package, config_cls, model_cls, extra = FAMILIES[family]
    config = getattr(official(f"models.{package}.configuration_{package}"), config_cls)(**{**SMALL, **extra})
    torch.manual_seed(0)
    cls = getattr(official(f"models.{package}.modeling_{package}"), model_cls)
    # transformers 5 reads _tied_weights_keys as {target: source}; the official code (4.x) lists targets
    cls._tied_weights_keys = {"lm_head.weight": "model.embeddings.weight"}
    model = cls(config).eval()
    with torch.no_grad():  # off the init: gates, dense weights and streams all matter
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(tmp_path / "official", safe_serialization=True)
    out = tmp_path / "converted.ckpt"
    assert convert(["official", str(tmp_path / "official"), "--family", family, "--out", str(out)]) == 0
    _, converted = load_checkpoint(out)
    x = torch.randint(0, SMALL["vocab_size"], (2, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(input_ids=x, use_cache=False).logits
        got = converted(x)
        torch.testing.assert_close(got, expected, rtol=0, atol=2e-5)
