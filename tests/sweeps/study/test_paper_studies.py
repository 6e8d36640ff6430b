"""The paper's studies (studies/paper/) resolve to the official repository's numbers design by
design and scale by scale: tests/sweeps/paper_official.py holds them, each row naming its file
(configs/<design>/<scale>.json of SkyeGunasekaran/SATFormer) or saying it is extrapolated."""

import json
from pathlib import Path

import pytest

from sweeps.study import load_study
from tests.sweeps.paper_official import (
    DESIGNS,
    DEVIATIONS,
    EXTRAPOLATED,
    OFFICIAL,
    PRECISION,
    SCALES,
    SEQ_LEN,
    WORLD_SIZE,
)

PAPER = Path(__file__).resolve().parents[3] / "studies" / "paper"


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shards")  # what the load checks: meta.json and the shards' files
    (folder / "meta.json").write_text(json.dumps({"vocab_size": 32000, "dtype": "uint16"}))
    for split in ("train", "val"):
        (folder / f"{split}_000.bin").write_bytes(bytes(range(16)))  # 8 uint16 ids, all < 32000
    return str(folder)


@pytest.fixture(scope="module")
def runs(shards):
    """(official design, scale) -> the resolved TrialConfig of that run of studies/paper/<scale>.yaml."""
    out = {}
    for scale in SCALES:
        study = load_study(PAPER / f"{scale}.yaml", [f"trial.data.path={shards}"])
        assert study.n_runs() == len(DESIGNS) and study.repeats == 1  # one run per design and scale
        assert study.resources.workers == WORLD_SIZE
        by_label = {p["model.residual"]: study.trial_config(p) for p in study.planned_points()}
        for design, label in DESIGNS.items():
            out[design, scale] = by_label[label]
    return out


def test_the_table_covers_every_design_and_scale_once():
    assert set(OFFICIAL) | set(EXTRAPOLATED) == {(d, s) for d in DESIGNS for s in SCALES}
    assert not set(OFFICIAL) & set(EXTRAPOLATED)
    assert set(EXTRAPOLATED) == {(d, "xl") for d in ("denseformer", "muddformer", "hyperconnections")}


@pytest.mark.parametrize("design", sorted(DESIGNS))
@pytest.mark.parametrize("scale", SCALES)
def test_paper_run_has_the_official_numbers(runs, design, scale):
    row = OFFICIAL.get((design, scale)) or EXTRAPOLATED[design, scale]
    row_heads = DEVIATIONS.get((design, scale), {}).get("heads", row.heads)
    cfg = runs[design, scale]
    m, t = cfg.model, cfg.train
    assert (m.d_model, m.n_layers, m.n_heads, m.d_ff) == (
        row.hidden_size,
        row.layers,
        row_heads,
        row.intermediate_size,
    ), row.file
    assert m.n_kv_heads == (row.kv_heads or row_heads), row.file
    assert t.lr == row.lr and t.lr * t.min_lr_ratio == pytest.approx(row.min_lr), row.file
    assert t.tokens == row.max_tokens_b * 1e9, row.file
    assert t.warmup_frac == pytest.approx(row.warmup_tokens_b / row.max_tokens_b), row.file
    # the global batch: the file's per-process batch on each of the 8 processes of torchrun
    assert (t.batch_size, t.grad_accum, t.workers) == (
        row.batch_per_process * WORLD_SIZE,
        row.grad_accum,
        WORLD_SIZE,
    ), row.file
    assert cfg.tokens_per_step == row.batch_per_process * row.grad_accum * WORLD_SIZE * SEQ_LEN
    assert t.precision == PRECISION


@pytest.mark.parametrize("scale", SCALES)
def test_what_every_official_file_shares(runs, scale):
    for design in DESIGNS:
        cfg = runs[design, scale]
        t, m = cfg.train, cfg.model
        assert (t.schedule, t.weight_decay, t.no_decay, t.beta1, t.beta2, t.grad_clip) == (
            "cosine",
            0.1,
            [],
            0.9,
            0.95,
            1.0,
        )
        assert (t.eval_every, t.eval_batches, cfg.seed) == (500, 100, 42)
        assert (m.vocab_size, m.qk_norm, m.max_seq_len, m.rope_base, m.norm_eps) == (
            32000,
            True,
            4096,
            10000.0,
            1e-6,
        )
        assert (m.init, m.init_std, m.tie_embeddings, cfg.data.seq_len) == ("normal", 0.02, True, SEQ_LEN)
        assert cfg.data.order == "chunks"  # train.py's ShardedTokenDataset: shuffled non-overlapping chunks


def test_each_design_is_its_official_form(runs):
    for scale in SCALES:
        resformer = runs["resformer", scale].model.residual
        satformer = runs["satformer", scale].model.residual
        mudd = runs["muddformer", scale].model.residual
        hc = runs["hyperconnections", scale].model.residual
        dense = runs["denseformer", scale].model.residual
        assert runs["transformer", scale].model.residual.kind == "none"
        assert (resformer.mode, resformer.granularity, resformer.coefficient) == (
            "static",
            "layer",
            "softmax",
        )
        assert (satformer.mode, satformer.granularity, satformer.activation) == (
            "gated",
            "token_head",
            "relu",
        )
        assert (dense.dilation, dense.period) == (1, 1)  # dwa_dilation, dwa_period
        assert (mudd.streams, mudd.sepln, mudd.param_realloc, mudd.pre_post_da_norm) == (
            "qkvr",
            True,
            True,
            True,
        )
        assert (hc.expansion_rate, hc.mode, hc.use_tanh, hc.norm) == (4, "dynamic", True, "rms")
        # models/hyperconnections at HEAD: o_proj, down_proj / sqrt(n); nn.RMSNorm(eps=None)
        assert (hc.out_proj_scale, hc.norm_eps) == ("inv_sqrt_n", "torch_default")


def test_extrapolated_runs_are_marked_in_the_study_file(shards):
    study = load_study(PAPER / "xl.yaml", [f"trial.data.path={shards}"])
    marked = study.description.split("extrapolated")[0]
    assert "EXTRAPOLATION" in (PAPER / "xl.yaml").read_text()
    assert all(DESIGNS[design] in marked for design, _ in EXTRAPOLATED)


def test_paper_study_without_shards_is_refused_naming_the_data_path():
    from arch.configtree import ConfigError
    from sweeps.run import launch

    with pytest.raises(ConfigError, match=r"trial\.data\.path: given ''; no meta\.json there"):
        launch.load(PAPER / "small.yaml")  # the launch's preflight: parsing reads no files
