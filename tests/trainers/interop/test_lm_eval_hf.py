"""lm-eval's own `--model hf` on an exported trial scores what `python -m evals` scores on its
checkpoint: the toy tasks of tests/evals (a 4-way multiple choice and a generation), per document."""

import json

import pytest
import torch

pytest.importorskip("transformers", reason="the interop extra (pip install -e '.[interop]')")
pytest.importorskip("lm_eval", reason="the evals extra (pip install -e '.[evals]')")

import lm_eval  # noqa: E402
import lm_eval.models  # noqa: E402,F401  (registers lm-eval's own models: hf)
from lm_eval.tasks import TaskManager  # noqa: E402

from arch import build_model  # noqa: E402
from evals.cli import main as evals_main  # noqa: E402
from tests.evals.toy import write_tasks  # noqa: E402
from tests.factories import text_data, tiny_trial  # noqa: E402
from trainers.config import TrialConfig  # noqa: E402
from trainers.export import main as export_main  # noqa: E402

TASKS = ["toy_choice", "toy_recall"]


def random_checkpoint(path):
    """A SATFormer byte-level trial with random weights (gates far from their init), saved as
    trainers.fit saves one: the trial config beside the model's state dict under `model.`."""
    trial = tiny_trial(model={"vocab_size": 256, "residual": {"kind": "value_residual"}})
    cfg = TrialConfig.from_dict({**trial, "data": text_data()})
    torch.manual_seed(0)
    model = build_model(cfg.model)
    with torch.no_grad():
        model.residual.mix.weight.normal_(std=0.5)
    state = {f"model.{k}": v for k, v in model.state_dict().items()}
    torch.save({"trial_config": cfg.to_dict(), "state_dict": state}, path)
    return path


def test_lm_eval_hf_on_the_export_equals_python_m_evals_on_the_checkpoint(tmp_path):
    (tmp_path / "tasks").mkdir()
    tasks = write_tasks(tmp_path / "tasks")
    ckpt = random_checkpoint(tmp_path / "trial.ckpt")
    argv = [str(ckpt), "--tasks", ",".join(TASKS), "--include-path", str(tasks), "--log-samples"]
    assert evals_main([*argv, "--json", str(tmp_path / "evals.json"), "--batch-size", "3"]) == 0
    ours = json.loads((tmp_path / "evals.json").read_text())
    assert export_main([str(ckpt), "--out", str(tmp_path / "hf")]) == 0
    theirs = lm_eval.simple_evaluate(
        model="hf",
        model_args={"pretrained": str(tmp_path / "hf"), "trust_remote_code": True},
        tasks=TASKS,
        task_manager=TaskManager(include_path=str(tasks)),
        batch_size=3,
        device="cpu",
        log_samples=True,
    )
    for task, metric in (("toy_choice", "acc,none"), ("toy_recall", "exact_match,none")):
        assert theirs["results"][task][metric] == ours["results"][task][metric]
    by_doc = {s["doc_id"]: s for s in theirs["samples"]["toy_choice"]}
    for sample in ours["samples"]["toy_choice"]:
        mine = [float(r[0][0]) for r in sample["resps"]]
        hf = [float(r[0][0]) for r in by_doc[sample["doc_id"]]["resps"]]
        assert hf == pytest.approx(mine, abs=1e-4)
    by_doc = {s["doc_id"]: s for s in theirs["samples"]["toy_recall"]}
    for sample in ours["samples"]["toy_recall"]:  # lm-eval's hf also stops at its EOS, "\n"
        assert by_doc[sample["doc_id"]]["resps"] == [[r[0].split("\n")[0]] for r in sample["resps"]]
