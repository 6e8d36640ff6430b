"""One training run for `bench.training_equivalence`, inside the tree of the revision under test.

Run as a script (`python bench/training_worker.py SPEC_JSON`, cwd and PYTHONPATH the revision's
tree), not as a module: it must import that tree's `trainers`, not this checkout's. SPEC_JSON:
{"trial": the trial mapping, "patch": a Python file run first (monkeypatches) or null}.
Prints one line, `RESULT {json}`: the final metrics of `trainers.fit.fit`, plus `loss_curve`
(the training loss of every optimizer step, for spikes; read from the step's output, so the run
trains exactly as without it) and `machine` (CPU model, torch and its CPU kernel level: the same
seed gives other digits on another CPU or kernel level).
"""

import json
import os
import runpy
import sys
import time

# sys.path[0] is this script's folder (bench/): put the revision's tree there instead, so that
# nothing of this checkout shadows it.
sys.path[0] = os.getcwd()


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown"


def loss_curve_callback(curve: list):
    """A Lightning callback appending each optimizer step's training loss to `curve`."""
    import lightning.pytorch as pl

    class LossCurve(pl.Callback):
        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            loss = outputs["loss"] if isinstance(outputs, dict) else outputs
            if loss is not None and (batch_idx + 1) % trainer.accumulate_grad_batches == 0:
                curve.append(round(float(loss), 5))

    return LossCurve()


def main(spec: dict) -> dict:
    if spec.get("patch"):
        runpy.run_path(spec["patch"], run_name="__patch__")
    import torch

    # After the patch: a `from X import Y` in trainers binds what the patch put there.
    from trainers.fit import fit

    curve: list[float] = []
    start = time.perf_counter()
    metrics = fit(spec["trial"], callbacks=[loss_curve_callback(curve)])
    metrics["wall_s"] = time.perf_counter() - start
    metrics["loss_curve"] = curve
    metrics["machine"] = {
        "cpu": cpu_model(),
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
    }
    return metrics


if __name__ == "__main__":
    result = main(json.loads(sys.argv[1]))
    print("RESULT " + json.dumps(result), flush=True)
