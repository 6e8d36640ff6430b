"""bench.mlflow_ui's measurements without the browser: the history reads agree, the report's stages
are found in its profile (a renamed stage would read 0 s and hide where the time goes)."""

from bench import mlflow_ui


def test_histories_reads_agree_and_bulk_is_timed():
    line = mlflow_ui.histories(30, rounds=1)  # raises if the bulk read differs from run by run
    assert line["runs"] == 30 and len(line["per_run_cpu_s"]) == len(line["bulk_cpu_s"]) == 1


def test_whole_report_finds_every_stage():
    line = mlflow_ui.whole_report(30, profiled=True)
    assert set(mlflow_ui.REPORT_STAGES) <= set(line)
    missing = [stage for stage in mlflow_ui.REPORT_STAGES if line[stage] <= 0]
    assert not missing, f"stages not found in the report's profile: {missing}"
    assert sum(line[stage] for stage in mlflow_ui.REPORT_STAGES) <= line["wall_s"] * 1.05
