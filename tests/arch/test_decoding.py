"""Incremental decoding equals the full forward, for every design of the shared harness.

Each design's own parameters are moved off their init first (several designs start at or near
their neutral point, where a wrong cache of the design's state would go unnoticed)."""

import pytest
import torch

from arch.generate import generate
from tests.arch.design_examples import DESIGN_EXAMPLES, HARNESS_MODEL
from tests.arch.test_designs import IDS, make, tokens


def perturbed(residual, seed=0, scale=0.2):
    """The harness model in float64, its design's parameters moved by N(0, scale^2)."""
    model = make(residual, seed=seed).double().eval()
    g = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():
        for p in model.residual.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


def incremental(model, x, prefill, attention_mask=None):
    """Logits of x [B, T] from a prefill of `prefill` tokens, then one token at a time."""
    cache = model.new_cache(x.shape[0], x.shape[1])
    mask = attention_mask[:, :prefill] if attention_mask is not None else None
    out = [model(x[:, :prefill], cache=cache, attention_mask=mask)]
    for t in range(prefill, x.shape[1]):
        mask = attention_mask[:, t : t + 1] if attention_mask is not None else None
        out.append(model(x[:, t : t + 1], cache=cache, attention_mask=mask))
    return torch.cat(out, dim=1)


@pytest.mark.parametrize("residual", [r for _, r in DESIGN_EXAMPLES], ids=IDS)
def test_prefill_then_one_token_at_a_time_equals_the_full_forward(residual):
    """float64 to 1e-10; float32 to 1e-5, with the design's parameters moved half as far (0.1: at
    0.2, MUDDFormer's dense weights amplify float32 rounding to 1.3e-5 here, its full float32
    forward being itself 1.6e-5 from float64; docs/evals/decoding.md)."""
    x = tokens(batch=2, length=12)
    with torch.no_grad():
        model = perturbed(residual)
        torch.testing.assert_close(incremental(model, x, prefill=5), model(x), rtol=0, atol=1e-10)
        model = perturbed(residual, scale=0.1).float()
        torch.testing.assert_close(incremental(model, x, prefill=5), model(x), rtol=0, atol=1e-5)


@pytest.mark.parametrize("residual", [r for _, r in DESIGN_EXAMPLES], ids=IDS)
def test_left_padded_batch_equals_each_row_alone(residual):
    """Rows of 12, 8 and 3 tokens left-padded to 12: every real token's logits equal those of
    its row run alone (rotary positions count from the row's first real token)."""
    model = perturbed(residual, seed=1)
    rows = [tokens(batch=1, length=n, seed=n)[0] for n in (12, 8, 3)]
    width = max(len(r) for r in rows)
    x = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for b, r in enumerate(rows):
        x[b, width - len(r) :] = r
        mask[b, width - len(r) :] = 1
    x[mask == 0] = 7  # padding token: any id; the mask must hide it
    with torch.no_grad():
        batched = incremental(model, x, prefill=6, attention_mask=mask)
        one_shot = model(x, attention_mask=mask)
        for b, r in enumerate(rows):
            alone = model(r[None])[0]
            torch.testing.assert_close(batched[b, width - len(r) :], alone, rtol=0, atol=1e-10)
            torch.testing.assert_close(one_shot[b, width - len(r) :], alone, rtol=0, atol=1e-10)


@pytest.mark.parametrize("residual", [r for _, r in DESIGN_EXAMPLES], ids=IDS)
def test_greedy_generation_equals_argmax_of_the_full_forward(residual):
    """Greedy tokens with the cache equal re-running the whole sequence at every step."""
    model = perturbed(residual, seed=2)
    prompts = [tokens(batch=1, length=n, seed=n)[0].tolist() for n in (6, 2)]
    out = generate(model, prompts, max_new_tokens=5)
    with torch.no_grad():
        for prompt, new in zip(prompts, out, strict=True):
            seq = list(prompt)
            for _ in range(5):
                seq.append(int(model(torch.tensor([seq]))[0, -1].argmax()))
            assert new == seq[len(prompt) :]


def test_rotary_positions_of_a_left_padded_row_start_at_its_first_real_token():
    model = make({"kind": "none"})
    cache = model.new_cache(2, 5)
    step = cache.step(torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]), 5, "cpu")
    assert step.positions.tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]]
    step = cache.step(None, 0, "cpu")  # nothing new: the next real token of each row
    assert cache.seen.tolist() == [3, 5]


def test_cache_refuses_more_than_its_capacity_and_the_context():
    model = make({"kind": "none"})
    cache = model.new_cache(1, 4)
    model(tokens(batch=1, length=3), cache=cache)
    with pytest.raises(ValueError, match="KVCache holds 4 slots; 3 used, 2 more"):
        model(tokens(batch=1, length=2), cache=cache)
    long = model.new_cache(1, HARNESS_MODEL["max_seq_len"] + 1)
    with pytest.raises(ValueError, match="exceeds max_seq_len"):
        model(tokens(batch=1, length=HARNESS_MODEL["max_seq_len"] + 1), cache=long)


def test_stop_sequences_end_a_row_and_are_removed():
    model = perturbed({"kind": "value_residual", "mode": "gated"}, seed=3)
    prompts = [tokens(batch=1, length=n, seed=n)[0].tolist() for n in (5, 3)]
    free = generate(model, prompts, max_new_tokens=8)
    stop = free[0][2:4]  # two tokens row 0 produces: it must end there, without them
    first = next(i for i in range(len(free[0]) - 1) if free[0][i : i + 2] == stop)
    cut = generate(model, prompts, max_new_tokens=8, stop_sequences=[stop])
    assert cut[0] == free[0][:first]
    ends = [i for i in range(len(free[1]) - 1) if free[1][i : i + 2] == stop]
    assert cut[1] == (free[1][: ends[0]] if ends else free[1])
    assert generate(model, prompts, 8, should_stop=lambda new: len(new) == 3) == [f[:3] for f in free]


def test_sampling_is_seeded_and_narrows_to_greedy():
    model = perturbed({"kind": "value_residual", "mode": "gated"}, seed=4)
    prompts = [tokens(batch=1, length=4, seed=9)[0].tolist()] * 3

    def sample(seed, **kw):
        g = torch.Generator().manual_seed(seed)
        return generate(model, prompts, 10, temperature=1.0, generator=g, **kw)

    greedy = generate(model, prompts, 10)
    assert sample(0) == sample(0)
    assert sample(0) != sample(1)
    assert sample(0)[0] != greedy[0]  # 64 tokens near-uniform: 10 greedy picks in a row is ~impossible
    assert sample(0, top_k=1) == greedy
    assert sample(0, top_p=1e-6) == greedy
