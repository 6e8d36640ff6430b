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
        "baseline,satformer,reference,reference+rmsnorm+rope+swiglu",
        "--json",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert set(result["designs"]) == {"baseline", "satformer", "reference", "reference+rmsnorm+rope+swiglu"}
    base, sat = result["designs"]["baseline"], result["designs"]["satformer"]
    assert base["train_speed_ratio"] == 1.0 and base["train_tokens_per_s"] > 0
    assert sat["params_design"] == 3 * 128 * 4  # consumers x d_model x N_kv on tiny
    assert base["peak_mem_mb"] > 0 and result["meta"]["matmul_peak_gflops"] > 0
    assert "target satformer" in proc.stdout and "target backbone vs reference" in proc.stdout
    assert "95% interval of the median" in proc.stdout and len(base["train_speed_interval"]) == 2
    ref = result["designs"]["reference"]
    assert ref["flops_per_token"] > 0 and ref["params_design"] == 0 and ref["train_tokens_per_s"] > 0
    plain = result["designs"]["reference+rmsnorm+rope+swiglu"]  # the backbone's function, plainly
    assert plain["params_total"] == base["params_total"] and plain["peak_mem_mb"] != base["peak_mem_mb"]
    assert "check backbone vs reference+rmsnorm+rope+swiglu" in proc.stdout
    assert result["configs"]["reference+rmsnorm+rope+swiglu"] == {
        "bench.reference.ReferenceGPT": ["rmsnorm", "rope", "swiglu"]
    }


def test_unknown_design_is_refused():
    proc = subprocess.run(
        [sys.executable, "-m", "bench.designs", "--designs", "baseline,nope,reference+alibi,reference+rope"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "['nope', 'reference+alibi']" in proc.stdout


def test_targets_are_decided_by_the_interval_of_the_median():
    from bench.designs import target_lines, verdict

    assert verdict([1.001, 1.02], 1.0) == "met"
    assert verdict([0.97, 0.999], 1.0) == "MISSED"
    assert verdict([0.99, 1.01], 1.0) == "undecided"
    assert verdict([1.005, 1.005], 1.01, at_least=False) == "met"
    assert verdict([1.02, 1.02], 1.01, at_least=False) == "MISSED"

    def design(speed, interval, memory):
        return {"train_speed_ratio": speed, "train_speed_interval": interval, "memory_ratio": memory,
                "train_flop_rate_ratio": 1.0, "train_flop_rate_interval": [1.0, 1.0], "mfu": 0.7}  # fmt: skip

    summary = {
        "baseline": design(1.0, [1.0, 1.0], 1.0),
        "satformer": design(0.985, [0.975, 0.99], 1.001),  # the interval covers 0.98
        "resformer": design(0.99, [0.985, 0.995], 1.04),  # fast enough, memory over 1.03
        "reference": {
            **design(1.1, [1.05, 1.15], 0.8),
            "train_flop_rate_ratio": 1.02,
            "train_flop_rate_interval": [1.01, 1.03],
        },
        "reference+rmsnorm+rope+swiglu": {  # the same function, plainly written, 5% slower per FLOP
            **design(0.95, [0.94, 0.96], 1.2),
            "train_flop_rate_ratio": 0.95,
            "train_flop_rate_interval": [0.94, 0.96],
        },
    }
    lines = target_lines(summary, {"preset": "tiny", "precision": "fp32"})
    by_target = {line.split(":")[0]: line.rsplit(": ", 1)[1] for line in lines if line.startswith("target")}
    assert by_target == {
        "target backbone vs reference (tokens/s x FLOPs/token)": "MISSED",  # 1/1.03 .. 1/1.01 < 1
        "target satformer (wall-time ratios)": "undecided",
        "target resformer (wall-time ratios)": "MISSED",
    }
    assert "0.980 [0.971-0.990]" in lines[0]
    check = [line for line in lines if line.startswith("check backbone")]
    assert check == [
        "check backbone vs reference+rmsnorm+rope+swiglu (tokens/s x FLOPs/token): 1.053 [1.042-1.064]"
        " (>= 1.0) [tokens/s 1.053x]: met"
    ]
