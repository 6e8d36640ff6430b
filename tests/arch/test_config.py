"""Config errors name the file, the full key path, what was given and what is allowed."""

import pytest

from arch import ConfigError, ModelConfig
from arch.configtree import parse_override, set_path

BAD = [
    ({"preset": "huge"}, "model.preset: given 'huge'; allowed: tiny, mini, small, medium, large, xl"),
    ({"n_layer": 3}, "model.n_layer: unknown key; did you mean 'n_layers'? allowed keys: preset, vocab_size"),
    ({"wibble": 3}, "model.wibble: unknown key; allowed keys: preset, vocab_size"),  # nothing close: no guess
    ({"n_layers": 0}, "model.n_layers: given 0; allowed: a number >= 1"),
    ({"n_layers": "six"}, "model.n_layers: given 'six'; allowed: an integer"),
    ({"qk_norm": "yes"}, "model.qk_norm: given 'yes'; allowed: true or false"),
    ({"d_model": 100, "n_heads": 3}, "model.d_model: given 100; must be divisible by n_heads 3"),
    ({"n_heads": 4, "n_kv_heads": 3}, "model.n_kv_heads: given 3; allowed: a divisor of n_heads 4"),
    ({"residual": {"kind": "dense"}}, "model.residual.kind: given 'dense'; allowed: "),
    (
        {"residual": {"kind": "value_residual", "activation": "gelu"}},
        "model.residual.activation: given 'gelu'; allowed: relu, sigmoid, sigmoid2, softplus, tanh, identity",
    ),
    (
        {"residual": {"kind": "value_residual", "mode": "gated", "granularity": "layer"}},
        "model.residual.granularity: given 'layer' with mode 'gated'; allowed pairs: static: layer, head;"
        " gated: token, token_head",
    ),
    (
        {"residual": {"kind": "value_residual", "mode": "static", "granularity": "token_head"}},
        "model.residual.granularity: given 'token_head' with mode 'static'",
    ),
    (
        {"n_layers": 6, "residual": {"kind": "value_residual", "tap_layer": 9}},
        "model.residual.tap_layer: given 9 with n_layers 6; allowed: 1 to 5",
    ),
    (
        {"n_layers": 6, "residual": {"kind": "value_residual", "tap_layer": 2, "consumers": 5}},
        "model.residual.consumers: given 5; allowed: 'all' or 1 to 4",
    ),
    (
        {"residual": {"kind": "value_residual", "consumers": "some"}},
        "model.residual.consumers: given 'some'; allowed: one of all or int",
    ),
    (
        {"residual": {"kind": "value_residual", "mode": "static", "activation": "tanh"}},
        "model.residual.activation: applies only to mode 'gated', not 'static'",
    ),
    (
        {"residual": {"kind": "value_residual", "lambda_tap": 0.3}},
        "model.residual.lambda_tap: applies only to mode 'static', not 'gated'",
    ),
    ({"residual": {"kind": "none", "mode": "gated"}}, "model.residual.mode: unknown key; allowed keys: kind"),
]


@pytest.mark.parametrize("mapping, message", BAD, ids=[m for _, m in BAD])
def test_bad_model_configs_are_refused_with_path_and_choices(mapping, message):
    with pytest.raises(ConfigError) as err:
        ModelConfig.from_dict({"preset": "tiny", **mapping}, source="study.yaml")
    text = str(err.value)
    assert text.startswith("study.yaml: ")
    assert message in text, text


def test_all_problems_are_reported_at_once():
    with pytest.raises(ConfigError) as err:
        ModelConfig.from_dict({"n_layers": 0, "bogus": 1, "residual": {"kind": "value_residual", "x": 1}})
    paths = {issue.path for issue in err.value.issues}
    assert paths == {"model.n_layers", "model.bogus", "model.residual.x"}


def test_overrides_set_nested_paths_with_yaml_values():
    tree = {"model": {"preset": "tiny"}}
    for text in ["model.residual.kind=value_residual", "model.n_layers=6", "model.residual.consumers=all"]:
        set_path(tree, *parse_override(text))
    cfg = ModelConfig.from_dict(tree["model"])
    assert cfg.n_layers == 6 and cfg.residual.kind == "value_residual" and cfg.residual.consumers == "all"
    with pytest.raises(ConfigError, match="key.path=value"):
        parse_override("model.n_layers")


def test_designs_describe_themselves_with_the_keys_of_their_mode():
    static = ModelConfig.from_dict(
        {"preset": "tiny", "residual": {"kind": "value_residual", "mode": "static"}}
    )
    assert static.residual.descriptors() == {
        "kind": "value_residual", "mode": "static", "granularity": "layer", "tap_layer": "1",
        "consumers": "all", "coefficient": "fixed",
    }  # fmt: skip
    gated = ModelConfig.from_dict({"preset": "tiny", "residual": {"kind": "value_residual"}})
    assert gated.residual.descriptors()["activation"] == "relu"
    assert "coefficient" not in gated.residual.descriptors()
    dense = ModelConfig.from_dict({"preset": "tiny", "residual": {"kind": "muddformer"}})
    assert dense.residual.descriptors()["kind"] == "muddformer" and "streams" in dense.residual.descriptors()
