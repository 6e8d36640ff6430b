"""`reference: {match: params | flops}`: a baseline widened to each design's budget
(sweeps.study.reference)."""

import pytest
import torch
import yaml
from optuna.trial import TrialState

from arch import build_model
from arch.configtree import ConfigError
from arch.paper_designs import PAPER_DESIGNS
from sweeps.run.dry_run import plan_text
from sweeps.run.launch import launch
from sweeps.study import load_study
from sweeps.study.reference import MATCH, TOLERANCE
from sweeps.study.run_record import RunRecord
from sweeps.study.space import point_id
from sweeps.study.targets import non_embedding_params
from tests.arch.design_examples import DESIGN_EXAMPLES
from tests.sweeps import fake_fit
from tests.sweeps.helpers import mlflow_runs, optuna_trials, write_study
from trainers.flops import flops_per_token

DENSE = ("denseformer", "muddformer", "hyper_connections")
# every dense form the design harness checks, and SATFormer (the paper's forms included)
DESIGNS = {
    **{n: r for n, r in PAPER_DESIGNS.items() if r["kind"] in DENSE or n in ("baseline", "satformer")},
    **{n: r for n, r in DESIGN_EXAMPLES if r["kind"] in DENSE},
}
TINY = {
    "model": {"preset": "tiny"},
    "data": {"kind": "text", "corpus": "shakespeare", "seq_len": 128},
    "train": {"tokens": 4096, "batch_size": 4},
}


def tiny_study(tmp_path, match, designs=DESIGNS, **extra):
    return load_study(
        write_study(
            tmp_path,
            trial=TINY,
            space={"model.residual": {"choices": dict(designs)}},
            reference={"match": match, **extra.pop("reference", {})},
            **extra,
        )
    )


def counts(study, point) -> tuple[int, float]:
    """What the scaling fits (non-embedding N) and trainers.flops count, for the point's model."""
    cfg = study.trial_config(point)
    with torch.device("meta"):
        model = build_model(cfg.model)
    return non_embedding_params(cfg.model.to_dict()), flops_per_token(model, cfg.data.seq_len)


@pytest.mark.parametrize("match", ["params", "flops"])
def test_every_dense_design_and_satformer_at_tiny_gets_a_baseline_within_one_percent(tmp_path, match):
    study = tiny_study(tmp_path, match)
    index = ("params", "flops").index(match)
    ref = {"model.residual": "baseline"}
    designs = [p for p in study.planned_points() if MATCH not in p and p != ref]
    assert len(designs) == len(DESIGNS) - 1 and len(study.matches) == len(designs)
    widened = 0
    for m, point in zip(study.matches, designs, strict=True):
        assert m.point == point_id(point)
        baseline = ref if m.label is None else {**ref, MATCH: m.label}
        assert baseline in study.grid
        cfg = study.trial_config(baseline)
        assert cfg.model.residual.kind == "none" and (cfg.model.d_model, cfg.model.d_ff) == (
            m.d_model,
            m.d_ff,
        )
        assert cfg.model.d_ff % 8 == 0 and cfg.model.d_model % 8 == 0  # the CPU multiple
        design, ours = counts(study, point)[index], counts(study, baseline)[index]
        assert abs(ours - design) / design <= TOLERANCE, (m.name, ours, design)
        assert abs(m.gap(match)) <= TOLERANCE
        widened += m.label is not None
    assert widened >= 2  # MUDDFormer's and dynamic Hyper-Connections' budgets are not the plain one's


def test_a_coarse_multiple_widens_d_model_too(tmp_path):
    """At multiples of 16, d_ff alone moves tiny's parameters 2.9% a step and misses MUDDFormer's
    +4.2% by 1.2%: d_model is widened too (measured: 144, d_ff 304, -0.58%)."""
    study = tiny_study(
        tmp_path,
        "params",
        {"baseline": {"kind": "none"}, "mudd": PAPER_DESIGNS["muddformer"]},
        reference={"multiple": 16},
    )
    (m,) = study.matches
    assert m.d_model > 128 and m.d_model % 16 == 0 and m.d_ff % 16 == 0, m
    assert m.label == f"d_model{m.d_model}_d_ff{m.d_ff}"
    assert study.trial_config({"model.residual": "baseline", MATCH: m.label}).model.d_model == m.d_model
    assert abs(m.gap("params")) <= TOLERANCE


def test_a_match_that_cannot_reach_one_percent_is_refused_with_why(tmp_path):
    path = write_study(
        tmp_path,
        trial=TINY,
        reference={"match": "params", "multiple": 512},
        space={"model.residual": {"choices": {"baseline": {"kind": "none"}, "mudd": {"kind": "muddformer"}}}},
    )
    with pytest.raises(ConfigError) as err:
        load_study(path)
    text = str(err.value)
    assert "reference.match: given 'params': no baseline within 1% of mudd's" in text
    assert "multiples of 512" in text and str(path) in text


@pytest.mark.parametrize(
    "extra, problem",
    [
        ({"sampler": {"kind": "random"}, "n_trials": 2}, "allowed: sampler.kind grid"),
        ({"repeats": {"min": 2, "max": 3}}, "allowed: a fixed repeats"),
        ({"reference": {"match": "both"}}, "reference.match: given 'both'; allowed: params, flops"),
        (
            {"reference": {"match": "params", "multiple": 0}},
            "reference.multiple: given 0; allowed: an integer >= 1",
        ),
    ],
)
def test_a_study_that_cannot_have_matched_baselines_is_refused(tmp_path, extra, problem):
    tree = {"trial": TINY, "reference": {"match": "params"}} | extra
    with pytest.raises(ConfigError, match=problem):
        load_study(write_study(tmp_path, **tree))


