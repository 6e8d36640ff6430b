"""The cost probe times the trial's own step: its loss path, activation checkpointing, micro-batch
split, clipping, precision and optimizer groups; pairs a design with the baseline at the baseline
trial's own split; refuses a step that does not fit, naming the design; parks models off the device."""

import pytest
import torch

import sweeps.run.probe as probe_module
from arch.configtree import ConfigError
from sweeps.run.probe import Probe
from sweeps.run.probe_device import Guarded, resident_on_device
from sweeps.study import load_study
from sweeps.study.architecture import arch_key, architecture, tokens_per_step, train_of, without_split
from sweeps.study.reference import baseline_of
from tests.factories import tiny_trial
from tests.sweeps.helpers import optuna_trials, write_study
from trainers.config import TrialConfig
from trainers.optim import build_optimizer
from trainers.timing import interleaved

SPACE = {
    "model.residual": {
        "choices": {"baseline": {"kind": "none"}, "hc4": {"kind": "hyper_connections", "expansion_rate": 4}}
    }
}


def trial(**train) -> TrialConfig:
    return TrialConfig.from_dict(tiny_trial(train=train))


def test_the_probe_step_is_built_from_the_trials_settings():
    cfg = trial(batch_size=4, grad_accum=3, loss="chunked", activation_checkpointing="blocks",
                precision="bf16-true", grad_clip=0.5, no_decay=["norms"])  # fmt: skip
    arch = architecture(cfg)
    step = probe_module._warm_step(arch, torch.device("cpu"))
    assert step.loss == "chunked" and step.blocks and step.grad_clip == 0.5
    assert [tuple(b.shape) for b in step.batches] == [(4, cfg.data.seq_len + 1)] * 3  # 3 micro-batches
    assert {p.dtype for p in step.model.parameters()} == {torch.bfloat16}  # bf16-true: cast, as trained
    ours = [len(g["params"]) for g in step.optimizer.param_groups]
    assert ours == [len(g["params"]) for g in build_optimizer(step.model, cfg.train).param_groups]
    assert tokens_per_step(arch) == 4 * 3 * cfg.data.seq_len
    # what changes the numbers but not the work is not the architecture
    assert arch_key(architecture(trial(lr=1e-4, weight_decay=0.0))) == arch_key(architecture(trial()))
    assert arch_key(architecture(trial(loss="chunked"))) != arch_key(architecture(trial()))
    assert train_of(arch).activation_checkpointing == "blocks"


def test_grad_accum_steps_are_one_optimizer_step_of_all_micro_batches():
    built = probe_module._warm_step(architecture(trial(batch_size=2, grad_accum=2)), torch.device("cpu"))
    calls, hidden = [], built.hidden
    built.optimizer.step = lambda *a, wrapped=built.optimizer.step: calls.append("step") or wrapped(*a)
    built.hidden = lambda *a, **k: calls.append("forward") or hidden(*a, **k)
    built()
    assert calls == ["forward", "forward", "step"]  # two micro-batches, one optimizer step


def test_a_design_pairs_with_the_baseline_at_the_baseline_trials_own_split(tmp_path):
    study = load_study(write_study(tmp_path, space=SPACE))
    base_cfg, hc_cfg = (study.trial_config(p) for p in study.planned_points())
    # micro_batch: auto gave the design half the micro-batch, twice the accumulation
    hc_cfg = TrialConfig.from_dict({**hc_cfg.to_dict(), "train": {**hc_cfg.to_dict()["train"],
                                    "batch_size": 4, "grad_accum": 2}})  # fmt: skip
    probe = Probe(study)
    probe.baselines[arch_key(without_split(architecture(base_cfg)))] = architecture(base_cfg)
    paired = probe.baseline_for(architecture(hc_cfg))
    assert paired == architecture(base_cfg)  # 8 x 1: the split the baseline trial runs
    assert (paired["batch_size"], paired["train"]["grad_accum"]) == (8, 1)
    alone = Probe(study).baseline_for(architecture(hc_cfg))  # no baseline trial known: the design's split
    assert alone == baseline_of(architecture(hc_cfg)) and alone["batch_size"] == 4


