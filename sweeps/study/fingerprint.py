"""A study's fingerprint: what defines its results, compared when a study resumes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from arch.configtree import dump

# Trial keys added after studies were run, at the value that computes what they computed before.
LATER_DEFAULTS = {
    "trial.data.order": "windows",
    "trial.model.qk_norm_eps": None,  # null: norm_eps, what the qk norms used before the key
    "trial.model.residual.gate_bias": False,
    "trial.model.residual.use_tanh": True,
    "trial.model.residual.norm_eps": "model",
    "trial.model.residual.sepln_layers": "all",
    "trial.model.residual.da_norm_form": "satformer",
    "trial.model.residual.realloc_rounding": "satformer",
    # the recall probe measures the final weights and changes no training number
    "trial.data.repeats": 0.0,
    "trial.data.repeat_tokens": "window",
    "trial.data.records.fraction": 0.0,  # the records mix (trainers.data.records), off
    "trial.data.records.per_window": 4,
    "trial.data.records.loss": "values",
    "trial.data.records.symbols": "text",
    "trial.recall.windows": 128,
    "trial.recall.at": "end",
    "trial.train.micro_batch": None,  # null: batch_size and grad_accum as given
}


def _flatten(tree: Any, prefix: str = "") -> dict[str, str]:
    if isinstance(tree, Mapping) and tree:
        out: dict[str, str] = {}
        for key, value in tree.items():
            out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: json.dumps(tree, sort_keys=True, default=str)}


def fingerprint(study) -> dict[str, str]:
    """What defines this study's results, flattened to key paths -> JSON values: the resolved
    base trial, the space, sampler, objectives, counts, scheduler, reference, time budget, probe, the
    hypervolume history's bounds and the lm-eval tasks scored (`evals:`, but its batch size).
    Not in it (changing them changes no result): max_concurrent, resources (but its workers,
    in the trial: they change the memory of a worker), probe.max_models, evals.batch_size,
    backend, ray, output, name and description."""
    trial = study.base.to_dict()
    if trial["train"]["workers"] == 1:  # the default: older studies' fingerprints stay as they were
        del trial["train"]["workers"]
    parts = {
        "trial": trial,
        "sampler": dump(study.sampler),
        "objectives": dump(study.objectives),
        "n_trials": study.n_trials,
        "repeats": study.repeats,
        **({"repeats_max": study.repeats_max} if study.repeats_max is not None else {}),  # old studies resume
        "scheduler": dump(study.scheduler),
        "reference": study.reference,
        **({"budget": dump(study.budget)} if study.budget.time is not None else {}),  # old studies resume
        **({"reference_match": dump(study.reference_match)} if study.reference_match else {}),
        **({"tune": dump(study.tune)} if study.tune is not None else {}),
        "probe": {k: v for k, v in dump(study.probe).items() if k != "max_models"},  # grouping only
        **({"hypervolume": study.hypervolume} if study.hypervolume is not None else {}),  # its scale
        **(
            {"evals": {k: v for k, v in dump(study.evals).items() if k != "batch_size"}}
            if study.evals
            else {}
        ),
    }
    space = {f"space.{name}": json.dumps(dump(p), sort_keys=True) for name, p in study.space.items()}
    flat = _flatten(parts)
    for key, default in LATER_DEFAULTS.items():  # at their defaults: older studies still resume
        if flat.get(key) == json.dumps(default):
            del flat[key]
    return {**flat, **space}
