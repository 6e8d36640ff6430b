"""`make rehearsal` (bench/rehearsal.py, studies/paper/rehearsal.yaml): the paper's study on a CPU,
every stage's output checked, not only the exit status: the Llama-style data, the split that
`micro_batch: auto` chose, the resume after one data-parallel worker was killed with SIGKILL, the
eval metrics of every run, the gate report's token categories, the front and the verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from sweeps.study import load_study

ROOT = Path(__file__).resolve().parents[2]
DESIGNS = {"baseline", "resformer", "satformer", "denseformer", "muddformer", "hyper_connections"}


def test_the_rehearsal_study_is_the_paper_study_at_toy_size(tmp_path):
    """Its six designs are the paper's, with the paper's options; its recipe keeps every knob of
    the GPU path (bf16-true, chunked loss, micro_batch auto under a memory budget, activation
    checkpointing on one design, 2 workers, checkpoints, evals)."""
    (tmp_path / "meta.json").write_text(json.dumps({"vocab_size": 1024, "dtype": "uint16"}))
    for split in ("train", "val"):
        (tmp_path / f"{split}_000.bin").write_bytes(bytes(16))
    data = [f"trial.data.path={tmp_path}"]
    rehearsal_study = load_study(
        ROOT / "studies" / "paper" / "rehearsal.yaml", [*data, f"evals.include_path={tmp_path}"]
    )
    small = load_study(ROOT / "studies" / "paper" / "small.yaml", data)
    paper = {p["model.residual"]: small.trial_config(p) for p in small.planned_points()}
    points = rehearsal_study.planned_points()
    assert {p["model.residual"] for p in points} == DESIGNS == set(paper)
    for point in points:
        cfg = rehearsal_study.trial_config(point)
        assert cfg.model.residual == paper[point["model.residual"]].model.residual
        assert (cfg.model.qk_norm, cfg.model.init) == (True, "normal")
        assert (cfg.train.precision, cfg.train.loss, cfg.train.micro_batch) == (
            "bf16-true",
            "chunked",
            "auto",
        )
        assert cfg.train.checkpoint_every and cfg.data.order == "chunks"
        blocks = point["model.residual"] == "muddformer"
        assert cfg.train.activation_checkpointing == ("blocks" if blocks else "none")
    assert rehearsal_study.resources.workers == 2 and rehearsal_study.resources.gpu_memory_gb
    assert rehearsal_study.evals.tasks == ["rehearsal_choice", "rehearsal_retrieval"]


@pytest.mark.slow
def test_the_rehearsal_runs_every_stage_of_the_paper_path(tmp_path):
    pytest.importorskip("lm_eval")
    pytest.importorskip("datasets")
    from bench import rehearsal

    assert rehearsal.main(["--out", str(tmp_path), "--kill-worker"]) == 0
    check_outputs(tmp_path)


def check_outputs(tmp_path: Path) -> None:
    """Every stage's output in the rehearsal's folder (also runnable on a finished `make rehearsal`:
    `python -c "from tests.bench.test_rehearsal import check_outputs; check_outputs(Path(DIR))"`)."""
    from mlflow.tracking import MlflowClient
    from tokenizers import Tokenizer

    summary = json.loads((tmp_path / "summary.json").read_text())

    # data: a Llama-style tokenizer (its post-processor adds <s>), shards by prepare hf without
    # any <s>, EOS after each document, meta.json naming tokenizer and separator
    meta = summary["data"]["meta"]
    assert (meta["separator"], meta["eos_id"], meta["bos_id"]) == ("eos", 2, None)
    tok = Tokenizer.from_file(summary["data"]["tokenizer"])
    assert tok.encode("To be").tokens[0] == "<s>" and tok.token_to_id("<0x0A>") is not None
    shards = tmp_path / "shards"
    ids = np.concatenate([np.fromfile(shards / n, dtype=np.uint16) for n in meta["train_shards"]])
    assert not (ids == 1).any() and (ids == 2).sum() >= 100

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("paper_rehearsal")
    runs = client.search_runs([experiment.experiment_id], "tags.`mlflow.parentRunId` != ''")
    finished = {r.data.params["model.residual"]: r for r in runs if r.info.status == "FINISHED"}
    assert set(finished) == DESIGNS

    # the split micro_batch: auto chose under the 0.05 GiB budget, as each trial ran it; the head as
    # wide as the tokenizer (not the preset's 32000)
    splits = {}
    for design, run in finished.items():
        path = client.download_artifacts(run.info.run_id, "config.yaml", str(tmp_path / design))
        config = yaml.safe_load(Path(path).read_text())
        assert config["model"]["vocab_size"] == meta["vocab_size"] == tok.get_vocab_size()
        train = config["train"]
        assert train["batch_size"] * train["grad_accum"] == 32 and train["micro_batch"] is None
        splits[design] = (train["batch_size"], train["grad_accum"])
    assert any(accum > 1 for _, accum in splits.values())  # the budget really split some
    assert splits["hyper_connections"][1] > splits["baseline"][1]  # the largest activations: more steps

    # the killed worker: Ray Train restarted the group, the run resumed from its checkpoint
    killed = summary["killed"]
    assert killed["pid"] in killed["workers"] and killed["checkpoints"]
    resumed = [r for r in finished.values() if "sweep.workers_resumed_from" in r.data.tags]
    assert resumed, "no run says it resumed from a checkpoint after the worker was killed"
    assert all(r.data.metrics["tokens"] >= 163840 for r in finished.values())

    # every run scored by lm-eval (both local tasks) and val_bpb from the tokenizer's bytes
    for run in finished.values():
        metrics = run.data.metrics
        assert 0 <= metrics["eval/rehearsal_choice/acc"] <= 1
        assert 0 <= metrics["eval/rehearsal_retrieval/exact_match"] <= 1
        assert 0 < metrics["val_bpb"] < metrics["val_loss"] * 2

    # the gate report: gate statistics and the three BPE token categories on every layer
    gates = summary["gates"]
    assert gates["exit"] == 0 and gates["summary"]["design"] == "value_residual"
    by_layer = gates["summary"]["by_category"]
    assert by_layer and all(
        set(cats) == {"structural", "functional", "semantic"} for cats in by_layer.values()
    )

    # the front and the verdicts: in the results folder and on the MLflow runs
    pareto = json.loads((tmp_path / "results" / "paper_rehearsal" / "pareto" / "pareto.json").read_text())
    assert len(pareto["points"]) == 6 and min(p["rank"] for p in pareto["points"]) == 0
    assert all("pareto_rank" in r.data.tags and "verdict" in r.data.tags for r in finished.values())
