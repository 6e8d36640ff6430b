"""bench.training_equivalence's pure parts: statistics, verdicts, arguments, revisions; and the
rotate-half patch of the rotary layout experiment (the same function as the adjacent-pairs model it
is permuted from)."""

import json
import math
import time

import pytest
import torch

from arch import build_model
from bench import training_equivalence as te
from bench.patches import rotate_half_permuted


def diff(lo, hi, n=6):
    return {"mean": (lo + hi) / 2, "std": 0.01, "lo": lo, "hi": hi, "n": n}


@pytest.mark.parametrize(
    "lo, hi, n, expected",
    [
        (-0.004, 0.006, 6, "equivalent"),
        (0.001, 0.004, 6, "equivalent"),  # a real but small difference is still inside the margin
        (-0.02, 0.005, 6, "undecided"),
        (0.002, 0.03, 6, "worse"),
        (-0.03, -0.002, 6, "better"),
        (-0.001, 0.001, 1, "undecided"),
        (math.nan, math.nan, 2, "undecided"),
    ],
)
def test_equivalence_verdict(lo, hi, n, expected):
    assert te.equivalence_verdict(diff(lo, hi, n), margin=0.01) == expected


def test_compare_pairs_by_seed_and_reports_spread():
    before = {0: 1.70, 1: 1.75, 2: 1.72, 3: 1.78, 9: 5.0}  # seed 9 has no pair: left out
    after = {s: v + 0.001 * (s % 2) for s, v in before.items() if s != 9}
    report = te.compare(before, after, margin=0.01)
    assert report["seeds"] == [0, 1, 2, 3]
    assert report["difference"]["mean"] == pytest.approx(0.0005)
    assert report["verdict"] == "equivalent"
    assert report["spread_ratio"]["ratio"] == pytest.approx(1.0, abs=0.05)
    assert report["spread_ratio"]["lo"] < 1 < report["spread_ratio"]["hi"]


def test_spread_ratio_detects_a_large_ratio():
    rng = torch.Generator().manual_seed(0)
    narrow = (torch.randn(20, generator=rng) * 0.01).tolist()
    wide = (torch.randn(20, generator=rng) * 0.05).tolist()
    s = te.spread_ratio(wide, narrow)
    assert s["lo"] > 1 and s["p_f"] < 0.01 and s["p_levene"] < 0.05


def test_power_shrinks_with_seeds():
    assert te.detectable_difference(0.02, 24) < te.detectable_difference(0.02, 6)
    # 2.8 standard errors at many pairs (1.96 + 0.84)
    assert te.detectable_difference(1.0, 10_000) * 100 == pytest.approx(2.8, abs=0.01)
    assert te.detectable_spread_ratio(24, 24) < te.detectable_spread_ratio(6, 6)
    assert math.isnan(te.detectable_difference(0.02, 1))


@pytest.mark.parametrize("text, seeds", [("0-3", [0, 1, 2, 3]), ("5,1,1", [1, 5]), ("0-1,8", [0, 1, 8])])
def test_parse_seeds(text, seeds):
    assert te.parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["3-1", "a", "1,,2"])
def test_parse_seeds_rejects(text):
    with pytest.raises(SystemExit, match="--seeds"):
        te.parse_seeds(text)


def test_parse_args_names_a_missing_patch(tmp_path, capsys):
    with pytest.raises(SystemExit):
        te.parse_args(["--after-patch", str(tmp_path / "nope.py")])
    assert "--after-patch" in capsys.readouterr().err


def test_recipe_trial_sets_budget_threads_seed_and_final_eval():
    trial = te.recipe_trial(te.DEFAULT_RECIPE, 1_000_000, 1, 7)
    assert trial["seed"] == 7 and trial["train"]["tokens"] == 1_000_000 and trial["train"]["num_threads"] == 1
    assert trial["model"]["preset"] == "tiny" and trial["model"]["qk_norm"] is True  # cpu_base, issue 41
    assert trial["train"]["eval_every"] == 1_000_000 // (16 * 128)  # the last step only
    as_recipe = te.recipe_trial(te.DEFAULT_RECIPE, None, 1, 0, final_eval_only=False)
    assert as_recipe["train"]["tokens"] == 1_000_000 and as_recipe["train"]["eval_every"] == 100


def test_revisions_resolve_and_export(tmp_path):
    assert te.resolve(".") == "."
    head = te.resolve("HEAD")
    assert len(head) == 40
    with pytest.raises(SystemExit, match="not a commit"):
        te.resolve("no-such-revision-xyz")
    tree = te.export_tree(head, tmp_path)
    assert (tree / "bench" / "training_worker.py").is_file() or (tree / "trainers" / "fit.py").is_file()
    assert not (tree / ".git").exists()


