"""The memory plan's extrapolation (trainers.memory_probe, trainers.memory_fit): measured at small
micro-batches on CPU, it predicts the exact meter's peak of a larger one; and its arithmetic."""

import pytest
import torch

from tests.factories import tiny_trial
from trainers.config import TrialConfig
from trainers.memory_fit import collapse, fit
from trainers.memory_probe import measure, measure_at

# 512 positions so that the measuring lengths are 64..128 (seq0 32), as for the paper's models
MODEL = {"max_seq_len": 512, "vocab_size": 512, "d_model": 64, "d_ff": 256}
CFG = TrialConfig.from_dict(tiny_trial(model=MODEL))
LARGE = (8, 256)  # 2048 tokens: 8 times the largest fit sample
TOLERANCE = 0.02  # of the measured peak


@pytest.mark.parametrize(
    ("kind", "precision", "loss", "blocks"),
    [
        ("none", "32-true", "plain", False),
        ("value_residual", "bf16-true", "chunked", True),
        ("hyper_connections", "bf16-mixed", "chunked", False),
    ],
)
def test_the_plan_predicts_a_larger_measured_batch(kind, precision, loss, blocks):
    cfg = TrialConfig.from_dict(tiny_trial(model={**MODEL, "residual": {"kind": kind}}))
    torch.set_num_threads(1)
    m = measure(cfg, precision, loss, blocks, up_to=LARGE[0] * LARGE[1])
    plan = fit(m, loss)
    predicted = plan.predict(*LARGE)
    measured = measure_at(cfg, precision, loss, blocks, *LARGE)
    assert abs(predicted.peak - measured.peak) <= TOLERANCE * measured.peak, (predicted.peak, measured.peak)
    assert abs(predicted.activations - measured.activations) <= TOLERANCE * measured.activations
    # held out of the fit: another number of rows
    assert abs(plan.check["predicted"] - plan.check["measured"]) <= TOLERANCE * plan.check["measured"]


def test_a_window_whose_events_line_up_at_two_lengths_only_is_still_followed_event_by_event():
    # The paper's Hyper-Connections with blocks recomputed: its backward makes fewer events at 128
    # positions than at 64 and 96; the lines through the ends and the largest value alone
    # predicted 10% under the measured peak at 16x the samples (docs/memory_plan.md).
    from arch.paper_designs import PAPER_DESIGNS

    model = {"preset": "tiny", **MODEL, "residual": PAPER_DESIGNS["hyper_connections"]}  # bench.memory_plan's
    cfg = TrialConfig.from_dict({"model": model, "data": {"kind": "mqar", "vocab": 64, "seq_len": 32}})
    torch.set_num_threads(1)
    plan = fit(measure(cfg, "32-true", "plain", True, up_to=8 * 512, check=False), "plain")
    measured = measure_at(cfg, "32-true", "plain", True, 8, 512)  # 16 x the largest sample
    assert abs(plan.predict(8, 512).peak - measured.peak) <= TOLERANCE * measured.peak


def test_collapse_folds_a_workspace_spike_into_its_level():
    # level 10, a spike of 5 freed at once, a nested spike 3 inside 4; then a lasting allocation
    assert collapse([10, 15, 10, 14, 17, 14, 10, 30]) == [10 + 7, 30]
    assert collapse([10, 20, 30]) == [10, 20, 30]  # nothing freed: nothing folded


def test_the_largest_fitting_micro_batch_keeps_the_rows_of_a_step():
    m = measure(CFG, "32-true", "plain", False, up_to=16 * 64)
    plan = fit(m, "plain")
    whole = plan.predict(16, 64)
    half = plan.predict(8, 64, grad_accum=2)
    assert half.peak < whole.peak
    best = plan.largest_fitting(half.peak, 16, 64)
    assert (best.rows, best.grad_accum) == (8, 2)
    assert plan.largest_fitting(whole.peak, 16, 64).rows == 16
    assert plan.largest_fitting(1, 16, 64) is None  # not even one row fits one byte
    # data-parallel: one more copy of the gradients (DDP's buckets)
    assert plan.predict(16, 64, workers=2).peak == whole.peak + plan.grads
