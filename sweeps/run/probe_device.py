"""The cost probe's device side: a step that does not fit is refused naming its design
(`DoesNotFit`, `refusal`), and models that do not fit the device together wait in host memory
between their turns (`Guarded`, `resident_on_device`). Used by `sweeps.run.probe`."""

from __future__ import annotations

from arch.configtree import Issue
from sweeps.run.memory import gpu_budget
from sweeps.study.architecture import arch_key, architecture


class DoesNotFit(Exception):
    """A probe step of architecture `key` ran out of device memory with `models` models on it."""

    def __init__(self, key: str, models: int):
        super().__init__(f"{key} does not fit ({models} model(s) on the device)")
        self.key, self.models = key, models


class Guarded:
    """A warmed-up step whose out-of-memory error names its architecture (`DoesNotFit`); with
    `park` (CUDA, `resident`), its model and optimizer state wait in host memory between its turns
    (`trainers.timing.interleaved` calls `enter` and `leave` around them)."""

    def __init__(self, key: str, step, device, models: int, park: bool = False):
        self.key, self.step, self.device, self.models, self.park = key, step, device, models, park
        if park:
            self.leave()

    def __call__(self) -> None:
        import torch

        try:
            self.step()
        except torch.cuda.OutOfMemoryError as err:
            raise DoesNotFit(self.key, self.models) from err

    def enter(self) -> None:
        if self.park:
            move(self.step, self.device)

    def leave(self) -> None:
        if self.park:
            move(self.step, "cpu")


def move(step, device) -> None:
    """A TrialStep's model, optimizer state and batches to `device` (parameters keep their identity,
    so the optimizer's state stays theirs)."""
    import torch

    step.model.to(device)
    for state in step.optimizer.state.values():
        for name, value in state.items():
            if isinstance(value, torch.Tensor):
                state[name] = value.to(device)
    step.batches = [b.to(device) for b in step.batches]
    if torch.device(device).type == "cpu":
        torch.cuda.empty_cache()  # what it held is the next model's


def describe_arch(arch: dict) -> str:
    """`model.residual.kind muddformer, micro-batch 16 x 4096, grad_accum 4, precision bf16-true,
    loss chunked, activation_checkpointing none`: what a refusal names."""
    train = arch["train"]
    return (
        f"model.residual.kind {arch['model']['residual']['kind']}, micro-batch {arch['batch_size']} x "
        f"{arch['seq_len']}, grad_accum {train['grad_accum']}, precision {arch['precision']}, loss "
        f"{train['loss']}, activation_checkpointing {train['activation_checkpointing']}"
    )


FITTING_STEP = (
    "a step that fits: train.micro_batch: auto (with resources.gpu_memory_gb), a smaller "
    "train.batch_size with a larger train.grad_accum, or train.activation_checkpointing: blocks"
)


def refusal(archs: dict[str, dict], does_not_fit: dict) -> Issue:
    """The Issue of a probe step that ran out of device memory (`time_architectures`)."""
    arch = archs[does_not_fit["key"]]
    others = does_not_fit["models"] - 1
    where = f"the cost probe's step of {describe_arch(arch)} ran out of memory on {does_not_fit['device']}"
    if others:
        return Issue(
            "trial.train.batch_size",
            f"{where} beside {others} other model(s) of the probe. Allowed: probe.max_models: 2 (fewer "
            f"models on the device at once), or {FITTING_STEP}",
        )
    return Issue(
        "trial.train.batch_size",
        f"{where} alone on the device: a trial of it would too. Allowed: {FITTING_STEP}",
    )


def resident_on_device(study) -> bool:
    """Whether the probe keeps one model on the device at a time: when the memory plan (launch's
    `launch_plans["memory"]`, sweeps.run.memory) says the distinct architectures' weights and
    optimizer state together with the largest step's own memory exceed the GPU's budget, or
    cannot say (no GPU size known). A CPU study (no plan): no."""
    plans = getattr(study, "launch_plans", {}).get("memory")
    if not plans:
        return False
    budget, _ = gpu_budget(study)
    if budget is None:
        return True
    static: dict[str, int] = {}
    for pp in plans:
        p = pp.prediction
        static[arch_key(architecture(pp.cfg))] = p.params + p.optimizer
    step = max(pp.prediction.peak - pp.prediction.params - pp.prediction.optimizer for pp in plans)
    return sum(static.values()) + step > budget