def test_run_key_tracks_patch_content(tmp_path):
    patch = tmp_path / "p.py"
    patch.write_text("x = 1\n")
    first = te.run_key("abc", patch, {"seed": 0})
    patch.write_text("x = 2\n")
    assert te.run_key("abc", patch, {"seed": 0}) != first
    assert json.loads(first)["commit"] == "abc"


def test_rotate_half_patch_is_the_same_function(monkeypatch):
    """Seed for seed, the patched model (rotate-half, Q/K rows permuted) gives the adjacent-pairs
    model's logits: the premise of the rotary layout's paired experiment
    (docs/bench/rotary_layout.md)."""
    cfg = {"preset": "tiny", "max_seq_len": 64}
    tokens = torch.randint(0, 256, (2, 64), generator=torch.Generator().manual_seed(1))
    torch.manual_seed(0)
    adjacent = build_model(cfg)
    with torch.no_grad():
        expected = adjacent(tokens)  # before the patch: it changes the Rotary class itself
    rotate_half_permuted.apply(monkeypatch.setattr)
    torch.manual_seed(0)
    rotate_half = build_model(cfg)
    q_adj = adjacent.blocks[0].attn.qkv_weights()[0]
    q_rh = rotate_half.blocks[0].attn.qkv_weights()[0]
    assert not torch.equal(q_adj, q_rh)  # permuted rows, not the same weights
    assert torch.equal(q_adj.sort(0).values, q_rh.sort(0).values)
    with torch.no_grad():
        torch.testing.assert_close(rotate_half(tokens), expected, atol=1e-5, rtol=1e-5)


def test_reference_patch_builds_the_plain_model_with_the_backbones_groups(monkeypatch):
    """The reference patch gives the trainer the plain GPT (rmsnorm, rope, swiglu), the same
    parameter count as the backbone, and its norm weights out of weight decay."""
    from bench import reference
    from bench.patches import reference_model
    from trainers.config import TrialConfig
    from trainers.module import LanguageModel
    from trainers.optim import build_optimizer

    plain = [(["model", "qk_norm"], False)]  # the reference GPT has none
    trial = TrialConfig.from_dict(te.recipe_trial(te.DEFAULT_RECIPE, 4096, 1, 0, overrides=plain))
    backbone = LanguageModel(trial).model
    reference_model.apply(monkeypatch.setattr)
    module = LanguageModel(trial)
    assert isinstance(module.model.gpt, reference.ReferenceGPT)
    assert module.model.gpt.features == frozenset(reference.FEATURES)
    assert module.model.param_counts()["total"] == backbone.param_counts()["total"]
    decay, keep = build_optimizer(module.model, trial.train).param_groups
    assert all(p.dim() == 2 for p in decay["params"]) and decay["weight_decay"] > 0
    assert {p.dim() for p in keep["params"]} == {1, 2}  # norm weights and the tied embedding
    logits = module.model(torch.randint(0, 256, (2, 16)))
    assert logits.shape == (2, 16, 256)
    with pytest.raises(ValueError, match="qk_norm=false"):  # cpu_base's own recipe: not the same function
        LanguageModel(TrialConfig.from_dict(te.recipe_trial(te.DEFAULT_RECIPE, 4096, 1, 0)))


def test_real_path_patch_is_the_same_rotation_bit_for_bit(monkeypatch):
    """fp32 through the real formula gives the complex multiply's numbers exactly on CPU: so it
    is no rounding control for the rotary layout experiment (and "same losses to four digits" follows)."""
    from arch import layers
    from bench.patches import rotary_real_path

    rotary = layers.Rotary(32, 64, 10000.0)
    x = torch.randn(2, 4, 64, 32, generator=torch.Generator().manual_seed(0))
    expected = rotary(x)
    rotary_real_path.apply(monkeypatch.setattr)
    assert torch.equal(rotary(x), expected)


def test_one_ulp_patch_moves_qk_weights_by_rounding_size(monkeypatch):
    from bench.patches import one_ulp_qk

    cfg = {"preset": "tiny", "max_seq_len": 64}
    torch.manual_seed(0)
    plain = build_model(cfg)
    one_ulp_qk.apply(monkeypatch.setattr)
    torch.manual_seed(0)
    nudged = build_model(cfg)
    q, k, v = plain.blocks[0].attn.qkv_weights()
    nq, nk, nv = nudged.blocks[0].attn.qkv_weights()
    assert torch.equal(v, nv)
    for a, b in ((q, nq), (k, nk)):
        assert (a != b).all() and ((b - a) * a.sign() > 0).all()  # every weight, outward
        ulp = torch.nextafter(a, a + a.sign()) - a
        assert ((b - a).abs() <= 2 * ulp.abs()).all()  # by rounding size: one or two ulps


