"""Exact step memory (trainers.step_memory): a hand-computed model, seed independence, design order."""

import pytest
import torch

from arch import build_model
from trainers.config import TrainConfig
from trainers.fit import fit
from trainers.optim import build_optimizer
from trainers.step_memory import StepMemoryMeter, tensor_bytes
from trainers.synthetic_step import synthetic_step_of

B, D_IN, D_OUT = 8, 64, 32  # batch, in features, out features
F32 = 4


def linear_step(seed: int, optimizer: str):
    torch.manual_seed(seed)
    model = torch.nn.Linear(D_IN, D_OUT, bias=False)
    opt = (
        torch.optim.SGD(model.parameters(), lr=1e-3)
        if optimizer == "sgd"
        else torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    )
    x = torch.randn(B, D_IN)
    meter = StepMemoryMeter("cpu")

    def step():
        loss = model(x).sum()
        meter.backward_starts()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()  # warm-up: the optimizer's state exists from here on
    meter.start(model, opt, [x])
    step()
    return meter.stop()


def test_step_memory_of_a_linear_layer_matches_the_hand_count():
    mem = linear_step(0, "sgd")
    w, x = D_IN * D_OUT * F32, B * D_IN * F32
    assert mem.params == w and mem.grads == w and mem.optimizer == 0
    assert mem.activations == F32  # y = xW^T is freed after .sum(); the scalar loss stays
    # live at the peak: W, x, the loss, its seed gradient, dL/dy (B x O, expanded then
    # materialised for the matmul) and dL/dW
    assert mem.peak == w + x + F32 + F32 + B * D_OUT * F32 + w
    adam = linear_step(0, "adam")
    assert adam.optimizer == 2 * w + F32  # exp_avg, exp_avg_sq and the step count


def test_step_memory_does_not_depend_on_the_seed_or_on_earlier_work():
    assert linear_step(0, "adam") == linear_step(1, "adam") == linear_step(7, "adam")


def step_peak(residual: dict) -> float:
    torch.manual_seed(0)
    model = build_model({"preset": "tiny", "n_layers": 3, "residual": residual})
    opt = build_optimizer(model, TrainConfig())
    meter = StepMemoryMeter("cpu")
    built = synthetic_step_of(model, opt, 256, 4, 32, "cpu", mark=meter.backward_starts)
    step, x = built.step, built.tokens
    step()
    meter.start(model, opt, [x])
    step()
    return meter.stop().peak


def test_dense_designs_cost_what_their_streams_keep_alive():
    base = step_peak({"kind": "none"})
    sat = step_peak({"kind": "value_residual", "mode": "gated"})
    mudd = step_peak({"kind": "muddformer"})
    hc = step_peak({"kind": "hyper_connections", "expansion_rate": 4})
    assert hc > mudd > sat >= base
    assert sat <= 1.01 * base


def test_static_parts_are_counted_once_for_tied_weights():
    model = build_model({"preset": "tiny"})
    assert model.cfg.tie_embeddings
    assert tensor_bytes(model.parameters()) == sum(p.numel() for p in model.parameters()) * F32


@pytest.mark.parametrize("seed", [0, 1])
def test_a_trial_reports_the_same_exact_memory_for_every_seed(tiny_tree, seed):
    metrics = fit(tiny_tree(seed=seed, train={"tokens": 4 * 4 * 32}))
    again = fit(tiny_tree(seed=seed + 5, train={"tokens": 4 * 4 * 32}))
    keys = ("peak_mem_mb", "mem_params_mb", "mem_grads_mb", "mem_optimizer_mb", "mem_activations_mb")
    assert {k: metrics[k] for k in keys} == {k: again[k] for k in keys}
