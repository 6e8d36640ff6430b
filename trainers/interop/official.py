"""The official SATFormer code's six model families (github.com/SkyeGunasekaran/SATFormer,
models/*/configuration_*.py and modeling_*.py) as arch configs and weights, and back.

`model_config(family, official)` maps an official config (its config.json) onto arch's model
mapping and `arch_state(family, official, tensors)` its state dict onto arch's names; anything
arch cannot express is refused with `Refused`, naming the key. `official_state(family, model)`
is the inverse (the round-trip tests, and a way back to the official classes).

The official attention keeps q_proj, k_proj, v_proj apart and rotates Q and K in the rotate-half
layout (fla's RotaryEmbedding); arch's attention loads exactly those names and permutes each
head's Q and K rows (and qk-norm weights) into its interleaved layout (arch.layers.Attention's
load hook), so the mapping hands them over by those names and arch does the rest. Its qk norms
are fla's RMSNorm at eps 1e-5 whatever `norm_eps` says: arch's `qk_norm_eps`.
"""

from __future__ import annotations

import torch

from arch.layers import interleave

FAMILIES = ("satformer", "resformer", "transformer", "denseformer", "muddformer", "hyperconnections")
FLA_RMSNORM_EPS = 1e-5  # fla.modules.RMSNorm's default: the official qk norms'

# Keys of an official config that do not change what the model computes: transformers' own
# bookkeeping, fused-kernel switches (the same maths), the loss's options, init ranges.
IGNORED = {
    "architectures", "model_type", "transformers_version", "torch_dtype", "dtype", "_name_or_path",
    "auto_map", "use_cache", "bos_token_id", "eos_token_id", "pad_token_id", "output_attentions",
    "output_hidden_states", "return_dict", "fuse_norm", "fuse_swiglu", "fuse_cross_entropy",
    "fuse_linear_cross_entropy", "use_l2warp", "keys_to_ignore_at_inference", "chunk_size_feed_forward",
    "is_encoder_decoder", "tie_encoder_decoder", "id2label", "label2id", "problem_type",
    "initializer_range", "value_residual_lambda2_init", "hidden_ratio", "hidden_act",
    "elementwise_affine", "qkv_bias", "window_size", "intermediate_size", "vocab_size", "hidden_size",
    "num_hidden_layers", "num_heads", "num_kv_heads", "qk_norm", "rope_theta", "max_position_embeddings",
    "norm_eps", "tie_word_embeddings",
}  # fmt: skip
FAMILY_KEYS = {
    "satformer": {"use_value_residual", "value_residual_gate", "value_residual_proj_bias",
                  "value_residual_last_k"},
    "resformer": {"use_value_residual", "value_residual_last_k"},
    "transformer": set(),
    "denseformer": {"dwa_dilation", "dwa_period"},
    "muddformer": {"num_ways", "param_realloc", "use_pre_post_da_norm"},
    "hyperconnections": {"expansion_rate", "use_dynamic_hc", "use_tanh", "hc_norm_type"},
}  # fmt: skip
# What the official classes default to, for keys a config.json leaves out.
DEFAULTS = {
    "num_kv_heads": None, "qkv_bias": False, "qk_norm": False, "window_size": None,
    "rope_theta": 10000.0, "max_position_embeddings": 2048, "hidden_ratio": 4, "intermediate_size": None,
    "hidden_act": "swish", "initializer_range": 0.02, "elementwise_affine": True, "norm_eps": 1e-6,
    "tie_word_embeddings": False, "vocab_size": 32000, "use_value_residual": True,
    "value_residual_gate": "relu", "value_residual_proj_bias": False, "value_residual_last_k": None,
    "dwa_dilation": 1, "dwa_period": 1, "num_ways": 4, "param_realloc": True, "use_pre_post_da_norm": True,
    "expansion_rate": 4, "use_dynamic_hc": True, "use_tanh": True, "hc_norm_type": "rms",
}  # fmt: skip


class Refused(ValueError):
    """What arch cannot express (or the input lacks), naming the key."""


def _get(official: dict, key: str):
    return official.get(key, DEFAULTS.get(key))


