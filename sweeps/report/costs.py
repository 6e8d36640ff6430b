"""The cost probe's cache, results/<name>/costs.json: machine -> architecture key -> entry.

The probe (`sweeps.run.probe`) writes it; the fronts and the dry run read it. An entry holds one
architecture's seconds per step in each interleaved round, its paired ratios to the baseline of
the same shape, and the probe's metrics (`metric_values`)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from sweeps.study.architecture import arch_key, architecture
from trainers.timing import paired_ratios


def metric_values(ratio: float, base_tokens_per_s: float) -> dict[str, float]:
    """The probe's metrics (`source: probe` in trainers.metrics) of an architecture that runs at
    `ratio` times the baseline's speed, the baseline at `base_tokens_per_s`."""
    return {"tokens_per_s": ratio * base_tokens_per_s, "tokens_per_s_ratio": ratio}


def entry(
    arch: dict, seconds: list[float], base_seconds: list[float], base_tokens_per_s: float, clock: str
) -> dict:
    ratios = paired_ratios(base_seconds, seconds)
    ratio = statistics.median(ratios)
    return {
        "arch": arch,
        "seconds_per_step": seconds,
        "clock": clock,  # what seconds_per_step counts (entries without it: wall, one process)
        "ratios": ratios,
        **metric_values(ratio, base_tokens_per_s),
        "baseline_tokens_per_s": base_tokens_per_s,
    }


def costs_path(study) -> Path:
    return study.results_dir() / "costs.json"


def load_costs(path: Path) -> dict:
    """The probe's cache: machine -> architecture key -> entry ({} when absent or unreadable)."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):  # not probed yet, or cut mid-write: measure again
        return {}


def scale_samples(entries: dict, cfg) -> list[float]:
    """tokens/s of each timing of the absolute scale when `cfg`'s architecture is the probe's
    baseline (its rounds are ratios to itself, all 1), else [] (entries from before: [])."""
    found = probe_entry(entries, cfg)
    return list(found.get("baseline_tokens_per_s_samples", [])) if found else []


def round_samples(entries: dict, cfg) -> dict[str, dict[str, float]]:
    """Each probe metric's value in each probe round of `cfg`'s architecture in the cache
    `entries`, {metric: {round: value}} ({} when never probed)."""
    entry = probe_entry(entries, cfg)
    if entry is None:
        return {}
    per_round = [metric_values(ratio, entry["baseline_tokens_per_s"]) for ratio in entry["ratios"]]
    names = per_round[0] if per_round else {}
    return {name: {f"round{r}": v[name] for r, v in enumerate(per_round)} for name in names}


def save_costs(path: Path, entries: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(entries, indent=1, sort_keys=True))
    tmp.replace(path)  # atomic: a crash leaves the old file or the new one


# The trial's own clock (trainers.callbacks.Throughput), kept on its Optuna trial by the driver.
OWN_SPEED = "train_tokens_per_s"
# The clock of an entry made of its trials' own speeds (a one-architecture study, sweeps.run.probe).
TRIALS_CLOCK = "trials"


def trials_clocked(entries: dict) -> bool:
    """Whether the cache holds an entry of trials' own speeds rather than the probe's timings."""
    return any(e.get("clock") == TRIALS_CLOCK for table in entries.values() for e in table.values())


def probe_entry(entries: dict, cfg) -> dict | None:
    """The cache's entry of `cfg`'s architecture (probed on several machines: the last written)."""
    key = arch_key(architecture(cfg))
    found = [table[key] for table in entries.values() if key in table]
    return found[-1] if found else None


def throughput_check(
    points: dict[str, list[float]], references: dict[str, str], probe: dict[str, float]
) -> dict[str, dict]:
    """The probe's ratio beside the trials' own, per point against its reference: `points` {point:
    the train_tokens_per_s of each of its trials}, `references` {point: its reference point},
    `probe` {point: the probe's tokens_per_s_ratio (to the baseline of its shape)}. Against a
    reference that is not the baseline, the probe's ratio is the point's over the reference's.
    The trials' own ratio is the point's median over its trials over the reference's median
    (trials run one after another, not side by side: nothing to pair)."""
    out = {}
    for pid, ref in references.items():
        if pid == ref or pid not in probe or ref not in probe:
            continue
        row = {"probe": probe[pid] / probe[ref]}
        own, base = points.get(pid), points.get(ref)
        if own and base:
            row.update(trials=statistics.median(own) / statistics.median(base), seeds=len(own),
                       reference_seeds=len(base))  # fmt: skip
        out[pid] = row
    return out
