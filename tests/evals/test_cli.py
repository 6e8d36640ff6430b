"""`python -m evals` end to end: a tiny model trained on a toy corpus, two local lm-eval tasks
written by the test (a 4-way multiple choice and a generation), scored from the checkpoint and
from an MLflow run; the harness's per-document loglikelihoods against the model's own forward."""

import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("lm_eval")

from evals.cli import main  # noqa: E402
from tests.evals.toy import ITEMS, NAMES, toy_trial, write_corpus  # noqa: E402
from trainers.fit import fit  # noqa: E402
from trainers.mlflow_names import CHECKPOINT_FOLDER  # noqa: E402
from trainers.trained import load_trial  # noqa: E402

pytestmark = pytest.mark.xdist_group("evals-cli")  # one worker builds the fixture (conftest)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 2-layer SATFormer trained for 100k byte tokens on "<name> has <item>." lines."""
    root = tmp_path_factory.mktemp("toy")
    corpus = write_corpus(root / "corpus")
    cfg = toy_trial(corpus)
    checkpoint = root / "final.ckpt"
    fit(cfg, data_root=root / "cache", checkpoint_path=checkpoint)
    return checkpoint


def own_logprob(model, context: str, continuation: str) -> float:
    """From the model's own forward over the context start (a line break: a text corpus) and text."""
    ids = [ord("\n"), *(context + continuation).encode()]
    n = len(continuation.encode())
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids[:-1]]))[0].double(), -1)
    return sum(logp[i - 1, ids[i]].item() for i in range(len(ids) - n, len(ids)))


def test_scores_a_checkpoint_above_chance_with_the_models_own_loglikelihoods(trained, tasks, tmp_path):
    out = tmp_path / "results.json"
    argv = [str(trained), "--tasks", "toy_choice,toy_recall", "--include-path", str(tasks)]
    assert main([*argv, "--json", str(out), "--log-samples", "--batch-size", "3"]) == 0
    results = json.loads(out.read_text())
    assert results["satsweep"]["context_start"]["token"] == "\n"
    assert results["pretty_env_info"].startswith("PyTorch version")  # read once a process, still recorded
    assert results["results"]["toy_choice"]["acc,none"] > 0.5  # chance: 0.25
    assert results["results"]["toy_recall"]["exact_match,none"] > 0.5  # chance: ~0
    _, model, _ = load_trial(str(trained))
    samples = results["samples"]["toy_choice"]
    assert len(samples) == len(NAMES)
    for sample in samples:
        context = f"{sample['doc']['name']} has"
        for choice, resp in zip(ITEMS, sample["resps"], strict=True):
            logp = float(resp[0][0])
            assert logp == pytest.approx(own_logprob(model, context, f" {choice}"), abs=1e-4)


def test_scores_an_mlflow_run_and_logs_every_metric_to_it(trained, tasks, tmp_path):
    import mlflow

    from sweeps.run.tracking import client as mlflow_client

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow_client(uri)  # a new store: a copy of the empty one (sweeps.run.store_template)
    run = client.create_run(client.create_experiment("evals-test"))
    client.log_artifact(run.info.run_id, str(trained), artifact_path=CHECKPOINT_FOLDER)
    argv = [run.info.run_id, "--tasks", "toy_choice", "--include-path", str(tasks), "--tracking-uri", uri]
    assert main([*argv, "--json", str(tmp_path / "r.json")]) == 0
    metrics = client.get_run(run.info.run_id).data.metrics
    results = json.loads((tmp_path / "r.json").read_text())["results"]["toy_choice"]
    assert metrics["eval/toy_choice/acc"] == pytest.approx(results["acc,none"])
    assert metrics["eval/toy_choice/acc_stderr"] == pytest.approx(results["acc_stderr,none"])
    mlflow.set_tracking_uri(uri)
    logged = mlflow.artifacts.download_artifacts(run_id=run.info.run_id, artifact_path="eval/results.json")
    assert json.loads(Path(logged).read_text())["results"]["toy_choice"]["acc,none"] == results["acc,none"]


def test_refuses_an_offline_hub_dataset_naming_it_and_how_to_provide_it(trained, tmp_path, capsys):
    (tmp_path / "hub_task.yaml").write_text(
        "task: hub_task\ndataset_path: someone/not_cached\noutput_type: multiple_choice\n"
        "test_split: test\ndoc_to_text: q\ndoc_to_choice: [a, b]\ndoc_to_target: 0\n"
    )
    assert main([str(trained), "--tasks", "hub_task", "--include-path", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "task hub_task: dataset someone/not_cached is offline" in err
    assert "datasets.load_dataset('someone/not_cached')" in err


def test_refuses_a_missing_checkpoint(tasks, tmp_path, capsys):
    assert main([str(tmp_path / "none.ckpt"), "--tasks", "toy_choice", "--include-path", str(tasks)]) == 2
    assert "none.ckpt: no such checkpoint file" in capsys.readouterr().err


@pytest.mark.slow  # indexes lm-eval's ~15,000 built-in tasks
def test_refuses_an_unknown_task_naming_close_ones(trained, tasks, capsys):
    assert main([str(trained), "--tasks", "toy_choise", "--include-path", str(tasks)]) == 2
    assert "unknown toy_choise (close: toy_choice," in capsys.readouterr().err


@pytest.mark.slow  # indexes lm-eval's ~15,000 built-in tasks
def test_suites_name_installed_tasks_and_are_refused_offline_naming_each_dataset(trained, capsys):
    from evals.suites import SUITES

    for suite, tasks in SUITES.items():
        assert main([str(trained), "--tasks", suite]) == 2
        err = capsys.readouterr().err
        assert "unknown" not in err
        for task in tasks:
            assert f"task {task}: dataset " in err


def test_lm_evals_own_model_args_load_the_checkpoint(trained):
    """What `lm_eval --model satsweep --model_args pretrained=...` does once evals.adapter is imported."""
    from lm_eval.api.instance import Instance
    from lm_eval.api.registry import get_model

    from evals.adapter import SatsweepLM  # registers the model

    assert get_model("satsweep") is SatsweepLM
    lm = get_model("satsweep").create_from_arg_string(f"pretrained={trained},batch_size=2")
    request = Instance(request_type="loglikelihood", doc={}, arguments=("zor has", " red"), idx=0)
    ((logp, greedy),) = lm.loglikelihood([request])
    _, model, _ = load_trial(str(trained))
    assert logp == pytest.approx(own_logprob(model, "zor has", " red"), abs=1e-4)
    assert greedy  # the trained fact
