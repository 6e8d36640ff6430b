"""A stand-in for trainers.fit with the same contract, instant and deterministic (tests only).

val_loss: 3.0, minus 0.2 for value_residual designs, plus 0.01 * seed (a tanh gate: 3.0 +
0.01 * seed + 0.05 * (-1)^seed, a difference to the baseline no number of seeds decides);
peak_mem_mb: 100 (+10 for value_residual). `train.lr >= 1` diverges; `train.min_lr_ratio == 0.5`
hangs (a polling loop that never ends, like a data loader waiting on dead workers).
FAKE_FIT_SLEEP (seconds) makes every run take that long (for kill/resume tests). FAKE_FIT_LR_BOWL=1
adds 0.1 * (log10(lr) + 3)^2 to val_loss: a search over train.lr then has something to find, and
its points stop tying (bench.scale --loss lr-bowl). `PROBE` stands in for the cost probe:
tokens_per_s 1000 for the baseline and 900 otherwise.
"""

import math
import os
import time
from types import SimpleNamespace

from trainers import TrainingDiverged


def fit(config, *, loggers=(), callbacks=(), data_root=None, checkpoint_path=None):
    """val_loss falls with the fraction of the budget: 1.5, 1.0, 0.5, 0 above its final value."""
    return _fit(config, lambda step, steps, tokens: (steps - step) * 0.5, loggers, callbacks)


def fit_by_tokens(config, *, loggers=(), callbacks=(), data_root=None, checkpoint_path=None):
    """val_loss falls with the tokens seen, whatever the budget (4096 / tokens above its final
    value), as real training roughly does: ASHA compares runs of different budgets fairly."""
    return _fit(config, lambda step, steps, tokens: 4096.0 / tokens, loggers, callbacks)


# Neither imports Lightning: the worker gives them a logger and report hook that do not either
# (sweeps.run.worker.execute), as bench.scale's trials measure the launcher, not Lightning's import.
fit.without_lightning = fit_by_tokens.without_lightning = True


def _fit(config, above_final, loggers, callbacks):
    if config.train.lr >= 1.0:
        raise TrainingDiverged(3, float("nan"))
    while config.train.min_lr_ratio == 0.5:
        time.sleep(0.05)
    gated = config.model.residual.kind != "none"
    noisy = gated and getattr(config.model.residual, "activation", None) == "tanh"
    loss = 3.0 + 0.05 * (-1) ** config.seed if noisy else 3.0 - 0.2 * gated
    if os.environ.get("FAKE_FIT_LR_BOWL") == "1":  # best at lr 1e-3, as bench.scale.search_trials
        loss += 0.1 * (math.log10(config.train.lr) + 3) ** 2
    final = {
        "val_loss": loss + 0.01 * config.seed,
        "train_tokens_per_s": 800.0,
        "peak_mem_mb": 110.0 if gated else 100.0,
        "params_total": 1000.0,
    }
    steps = 4
    pause = float(os.environ.get("FAKE_FIT_SLEEP", "0")) / steps
    for step in range(1, steps + 1):
        time.sleep(pause)
        tokens = config.train.tokens * step / steps
        metrics = {
            **final,
            "val_loss": final["val_loss"] + above_final(step, steps, tokens),
            "tokens": tokens,
        }
        evaluate(metrics, step, loggers, callbacks)
    finish(loggers)
    return {**final, "tokens": float(config.train.tokens)}


def evaluate(metrics: dict, step: int, loggers=(), callbacks=()) -> None:
    """What one evaluation of trainers.fit does for the launcher: the loggers get the metrics and
    the callbacks their `on_validation_end` (the launcher's report to Ray Tune or Optuna)."""
    for logger in loggers:
        logger.log_metrics(metrics, step=step)
    trainer = SimpleNamespace(sanity_checking=False, callback_metrics=metrics)
    for cb in callbacks:
        cb.on_validation_end(trainer, None)


def finish(loggers=()) -> None:
    for logger in loggers:
        logger.finalize("success")


class FakeProbe:
    seconds = 0.0

    def ensure(self, configs) -> None:
        list(configs)

    def record(self, config, metrics, where=None) -> None:
        pass

    def metrics(self, config) -> dict[str, float]:
        fast = config.model.residual.kind == "none"
        return {"tokens_per_s": 1000.0 if fast else 900.0, "tokens_per_s_ratio": 1.0 if fast else 0.9}


PROBE = FakeProbe()
