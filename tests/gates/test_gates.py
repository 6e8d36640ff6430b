"""Gate analysis: statistics by hand, token categories, interventions reproduce the baseline."""

import torch

from arch import build_model
from gates.categories import CATEGORIES, categorize, gate_by_category
from gates.gate_stats import collect_gates, gate_statistics, summary_rows
from gates.interventions import mean_loss, run_interventions

MODEL = {"preset": "tiny", "d_model": 32, "n_layers": 3, "n_heads": 4, "n_kv_heads": 2, "d_ff": 64}


def satformer(seed=0):
    torch.manual_seed(seed)
    return build_model({**MODEL, "residual": {"kind": "value_residual", "gate_init_std": 0.5}})


def batches(n=3, length=17):
    g = torch.Generator().manual_seed(0)
    return [torch.randint(0, 256, (2, length), generator=g) for _ in range(n)]


def test_statistics_match_hand_computation():
    gates = {1: torch.tensor([[0.0, 2.0], [1.0, 0.0], [0.0, 4.0], [3.0, 0.0]])}
    stats = gate_statistics(gates)[1]
    assert stats["mean"] == [1.0, 1.5]
    assert stats["zero_frac"] == [0.5, 0.5]
    assert stats["q0.5"] == [0.5, 1.0]
    row = summary_rows({1: stats})[0]
    assert row["layer"] == 2 and row["mean_gate"] == 1.25 and row["zero_frac"] == 0.5


def test_hand_set_gate_weights_give_the_expected_statistics():
    model = satformer()
    with torch.no_grad():
        model.residual.mix.weight.zero_()  # relu(0) = 0 everywhere
    gates, tokens = collect_gates(model, batches())
    stats = gate_statistics(gates)
    assert sorted(stats) == [1, 2]
    assert all(s["zero_frac"] == [1.0, 1.0] and s["mean"] == [0.0, 0.0] for s in stats.values())
    assert tokens.numel() == 3 * 2 * 17
    with torch.no_grad():
        model.residual.mix.weight.normal_(std=1.0)
    stats = gate_statistics(collect_gates(model, batches())[0])
    for s in stats.values():
        assert all(0 < z < 1 for z in s["zero_frac"])  # ReLU: some exactly zero, not all


def test_categories_structural_functional_semantic():
    text = "the King, 42 lords!"
    ids = list(text.encode())
    cats = categorize(ids, lambda t: bytes([t]).decode("latin-1"))
    by_char = dict(zip(text, [CATEGORIES[c] for c in cats.tolist()], strict=True))
    assert by_char["K"] == "semantic" and by_char["t"] == "functional"
    assert by_char[","] == by_char["4"] == by_char[" "] == "structural"
    assert cats.tolist()[:3] == [1, 1, 1]  # "the"


def test_gate_by_category_averages_heads_and_tokens():
    gates = {0: torch.tensor([[1.0, 3.0], [0.0, 0.0], [4.0, 4.0]])}
    out = gate_by_category(gates, torch.tensor([0, 1, 2]))[0]
    assert out == {"structural": 2.0, "functional": 0.0, "semantic": 4.0}


def test_zeroed_gates_reproduce_the_baseline_loss_from_the_same_weights():
    model = satformer()
    torch.manual_seed(0)
    baseline = build_model(MODEL)
    baseline.load_state_dict(model.state_dict(), strict=False)
    data = [(b[:, :-1], b[:, 1:]) for b in batches()]
    gates, _ = collect_gates(model, [inputs for inputs, _ in data])
    means = {layer: s["mean"] for layer, s in gate_statistics(gates).items()}
    rows = {r["intervention"].split("=")[0]: r for r in run_interventions(model, data, means)}
    assert rows["zero"]["val_loss"] == mean_loss(baseline, data)
    assert rows["trained"]["val_loss"] != rows["zero"]["val_loss"]
    assert rows["trained"]["delta_loss"] == 0.0
    assert set(rows) == {"trained", "zero", "layer_head_mean", "constant"}
    assert model.residual.gate_hook is None  # restored after the interventions
