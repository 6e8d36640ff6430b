"""The rungs of a `scaling:` section: a pure expansion, sizes x token budgets, into the override
dicts that make each rung an ordinary trial (sweeps.study makes them one grid parameter, `rung`).

    scaling:
      sizes:                           # preset names, or mappings of model keys (a `preset:` among them)
        - {d_model: 64, n_layers: 2, n_heads: 2, d_ff: 192, lr: 6.0e-3}   # `lr`: this size's train.lr
        - tiny
        - {preset: mini, lr: 1.5e-3, tokens: [1000000]}  # `tokens` / `tokens_per_param`: this size's own
      tokens: [300000, 1000000]        # budgets for every size, or:
      tokens_per_param: [5, 20]        # D = ratio x N (N: non-embedding parameters)
      token_scale: 1.0                 # multiplies every budget (smoke runs, tests)
      targets: [small, medium, large, xl]   # default; or {name, params, tokens} mappings

`expand(section, base_model, source, train_tokens)` returns one dict per rung, smallest compute
first, labelled r0, r1, ...: `label`, `overrides` (trial key paths, as the search space names them:
`model.d_model`, `train.tokens`, `train.lr` for a size with its own `lr`; a preset size sets
`model.preset` and every dimension the preset defines, so a base model's own d_model cannot leak
into it), `lr` (the size's learning rate, None: the trial's), `params` (N),
`tokens` (D), `flops` (6 N D) and `epochs` (D over the corpus's training split, when given: a
rung past one epoch repeats data, which bends the fitted curve; Muennighoff et al. 2023).
`targets(section, source)` resolves the targets. Errors name the file and the key.
"""

from __future__ import annotations

import math

from arch.config import ModelConfig, presets
from arch.configtree import ConfigError, parse
from sweeps.study.targets import PAPER_SCALES, Target, non_embedding_params, paper_targets
from trainers.config import DataConfig
from trainers.data.corpora import CorpusUnavailable, load_corpus


class LadderError(ValueError):
    """A table or a ladder that cannot be fitted; the message says what and why."""


KEYS = ("sizes", "tokens", "tokens_per_param", "token_scale", "targets")
BUDGETS = ("tokens", "tokens_per_param")  # a section's budgets for every size, or a size's own
SIZE_KEYS = ("lr", *BUDGETS)  # keys of a size mapping that are not model keys


def _fail(source: str, key: str, message: str):
    raise _error(source, key, message)


def _error(source: str, key: str, message: str) -> LadderError:
    """A LadderError that also carries its key (`scaling.<key>`) and problem, for ConfigError."""
    err = LadderError(f"{source}: scaling.{key}: {message}" if key else f"{source}: scaling: {message}")
    err.key, err.problem = f"scaling.{key}" if key else "scaling", message
    return err


def _positive_list(section: dict, key: str, source: str, prefix: str = "") -> list[float]:
    values = section[key]
    if not isinstance(values, list) or not values:
        _fail(source, prefix + key, f"must be a non-empty list of positive numbers, got {values!r}")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
            _fail(source, f"{prefix}{key}[{i}]", f"must be a positive number, got {v!r}")
    return [float(v) for v in values]


def _size_model(size, i: int, base_model: dict, source: str) -> tuple[dict, dict]:
    """(the rung's model mapping, its model overrides as trial key paths) of a size without its
    SIZE_KEYS; a `preset:` in a mapping expands as a preset name does."""

    key = f"sizes[{i}]"
    if isinstance(size, dict) and size:
        named = size.get("preset")
        if named is not None and named not in presets():
            _fail(source, f"{key}.preset", f"{named!r} is not a preset; presets: {', '.join(presets())}")
        table = presets()[named] if named is not None else {}
        overrides = {**table, **size}
        model = {k: v for k, v in base_model.items() if k not in table} | overrides
    elif isinstance(size, str):
        if size not in presets():
            _fail(source, key, f"{size!r} is not a preset; presets: {', '.join(presets())}")
        overrides = {"preset": size, **presets()[size]}
        model = {k: v for k, v in base_model.items() if k not in presets()[size]} | overrides
    else:
        _fail(source, key, f"must be a preset name or a mapping of model keys, got {size!r}")
    return model, {f"model.{k}": v for k, v in overrides.items()}


def _size_extras(size, i: int, source: str) -> tuple[dict, float | None, tuple[str, list[float]] | None]:
    """(the size without SIZE_KEYS, its lr or None, its own (budget key, budgets) or None)."""
    if not isinstance(size, dict):
        return size, None, None
    lr = size.get("lr")
    if lr is not None and (isinstance(lr, bool) or not isinstance(lr, int | float) or not 0 < lr < math.inf):
        _fail(source, f"sizes[{i}].lr", f"must be a positive number (this size's train.lr), got {lr!r}")
    given = [k for k in BUDGETS if k in size]
    if len(given) > 1:
        _fail(source, f"sizes[{i}]", f"give at most one of {', '.join(BUDGETS)}; got {', '.join(given)}")
    own = (given[0], _positive_list(size, given[0], source, f"sizes[{i}].")) if given else None
    model = {k: v for k, v in size.items() if k not in SIZE_KEYS}
    if not model:
        _fail(source, f"sizes[{i}]", f"needs a preset or model keys besides {', '.join(SIZE_KEYS)}")
    return model, None if lr is None else float(lr), own