def test_a_probe_step_that_runs_out_of_memory_is_refused_naming_the_design(tmp_path, monkeypatch):
    warm = probe_module._warm_step

    def hc_does_not_fit(arch, device):
        step = warm(arch, device)
        if arch["model"]["residual"]["kind"] != "hyper_connections":
            return step

        def out_of_memory():  # stand-in: a CPU has no device memory to run out of
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

        return out_of_memory

    monkeypatch.setattr(probe_module, "_warm_step", hc_does_not_fit)
    study = load_study(write_study(tmp_path, space=SPACE, probe={"rounds": 2, "steps": 1}))
    with pytest.raises(ConfigError) as caught:
        Probe(study).ensure(study.trial_config(p) for p in study.planned_points())
    (issue,) = caught.value.issues
    assert issue.path == "trial.train.batch_size"
    assert "model.residual.kind hyper_connections" in issue.problem and "ran out of memory" in issue.problem
    assert "beside 1 other model" in issue.problem and "activation_checkpointing: blocks" in issue.problem
    assert not (study.results_dir() / "costs.json").exists()  # nothing half-timed is cached


def test_out_of_memory_while_building_is_refused_too(tmp_path, monkeypatch):
    def never_fits(arch, device):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(probe_module, "_warm_step", never_fits)
    study = load_study(write_study(tmp_path, space=SPACE, probe={"rounds": 2, "steps": 1}))
    with pytest.raises(ConfigError, match="model.residual.kind none.*ran out of memory"):
        Probe(study).ensure(study.trial_config(p) for p in study.planned_points())


def test_interleaving_calls_a_parked_steps_enter_and_leave_around_its_turns():
    events = []

    class Parked:
        def __init__(self, name):
            self.name = name

        def enter(self):
            events.append(("enter", self.name))

        def leave(self):
            events.append(("leave", self.name))

        def __call__(self):
            events.append(("step", self.name))

    interleaved({"a": Parked("a"), "b": Parked("b")}, 2, 2, "cpu")
    turn = lambda n: [("enter", n), ("step", n), ("step", n), ("leave", n)]  # noqa: E731
    assert events == turn("a") + turn("b") + turn("b") + turn("a")  # rotated, parked between turns


def test_a_parked_step_keeps_its_optimizer_state_and_trains_on():
    step = probe_module._warm_step(architecture(trial()), torch.device("cpu"))
    guarded = Guarded("k", step, torch.device("cpu"), 1, park=True)
    before = [p.detach().clone() for p in step.model.parameters()]
    guarded.enter()
    guarded()
    guarded.leave()
    assert any(not torch.equal(a, p) for a, p in zip(before, step.model.parameters(), strict=True))
    assert all(s["exp_avg"].device.type == "cpu" for s in step.optimizer.state.values())


def test_a_cpu_study_keeps_every_model_built():
    class Study:
        launch_plans = {"memory": None}

    assert resident_on_device(Study()) is False


def test_models_park_off_the_gpu_when_the_plan_says_they_do_not_fit_together():
    from types import SimpleNamespace as NS

    gib = 2**30
    cfgs = [trial(), TrialConfig.from_dict(tiny_trial(model={"residual": {"kind": "value_residual"}}))]

    def study(gpu_gb, static_gib, peak_gib):
        plans = [NS(cfg=c, prediction=NS(params=static_gib * gib / 3, optimizer=2 * static_gib * gib / 3,
                                         peak=peak_gib * gib)) for c in cfgs]  # fmt: skip
        return NS(resources=NS(gpu_memory_gb=gpu_gb), launch_plans={"memory": plans})

    # budget 0.85 x 80 = 68 GiB: two models' 8 GiB of state and the largest step's own 48 GiB fit
    assert resident_on_device(study(80, 8, 56)) is False
    # 2 x 20 GiB of state and a step of 40 GiB more do not: one model on the device at a time
    assert resident_on_device(study(80, 20, 60)) is True
    # the same two points of one architecture count once
    cfgs[1] = cfgs[0]
    assert resident_on_device(study(80, 20, 60)) is False


def test_the_launch_exits_2_before_any_trial_when_a_probe_step_does_not_fit(tmp_path, monkeypatch, capsys):
    from sweeps.run.launch import main

    def never_fits(arch, device):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(probe_module, "_warm_step", never_fits)
    path = write_study(tmp_path, space=SPACE, probe={"rounds": 2, "steps": 1})
    assert main([str(path)]) == 2
    err = capsys.readouterr().err
    assert "trial.train.batch_size: the cost probe's step of model.residual.kind none" in err
    assert not any(t.user_attrs.get("status") for t in optuna_trials(load_study(path)))  # no trial ran
