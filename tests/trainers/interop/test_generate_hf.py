"""transformers' `generate` on an export beyond greedy: beam search reorders arch's cache, so
with the cache it picks what it picks when every step reruns the whole sequence (no cache)."""

import pytest
import torch

pytest.importorskip("transformers", reason="the interop extra (pip install -e '.[interop]')")

from transformers import AutoModelForCausalLM  # noqa: E402

from tests.arch.test_decoding import perturbed  # noqa: E402
from trainers.interop.export import write_export  # noqa: E402


@pytest.mark.parametrize(
    "residual",
    [{"kind": "value_residual"}, {"kind": "muddformer"}, {"kind": "hyper_connections", "expansion_rate": 2}],
    ids=["satformer", "muddformer", "hyper_connections"],
)
def test_beam_search_with_the_cache_equals_it_without(residual, tmp_path):
    model = perturbed(residual, seed=3, scale=0.5).float()
    with torch.no_grad():  # every weight far from its init: peaked, varied next-token choices
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    hf = AutoModelForCausalLM.from_pretrained(write_export(model, tmp_path / "hf"), trust_remote_code=True)
    ids = torch.tensor([[5, 9, 3, 7, 1, 2], [0, 0, 0, 4, 8, 6]])
    mask = torch.tensor([[1] * 6, [0, 0, 0, 1, 1, 1]])
    kw = {"attention_mask": mask, "max_new_tokens": 6, "num_beams": 3, "do_sample": False, "pad_token_id": 0}
    with_cache = hf.generate(ids, use_cache=True, **kw)
    without = hf.generate(ids, use_cache=False, **kw)
    assert with_cache.tolist() == without.tolist()
