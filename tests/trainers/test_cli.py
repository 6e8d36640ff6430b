"""`python -m trainers.train`: config errors exit 2 before any work; MLflow logging."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sweeps.run.store_template import seed_store
from trainers.train import flatten, main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "override,message",
    [
        ("model.residual.tap_layer=9", "model.residual.tap_layer: given 9"),
        ("train.schedule=linear", "train.schedule: given 'linear'; allowed: cosine, wsd, constant"),
        ("train.bogus=1", "train.bogus: unknown key"),
        ("train.seed=1", "train.seed: unknown key; seed is a key of the trial (beside train:)"),
        ("data.batch_size=4", "data.batch_size: unknown key; batch_size is a key of train:"),
    ],
)
def test_bad_config_exits_2(override, message, capsys):
    assert main([str(ROOT / "trials/smoke.yaml"), "--set", override, "--no-mlflow"]) == 2
    err = capsys.readouterr().err
    assert message in err and "smoke.yaml" in err


def test_a_config_that_cannot_be_read_or_is_not_yaml_is_named_and_exits_2(tmp_path, capsys):
    missing = tmp_path / "nothing.yaml"
    assert main([str(missing), "--no-mlflow"]) == 2
    assert (
        capsys.readouterr().err
        == f"config error:\n{missing}: cannot read {str(missing)!r}: No such file or directory\n"
    )
    broken = tmp_path / "broken.yaml"
    broken.write_text("train: {tokens: 1024\n")
    assert main([str(broken), "--no-mlflow"]) == 2
    assert f"{broken}: not valid YAML: while parsing a flow mapping" in capsys.readouterr().err


def test_bad_config_exits_2_as_a_process_before_importing_torch():
    cmd = [sys.executable, "-X", "importtime", "-m", "trainers.train", str(ROOT / "trials/smoke.yaml")]
    proc = subprocess.run(
        [*cmd, "--set", "train.lr=-1"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 2 and "train.lr: given -1" in proc.stderr
    imported = {
        line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")
    }
    assert "arch.configtree" in imported and "torch" not in imported  # bad input fails in a second


def test_shipped_trials_validate():
    from trainers.train import load_config

    for path in sorted((ROOT / "trials").glob("*.yaml")):
        load_config(str(path), [])


def test_flatten_uses_key_paths():
    flat = flatten({"model": {"residual": {"kind": "none"}, "d_model": 8}, "train": {"no_decay": ["norms"]}})
    assert flat == {"model.residual.kind": "none", "model.d_model": "8", "train.no_decay": '["norms"]'}


def test_cli_logs_to_mlflow(tmp_path, corpus_dir, capsys):
    trial = {
        "model": {"d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64, "max_seq_len": 32},
        "data": {"kind": "text", "corpus": "folder", "path": str(corpus_dir), "seq_len": 32},
        "train": {"tokens": 4 * 4 * 32, "batch_size": 4, "eval_every": 2, "eval_batches": 1, "log_every": 1},
    }
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(trial))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    seed_store(uri)  # the tables from the launcher's empty store, not MLflow's migrations (seconds)
    assert main([str(path), "--tracking-uri", uri, "--experiment", "cli-test"]) == 0
    out = capsys.readouterr().out
    assert "val_loss" in out and "train_tokens_per_s" in out

    import mlflow

    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("cli-test")
    (run,) = client.search_runs([exp.experiment_id])
    assert run.data.params["model.d_model"] == "32" and run.data.params["data.kind"] == "text"
    for name in ("val_loss", "train_loss", "tokens", "train_tokens_per_s", "peak_mem_mb", "params_total"):
        assert name in run.data.metrics, name
    assert [a.path for a in client.list_artifacts(run.info.run_id)] == ["trial.yaml"]


def test_trial_file_with_a_key_written_twice_exits_2(tmp_path, capsys):
    path = tmp_path / "dup.yaml"
    path.write_text("seed: 0\ntrain: {tokens: 4096}\nseed: 1\n")
    assert main([str(path), "--no-mlflow"]) == 2
    assert f"{path}: seed: written twice, at lines 1 and 3" in capsys.readouterr().err
