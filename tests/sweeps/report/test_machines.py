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
