"""`train_tokens_per_s` counts the training steps only: not validation, the recall probe, checkpoint
writes or data loading between batches, and not the warm-up steps."""

import types

import torch

import trainers.callbacks as callbacks
from trainers.callbacks import Throughput


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_only_the_steps_micro_batches_are_timed(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(callbacks.time, "perf_counter", clock)
    module = types.SimpleNamespace(device=torch.device("cpu"))
    trainer = types.SimpleNamespace(global_step=0, max_steps=10)
    meter = Throughput(tokens_per_step=100, warmup_steps=2)
    meter.on_train_start(trainer, module)
    for step in range(1, 11):
        for micro in range(2):  # grad_accum 2: each micro-batch takes 1 s, the first step's 5 s
            meter.on_train_batch_start(trainer, module, None, 2 * step + micro)
            clock.now += 5.0 if step == 1 else 1.0
            if micro == 1:
                trainer.global_step = step
            meter.on_train_batch_end(trainer, module, None, None, 2 * step + micro)
            clock.now += 0.5  # fetching the next batch
        if step % 3 == 0:
            clock.now += 100.0  # validation, the recall probe, a checkpoint: between batches
    # steps 3..10 counted (the first 2 skipped): 8 steps of 100 tokens in 8 x 2 s
    assert meter.tokens == 800 and meter.seconds == 16.0
    assert meter.value == 50.0


def test_no_counted_step_gives_nan(monkeypatch):
    meter = Throughput(tokens_per_step=100)
    assert meter.value != meter.value