def test_the_resolved_study_round_trips_and_the_match_is_in_the_fingerprint(tmp_path):
    study = tiny_study(
        tmp_path, "params", {"baseline": {"kind": "none"}, "mudd": PAPER_DESIGNS["muddformer"]}
    )
    tree = study.to_dict()
    assert tree["reference"] == {"match": "params"} and MATCH not in tree["space"]
    (tmp_path / "again.yaml").write_text(yaml.safe_dump(tree))
    again = load_study(tmp_path / "again.yaml")
    assert again.grid == study.grid and again.fingerprint() == study.fingerprint()
    assert (
        study.fingerprint()["reference_match.match"] == '"params"' and f"space.{MATCH}" in study.fingerprint()
    )


def test_the_dry_run_lists_each_matched_baseline_with_its_gaps(tmp_path):
    study = tiny_study(
        tmp_path,
        "flops",
        {
            "baseline": {"kind": "none"},
            "satformer": PAPER_DESIGNS["satformer"],
            "mudd": PAPER_DESIGNS["muddformer"],
        },
    )
    text = plan_text(study)
    sat, mudd = study.matches
    assert "within 1% of its training FLOPs per token (d_ff, then d_model, in multiples of 8)" in text
    line = next(t for t in text.splitlines() if t.lstrip().startswith("satformer "))
    assert line.split()[1] == str(sat.design_params) and "the plain one (128, 384)" in line
    line = next(t for t in text.splitlines() if t.lstrip().startswith("mudd "))
    assert f"{mudd.label} ({mudd.d_model}, {mudd.d_ff})" in line
    assert f"{mudd.gap('params'):+.2%}" in line and f"{mudd.gap('flops'):+.2%}" in line
    assert f"model.residual=baseline, match={mudd.label}" in text


def widened_fit(config, **kwargs):
    """The stand-in fit (every design but the baseline 0.2 below it), where a baseline wider than
    tiny's d_ff 384 ends 0.1 lower: a design's matched comparison reads -0.1, its plain one -0.2."""
    final = fake_fit.fit(config, **kwargs)
    wide = config.model.residual.kind == "none" and config.model.d_ff != 384
    return {**final, "val_loss": final["val_loss"] - 0.1 * wide}


def test_a_matched_study_runs_end_to_end_and_compares_each_design_with_its_own_baseline(tmp_path, capsys):
    designs = {
        "baseline": {"kind": "none"},
        "sat": {"kind": "value_residual"},
        "mudd": {"kind": "muddformer"},
    }
    study = tiny_study(tmp_path, "params", designs)
    assert launch(study, fit=widened_fit, probe=fake_fit.PROBE) == 0
    out = capsys.readouterr().out
    trials = optuna_trials(study)
    assert len(trials) == 4 * 2 and all(t.state == TrialState.COMPLETE for t in trials)
    (label,) = {m.label for m in study.matches} - {None}  # MUDDFormer's; SATFormer's is the plain one
    widened = [t for t in trials if t.params == {"model.residual": "baseline", MATCH: label}]
    assert len(widened) == 2 and {RunRecord.of(t).seed for t in widened} == {0, 1}
    lines = out.splitlines()
    mudd = next(i for i, line in enumerate(lines) if line.strip().startswith("mudd:"))
    assert "val_loss -0.2000" in lines[mudd]  # against the plain baseline
    assert lines[mudd + 1].strip().startswith(f"vs matched baseline residual=baseline, match={label}:")
    assert "val_loss -0.1000" in lines[mudd + 1] and "tokens_per_s not compared" in lines[mudd + 1]
    sat = next(i for i, line in enumerate(lines) if line.strip().startswith("sat:"))
    assert "val_loss -0.2000" in lines[sat] and "vs matched" not in lines[sat + 1]
    # 2 designs x (val_loss, tokens_per_s; memory is exact) + MUDDFormer's matched val_loss
    assert "Holm over 5 comparison(s)" in out
    children = mlflow_runs(study, "trial")
    tagged = {r.data.params["model.residual"]: r.data.tags.get("matched_verdict.val_loss") for r in children}
    assert tagged["mudd"] == "better" and tagged["sat"] is None
    csv = (study.results_dir() / "pareto" / "pareto.csv").read_text().splitlines()
    assert "val_loss_matched_verdict" in csv[0] and "matched_reference" in csv[0]


def test_match_beside_a_reference_point_widens_that_point(tmp_path):
    designs = {"small": {"kind": "none"}, "mudd": {"kind": "muddformer"}, "plain": {"kind": "none"}}
    study = tiny_study(tmp_path, "params", designs, reference={"model.residual": "plain"})
    assert study.reference == {"model.residual": "plain"}
    widened = [p for p in study.grid if MATCH in p]
    assert widened == [{"model.residual": "plain", MATCH: "d_ff408"}]  # the reference's own shape, widened
    assert study.to_dict()["reference"] == {"model.residual": "plain", "match": "params"}
