"""`train.loss` and `train.activation_checkpointing`: the same loss and gradients as the plain path
for every registered design (float64), the memory the arithmetic says, and the config's errors."""

from __future__ import annotations

import copy

import pytest
import torch

from arch import build_model
from arch.configtree import ConfigError
from tests.arch.design_examples import DESIGN_EXAMPLES, HARNESS_MODEL
from trainers import preflight
from trainers.config import TrainConfig, TrialConfig
from trainers.loss import AUTO_CHUNKED_ABOVE, IGNORE, eval_sums, lm_loss, resolve_loss
from trainers.optim import build_optimizer
from trainers.step_memory import StepMemoryMeter

IDS = [name for name, _ in DESIGN_EXAMPLES]


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny float64 models: one thread is ~100x faster than two on a shared, loaded CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


CHUNK = 5  # positions per chunk: 2 x 12 = 24 positions give four full chunks and a partial one


def _model(residual, tie: bool):
    torch.manual_seed(0)
    cfg = {**HARNESS_MODEL, "tie_embeddings": tie, "residual": copy.deepcopy(residual)}
    return build_model(cfg).double()


def _batch(ignored: bool):
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, HARNESS_MODEL["vocab_size"], (2, 13), generator=g)
    inputs, targets = x[:, :-1], x[:, 1:].clone()
    if ignored:  # as MQAR's: most targets ignored, a few answers count
        keep = torch.zeros_like(targets, dtype=torch.bool)
        keep[:, 3::4] = True
        targets[~keep] = IGNORE
    return inputs, targets


def _loss_and_grads(model, inputs, targets, kind, checkpoint_blocks=False):
    model.zero_grad(set_to_none=True)
    h = model.hidden(inputs, checkpoint_blocks=checkpoint_blocks)
    loss = lm_loss(kind, h, model.head.weight, targets, chunk=CHUNK)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _assert_same(a, b):
    (loss_a, grads_a), (loss_b, grads_b) = a, b
    torch.testing.assert_close(loss_a, loss_b, rtol=1e-12, atol=0)
    assert grads_a.keys() == grads_b.keys()
    for name in grads_a:
        torch.testing.assert_close(grads_a[name], grads_b[name], rtol=1e-10, atol=1e-14, msg=name)


