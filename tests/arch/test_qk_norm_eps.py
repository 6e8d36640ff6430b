"""`model.qk_norm_eps` (the official SATFormer code's qk norms: eps 1e-5 whatever norm_eps):
unset, the model is what it was; set, only the qk norms change; studies run before it resume."""

import torch

from arch import build_model
from sweeps.study import load_study
from tests.arch.design_examples import HARNESS_MODEL
from tests.sweeps.study.test_study_file import BASE, write


def test_unset_is_norm_eps_and_set_changes_only_the_qk_norms():
    torch.manual_seed(0)
    plain = build_model(HARNESS_MODEL).eval()
    same = build_model({**HARNESS_MODEL, "qk_norm_eps": HARNESS_MODEL.get("norm_eps", 1e-6)}).eval()
    other = build_model({**HARNESS_MODEL, "qk_norm_eps": 1e-2}).eval()
    same.load_state_dict(plain.state_dict())
    other.load_state_dict(plain.state_dict())
    x = torch.randint(0, HARNESS_MODEL["vocab_size"], (2, 8))
    with torch.no_grad():
        assert torch.equal(same(x), plain(x))
        assert not torch.allclose(other(x), plain(x), atol=1e-6)
    assert [b.attn.q_norm.eps for b in other.blocks] == [1e-2] * len(other.blocks)
    assert other.blocks[0].mlp_norm.eps == plain.blocks[0].mlp_norm.eps


def test_studies_run_before_the_key_keep_their_fingerprint(tmp_path):
    text = BASE.replace("space:\n  model.residual.kind: [none, value_residual]\n", "")
    assert "trial.model.qk_norm_eps" not in load_study(write(tmp_path / "s.yaml", text)).fingerprint()
    changed = load_study(write(tmp_path / "s.yaml", text), ["trial.model.qk_norm_eps=0.00001"])
    assert "trial.model.qk_norm_eps" in changed.fingerprint()
