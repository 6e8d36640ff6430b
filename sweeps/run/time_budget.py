"""Equal time: each design's token budget from the cost probe's speed (`budget: {time: ...}`).

With `budget.time` every design trains for the same time instead of the same tokens:

    steps_d  = round(S x tokens_per_s_d / tokens per step)     (at least one)
    tokens_d = steps_d x tokens per step

where tokens_per_s_d is the probe's speed of design d (timed side by side with the others in
interleaved rounds, sweeps.run.probe) and S the budget in seconds: `time: S`, or `time: reference`,
the time the reference design needs for the trial's `train.tokens` (S = train.tokens /
tokens_per_s_reference: the reference trains exactly its train.tokens). Each run then goes through
its whole schedule (warm-up, decay) over its own steps, so the verdicts on val_loss compare
finished runs at equal time; reading a slower design's curve at the fastest one's end
(sweeps.report.equal_cost) compares it mid-schedule, a curve and not a verdict.

The time is the probe's time of training steps: validation, data loading and start-up are not in
it. The resolution is written once to results/<name>/time_budget.json and read back when the
study resumes, so its runs keep their tokens even where another probe would time them otherwise.

This returns new trial configs and never changes the Study: the driver asks `TimeBudget.config`
for the config of each run it starts (sweeps.run.driver.Driver.begin).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from sweeps.report.equal_cost import TIME_BUDGET_FILE
from sweeps.study.architecture import arch_key, architecture
from sweeps.study.reference import reference_design
from trainers.metrics import TOKENS_PER_S


def tokens_for(seconds: float, tokens_per_s: float, tokens_per_step: int) -> int:
    """The tokens of the whole optimizer steps that fit `seconds` at `tokens_per_s` (at least one)."""
    return max(1, round(seconds * tokens_per_s / tokens_per_step)) * tokens_per_step


def with_tokens(cfg, tokens: int):
    """A copy of the trial config `cfg` that trains `tokens`."""
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, tokens=tokens))


class TimeBudget:
    """A study's `budget.time` resolved at its probe (see the module docstring)."""

    def __init__(self, study, probe):
        self.study, self.probe = study, probe
        self.path = study.results_dir() / TIME_BUDGET_FILE
        self.record = json.loads(self.path.read_text()) if self.path.is_file() else None

    @property
    def seconds(self) -> float:
        if self.record is None:
            self.record = {"time": self.study.budget.time, "seconds": self._seconds(), "designs": {}}
            self._save()
        return self.record["seconds"]

    def _seconds(self) -> float:
        time = self.study.budget.time
        if time != "reference":
            return float(time)
        reference = self.study.trial_config(reference_design(self.study))
        return reference.train.tokens / self._speed(reference)

    def _speed(self, cfg) -> float:
        if self.probe is None:
            raise RuntimeError("budget.time needs the cost probe's speeds; this launch has no probe")
        self.probe.ensure([cfg])
        speed = self.probe.metrics(cfg).get(TOKENS_PER_S)
        if not speed:
            raise RuntimeError(
                f"budget.time: the cost probe has no {TOKENS_PER_S} for {arch_key(architecture(cfg))}"
            )
        return speed

    def config(self, cfg):
        """`cfg` with train.tokens for the budget's time at its design's probe speed."""
        seconds = self.seconds
        key = arch_key(architecture(cfg))
        known = self.record["designs"].get(key)
        if known is None:
            speed = self._speed(cfg)
            tokens = tokens_for(seconds, speed, cfg.tokens_per_step)
            known = self.record["designs"][key] = {
                "design": cfg.model.residual.kind, "tokens_per_s": speed, "tokens": tokens,
                "steps": tokens // cfg.tokens_per_step,
            }  # fmt: skip
            self._save()
        return with_tokens(cfg, known["tokens"])

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(f"{self.path}.tmp")
        tmp.write_text(json.dumps(self.record, indent=2))
        tmp.replace(self.path)
