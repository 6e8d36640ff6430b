"""A `scaling:` section in a study: its rungs are grid points trained at their own budgets, the dry
run lists them, bad sections are refused with file and key, and a launch ends with the ladder's
fits in results/<name>/scaling/ and in the parent MLflow run."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from optuna.trial import TrialState

from arch.configtree import ConfigError
from sweeps.run import launch as launcher
from sweeps.run.launch import launch
from sweeps.study import load_study
from sweeps.study.run_record import RunRecord
from sweeps.study.targets import non_embedding_params
from tests.sweeps import fake_fit
from tests.sweeps.helpers import artifacts, mlflow_runs, optuna_trials, write_study

ROOT = Path(__file__).resolve().parents[4]
SIZES = [{"d_model": 16, "d_ff": 32}, {"d_model": 32, "d_ff": 64}, {"d_model": 64, "d_ff": 128}]
LADDER = {
    "sizes": SIZES,
    "tokens": [20480, 40960],
    "token_scale": 0.1,  # 2048 and 4096 tokens: 8 and 16 steps of 256
    "targets": [{"name": "big", "params": 2e5, "tokens": 2e4}],  # 4x the largest rung's compute
}


def ladder_study(tmp_path, **extra):
    return write_study(tmp_path, name="ladder", scaling=LADDER, **extra)


def law_fit(config, *, loggers=(), callbacks=(), data_root=None, checkpoint_path=None):
    """A stand-in trainer whose val_loss follows L = 1 + 60 N^-0.35 + 120 D^-0.3 (0.1 lower for the
    value-residual design) with a little seed noise: the fit has a law to find. N is the rung's (the
    baseline's count), as the ladder's rows have it."""
    n = non_embedding_params({**config.model.to_dict(), "residual": {"kind": "none"}})
    gated = config.model.residual.kind != "none"
    loss = 1.0 + 60 * n**-0.35 + 120 * config.train.tokens**-0.3 - 0.1 * gated
    loss *= 1 + 0.002 * ((config.seed * 7919 + n) % 5 - 2)
    metrics = {"val_loss": loss, "tokens": float(config.train.tokens), "peak_mem_mb": 100.0}
    fake_fit.evaluate(metrics, 1, loggers, callbacks)
    fake_fit.finish(loggers)
    return {**metrics, "train_tokens_per_s": 800.0}


def test_the_dry_run_lists_the_rungs(tmp_path):
    study = load_study(ladder_study(tmp_path))
    assert [r["label"] for r in study.rungs] == [f"r{i}" for i in range(6)]
    assert list(study.space) == ["rung", "model.residual"] and len(study.grid) == 12
    assert sorted({r["tokens"] for r in study.rungs}) == [2048, 4096]
    point = {"rung": "r5", "model.residual": "sat"}
    cfg = study.trial_config(point)
    assert (cfg.model.d_model, cfg.train.tokens) == (64, 4096)
    assert study.rung_of(point)["params"] == non_embedding_params(study.trial_config(
        {"rung": "r5", "model.residual": "baseline"}).model.to_dict())  # fmt: skip
    text = launcher.plan_text(study)
    assert "scaling      6 rung(s) x 2 design(s)" in text
    assert "  r0   " in text and "d_model=16, d_ff=32" in text
    assert "epochs" in text and "estimated CPU time" in text and "targets: big" in text
    assert "point   0  rung=r0, model.residual=baseline  (2048 tokens)" in text


def test_the_fingerprint_holds_the_ladder(tmp_path):
    path = ladder_study(tmp_path)
    before = load_study(path).fingerprint()
    after = load_study(path, ["scaling.token_scale=0.2"]).fingerprint()
    assert [k for k in before if before[k] != after[k]] == ["space.rung"]


def test_the_printed_study_loads_again_with_the_same_rungs(tmp_path):
    from sweeps.study import study_from_dict

    study = load_study(ladder_study(tmp_path))
    tree = study.to_dict()
    assert "rung" not in tree["space"] and tree["scaling"]["token_scale"] == 0.1
    again = study_from_dict(tree)
    assert again.grid == study.grid and again.fingerprint() == study.fingerprint()


@pytest.mark.parametrize(
    ("section", "words"),
    [
        ({**LADDER, "budget": 1}, "scaling.budget: unknown key; allowed: sizes"),
        ({**LADDER, "sizes": SIZES[:1]}, "scaling.sizes: needs 2 or more sizes"),
        ({**LADDER, "sizes": [*SIZES, "huge"]}, "scaling.sizes[3]: 'huge' is not a preset"),
        ({**LADDER, "sizes": [*SIZES, {"d_model": 30, "n_heads": 4}]}, "scaling.sizes[3]: d_model"),
        ({**LADDER, "token_scale": -1}, "scaling.token_scale: must be a positive number"),
        ({**LADDER, "targets": ["huge"]}, "scaling.targets[0]: 'huge' is not a paper scale"),
    ],
)
def test_a_bad_scaling_section_is_refused_with_file_and_key(tmp_path, section, words):
    path = write_study(tmp_path, name="ladder", scaling=section)
    with pytest.raises(ConfigError) as err:
        load_study(path)
    assert f"{path}: {words}" in str(err.value)


def test_the_rung_name_and_the_objectives_are_checked(tmp_path):
    space = {"rung": {"choices": [1, 2]}}
    with pytest.raises(ConfigError, match="space.rung: the name of the scaling ladder's rungs"):
        load_study(write_study(tmp_path, name="ladder", scaling=LADDER, space=space))
    objectives = [{"metric": "peak_mem_mb"}]
    with pytest.raises(ConfigError, match="scaling: fits val_loss"):
        load_study(write_study(tmp_path, name="ladder", scaling=LADDER, objectives=objectives))


def test_a_ladder_launch_fits_the_completed_rungs_and_logs_them_to_the_parent(tmp_path, capsys):
    study = load_study(ladder_study(tmp_path))  # 6 rungs x 2 designs x 2 seeds, the law stand-in
    assert launch(study, fit=law_fit, probe=fake_fit.PROBE) == 0
    out = capsys.readouterr().out
    trials = optuna_trials(study)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 24
    folder = study.results_dir() / "scaling"
    fits = json.loads((folder / "fits.json").read_text())
    assert set(fits) >= {"baseline", "sat", "backtest", "fit"} and fits["fit"]["reference"] == "baseline"
    rows = list(csv.DictReader((folder / "predictions.csv").open()))
    assert [(r["design"], r["target"]) for r in rows] == [("baseline", "big"), ("sat", "big")]
    # the stand-in's gap is 0.1; five parameters a design on six rungs pin it loosely (the pipeline
    # is tested here, the fit's accuracy in tests/sweeps/report/scaling/test_fit.py)
    assert -0.2 < float(rows[1]["diff"]) < 0 and float(rows[1]["diff_lo"]) <= float(rows[1]["diff"])
    (parent,) = mlflow_runs(study, "parent")
    files = artifacts(study, parent)
    assert {"scaling/fits.json", "scaling/predictions.csv", "scaling/crossover.json"} <= set(files)
    assert "scaling/loss_vs_compute.png" in files
    assert parent.data.tags["scaling.big.sat"].startswith(rows[1]["verdict"])
    summary = out[out.index("24/24 done") :]
    assert "at big (2e+05 params, 2e+04 tokens) sat is predicted 0." in summary
    assert "below baseline" in summary and "x beyond the largest rung" in summary
    # paired verdicts within each rung (same size, budget and seeds), never across sizes
    fronts = out[out.index("per rung, against the reference design") : out.index("scaling ladder: 6 of 6")]
    for rung in study.rungs:
        size = f"(N {rung['params']:.3g}, D {rung['tokens']:.3g} tokens)"
        assert f"  rung {rung['label']} {size}, against baseline:\n    sat: val_loss -0.1" in fronts
    children = mlflow_runs(study, "trial")
    words = {r.data.tags["mlflow.runName"]: r.data.tags["verdict"] for r in children}
    assert words["rung=r0, residual=baseline/s0"] == "reference"
    assert all(words[f"rung=r{i}, residual=sat/s1"].startswith("val_loss: ") for i in range(6))
    names = {r.data.tags["mlflow.runName"] for r in mlflow_runs(study, "trial")}
    assert "rung=r3, residual=sat/s1" in names
    assert {r.data.params["rung"] for r in mlflow_runs(study, "trial")} == {f"r{i}" for i in range(6)}

    # the same fit from the results folder alone (its study.yaml and Optuna storage)
    from sweeps.scaling import main

    again = tmp_path / "again"
    assert (
        main(["fit", str(study.results_dir()), "--out", str(again), "--replicates", "20", "--no-plots"]) == 0
    )
    assert json.loads((again / "fits.json").read_text())["sat"]["points"] == fits["sat"]["points"]


@pytest.mark.slow  # 12 real trainings: ~40 s of CPU
def test_the_real_trainer_trains_every_rung_to_its_own_budget(tmp_path, capsys):
    """Tiny MQAR trials, one seed: the pipeline end to end (a fit of noise may be refused)."""
    study = load_study(ladder_study(tmp_path, repeats=1))
    assert launch(study, probe=fake_fit.PROBE) == 0
    out = capsys.readouterr().out
    assert [t.state for t in optuna_trials(study)] == [TrialState.COMPLETE] * 12
    for run in mlflow_runs(study, "trial"):
        rung = study.rung_of({"rung": run.data.params["rung"]})
        assert run.data.metrics["final/tokens"] == rung["tokens"]
    assert "scaling ladder: 6 of 6 rungs" in out
    (parent,) = mlflow_runs(study, "parent")
    if "scaling: no fit" not in out:
        assert {"scaling/fits.json", "scaling/predictions.csv"} <= set(artifacts(study, parent))


def test_too_few_completed_rungs_say_so_and_the_launch_ends_well(tmp_path, capsys):
    study = load_study(ladder_study(tmp_path, repeats=1, n_trials=2))  # rung r0, both designs
    assert launch(study, fit=law_fit, probe=fake_fit.PROBE) == 0
    assert "scaling: 1 of 6 rungs completed; too few to fit a law (no fit)" in capsys.readouterr().out
    assert not (study.results_dir() / "scaling").exists()


@pytest.mark.slow
def test_kill_9_and_resume_of_a_ladder_end_exactly_at_the_total(tmp_path):
    from tests.sweeps.helpers import wait_for_complete

    path = ladder_study(tmp_path, repeats=1)
    study = load_study(path)
    env = {**os.environ, "FAKE_FIT_SLEEP": "1.5", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.sweeps.fake_launch", str(path)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    wait_for_complete(study, 3, proc)
    proc.kill()
    proc.wait(30)
    time.sleep(0.2)
    assert launch(load_study(path), fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    complete = [t for t in optuna_trials(study) if t.state == TrialState.COMPLETE]
    assert len(complete) == 12
    assert len({(RunRecord.of(t).point, RunRecord.of(t).seed) for t in complete}) == 12


def test_the_paper_ladder_resolves(tmp_path):
    (tmp_path / "meta.json").write_text(json.dumps({"vocab_size": 32000, "dtype": "uint16"}))
    for split in ("train", "val"):  # what the load checks: meta.json and the shards' files
        (tmp_path / f"{split}_000.bin").write_bytes(bytes(range(16)))
    study = load_study(ROOT / "studies" / "paper" / "scaling.yaml", [f"trial.data.path={tmp_path}"])
    assert len(study.rungs) == 8 and len(study.grid) == 24
    assert sorted({round(r["tokens"] / r["params"]) for r in study.rungs}) == [3, 10]
    xl = study.trial_config({"rung": study.rungs[-1]["label"], "model.residual": "satformer"})
    assert (xl.model.d_model, xl.model.d_ff, xl.model.n_layers, xl.train.tokens) == (
        2048, 5504, 24, study.rungs[-1]["tokens"])  # fmt: skip
    assert "estimated GPU time" in launcher.plan_text(study)


def split_fit(config, *, loggers=(), callbacks=(), data_root=None, checkpoint_path=None):
    """A stand-in whose design effect differs by rung: at the larger size `sat` is 0.2 below the
    baseline on every seed (decided at 2 seeds), at the smaller +-0.05 around it, alternating
    with the seed (never decided). The smaller size is 0.5 worse, so the fronts are clear-cut."""
    small = config.model.d_model == SIZES[0]["d_model"]
    gap = 0.0
    if config.model.residual.kind != "none":
        gap = 0.05 * (-1) ** config.seed if small else -0.2
    loss = 3.0 + 0.5 * small + gap + 0.01 * config.seed
    metrics = {"val_loss": loss, "tokens": float(config.train.tokens), "peak_mem_mb": 100.0}
    fake_fit.evaluate(metrics, 1, callbacks=callbacks)
    return {**metrics, "train_tokens_per_s": 800.0}


def test_adaptive_seeds_decide_rung_by_rung(tmp_path, capsys):
    """Two rungs (two sizes, one budget), seeds 2..4: the rung whose pair stays open grows both
    its points to 4 seeds (the reference grows with the point it pairs with); the decided rung
    stays at 2."""
    section = {**LADDER, "sizes": SIZES[:2], "tokens": [20480]}
    study = load_study(write_study(tmp_path, name="ladder", scaling=section, repeats={"min": 2, "max": 4}))
    assert launch(study, fit=split_fit, probe=fake_fit.PROBE) == 0
    out = capsys.readouterr().out
    seeds = {}
    for t in optuna_trials(study):
        assert t.state == TrialState.COMPLETE
        seeds.setdefault((t.params["rung"], t.params["model.residual"]), []).append(RunRecord.of(t).seed)
    small, large = (r["label"] for r in study.rungs)
    assert {k: sorted(v) for k, v in seeds.items()} == {
        (small, "baseline"): [0, 1, 2, 3], (small, "sat"): [0, 1, 2, 3],
        (large, "baseline"): [0, 1], (large, "sat"): [0, 1],
    }  # fmt: skip
    assert f"rung {large} " in out and "sat: val_loss -0.2000 ± 0.0000 (better, 2 seed(s)" in out
    assert "sat: val_loss +0.0000" in out and "(indistinguishable, 4 seed(s)" in out


def test_a_ladder_reference_is_a_design_paired_within_each_rung(tmp_path):
    from sweeps.report.analysis import reference_points
    from sweeps.study.space import point_id

    study = load_study(ladder_study(tmp_path, reference={"model.residual": "sat"}))
    refs = reference_points(study, [])
    for rung in study.rungs:
        sat = point_id({"rung": rung["label"], "model.residual": "sat"})
        base = point_id({"rung": rung["label"], "model.residual": "baseline"})
        assert refs[base] == sat and refs[sat] == sat
    bad = {"rung": "r0", "model.residual": "baseline"}
    with pytest.raises(ConfigError, match="reference.rung: a ladder compares designs within each rung"):
        load_study(write_study(tmp_path, name="bad", scaling=LADDER, reference=bad))
    with pytest.raises(ConfigError, match="reference: given .*allowed: a design of the grid"):
        load_study(write_study(tmp_path, name="bad2", scaling=LADDER, reference={"model.residual": "huge"}))


def test_a_size_with_its_own_lr_trains_with_it_and_the_dry_run_shows_it(tmp_path):
    sizes = [{**SIZES[0], "lr": 6e-3}, SIZES[1], {**SIZES[2], "lr": 1.5e-3, "tokens": [40960]}]
    study = load_study(write_study(tmp_path, name="ladder", scaling={**LADDER, "sizes": sizes}))
    assert len(study.rungs) == 5  # the largest size at its own one budget
    n = sorted({r["params"] for r in study.rungs})
    assert sorted((r["params"], r["tokens"], r["lr"] or 0) for r in study.rungs) == [
        (n[0], 2048, 6e-3), (n[0], 4096, 6e-3), (n[1], 2048, 0), (n[1], 4096, 0), (n[2], 4096, 1.5e-3),
    ]  # fmt: skip
    small = next(r for r in study.rungs if r["lr"] == 6e-3)
    assert study.trial_config({"rung": small["label"], "model.residual": "sat"}).train.lr == 6e-3
    plain = next(r for r in study.rungs if r["lr"] is None)
    assert (
        study.trial_config({"rung": plain["label"], "model.residual": "sat"}).train.lr == study.base.train.lr
    )
    text = launcher.plan_text(study)
    assert (
        "      lr  size" in text
        and "   0.006  d_model=16, d_ff=32" in text
        and "  0.0015  d_model=64" in text
    )
    assert f"{study.base.train.lr:.3g}*  d_model=32" in text and "*: the trial's train.lr" in text
    bad = write_study(tmp_path, name="bad", scaling={**LADDER, "sizes": [*SIZES, {**SIZES[0], "lr": -1}]})
    with pytest.raises(ConfigError) as err:
        load_study(bad)
    assert f"{bad}: scaling.sizes[3].lr: must be a positive number (this size's train.lr), got -1" in str(
        err.value
    )


def test_the_dry_run_estimates_time_from_the_calibrated_cost_of_a_token(tmp_path):
    from sweeps.run import dry_run as ladder_study_module

    study = load_study(ladder_study(tmp_path, repeats=1))
    text = launcher.plan_text(study)
    c0, c1 = ladder_study_module.CPU_SECONDS_PER_TOKEN
    assert f"{c0:.3g} s + {c1:.3g} s x N a token" in text and "s a trial to start" in text
    point = {"rung": "r5", "model.residual": "baseline"}
    cfg = study.trial_config(point)
    seconds = ladder_study_module.trial_seconds(cfg, study.rung_of(point)["params"])
    evals = -(-cfg.max_steps // cfg.train.eval_every)
    eval_tokens = evals * cfg.train.eval_batches * cfg.train.batch_size * cfg.data.seq_len / 3
    assert seconds == pytest.approx(
        ladder_study_module.TRIAL_START_S
        + (cfg.max_steps * cfg.tokens_per_step + eval_tokens) * (c0 + c1 * study.rung_of(point)["params"])
    )
    assert ladder_study_module.trial_seconds(cfg, 1e5, tokens_per_s=1000.0) == pytest.approx(
        ladder_study_module.TRIAL_START_S + (cfg.max_steps * cfg.tokens_per_step + eval_tokens) / 1000.0
    )


def test_the_cpu_ladder_is_estimated_within_two_hours():
    import re

    study = load_study(ROOT / "studies" / "scaling_ladder.yaml")
    (line,) = [line for line in launcher.plan_text(study).splitlines() if "estimated CPU time" in line]
    hours, minutes = re.search(r"estimated CPU time (?:(\d+)h)?(\d+)m", line).groups()
    assert int(hours or 0) * 60 + int(minutes) <= 100, line
    assert len(study.grid) == 21 and study.repeats == 2  # 7 rungs x 3 designs x 2 seeds


def test_the_calibration_is_fitted_to_a_finished_ladders_own_trials(tmp_path, capsys):
    """`bench.ladder_speeds --from-runs`: trials whose wall time follows start + (c0 + c1 N) x
    tokens give back start, c0 and c1 (least squares over the Optuna start and end times)."""
    import datetime

    import optuna
    from optuna.distributions import CategoricalDistribution

    from bench.ladder_speeds import from_runs
    from sweeps.run.dry_run import effective_tokens
    from sweeps.run.storage import open_storage

    study = load_study(ladder_study(tmp_path, repeats=1))
    store = optuna.create_study(study_name=study.name, storage=open_storage(study.storage_url()))
    points = study.planned_points()
    space = {k: CategoricalDistribution(sorted({p[k] for p in points})) for k in points[0]}
    start = datetime.datetime(2026, 12, 5)
    for point in points:
        rung = study.rung_of(point)
        wall = 0.5 + (2e-5 + 7e-11 * rung["params"]) * effective_tokens(study.trial_config(point))
        store.add_trial(
            optuna.trial.FrozenTrial(
                number=0, state=TrialState.COMPLETE, value=1.0, values=None,
                datetime_start=start, datetime_complete=start + datetime.timedelta(seconds=wall),
                params=point, distributions=space, user_attrs={}, system_attrs={},
                intermediate_values={}, trial_id=0,
            )
        )  # fmt: skip
    assert from_runs(study) == 0
    out = capsys.readouterr().out
    assert f"{len(points)} trials: wall seconds = 0.5 + (2e-05 + 7e-11 N) x tokens" in out
    assert "r5" in out and "total: measured" in out


def test_the_dry_run_counts_the_cost_probe_of_each_size_not_yet_probed(tmp_path):
    from sweeps.run import dry_run as ladder_study_module

    study = load_study(ladder_study(tmp_path, repeats=1))
    text = launcher.plan_text(study)
    point = study.planned_points()[0]
    cfg, params = study.trial_config(point), study.rung_of(point)["params"]
    one = ladder_study_module.probe_seconds(study.probe, cfg, 2, params)
    steps = (study.probe.rounds * 2 + -(-study.probe.rounds // 2)) * study.probe.steps
    c0, c1 = ladder_study_module.CPU_SECONDS_PER_TOKEN
    assert one == pytest.approx(
        ladder_study_module.PROBE_START_S + steps * cfg.tokens_per_step * (c0 + c1 * params)
    )
    assert "the cost probe of 3 size(s)" in text  # three sizes, two designs each
