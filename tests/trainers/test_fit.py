"""`trainers.fit`: determinism, divergence, metrics (real memory and throughput), gates, data kinds."""

from __future__ import annotations

import math

import lightning.pytorch as pl
import pytest
import torch

from tests.trainers.conftest import GATED, STATIC_LEARNED, LossHistory
from trainers import METRICS, TrainingDiverged, TrialConfig
from trainers.fit import fit
from trainers.flops import flops_per_token


def _run(tree, **kw):
    history = LossHistory()
    metrics = fit(TrialConfig.from_dict(tree), callbacks=[history], **kw)
    return metrics, history.losses


def test_same_seed_gives_bit_identical_loss_curves(tiny_tree):
    tree = tiny_tree(model={"residual": GATED})
    m1, a = _run(tree)
    m2, b = _run(tree)
    assert len(a) == 20 and a == b  # exact float equality, every step
    assert m1["val_loss"] == m2["val_loss"]
    _, c = _run({**tree, "seed": 1})
    assert c != a


def test_metrics_are_all_there_and_real(tiny_tree):
    metrics, losses = _run(tiny_tree(model={"residual": GATED}))
    for name in METRICS:
        assert name in metrics and math.isfinite(metrics[name]), name
    assert metrics["tokens"] == 20 * 4 * 32 and metrics["steps"] == 20
    assert metrics["val_ppl"] == pytest.approx(math.exp(metrics["val_loss"]), rel=1e-5)
    assert metrics["train_tokens_per_s"] > 0 and metrics["rss_peak_mb"] > 50
    parts = ("mem_params_mb", "mem_grads_mb", "mem_optimizer_mb", "mem_activations_mb")
    assert metrics["peak_mem_mb"] >= sum(metrics[k] for k in parts) > 0
    assert metrics["params_design"] == 1 * 32 * 2  # one consumer x d_model x N_kv
    assert losses[-1] < losses[0]
    assert {"gate_mean/L1", "gate_zero_frac/L1"} <= metrics.keys()
    assert 0 <= metrics["gate_zero_frac/L1"] <= 1 and metrics["gate_mean/L1"] >= 0  # relu gates


def test_baseline_logs_no_gates_and_static_has_design_params(tiny_tree):
    base, _ = _run(tiny_tree())
    assert not any(k.startswith("gate_") for k in base) and base["params_design"] == 0
    static, _ = _run(tiny_tree(model={"residual": STATIC_LEARNED}))
    assert not any(k.startswith("gate_") for k in static) and static["params_design"] == 2


def test_flops_formula(tiny_tree):
    from arch import build_model

    cfg = TrialConfig.from_dict(tiny_tree())
    model = build_model(cfg.model)
    n = sum(p.numel() for p in model.parameters())
    assert flops_per_token(model, 32) == 6 * n + 6 * 2 * 32 * 32


def test_larger_batch_has_larger_measured_peak(tiny_tree):
    small, _ = _run(tiny_tree(train={"batch_size": 2, "tokens": 6 * 2 * 64}, data={"seq_len": 64}))
    big, _ = _run(tiny_tree(train={"batch_size": 256, "tokens": 6 * 256 * 64}, data={"seq_len": 64}))
    assert small["peak_mem_mb"] > 0 and small["train_tokens_per_s"] > 0
    assert big["peak_mem_mb"] > small["peak_mem_mb"] + 20
    assert big["mem_activations_mb"] > 100 * small["mem_activations_mb"]  # 128x the tokens per step
    assert big["mem_params_mb"] == small["mem_params_mb"]
    assert big["train_tokens_per_s"] > small["train_tokens_per_s"]  # batching amortises the per-step overhead


def test_nan_loss_raises_training_diverged(tiny_tree):
    tree = tiny_tree(train={"lr": 1e30, "grad_clip": None, "warmup_frac": 0.0})
    with pytest.raises(TrainingDiverged, match=r"training diverged at step \d+: loss is (nan|inf)") as info:
        fit(tree)
    assert info.value.step >= 1 and not math.isfinite(info.value.value)


def test_mqar_reports_accuracy(tiny_tree):
    tree = tiny_tree(
        data={
            "kind": "mqar",
            "seq_len": 32,
            "vocab": 64,
            "num_kv_pairs": 4,
            "train_examples": 200,
            "val_examples": 16,
        },
        model={"vocab_size": 64},
    )
    del tree["data"]["corpus"], tree["data"]["path"]
    metrics, _ = _run(tree)
    assert 0 <= metrics["mqar_acc"] <= 1 and math.isfinite(metrics["val_loss"])


def test_tokens_data_trains(corpus_dir, tmp_path, tiny_tree):
    from trainers.prepare import prepare

    prepare(str(corpus_dir), tmp_path / "shards", shard_tokens=30_000)
    tree = tiny_tree(data={"kind": "tokens", "path": str(tmp_path / "shards")})
    del tree["data"]["corpus"]
    metrics, losses = _run(tree)
    assert math.isfinite(metrics["val_loss"]) and losses[-1] < losses[0]


def test_grad_accum_counts_optimizer_steps(tiny_tree):
    metrics, losses = _run(tiny_tree(train={"grad_accum": 2, "tokens": 5 * 2 * 4 * 32, "eval_every": 2}))
    assert metrics["steps"] == 5 and len(losses) == 10 and metrics["tokens"] == 5 * 2 * 4 * 32


def test_checkpoint_only_when_asked(tiny_tree, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fit(tiny_tree(train={"tokens": 3 * 4 * 32}))
    assert list(tmp_path.iterdir()) == []  # nothing written to the cwd
    fit(tiny_tree(train={"tokens": 3 * 4 * 32}), checkpoint_path=tmp_path / "final.ckpt")
    assert (tmp_path / "final.ckpt").is_file()


def test_bf16_mixed_clips_gradients_with_the_fused_optimizer(tiny_tree):
    """Lightning's bf16-mixed refuses gradient clipping with a fused AdamW (a guard for fp16's
    scaler): what every CUDA trial (precision auto) runs. The module clips itself."""
    tree = tiny_tree(train={"tokens": 3 * 4 * 32, "precision": "bf16-mixed", "grad_clip": 1.0})
    assert math.isfinite(fit(TrialConfig.from_dict(tree))["val_loss"])


def test_bf16_true_trains_the_model_in_bf16(tiny_tree):
    """precision bf16-true (the SATFormer code's pure bf16): weights, gradients and AdamW state in
    bf16, no fp32 master copy; it runs on CPU too, so the path is tested here."""
    from trainers.module import LanguageModel

    seen = {}

    class Dtypes(pl.Callback):
        def on_train_batch_end(self, trainer, module: LanguageModel, *args):
            opt = trainer.optimizers[0]
            seen["params"] = {p.dtype for p in module.parameters()}
            seen["state"] = {v.dtype for s in opt.state.values() for v in s.values() if v.dim() > 0}

    tree = tiny_tree(train={"tokens": 3 * 4 * 32, "precision": "bf16-true"})
    metrics = fit(TrialConfig.from_dict(tree), callbacks=[Dtypes()])
    assert seen["params"] == {torch.bfloat16} and seen["state"] == {torch.bfloat16}
    assert math.isfinite(metrics["val_loss"]) and metrics["steps"] == 3