@pytest.mark.parametrize("ignored", [False, True], ids=["all_targets", "ignored_targets"])
@pytest.mark.parametrize("tie", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("residual", [r for _, r in DESIGN_EXAMPLES], ids=IDS)
def test_chunked_loss_and_block_recomputation_equal_the_plain_path(residual, tie, ignored):
    model = _model(residual, tie)
    inputs, targets = _batch(ignored)
    plain = _loss_and_grads(model, inputs, targets, "plain")
    assert torch.isfinite(plain[0]) and len(plain[1]) == len(list(model.parameters()))
    _assert_same(plain, _loss_and_grads(model, inputs, targets, "chunked"))
    _assert_same(plain, _loss_and_grads(model, inputs, targets, "plain", checkpoint_blocks=True))
    # the logits path the model's forward takes is the one the loss sees
    with torch.no_grad():
        logits = model(inputs)
    ref = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
    torch.testing.assert_close(plain[0], ref, rtol=1e-12, atol=0)


@pytest.mark.parametrize("ignored", [False, True], ids=["all_targets", "ignored_targets"])
def test_validation_sums_are_the_same_on_both_paths(ignored):
    model = _model({"kind": "value_residual"}, tie=True)
    inputs, targets = _batch(ignored)
    with torch.no_grad():
        h = model.hidden(inputs)
    plain = eval_sums("plain", h, model.head.weight, targets)
    chunked = eval_sums("chunked", h, model.head.weight, targets, chunk=CHUNK)
    n = (targets != IGNORE).sum().item()
    assert plain[1].item() == chunked[1].item() == n and 0 <= plain[2].item() <= n
    assert plain[2].item() == chunked[2].item()
    torch.testing.assert_close(plain[0], chunked[0], rtol=1e-12, atol=0)
    torch.testing.assert_close(
        plain[0] / n, lm_loss("plain", h, model.head.weight, targets), rtol=1e-12, atol=0
    )


VOCAB, SEQ, MEM_CHUNK = 32000, 64, 16


def _peak(kind, batch, checkpoint_blocks=False, layers=4, d_model=32, vocab=VOCAB):
    """The exact peak (trainers.step_memory.StepMemoryMeter) of one fp32 training step after a warm-up."""
    torch.manual_seed(0)
    cfg = {**HARNESS_MODEL, "vocab_size": vocab, "max_seq_len": SEQ, "n_layers": layers, "d_model": d_model}
    model = build_model(cfg)
    opt = build_optimizer(model, TrainConfig())
    x = torch.randint(0, vocab, (batch, SEQ + 1), generator=torch.Generator().manual_seed(0))

    def step(meter=None):
        h = model.hidden(x[:, :-1], checkpoint_blocks=checkpoint_blocks)
        loss = lm_loss(kind, h, model.head.weight, x[:, 1:], chunk=MEM_CHUNK)
        if meter is not None:
            meter.backward_starts()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    meter = StepMemoryMeter("cpu")
    meter.start(model, opt, x)
    step(meter)
    return meter.stop()


def test_chunked_loss_peak_falls_by_the_logits_the_plain_path_holds():
    """The arithmetic, per position of the micro-batch (N = B x T, V = 32000, fp32, 4 bytes):
    at its peak (in the loss's backward) the plain path holds three [N, V] tensors: the
    log-softmax saved for backward, the NLL's gradient, and the log-softmax backward's output,
    i.e. 3 x V x 4 = 384,000 bytes a position. The chunked path holds no [N, V] tensor: three
    [c, V] tensors of one chunk (c = 16), and its fp32 gradient accumulator of the head [V, D].
    So (1) per extra position the plain peak grows by 3 V 4 bytes more than the chunked one, and
    (2) at N positions the peak falls by 3 N V 4 - 3 c V 4 - V D 4."""
    plain = {b: _peak("plain", b).peak for b in (2, 4)}
    chunked = {b: _peak("chunked", b).peak for b in (2, 4)}
    positions = 2 * SEQ  # the two micro-batches differ by 2 rows of SEQ
    slope_gap = ((plain[4] - plain[2]) - (chunked[4] - chunked[2])) / positions
    assert slope_gap == pytest.approx(3 * VOCAB * 4, rel=0.005)
    n, d = 4 * SEQ, HARNESS_MODEL["d_model"]
    expected_fall = 3 * n * VOCAB * 4 - 3 * MEM_CHUNK * VOCAB * 4 - VOCAB * d * 4
    assert plain[4] - chunked[4] == pytest.approx(expected_fall, rel=0.005)
    assert chunked[4] < plain[4] / 4


def test_block_recomputation_keeps_only_block_inputs():
    """Without recomputation every block keeps its activations for backward; with it, a block
    keeps its input state only (here the residual stream [B, T, D], fp32) and the recomputation's
    bookkeeping (under 5% of that here). The activations at backward's start (the meter's
    breakdown) grow with depth: each extra layer adds what one block keeps (at least 8 [B, T, D]
    tensors here) without recomputation, and one [B, T, D] input with it."""
    batch, d = 8, 64
    keep = {
        (ck, n): _peak("chunked", batch, checkpoint_blocks=ck, layers=n, d_model=d, vocab=256).activations
        for ck in (False, True)
        for n in (2, 4)
    }
    per_layer_plain = (keep[False, 4] - keep[False, 2]) / 2
    per_layer_ckpt = (keep[True, 4] - keep[True, 2]) / 2
    stream = batch * SEQ * d * 4
    assert stream <= per_layer_ckpt < 1.05 * stream
    assert per_layer_plain >= 8 * stream


def test_auto_resolves_by_device_and_logits_size():
    cpu = torch.device("cpu")
    assert resolve_loss("auto", cpu, 16, 128, 256) == "plain"  # the CPU studies: 2 MiB of logits
    assert resolve_loss("auto", cpu, 64, 4096, 32000) == "chunked"  # the paper's small: 33.5 GB
    rows = AUTO_CHUNKED_ABOVE // (4 * 4096 * 32000)
    assert resolve_loss("auto", cpu, rows, 4096, 32000) == "plain"
    assert resolve_loss("auto", cpu, rows + 1, 4096, 32000) == "chunked"
    for kind in ("plain", "chunked", "fused"):
        assert resolve_loss(kind, cpu, 1, 1, 1) == kind


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("loss", "fast", "train.loss: given 'fast'; allowed: auto, plain, chunked, fused"),
        (
            "activation_checkpointing",
            "all",
            "train.activation_checkpointing: given 'all'; allowed: none, blocks",
        ),
    ],
)
def test_bad_values_name_the_key_and_the_choices(key, value, message):
    with pytest.raises(ConfigError, match=message):
        TrialConfig.from_dict({"train": {key: value}}, source="trial.yaml")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_fused_is_refused_at_load_without_cuda():
    with pytest.raises(
        ConfigError, match=r"trial.yaml: train.loss: given 'fused'; needs CUDA.*auto, plain, chunked"
    ):
        preflight.load({"train": {"loss": "fused"}}, source="trial.yaml")


def test_a_trial_trains_and_validates_the_same_on_the_chunked_recomputed_path(tiny_tree):
    from tests.trainers.conftest import LossHistory
    from trainers.fit import fit

    def run(**train):
        history = LossHistory()
        metrics = fit(TrialConfig.from_dict(tiny_tree(train=train)), callbacks=[history])
        return metrics, history.losses

    plain, plain_losses = run(loss="plain")
    other, other_losses = run(loss="chunked", activation_checkpointing="blocks")
    assert len(plain_losses) == len(other_losses) == 20
    assert other_losses == pytest.approx(plain_losses, rel=1e-5)
    assert other["val_loss"] == pytest.approx(plain["val_loss"], rel=1e-5)
    assert other["mem_activations_mb"] < plain["mem_activations_mb"]
