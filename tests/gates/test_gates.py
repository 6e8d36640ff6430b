"""Gate analysis: statistics by hand, token categories, interventions reproduce the baseline."""

import json

import numpy as np
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


def test_bpe_pieces_are_categorised_by_the_word_their_first_letter_is_in(tmp_path):
    """Byte-level BPE (Ġ marks a word start) and SentencePiece (▁, byte fallback) pieces."""
    from tokenizers import Tokenizer, models

    from gates.categories import piece_decoder

    pieces = ["the", "Ġcat", "Ġsat", "ing", "Ġon", ".", "▁the", "▁dog", "<0x0A>", "▁and"]
    tok = Tokenizer(models.WordLevel({p: i for i, p in enumerate(pieces)} | {"[UNK]": 99}, unk_token="[UNK]"))
    decode = piece_decoder(tok)
    assert [decode(i) for i in range(len(pieces))] == [
        "the", " cat", " sat", "ing", " on", ".", " the", " dog", "\n", " and"
    ]  # fmt: skip
    cats = categorize(list(range(len(pieces))), decode)
    #          the  cat  sat  ing  on  .   the  dog  \n  and
    expected = [1, 2, 2, 2, 1, 0, 1, 2, 0, 1]
    assert cats.tolist() == expected


def test_token_shards_get_their_tokenizer_for_the_categories(tmp_path):
    """A BPE-tokenised shard folder (trainers.prepare writes tokenizer.json): the gate analysis
    decodes its ids; byte shards decode as bytes; a folder without a tokenizer gives none."""
    from gates.cli import token_decoder
    from trainers.config import TrialConfig
    from trainers.prepare import prepare

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("the cat sat on the mat and the dog sat on the log.\n" * 400)
    for kind in ("bpe", "byte"):
        out = tmp_path / kind
        prepare(str(corpus), out, tokenizer=kind, vocab_size=300, data_root=tmp_path / "cache")
        cfg = TrialConfig.from_dict(
            {"model": {}, "data": {"kind": "tokens", "path": str(out), "seq_len": 32}}
        )
        decode = token_decoder(cfg, None)
        ids = np.fromfile(out / "train_000.bin", dtype=np.uint16)[:60].tolist()
        text = "".join(decode(t) for t in ids)
        assert "the cat sat on the mat" in text
        cats = categorize(ids, decode)
        assert set(cats.tolist()) == {0, 1, 2}
    (tmp_path / "bpe" / "tokenizer.json").unlink()
    meta = json.loads((tmp_path / "bpe" / "meta.json").read_text())
    assert meta["tokenizer"] == "bpe"
    cfg = TrialConfig.from_dict(
        {"model": {}, "data": {"kind": "tokens", "path": str(tmp_path / "bpe"), "seq_len": 32}}
    )
    assert token_decoder(cfg, None) is None
