"""The design benchmark runs end to end at a toy size (asserts nothing about speed)."""

import json
import subprocess
import sys


def test_design_benchmark_runs_and_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    cmd = [sys.executable, "-m", "bench.designs", "--preset", "tiny", "--batch", "2", "--seq-len", "16"]
    cmd += [
        "--steps",
        "1",
        "--repeats",
        "2",
        "--designs",
        "baseline,satformer,reference",
        "--json",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert set(result["designs"]) == {"baseline", "satformer", "reference"}
    base, sat = result["designs"]["baseline"], result["designs"]["satformer"]
    assert base["train_speed_ratio"] == 1.0 and base["train_tokens_per_s"] > 0
    assert sat["params_design"] == 3 * 128 * 4  # consumers x d_model x N_kv on tiny
    assert base["peak_mem_mb"] > 0 and result["meta"]["matmul_peak_gflops"] > 0
    assert "target satformer" in proc.stdout and "target backbone vs reference" in proc.stdout
    ref = result["designs"]["reference"]
    assert ref["flops_per_token"] > 0 and ref["params_design"] == 0 and ref["train_tokens_per_s"] > 0


def test_unknown_design_is_refused():
    proc = subprocess.run(
        [sys.executable, "-m", "bench.designs", "--designs", "baseline,nope"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "nope" in proc.stdout