def test_cached_only_reports_the_runs_file_without_training(tmp_path, capsys):
    """Two arms read back from a runs file (the working tree's HEAD twice, one with a patch):
    nothing trains, and the report pairs the seeds both arms have."""
    head = te.resolve("HEAD")
    patch = tmp_path / "noop.py"
    patch.write_text("")
    runs = tmp_path / "runs.jsonl"
    rows = []
    for seed, (x, y) in enumerate([(2.20, 2.201), (2.25, 2.249), (2.18, 2.182)]):
        for p, value in ((None, x), (patch, y)):
            key = te.run_key(head, p, te.recipe_trial(te.DEFAULT_RECIPE, 4096, 1, seed))
            rows.append(json.dumps({"key": key, "val_loss": value}))
    runs.write_text("\n".join(rows) + "\n")
    argv = ["--before", "HEAD", "--after", "HEAD", "--after-patch", str(patch), "--seeds", "0-4",
            "--tokens", "4096", "--runs", str(runs), "--cached-only"]  # fmt: skip
    argv += ["--json", str(tmp_path / "r.json")]
    report = te.main(argv)
    assert report["seeds"] == [0, 1, 2]
    assert report["difference"]["mean"] == pytest.approx(0.002 / 3, abs=1e-9)
    assert json.loads((tmp_path / "r.json").read_text())["verdict"] == report["verdict"]
    assert "paired difference" in capsys.readouterr().out


def test_heads_reversed_patch_is_the_same_function(monkeypatch):
    from bench.patches import heads_reversed

    cfg = {"preset": "tiny", "max_seq_len": 64}
    tokens = torch.randint(0, 256, (2, 64), generator=torch.Generator().manual_seed(1))
    torch.manual_seed(0)
    plain = build_model(cfg)
    heads_reversed.apply(monkeypatch.setattr)
    torch.manual_seed(0)
    reversed_heads = build_model(cfg)
    assert not torch.equal(plain.blocks[0].attn.o_proj.weight, reversed_heads.blocks[0].attn.o_proj.weight)
    with torch.no_grad():
        torch.testing.assert_close(reversed_heads(tokens), plain(tokens), atol=1e-5, rtol=1e-5)


def test_set_overrides_reach_their_arm_only():
    """--set changes both arms' trial, --after-set / --before-set one arm's; values are YAML."""
    args = te.parse_args(["--set", "train.lr=2.0e-3", "--set", "model.qk_norm=true",
                          "--after-set", "model.residual={kind: value_residual, mode: gated}"])  # fmt: skip
    before = te.recipe_trial(te.DEFAULT_RECIPE, 4096, 1, 3, overrides=[*args.set_both, *args.before_set])
    after = te.recipe_trial(te.DEFAULT_RECIPE, 4096, 1, 3, overrides=[*args.set_both, *args.after_set])
    assert before["train"]["lr"] == after["train"]["lr"] == 0.002
    assert before["model"]["qk_norm"] is True and after["model"]["qk_norm"] is True
    assert "residual" not in before["model"]
    assert after["model"]["residual"] == {"kind": "value_residual", "mode": "gated"}
    assert te.run_key("c", None, before) != te.run_key("c", None, after)


@pytest.mark.parametrize("text", ["lr", "=3", "train..lr=1"])
def test_set_without_a_key_path_is_refused(text, capsys):
    with pytest.raises(SystemExit):
        te.parse_args(["--set", text])
    assert "KEY.PATH=VALUE" in capsys.readouterr().err


def test_a_failed_run_stops_the_benchmark_and_starts_no_other(monkeypatch):
    """One failure ends the benchmark at once: queued runs are cancelled, not started one by one
    after it. Runs use a copy of the worker script taken at the start (a rebase of this tree
    during a benchmark of hours once left conflict markers in it and failed the runs started
    then)."""
    calls = []

    def failing(python, tree, trial, patch, worker):
        calls.append(trial["seed"])
        assert worker != te.WORKER and worker.read_text() == te.WORKER.read_text()
        if len(calls) > 1:
            time.sleep(0.5)  # a run takes time: the benchmark has stopped before this one ends
        raise RuntimeError("boom")

    monkeypatch.setattr(te, "train", failing)
    args = te.parse_args(
        ["--before", "HEAD", "--after", "HEAD", "--seeds", "0-3", "--tokens", "4096", "--jobs", "1"]
    )
    head = te.resolve("HEAD")
    with pytest.raises(RuntimeError, match="boom"):
        te.run_arms(args, {"before": (head, None), "after": (head, None)})
    assert len(calls) <= 2  # the failed run and at most the one its thread took meanwhile, of 8
