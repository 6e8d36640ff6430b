"""The machine line printed under a study's verdicts (sweeps.report.analysis)."""

from sweeps.report.analysis import machines, machines_text
from trainers.machine import describe


def test_the_report_names_each_machine_the_probe_timed_on():
    info = {"cpu": "AMD EPYC", "cpus": "2", "torch": "2.13.0+cpu", "cpu_capability": "AVX512"}
    other = {**info, "cpu_capability": "AVX2"}
    entries = {"host|x86_64|2 cpus|2 threads": {"a": {"kernels": info}, "b": {"kernels": info}, "old": {}},
               "other|x86_64|2 cpus|2 threads": {"a": {"kernels": other}}}  # fmt: skip
    found = machines(entries)
    assert found == sorted([describe(info), describe(other)])  # one line per machine, entries before: none
    line = machines_text(found)
    assert "AVX2 kernels; AMD EPYC" in line and "docs/verdicts/recipe.md" in line


def test_the_launchs_report_prints_the_machine_under_the_verdicts(monkeypatch, tmp_path):
    import io
    from types import SimpleNamespace

    from optuna.distributions import CategoricalDistribution
    from optuna.trial import TrialState, create_trial

    from sweeps.report import analysis
    from sweeps.report.fronts import compute

    def trial(number, point, seed, value):
        return create_trial(
            state=TrialState.COMPLETE, values=[value], params={"p": point},
            distributions={"p": CategoricalDistribution(["base", "x"])},
            user_attrs={"point": point, "seed": seed, "repeat": seed},
        )  # fmt: skip

    trials = [trial(i, "base", s, 2.0 + s / 10) for i, s in enumerate(range(3))]
    trials += [trial(3 + i, "x", s, 1.9 + s / 10 + s / 1000) for i, s in enumerate(range(3))]
    info = {"cpu": "AMD EPYC", "cpus": "2", "torch": "2.13.0+cpu", "cpu_capability": "AVX512"}
    result = compute(trials, [("val_loss", "minimize")], reference="base", replicates=20)
    monkeypatch.setattr(
        analysis, "fronts_for", lambda study, trials, **kw: {**result, "machines": [describe(info)]}
    )
    monkeypatch.setattr(analysis, "write_files", lambda result, folder: [])
    out = io.StringIO()
    analysis.report_fronts(SimpleNamespace(name="m", results_dir=lambda: tmp_path), trials, stream=out)
    text = out.getvalue()
    verdicts, machine = text.index("against base"), text.index("machine: AMD EPYC (2 CPUs), torch 2.13.0+cpu")
    assert verdicts < machine  # under the verdicts it qualifies
