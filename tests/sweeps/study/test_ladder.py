"""The expansion of a `scaling:` section into rungs, and its refusals."""

from pathlib import Path

import pytest
import yaml

from sweeps.study.ladder import LadderError, expand, over_one_epoch, targets

BASE = {"preset": "tiny"}
SMALL = {"d_model": 64, "n_layers": 2, "n_heads": 2, "d_ff": 192}


def test_sizes_times_budgets_with_scale_and_epochs():
    rungs = expand(
        {"sizes": [SMALL, "tiny"], "tokens": [1e6, 4e6], "token_scale": 0.5}, BASE, "s.yaml", 4.8e6
    )
    assert len(rungs) == 4
    assert [r["flops"] for r in rungs] == sorted(r["flops"] for r in rungs)
    small = [r for r in rungs if r["overrides"].get("model.d_model") == 64]
    assert {r["tokens"] for r in small} == {500000, 2000000}
    assert small[0]["overrides"]["train.tokens"] == small[0]["tokens"]
    tiny = [r for r in rungs if r["overrides"].get("model.preset") == "tiny"][0]
    # tiny: 4 layers of 4 d^2 attention + 3 d x 384 SwiGLU + 2 norms, and the final norm
    assert tiny["params"] == 4 * (4 * 128 * 128 + 3 * 128 * 384 + 2 * 128) + 128
    assert small[1]["epochs"] == pytest.approx(2e6 / 4.8e6)
    assert over_one_epoch(rungs) == []


def test_tokens_per_param_and_the_epoch_warning():
    rungs = expand({"sizes": [SMALL, "tiny"], "tokens_per_param": [20]}, BASE, "s.yaml", 4.8e6)
    for r in rungs:
        assert r["tokens"] == round(20 * r["params"])
    warnings = over_one_epoch(rungs)
    assert len(warnings) == 1 and "epochs of the training split" in warnings[0]


@pytest.mark.parametrize(
    ("section", "words"),
    [
        ({"sizes": ["tiny", "mini"], "tokens": [1e6], "budget": 1}, "s.yaml: scaling.budget: unknown key"),
        ({"sizes": ["tiny"], "tokens": [1e6]}, "scaling.sizes: needs 2 or more sizes"),
        (
            {"sizes": ["tiny", "huge"], "tokens": [1e6]},
            "scaling.sizes[1]: 'huge' is not a preset; presets: tiny",
        ),
        ({"sizes": ["tiny", "mini"]}, "give exactly one"),
        ({"sizes": ["tiny", "mini"], "tokens": [1e6], "tokens_per_param": [20]}, "give exactly one"),
        ({"sizes": ["tiny", "mini"], "tokens": [1e6, -2]}, "scaling.tokens[1]: must be a positive number"),
        ({"sizes": ["tiny", "mini"], "tokens": [1e6], "token_scale": 0}, "scaling.token_scale"),
        ({"sizes": ["tiny", {"d_model": 64, "n_heads": 3}], "tokens": [1e6]}, "scaling.sizes[1]"),
    ],
)
def test_bad_sections_are_refused_naming_file_and_key(section, words):
    with pytest.raises(LadderError) as err:
        expand(section, BASE, "s.yaml")
    assert "s.yaml" in str(err.value) and words in str(err.value)


def test_targets_default_to_the_paper_scales_and_accept_mappings():
    paper = targets({})
    assert [t.name for t in paper] == ["small", "medium", "large", "xl"]
    assert paper[2].tokens == 2e10 and 6e8 < paper[2].params < 8e8
    own = targets({"targets": [{"name": "mine", "params": 1e7, "tokens": 2e8}]})
    assert own[0].flops == 6 * 1e7 * 2e8
    with pytest.raises(LadderError, match=r"s.yaml: scaling.targets\[0\]: 'huge' is not a paper scale"):
        targets({"targets": ["huge"]}, "s.yaml")


def test_the_draft_study_expands_within_one_epoch():
    path = Path(__file__).resolve().parents[3] / "studies" / "scaling_ladder.yaml"
    spec = yaml.safe_load(path.read_text())
    rungs = expand(spec["scaling"], BASE, str(path), 0.95 * 5.06e6)
    assert len(rungs) == 7  # four sizes, the largest at one budget
    assert 0.08e6 < rungs[0]["params"] < 0.15e6 and 2e6 < rungs[-1]["params"] < 3e6
    assert min(r["tokens"] for r in rungs) >= 1e6  # 488 steps of 2048 tokens: past the steep start
    assert over_one_epoch(rungs) == []


def test_a_size_may_carry_its_own_lr_and_budgets():
    sizes = [{**SMALL, "lr": 6e-3, "tokens": [2e6, 4e6]}, {"preset": "mini", "lr": 1.5e-3}, "tiny"]
    rungs = expand({"sizes": sizes, "tokens": [1e6]}, {"preset": "tiny", "d_model": 96}, "s.yaml")
    small = [r for r in rungs if r["overrides"].get("model.d_model") == 64]
    assert sorted(r["tokens"] for r in small) == [2000000, 4000000]  # its own budgets, not the section's
    assert {r["lr"] for r in small} == {6e-3} and small[0]["overrides"]["train.lr"] == 6e-3
    (mini,) = [r for r in rungs if r["overrides"].get("model.preset") == "mini"]
    # a preset in a mapping sets every dimension it defines: the base's d_model 96 does not leak in
    assert mini["overrides"]["model.d_model"] == 256 and mini["lr"] == 1.5e-3 and mini["tokens"] == 1000000
    (tiny,) = [r for r in rungs if r["overrides"].get("model.preset") == "tiny"]
    assert tiny["lr"] is None and "train.lr" not in tiny["overrides"]
    only_own = expand({"sizes": [{**SMALL, "tokens": [1e6]}, {"preset": "tiny", "tokens": [2e6]}]}, BASE)
    assert sorted(r["tokens"] for r in only_own) == [1000000, 2000000]


@pytest.mark.parametrize(
    ("sizes", "words"),
    [
        (
            [{**SMALL, "lr": 0}, "tiny"],
            "scaling.sizes[0].lr: must be a positive number (this size's train.lr)",
        ),
        ([{**SMALL, "lr": "fast"}, "tiny"], "scaling.sizes[0].lr: must be a positive number"),
        (["tiny", {**SMALL, "lrr": 1e-3}], "scaling.sizes[1]: lrr: unknown key; allowed keys:"),
        (["tiny", {**SMALL, "tokens": [1e6, 0]}], "scaling.sizes[1].tokens[1]: must be a positive number"),
        (["tiny", {**SMALL, "tokens": [1e6], "tokens_per_param": [5]}], "scaling.sizes[1]: give at most one"),
        (["tiny", {"preset": "huge"}], "scaling.sizes[1].preset: 'huge' is not a preset; presets: tiny"),
        (["tiny", {"lr": 1e-3}], "scaling.sizes[1]: needs a preset or model keys besides lr"),
    ],
)
def test_bad_per_size_keys_are_refused_naming_file_and_key(sizes, words):
    with pytest.raises(LadderError) as err:
        expand({"sizes": sizes, "tokens": [1e6]}, BASE, "s.yaml")
    assert f"s.yaml: {words}" in str(err.value)
    if "unknown key" in words:
        assert "or a size's own lr, tokens, tokens_per_param" in str(err.value)
