"""The paper's studies (studies/paper/) resolve to the official repository's recipe, number by
number (configs/<design>/<scale>.json and train.py of SkyeGunasekaran/SATFormer)."""

import json
from pathlib import Path

import pytest

from sweeps.spec import load_study

PAPER = Path(__file__).resolve().parents[2] / "studies" / "paper"
# scale: (learning_rate, max_tokens, batch_size, gradient_accumulation_steps, d_model, layers, FFN)
OFFICIAL = {
    "small": (2.0e-3, 5e9, 64, 1, 768, 11, 3072),
    "medium": (1.5e-3, 10e9, 32, 2, 1024, 18, 4096),
    "large": (1.0e-3, 20e9, 16, 4, 1536, 19, 6144),
    "xl": (8.0e-4, 30e9, 8, 8, 2048, 24, 5504),
}


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shards")  # what the load checks: the vocabulary in meta.json
    (folder / "meta.json").write_text(json.dumps({"vocab_size": 32000}))
    return str(folder)


@pytest.mark.parametrize("scale", sorted(OFFICIAL))
def test_paper_study_resolves_to_the_official_recipe(scale, shards):
    study = load_study(PAPER / f"{scale}.yaml", [f"trial.data.path={shards}"])
    lr, tokens, batch, accum, d_model, layers, d_ff = OFFICIAL[scale]
    base = study.base
    t, m = base.train, base.model
    assert (t.lr, t.tokens, t.batch_size, t.grad_accum) == (lr, tokens, batch, accum)
    assert base.tokens_per_step == 64 * 4096  # 64 sequences of 4096 a step on one GPU
    assert (t.schedule, t.warmup_frac, t.min_lr_ratio) == ("cosine", 0.01, 0.1)
    assert (t.weight_decay, t.no_decay, t.beta1, t.beta2, t.grad_clip) == (0.1, [], 0.9, 0.95, 1.0)
    assert (m.d_model, m.n_layers, m.d_ff, m.vocab_size) == (d_model, layers, d_ff, 32000)
    assert (m.qk_norm, m.max_seq_len, m.init, m.init_std, base.data.seq_len) == (
        True,
        4096,
        "normal",
        0.02,
        4096,
    )
    assert base.seed == 42 and study.n_runs() == 6
    designs = {p["model.residual"]: study.trial_config(p).model.residual for p in study.planned_points()}
    assert designs["resformer"].coefficient == "softmax"
    assert designs["muddformer"].param_realloc and designs["muddformer"].pre_post_da_norm
    assert designs["satformer"].activation == "relu" and designs["satformer"].granularity == "token_head"


def test_paper_study_without_shards_is_refused_naming_the_data_path():
    from arch.configtree import ConfigError

    with pytest.raises(ConfigError, match=r"trial\.data\.path: given ''; no meta\.json there"):
        load_study(PAPER / "small.yaml")
