"""`train.checkpoint_every`: atomic checkpoints, the newest valid one resumed, and a trial killed
with SIGKILL mid-budget that, started again, ends exactly as an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import lightning.pytorch as pl
import pytest

from trainers import TrialConfig
from trainers.checkpoint_files import checkpoints, defect, latest_valid
from trainers.fit import fit
from trainers.resume import AtomicCheckpointIO

REPO = Path(__file__).resolve().parents[2]
STEPS, EVERY = 40, 10  # optimizer steps of the trial; a checkpoint every 10 (x 128 tokens)

# The trial process: trains `tree` with its checkpoints in `folder`, appends (step, loss) of every
# micro-batch to `curve` as it goes, and sleeps `pause` s a step so that the test can kill it
# mid-budget; prints the final metrics as JSON.
SCRIPT = """
import json, sys, time
import lightning.pytorch as pl
from trainers.fit import fit

tree, folder, curve, pause = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])

class Curve(pl.Callback):
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        with open(curve, "a") as f:
            f.write(json.dumps([trainer.global_step, float(outputs["loss"])]) + "\\n")
        time.sleep(pause)

metrics = fit(tree, callbacks=[Curve()], checkpoint_dir=folder)
print(json.dumps(metrics))
"""


class Curve(pl.Callback):
    def __init__(self):
        self.points: list[list] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.points.append([trainer.global_step, float(outputs["loss"])])


def _tree(tiny_tree):
    return tiny_tree(
        model={"residual": {"kind": "value_residual"}},
        train={"tokens": STEPS * 4 * 32, "checkpoint_every": EVERY * 4 * 32, "eval_every": 15},
    )


def _start(tree, folder, curve, pause, tmp_path):
    script = tmp_path / "trial.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, str(script), json.dumps(tree), str(folder), str(curve), str(pause)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _curve(path: Path) -> list[list]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_trial_killed_mid_budget_resumes_and_ends_as_an_uninterrupted_run(tiny_tree, tmp_path):
    tree = _tree(tiny_tree)
    folder = tmp_path / "checkpoints"
    killed = _start(tree, folder, tmp_path / "killed.jsonl", 0.1, tmp_path)
    deadline = time.monotonic() + 240
    while len([p for p in checkpoints(folder) if defect(p) is None]) < 2:  # its second checkpoint
        assert killed.poll() is None, killed.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no second checkpoint in time"
        time.sleep(0.05)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    stopped_at = _curve(tmp_path / "killed.jsonl")[-1][0]
    assert 2 * EVERY <= stopped_at < STEPS  # killed mid-budget, after its second checkpoint

    resumed = _start(tree, folder, tmp_path / "resumed.jsonl", 0.0, tmp_path)
    out, err = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, err[-3000:]
    final = json.loads(out.strip().splitlines()[-1])
    after = _curve(tmp_path / "resumed.jsonl")

    reference = Curve()
    uninterrupted = fit(TrialConfig.from_dict({**tree, "train": {**tree["train"], "checkpoint_every": None}}),
                        callbacks=[reference])  # fmt: skip
    start = after[0][0]  # the first step after the resume
    assert start in (2 * EVERY + 1, 3 * EVERY + 1)  # from the newest checkpoint, not from step 0
    assert after == reference.points[start - 1 :]  # every loss after the resume, bit for bit
    assert final["val_loss"] == uninterrupted["val_loss"] and final["steps"] == STEPS
    assert final["peak_mem_mb"] == uninterrupted["peak_mem_mb"]  # measured again after the resume
    assert len(checkpoints(folder)) == 2  # the last two kept


def _fake_checkpoints(folder: Path, steps) -> list[Path]:
    io = AtomicCheckpointIO()
    paths = []
    for step in steps:
        path = folder / f"step{step:09d}.ckpt"
        io.save_checkpoint({"step": step, "weights": list(range(step))}, path)
        paths.append(path)
    return paths


def test_a_damaged_newest_checkpoint_is_skipped_with_a_message(tmp_path):
    first, second, third = _fake_checkpoints(tmp_path, (10, 20, 30))
    assert not list(tmp_path.glob(".*.tmp"))  # written, then renamed
    assert latest_valid(tmp_path) == third
    lines: list[str] = []
    data = bytearray(third.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte
    third.write_bytes(bytes(data))
    assert latest_valid(tmp_path, log=lines.append) == second
    assert lines == [f"checkpoint {third} skipped: its bytes do not match {third.name}.sha256 "
                     "(corrupt or half-written); trying the previous one"]  # fmt: skip
    second.write_bytes(second.read_bytes()[:100])  # truncated
    (tmp_path / ".step000000040.ckpt.tmp").write_bytes(b"half")  # a save killed mid-write: ignored
    fourth = tmp_path / "step000000040.ckpt"
    fourth.write_bytes(first.read_bytes())  # complete bytes, but no digest: its save never finished
    lines.clear()
    assert latest_valid(tmp_path, log=lines.append) == first
    assert [line.split(" skipped: ")[0] for line in lines] == [
        f"checkpoint {p}" for p in (fourth, third, second)
    ]
    assert "no step000000040.ckpt.sha256 (its save did not finish)" in lines[0]
    first.unlink()
    assert latest_valid(tmp_path, log=lines.append) is None  # nothing valid: start from step 0


def test_checkpoint_every_needs_a_folder(tiny_tree):
    with pytest.raises(ValueError, match="checkpoint_every is set but no checkpoint folder"):
        fit(_tree(tiny_tree))


def test_the_cli_asks_for_a_checkpoint_folder(tmp_path, capsys, corpus_dir):
    from trainers.train import main

    trial = tmp_path / "trial.yaml"
    trial.write_text(json.dumps({"train": {"checkpoint_every": 1000}}))
    assert main([str(trial), "--no-mlflow"]) == 2
    err = capsys.readouterr().err
    assert "train.checkpoint_every: given 1000; needs --checkpoint-dir" in err
