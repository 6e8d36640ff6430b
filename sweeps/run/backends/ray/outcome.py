"""What a Ray trial reports last, and the outcome the launcher reads back from Tune's result.

The worker ends with one report carrying `sweep_status` (`final_report`); a trial whose last
result lacks it was stopped early (ASHA) and never enters a front (`outcome_of`).
"""

from __future__ import annotations

import json

from sweeps.run.backends.ray.train import PLACEMENT_GROUP
from sweeps.run.worker import Outcome

FINAL_KEYS = ("sweep_status", "sweep_error", "sweep_wall_s", "sweep_metrics", "sweep_machine")


def final_report(outcome: Outcome) -> dict:
    """The trial's last report: its metrics, and the keys that say how it ended."""
    return {
        **outcome.metrics,
        "sweep_status": outcome.status,
        "sweep_error": outcome.error[:4000],
        "sweep_wall_s": outcome.wall_s,
        "sweep_metrics": json.dumps(sorted(outcome.metrics)),
        **({"sweep_machine": json.dumps(outcome.machine)} if outcome.machine else {}),
    }


def outcome_of(result: dict | None, error: bool) -> Outcome:
    """The trial's outcome from its last Tune result: exactly the metrics the trial named in its
    final report (Ray adds its own keys and the flattened `config/...` to every result); a trial
    stopped early (ASHA) reported only its training metrics."""
    result = dict(result or {})
    if "sweep_metrics" in result:
        names = json.loads(result["sweep_metrics"])
    else:
        from ray.tune.result import AUTO_RESULT_KEYS

        ray_keys = {
            *AUTO_RESULT_KEYS,
            *FINAL_KEYS,
            PLACEMENT_GROUP,
            "done",
            "trial_id",
            "experiment_tag",
            "should_checkpoint",
        }
        names = [k for k in result if k not in ray_keys and not k.startswith("config/")]
    metrics = {k: float(result[k]) for k in names if _number(result.get(k))}
    if "sweep_status" in result:
        return Outcome(
            str(result["sweep_status"]),
            metrics,
            str(result.get("sweep_error", "")),
            float(result.get("sweep_wall_s", 0.0)),
            machine=_machine(result.get("sweep_machine")),
        )
    wall = float(result.get("time_total_s", 0.0))
    if error:
        return Outcome(
            "error", metrics, "the Ray trial failed outside training (see Ray's trial folder)", wall
        )
    return Outcome("pruned", metrics, "", wall)


def _machine(text: str | None) -> tuple[str, dict] | None:
    if not text:
        return None
    key, kernels = json.loads(text)
    return key, kernels


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)