def _require(official: dict, key: str, allowed, why: str) -> None:
    value = _get(official, key)
    if value not in allowed:
        raise Refused(f"{key}: given {value!r}; arch expresses {' or '.join(map(repr, allowed))} ({why})")


def _d_ff(family: str, official: dict) -> int:
    """The MLP width as the official block computes it when intermediate_size is not given."""
    size = _get(official, "intermediate_size")
    if size is not None:
        return int(size)
    width = int(official["hidden_size"] * _get(official, "hidden_ratio") * 2 / 3)
    if family == "muddformer":
        return max(256, (width + 127) // 256 * 256)
    return 256 * ((width + 256 - 1) // 256)  # fla's GatedMLP


def _residual(family: str, official: dict) -> dict:
    if family == "transformer" or (
        family in ("satformer", "resformer") and not _get(official, "use_value_residual")
    ):
        return {"kind": "none"}
    last_k = _get(official, "value_residual_last_k")
    consumers = "all" if last_k is None else int(last_k)
    if family == "satformer":
        gate = _get(official, "value_residual_gate")
        bias = bool(_get(official, "value_residual_proj_bias"))
        return {"kind": "value_residual", "mode": "gated", "granularity": "token_head", "activation": gate,
                "gate_bias": bias, "consumers": consumers}  # fmt: skip
    if family == "resformer":
        return {"kind": "value_residual", "mode": "static", "granularity": "layer", "coefficient": "softmax",
                "consumers": consumers}  # fmt: skip
    if family == "denseformer":
        return {"kind": "denseformer", "dilation": int(_get(official, "dwa_dilation")),
                "period": int(_get(official, "dwa_period"))}  # fmt: skip
    if family == "muddformer":
        # num_ways 1 keeps Q, K and V on their last 4-way values (the embedding): not arch's streams r
        _require(official, "num_ways", (4,), "four streams Q, K, V, R")
        return {"kind": "muddformer", "preset": "satformer_paper",
                "param_realloc": bool(_get(official, "param_realloc")),
                "pre_post_da_norm": bool(_get(official, "use_pre_post_da_norm"))}  # fmt: skip
    _require(official, "hc_norm_type", ("rms", "layer"), "the dynamic weights' norm")
    return {
        "kind": "hyper_connections",
        "expansion_rate": int(_get(official, "expansion_rate")),
        "stream_index": "sublayer",
        "out_proj_scale": "inv_sqrt_n",  # the official init (o_proj, down_proj / sqrt(n)); init only
        **(
            {"mode": "dynamic", "use_tanh": bool(_get(official, "use_tanh")), "norm_eps": "torch_default",
             "norm": "rms" if _get(official, "hc_norm_type") == "rms" else "layer"}
            if _get(official, "use_dynamic_hc") else {"mode": "static"}
        ),
    }  # fmt: skip


def model_config(family: str, official: dict) -> dict:
    """arch's `model:` mapping of an official config; Refused for what arch cannot express."""
    if family not in FAMILIES:
        raise Refused(f"--family: given {family!r}; allowed: {', '.join(FAMILIES)}")
    for key in official:
        if key not in IGNORED and key not in FAMILY_KEYS[family]:
            raise Refused(f"{key}: not a key arch maps for family {family!r} (a newer official config?)")
    _require(official, "qkv_bias", (False,), "no biases on Q, K, V")
    _require(official, "window_size", (None,), "full causal attention")
    _require(official, "hidden_act", ("swish",), "SwiGLU")
    _require(official, "elementwise_affine", (True,), "scaled RMSNorms")
    heads = int(official["num_heads"])
    model = {
        "vocab_size": int(_get(official, "vocab_size")),
        "d_model": int(official["hidden_size"]),
        "n_layers": int(official["num_hidden_layers"]),
        "n_heads": heads,
        "n_kv_heads": int(_get(official, "num_kv_heads") or heads),
        "d_ff": _d_ff(family, official),
        "max_seq_len": int(_get(official, "max_position_embeddings")),
        "rope_base": float(_get(official, "rope_theta")),
        "qk_norm": bool(_get(official, "qk_norm")),
        "tie_embeddings": bool(_get(official, "tie_word_embeddings")),
        "norm_eps": float(_get(official, "norm_eps")),
        "init_std": float(_get(official, "initializer_range")),
        "init": "normal",
        "residual": _residual(family, official),
    }
    if model["qk_norm"]:
        model["qk_norm_eps"] = FLA_RMSNORM_EPS
    return model


def _names(family: str, model_cfg) -> dict[str, str]:
    """arch parameter name -> official name, for every tensor that is a plain rename (the
    attention's q/k/v by their separate names: arch's load hook fuses and permutes them)."""
    n = model_cfg.n_layers
    out = {"embed.weight": "model.embeddings.weight", "norm.weight": "model.norm.weight"}
    if not model_cfg.tie_embeddings:
        out["head.weight"] = "lm_head.weight"
    for i in range(n):
        a, o = f"blocks.{i}.", f"model.layers.{i}."
        out[a + "attn_norm.weight"] = o + (
            "attn_norm_q.weight" if family == "muddformer" else "attn_norm.weight"
        )
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            out[f"{a}attn.{proj}.weight"] = f"{o}attn.{proj}.weight"
        if model_cfg.qk_norm:
            out[a + "attn.q_norm.weight"] = o + "attn.q_norm.weight"
            out[a + "attn.k_norm.weight"] = o + "attn.k_norm.weight"
        out[a + "mlp_norm.weight"] = o + "mlp_norm.weight"
        for proj in ("gate_proj", "up_proj", "down_proj"):
            out[f"{a}mlp.{proj}.weight"] = f"{o}mlp.{proj}.weight"
    return out


def _design_tensors(family: str, model, official: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """arch's design tensors (residual.*) from the official ones; `official` is consumed (popped)."""
    design, cfg = model.residual, model.cfg
    out = {}
    take = official.pop
    if cfg.residual.kind == "value_residual" and cfg.residual.mode == "gated":
        weights, biases = [], []
        for layer in design.consumers:
            prefix = f"model.layers.{layer}.attn.value_residual_mixing.alpha_proj."
            weights.append(take(prefix + "weight").t())  # [N_kv, D] -> [D, N_kv]
            if cfg.residual.gate_bias:
                biases.append(take(prefix + "bias"))
        out["residual.mix.weight"] = torch.stack(weights)
        if biases:
            out["residual.mix.bias"] = torch.stack(biases)
    elif cfg.residual.kind == "value_residual":  # ResFormer: s softmax(z), lambda2 per layer
        out["residual.mix.lambda_scale"] = take("model.lambda_manager.lambda_scale").reshape(())
        out["residual.mix.lambda_logits"] = take("model.lambda_manager.lambda_logits").reshape(-1, 1)
        lam = [take(f"model.layers.{i}.attn.value_residual_mixing.lambda2") for i in design.consumers]
        out["residual.mix.lambda_self"] = torch.stack(lam).reshape(-1, 1)
    elif cfg.residual.kind == "denseformer":
        for b in design.inputs:
            out[f"residual.alphas.{b}"] = take(f"model.dwa_modules.alphas.{b - 1}.weight").reshape(-1)
    elif cfg.residual.kind == "muddformer":
        kv = []
        for i in range(cfg.n_layers):
            o = f"model.layers.{i}."
            out[f"residual.w1.{i}"] = take(o + "da.w1.weight")
            out[f"residual.w2.{i}"] = take(o + "da.w2.weight")
            out[f"residual.prior.{i}"] = take(o + "da.static_weight")
            kv.append(torch.stack([take(o + "attn_norm_k.weight"), take(o + "attn_norm_v.weight")]))
            if design.da_norm == "satformer":
                spans, ways = i + 2, design.ways[i]
                pre = [take(f"{o}da.pre_da_norms.{j}.weight") for j in range(spans)]
                post = [take(f"{o}da.post_da_norms.{c}.weight") for c in range(ways)]
                out[f"residual.pre_norm.{i}"] = torch.stack(pre)
                out[f"residual.post_norm.{i}"] = torch.stack(post)
        out["residual.kv_norm"] = torch.stack(kv)
    elif cfg.residual.kind == "hyper_connections":
        parts = {"static_alpha": [], "static_beta": [], "alpha_fn": [], "beta_fn": [], "alpha_scale": [],
                 "beta_scale": [], "norm_weight": [], "norm_bias": []}  # fmt: skip
        for i in range(cfg.n_layers):
            for hc in ("attn_hc", "mlp_hc"):
                o = f"model.layers.{i}.{hc}."
                parts["static_alpha"].append(take(o + "static_alpha"))
                parts["static_beta"].append(take(o + "static_beta"))
                if design.dynamic:
                    parts["alpha_fn"].append(take(o + "dynamic_alpha_proj"))
                    parts["beta_fn"].append(take(o + "dynamic_beta_proj").reshape(-1, 1))
                    parts["alpha_scale"].append(take(o + "dynamic_alpha_scale").reshape(()))
                    parts["beta_scale"].append(take(o + "dynamic_beta_scale").reshape(()))
                    parts["norm_weight"].append(take(o + "norm.weight"))
                    if design.norm_bias is not None:
                        parts["norm_bias"].append(take(o + "norm.bias"))
        out.update({f"residual.{k}": torch.stack(v) for k, v in parts.items() if v})
    return out


def arch_state(family: str, model, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """arch's state dict for `model` (built from `model_config`) from the official `tensors`;
    Refused naming the first official tensor that has no place in arch, or the one missing."""
    official = dict(tensors)
    if model.cfg.tie_embeddings and "lm_head.weight" in official:
        head = official.pop("lm_head.weight")
        if not torch.equal(head, official.get("model.embeddings.weight", head)):
            raise Refused(
                "lm_head.weight: differs from model.embeddings.weight with tie_word_embeddings true"
            )
    state = {}
    try:
        for arch_name, name in _names(family, model.cfg).items():
            state[arch_name] = official.pop(name)
        state.update(_design_tensors(family, model, official))
    except KeyError as err:
        raise Refused(f"{err.args[0]}: missing from the official state dict (family {family!r})") from None
    for name in official:
        raise Refused(f"{name}: an official tensor arch has no place for (family {family!r})")
    if model.cfg.tie_embeddings:
        state["head.weight"] = state["embed.weight"]  # one tensor, listed under both names
    return state


def official_state(family: str, model) -> dict[str, torch.Tensor]:
    """The inverse of `arch_state`: the official state dict of an arch model of that family."""
    cfg = model.cfg
    arch = model.state_dict()
    back = {}
    hd = cfg.head_dim
    order = torch.argsort(interleave(hd))  # interleaved -> rotate-half within each head
    for i in range(cfg.n_layers):
        wq, wk, wv = model.blocks[i].attn.qkv_weights()
        unperm = lambda w: w.view(-1, hd, w.shape[-1])[:, order].reshape(w.shape)  # noqa: E731
        back[f"blocks.{i}.attn.q_proj.weight"] = unperm(wq)
        back[f"blocks.{i}.attn.k_proj.weight"] = unperm(wk)
        back[f"blocks.{i}.attn.v_proj.weight"] = wv
        if cfg.qk_norm:
            back[f"blocks.{i}.attn.q_norm.weight"] = arch[f"blocks.{i}.attn.q_norm.weight"][order]
            back[f"blocks.{i}.attn.k_norm.weight"] = arch[f"blocks.{i}.attn.k_norm.weight"][order]
        gate, up = arch[f"blocks.{i}.mlp.gate_up_proj.weight"].chunk(2)
        back[f"blocks.{i}.mlp.gate_proj.weight"], back[f"blocks.{i}.mlp.up_proj.weight"] = gate, up
    out = {name: (back.get(a, arch.get(a))).clone() for a, name in _names(family, cfg).items()}
    if cfg.tie_embeddings:
        out["lm_head.weight"] = out["model.embeddings.weight"]
    out.update(_official_design(model))
    return out


def _official_design(model) -> dict[str, torch.Tensor]:
    design, r = model.residual, model.cfg.residual
    out = {}
    state = {k.removeprefix("residual."): v.clone() for k, v in model.state_dict().items()
             if k.startswith("residual.")}  # fmt: skip
    if r.kind == "value_residual" and r.mode == "gated":
        for j, layer in enumerate(design.consumers):
            prefix = f"model.layers.{layer}.attn.value_residual_mixing.alpha_proj."
            out[prefix + "weight"] = state["mix.weight"][j].t().contiguous()
            if r.gate_bias:
                out[prefix + "bias"] = state["mix.bias"][j]
    elif r.kind == "value_residual":
        out["model.lambda_manager.lambda_scale"] = state["mix.lambda_scale"]
        out["model.lambda_manager.lambda_logits"] = state["mix.lambda_logits"].reshape(-1)
        for j, layer in enumerate(design.consumers):
            out[f"model.layers.{layer}.attn.value_residual_mixing.lambda2"] = state["mix.lambda_self"][j, 0]
    elif r.kind == "denseformer":
        for b in design.inputs:
            out[f"model.dwa_modules.alphas.{b - 1}.weight"] = state[f"alphas.{b}"].reshape(1, -1)
    elif r.kind == "muddformer":
        for i in range(model.cfg.n_layers):
            o = f"model.layers.{i}."
            out[o + "da.w1.weight"], out[o + "da.w2.weight"] = state[f"w1.{i}"], state[f"w2.{i}"]
            out[o + "da.static_weight"] = state[f"prior.{i}"]
            out[o + "attn_norm_k.weight"], out[o + "attn_norm_v.weight"] = state["kv_norm"][i].unbind(0)
            if design.da_norm == "satformer":
                for j, w in enumerate(state[f"pre_norm.{i}"]):
                    out[f"{o}da.pre_da_norms.{j}.weight"] = w
                for c, w in enumerate(state[f"post_norm.{i}"]):
                    out[f"{o}da.post_da_norms.{c}.weight"] = w
    elif r.kind == "hyper_connections":
        for w in range(2 * model.cfg.n_layers):
            o = f"model.layers.{w // 2}.{('attn_hc', 'mlp_hc')[w % 2]}."
            out[o + "static_alpha"], out[o + "static_beta"] = (
                state["static_alpha"][w],
                state["static_beta"][w],
            )
            if design.dynamic:
                out[o + "dynamic_alpha_proj"] = state["alpha_fn"][w]
                out[o + "dynamic_beta_proj"] = state["beta_fn"][w].reshape(-1)
                out[o + "dynamic_alpha_scale"] = state["alpha_scale"][w].reshape(1)
                out[o + "dynamic_beta_scale"] = state["beta_scale"][w].reshape(1)
                out[o + "norm.weight"] = state["norm_weight"][w]
                if design.norm_bias is not None:
                    out[o + "norm.bias"] = state["norm_bias"][w]
    return {k: v.contiguous() for k, v in out.items()}


def official_config(family: str, model_cfg) -> dict:
    """The official config (config.json's keys) of an arch model that `model_config` maps back to it."""
    r = model_cfg.residual
    official = {
        "vocab_size": model_cfg.vocab_size, "hidden_size": model_cfg.d_model,
        "num_hidden_layers": model_cfg.n_layers, "num_heads": model_cfg.n_heads,
        "num_kv_heads": model_cfg.n_kv_heads, "qk_norm": model_cfg.qk_norm,
        "rope_theta": model_cfg.rope_base, "max_position_embeddings": model_cfg.max_seq_len,
        "intermediate_size": model_cfg.d_ff, "norm_eps": model_cfg.norm_eps,
        "tie_word_embeddings": model_cfg.tie_embeddings, "initializer_range": model_cfg.init_std,
    }  # fmt: skip
    if family in ("satformer", "resformer"):
        official["use_value_residual"] = r.kind == "value_residual"
        if r.kind == "value_residual":
            official["value_residual_last_k"] = None if r.consumers == "all" else r.consumers
    if family == "satformer" and r.kind == "value_residual":
        official["value_residual_gate"] = r.activation
        official["value_residual_proj_bias"] = r.gate_bias
    if family == "denseformer":
        official.update(dwa_dilation=r.dilation, dwa_period=r.period)
    if family == "muddformer":
        official.update(num_ways=4, param_realloc=r.param_realloc, use_pre_post_da_norm=r.pre_post_da_norm)
    if family == "hyperconnections":
        official.update(expansion_rate=r.expansion_rate, use_dynamic_hc=r.mode == "dynamic")
        if r.mode == "dynamic":
            official.update(use_tanh=r.use_tanh, hc_norm_type=r.norm)
    return official
