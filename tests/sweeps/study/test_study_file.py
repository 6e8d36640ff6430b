"""Study spec: every shipped study validates; every bad study fails with its expected message."""

import re
from pathlib import Path

import pytest
import yaml

from arch.configtree import ConfigError
from sweeps.run import launch
from sweeps.study import load_study

ROOT = Path(__file__).resolve().parents[3]
STUDIES = sorted((ROOT / "studies").glob("*.yaml"))
BAD = sorted((Path(__file__).parents[1] / "bad_studies").glob("*.yaml"))


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.name)
def test_every_shipped_study_loads_and_validates(path):
    plan = launch.load(path)
    assert plan.study.n_runs() >= 1
    assert launch.plan_text(plan)


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_study_fails_at_load_with_file_and_key_path(path):
    expected = re.findall(r"^# expect: (.*)$", path.read_text(), re.M)
    assert expected, f"{path.name} has no '# expect:' line"
    with pytest.raises(ConfigError) as err:
        launch.load(path)  # the study's own checks, then its backend's and this machine's
    text = str(err.value)
    assert str(path) in text
    for fragment in expected:
        assert fragment in text


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_every_bad_study_exits_2_from_the_cli_and_creates_nothing(path, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for args in ([str(path)], [str(path), "--dry-run"]):
        assert launch.main(args) == 2
        assert str(path) in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no mlflow.db, no results/, no Optuna journal


def test_cli_exits_2_and_creates_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    bad = Path(__file__).parents[1] / "bad_studies" / "gated_static_granularity.yaml"
    assert launch.main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert "space.model.residual.granularity" in err and "allowed pairs" in err
    assert list(tmp_path.iterdir()) == []  # no mlflow.db, no results/, no Optuna journal


def test_safe_loader_never_executes(tmp_path):
    marker = Path("/tmp/sweeps-pwned")
    marker.unlink(missing_ok=True)
    with pytest.raises(ConfigError):
        load_study(Path(__file__).parents[1] / "bad_studies" / "python_tag.yaml")
    assert not marker.exists()


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


BASE = """
name: base
trial:
  model: {preset: tiny, n_layers: 2, d_model: 64, n_heads: 2, d_ff: 128, max_seq_len: 32}
  data: {kind: mqar, seq_len: 32, vocab: 64, num_kv_pairs: 4}
  train: {tokens: 4096, batch_size: 8, lr: 0.003}
space:
  model.residual.kind: [none, value_residual]
repeats: 2
"""


def test_extends_overrides_only_what_differs_and_set_wins(tmp_path):
    write(tmp_path / "base.yaml", BASE)
    child = write(
        tmp_path / "child.yaml",
        "extends: base.yaml\nname: child\ntrial: {train: {lr: 0.01}}\nrepeats: 3\n",
    )
    study = load_study(
        child, ["trial.train.batch_size=4", "space.model.residual.kind.choices=[value_residual]"]
    )
    assert study.name == "child" and study.repeats == 3
    assert study.trial["train"] == {"tokens": 4096, "batch_size": 4, "lr": 0.01}
    assert study.trial["data"]["kind"] == "mqar"
    assert study.grid == [{"model.residual.kind": "value_residual"}]


def test_extends_cycle_is_an_error(tmp_path):
    write(tmp_path / "a.yaml", "extends: b.yaml\nname: a\n")
    write(tmp_path / "b.yaml", "extends: a.yaml\nname: b\n")
    with pytest.raises(ConfigError, match="extends: cycle"):
        load_study(tmp_path / "a.yaml")


def test_bad_override_names_the_key(tmp_path):
    path = write(tmp_path / "s.yaml", BASE)
    with pytest.raises(
        ConfigError, match=r"s.yaml: trial.train.batch_size: given 'many'; allowed: an integer"
    ):
        load_study(path, ["trial.train.batch_size=many"])
    with pytest.raises(ConfigError, match="allowed: key.path=value"):
        load_study(path, ["repeats"])


def test_numbers_in_exponent_form_are_numbers_in_the_file_and_in_set(tmp_path):
    """PyYAML reads YAML 1.1, where `3e-4` and `1.0e3` are strings: `lr: 3e-4` was refused as not a
    number. They are read as YAML 1.2 reads them; an integer key given one says what to write."""
    tune = "tune: {train.lr: {low: 1e-4, high: 1.0e2, points: 3, log: true}, seeds: 1}\n"
    path = write(tmp_path / "s.yaml", BASE.replace("lr: 0.003", "lr: 3e-3") + tune)
    study = load_study(path, ["trial.train.grad_clip=1E0"])
    assert study.base.train.lr == 3e-3 and study.base.train.grad_clip == 1.0
    assert (study.tune.range.low, study.tune.range.high) == (1e-4, 100.0)
    assert load_study(path, ["trial.train.lr=1e-3"]).base.train.lr == 1e-3
    assert load_study(path, ["name=1e3x"]).name == "1e3x"  # not a number: still a string
    with pytest.raises(ConfigError, match=r"train.tokens: given 4000.0; allowed: an integer \(write 4000\)"):
        load_study(path, ["trial.train.tokens=4e3"])


def test_a_missing_study_file_is_named_and_a_key_of_another_section_says_where_it_goes(tmp_path):
    missing = tmp_path / "nothing.yaml"  # the study file itself: no `extends:` in the message
    with pytest.raises(ConfigError) as err:
        load_study(missing)
    assert str(err.value) == f"{missing}: cannot read {str(missing)!r}: No such file or directory"
    path = write(tmp_path / "s.yaml", BASE)
    with pytest.raises(
        ConfigError, match=r"sampler.n_trials: unknown key; n_trials is a key of the study's top"
    ):
        load_study(path, ["sampler.n_trials=50"])
    with pytest.raises(ConfigError, match=r"seeds: unknown key; a point's seeds are repeats:"):
        load_study(path, ["seeds=6"])


def test_print_config_round_trips(tmp_path, capsys):
    path = write(tmp_path / "s.yaml", BASE)
    assert launch.main([str(path), "--print-config", "--set", "repeats=4"]) == 0
    printed = capsys.readouterr().out
    again = write(tmp_path / "again.yaml", printed)
    assert load_study(again) == load_study(path, ["repeats=4"])


def test_dry_run_prints_the_plan_and_creates_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path / "s.yaml", BASE)
    assert launch.main([str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "2 x 2 seed(s) = 4 trial(s)" in out and "point   1  model.residual.kind=value_residual" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def test_minimal_study_has_defaults(tmp_path):
    study = load_study(write(tmp_path / "m.yaml", "name: minimal\ntrial: {data: {kind: mqar}}\n"))
    assert [o.metric for o in study.objectives] == ["val_loss", "tokens_per_s", "peak_mem_mb"]
    assert study.n_runs() == 1 and study.backend == "ray" and study.sampler.kind == "grid"


def test_duplicate_key_in_an_extended_file_names_that_file_and_exits_2(tmp_path, monkeypatch, capsys):
    write(tmp_path / "base.yaml", BASE + "repeats: 3\n")
    child = write(tmp_path / "child.yaml", "extends: base.yaml\nname: child\n")
    with pytest.raises(ConfigError) as err:
        load_study(child)
    assert f"{tmp_path / 'base.yaml'}: repeats: written twice, at lines 9 and 10" in str(err.value)
    monkeypatch.chdir(tmp_path)
    assert launch.main([str(child)]) == 2
    assert "written twice" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base.yaml", "child.yaml"]


def test_study_paths_resolve_parameters_trial_paths_and_metrics_for_later_sections(tmp_path):
    """`study.paths` is the one resolver: later sections (margins, ladders) call it the same way."""
    study = load_study(write(tmp_path / "s.yaml", BASE))
    paths = study.paths
    assert paths.check("model.residual.kind", "x") == []  # a parameter
    assert paths.check("model.residual.tap_layer", "x") == []  # only in the value_residual point
    assert paths.check("train.tokens", "x", kinds=("trial",)) == []  # a default of the trial config
    assert paths.check("val_loss", "x", kinds=("metric",)) == []
    (issue,) = paths.check("train.tokns", "margins.x.key")
    said = "given 'train.tokns'; did you mean 'train.tokens'? allowed: parameters model.residual.kind"
    assert issue.path == "margins.x.key" and said in str(issue)
    assert "trial paths train.{" in issue.problem and "tokens" in issue.problem
    assert paths.check("model.residual.kind", "x", kinds=("metric",))  # a path is not a metric


def test_backends_are_one_registry_and_a_bad_name_lists_it(tmp_path):
    from sweeps.run import backends
    from sweeps.run.backends.base import Backend

    for name in backends.BACKENDS:
        assert isinstance(backends.get(name), Backend) and backends.get(name).name == name
    assert backends.supporting("asha") == ["ray"]
    with pytest.raises(ConfigError, match=r"backend: given 'slurm'; allowed: ray, local"):
        launch.load(write(tmp_path / "s.yaml", BASE + "backend: slurm\n"))


def test_samplers_are_one_registry_that_validation_and_optuna_read(tmp_path):
    import optuna

    from sweeps.study import SamplerConfig
    from sweeps.study.samplers import SAMPLERS, build

    for kind, entry in SAMPLERS.items():
        options = {option: 3 for option in entry.options}
        sampler = build(SamplerConfig(kind=kind, seed=1, **options))
        assert isinstance(sampler, getattr(optuna.samplers, entry.optuna))
    with pytest.raises(ConfigError, match=r"sampler.population_size: applies only to nsga2, not tpe"):
        load_study(write(tmp_path / "s.yaml", BASE + "sampler: {kind: tpe, population_size: 4}\n"))


@pytest.mark.parametrize(
    ("residual", "key", "other", "extra"),
    [
        ("{kind: value_residual}", "gate_bias", "true", []),
        ("{kind: hyper_connections}", "use_tanh", "false", []),
        ("{kind: hyper_connections}", "norm_eps", "torch_default", []),
        ("{kind: muddformer, sepln: true}", "sepln_layers", "after_first", []),
        ("{kind: muddformer, pre_post_da_norm: true}", "da_norm_form", "caiyun", []),
        # Caiyun's rounding needs d_ff > 128 (layer 0 would get no MLP)
        ("{kind: muddformer, param_realloc: true}", "realloc_rounding", "caiyun", ["trial.model.d_ff=384"]),
    ],
)
def test_keys_added_later_leave_fingerprints_at_their_defaults_alone(tmp_path, residual, key, other, extra):
    """A study run before a key existed resumes: at its default the key is not in the fingerprint."""
    text = BASE.replace("space:\n  model.residual.kind: [none, value_residual]\n", "")
    study = load_study(write(tmp_path / "s.yaml", text), [f"trial.model.residual={residual}", *extra])
    assert f"trial.model.residual.{key}" not in study.fingerprint()
    sets = [f"trial.model.residual={residual}", f"trial.model.residual.{key}={other}", *extra]
    changed = load_study(write(tmp_path / "s.yaml", text), sets)
    assert f"trial.model.residual.{key}" in changed.fingerprint()


def test_evals_without_lm_eval_installed_names_the_extra(tmp_path, monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "lm_eval" else find_spec(n, *a)
    )
    text = BASE.replace("kind: mqar, seq_len: 32, vocab: 64, num_kv_pairs: 4", "kind: text, seq_len: 32")
    path = write(tmp_path / "s.yaml", text + "evals: {tasks: [piqa]}\n")
    with pytest.raises(ConfigError) as err:
        launch.load(path)  # the launch's preflight: parsing asks no installed package
    needs = "s.yaml: evals: needs lm-eval, which is not installed; allowed: install the extra"
    assert f'{needs} (pip install -e ".[evals]")' in str(err.value)


def test_evals_tasks_define_a_study_and_its_batch_size_does_not(tmp_path):
    text = BASE.replace("kind: mqar, seq_len: 32, vocab: 64, num_kv_pairs: 4", "kind: text, seq_len: 32")
    plain = load_study(write(tmp_path / "plain.yaml", text)).fingerprint()
    assert not any(k.startswith("evals") for k in plain)  # studies without evals: resume as before
    scored = write(tmp_path / "s.yaml", text + "evals: {tasks: [piqa], limit: 100}\n")
    study = load_study(scored)
    again = load_study(write(tmp_path / "again.yaml", yaml.safe_dump(study.to_dict())))
    assert again == study  # --print-config round-trips the section
    prints = {
        change: load_study(scored, [change]).fingerprint()
        for change in ("evals.batch_size=32", "evals.limit=200", "evals.tasks=[piqa, hellaswag]")
    }
    assert prints["evals.batch_size=32"] == study.fingerprint()
    assert prints["evals.limit=200"]["evals.limit"] != study.fingerprint()["evals.limit"]
    assert prints["evals.tasks=[piqa, hellaswag]"]["evals.tasks"] != study.fingerprint()["evals.tasks"]


def test_reserved_record_symbols_on_a_text_that_uses_every_byte_are_refused_at_load(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "all.txt").write_bytes(bytes(range(256)) * 40)
    data = {"kind": "text", "corpus": "folder", "path": str(corpus), "seq_len": 128,
            "records": {"fraction": 0.5, "symbols": "reserved"}}  # fmt: skip
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump({"name": "reserved", "trial": {"data": data}}))
    expected = r"trial.data.records.symbols: given 'reserved' for corpus 'folder'; the text uses 256 of"
    with pytest.raises(ConfigError, match=expected):
        launch.load(path)
    data["records"]["symbols"] = "text"
    path.write_text(yaml.safe_dump({"name": "reserved", "trial": {"data": data}}))
    assert launch.load(path).study.n_runs() == 1