def expand(section: dict, base_model: dict, source: str = "the study", train_tokens: float | None = None):
    """The rungs of `section` (the mapping under `scaling:`), smallest compute first."""

    if not isinstance(section, dict):
        raise _error(source, "", f"must be a mapping with keys {', '.join(KEYS)}")
    unknown = sorted(set(section) - set(KEYS))
    if unknown:
        _fail(source, unknown[0], f"unknown key; allowed: {', '.join(KEYS)}")
    if "sizes" not in section:
        raise _error(source, "sizes", "missing (a list of preset names or model overrides)")
    sizes = section["sizes"]
    if not isinstance(sizes, list) or len(sizes) < 2:
        _fail(source, "sizes", f"needs 2 or more sizes to fit a law in N, got {sizes!r}")
    given = [k for k in BUDGETS if k in section]
    extras = [_size_extras(size, i, source) for i, size in enumerate(sizes)]
    if len(given) > 1 or (not given and any(own is None for _, _, own in extras)):
        why = "; or one in every size" if not given else ""
        raise _error(
            source, "tokens", f"give exactly one of {', '.join(BUDGETS)}{why}; got {given or 'none'}"
        )
    section_budgets = (given[0], _positive_list(section, given[0], source)) if given else None
    scale = section.get("token_scale", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not scale > 0:
        _fail(source, "token_scale", f"must be a positive number, got {scale!r}")
    rungs = []
    for i, (size, lr, own) in enumerate(extras):
        model, overrides = _size_model(size, i, base_model, source)
        try:
            ModelConfig.from_dict(model, path=f"scaling.sizes[{i}]", source=source)
        except ConfigError as err:
            issue = err.issues[0]
            rest = issue.path.removeprefix(f"scaling.sizes[{i}]").lstrip(".")
            problem = issue.problem
            if problem.startswith("unknown key"):  # the size's own keys are allowed too
                problem += f"; or a size's own {', '.join(SIZE_KEYS)}"
            raise _error(source, f"sizes[{i}]", f"{rest}: {problem}" if rest else problem) from None
        if lr is not None:
            overrides["train.lr"] = lr
        n = non_embedding_params(model)
        kind, budgets = own or section_budgets
        for b in budgets:
            d = max(1, round((b * n if kind == "tokens_per_param" else b) * scale))
            rung = {
                "overrides": {**overrides, "train.tokens": d},
                "params": n,
                "tokens": d,
                "flops": 6.0 * n * d,
                "lr": lr,
            }
            rung["epochs"] = d / train_tokens if train_tokens else None
            rungs.append(rung)
    rungs.sort(key=lambda r: (r["flops"], r["params"]))
    return [{"label": f"r{i}", **r} for i, r in enumerate(rungs)]


def over_one_epoch(rungs: list[dict]) -> list[str]:
    """One warning per rung that repeats its corpus's training split."""
    return [
        f"rung N={r['params']:.3g}, D={r['tokens']:.3g}: {r['epochs']:.2f} epochs of the training split "
        "(repeated data bends the fit; Muennighoff et al. 2023)"
        for r in rungs
        if r["epochs"] is not None and r["epochs"] > 1
    ]


def targets(section: dict, source: str = "the study") -> list[Target]:
    """`scaling.targets`: paper scale names (small, medium, large, xl: their non-embedding N and
    token budgets from studies/paper/) or {name, params, tokens} mappings; default: the four."""

    wanted = section.get("targets", list(PAPER_SCALES))
    if not isinstance(wanted, list) or not wanted:
        _fail(source, "targets", f"must be a non-empty list, got {wanted!r}")
    paper = None
    out = []
    for i, t in enumerate(wanted):
        if isinstance(t, str):
            if t not in PAPER_SCALES:
                _fail(
                    source, f"targets[{i}]", f"{t!r} is not a paper scale; scales: {', '.join(PAPER_SCALES)}"
                )
            paper = paper or {p.name: p for p in paper_targets()}
            out.append(paper[t])
        elif isinstance(t, dict) and set(t) == {"name", "params", "tokens"}:
            for key in ("params", "tokens"):
                v = t[key]
                if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0 or math.isinf(v):
                    _fail(source, f"targets[{i}].{key}", f"must be a positive number, got {v!r}")
            out.append(Target(str(t["name"]), float(t["params"]), float(t["tokens"])))
        else:
            _fail(
                source, f"targets[{i}]", f"must be a paper scale name or {{name, params, tokens}}, got {t!r}"
            )
    return out


def split_tokens(data) -> float | None:
    """Tokens in the training split of the trial's `data:` mapping: MQAR's train_examples x
    seq_len, a byte-level corpus's bytes less its validation tail; None when unknown without
    tokenizing (BPE) or when the corpus is not on this machine."""
    if not isinstance(data, dict):
        return None
    try:
        cfg = parse(DataConfig, data, "trial.data")
    except ConfigError:  # the trial's own check reports it
        return None
    if cfg.kind == "mqar":
        return float(cfg.train_examples * cfg.seq_len)
    if cfg.kind != "text" or cfg.tokenizer != "byte":
        return None
    try:
        n = len(load_corpus(cfg.corpus, cfg.path, cfg.max_bytes))
    except (CorpusUnavailable, OSError):
        return None
    return float(n - max(1, round(n * cfg.val_fraction)))
