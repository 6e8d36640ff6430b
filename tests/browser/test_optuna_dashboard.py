"""optuna-dashboard on a finished study's own journal, in a real browser: `make test-browser`.

A small finished study (stand-in fit: 2 designs x 2 seeds, local backend) is served by the command
`make dashboard` runs (`python -m sweeps.dashboard <study> --port P`, in its own process); the test
checks that it listens on loopback only, that its API holds the study with its named objectives,
and that chromium shows every trial (with the MLflow run id the launcher stored), the Pareto front
and the study's parameter. Screenshots go to test-output/browser/.
"""

import io
import socket
import subprocess
import sys
import urllib.request
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from sweeps.run.launch import launch
from sweeps.study import load_study
from sweeps.study.run_record import RunRecord
from tests.browser.test_mlflow_ui import SHOTS, browser  # noqa: F401 (the module's chromium fixture)
from tests.cluster import services
from tests.sweeps import fake_fit
from tests.sweeps.helpers import optuna_trials, write_study

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory):
    pytest.importorskip("optuna_dashboard", reason="the extra `dashboard` (make test-browser installs it)")
    folder = tmp_path_factory.mktemp("dashboard")
    path = write_study(folder, name="dash_demo")
    study = load_study(path)
    with redirect_stdout(io.StringIO()):
        assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE, stream=io.StringIO()) == 0
    port = services.free_port()
    log = folder / "dashboard.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sweeps.dashboard", str(path), "--port", str(port)],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        services._wait(
            lambda: urllib.request.urlopen(f"{url}/api/studies", timeout=5), "dashboard", 180, proc, log
        )
        yield study, url, port, log
    finally:
        services._killpg(proc)


def outside_address() -> str | None:
    """This host's address on a non-loopback interface (None when it has none)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent, the route picks the interface
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_it_listens_on_loopback_only(dashboard):
    _, _, port, log = dashboard
    assert f"http://127.0.0.1:{port}/" in log.read_text()
    address = outside_address()
    if address is None:
        pytest.skip("this host has no non-loopback address to try")
    with pytest.raises(OSError), socket.create_connection((address, port), timeout=5):
        pass


def test_the_api_holds_the_study_and_its_named_objectives(dashboard):
    import json

    study, url, *_ = dashboard
    summaries = json.load(urllib.request.urlopen(f"{url}/api/studies"))["study_summaries"]
    (summary,) = [s for s in summaries if s["study_name"] == study.name]
    detail = json.load(urllib.request.urlopen(f"{url}/api/studies/{summary['study_id']}?after=0"))
    assert detail["objective_names"] == [o.metric for o in study.objectives]
    assert len(detail["trials"]) == len(optuna_trials(study)) == 4


def test_chromium_shows_every_trial_the_pareto_front_and_the_parameter(dashboard, browser):  # noqa: F811
    study, url, *_ = dashboard
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        page.goto(f"{url}/dashboard/studies/0/trials")
        page.get_by_text("4 Trials").wait_for(timeout=60_000)
        body = page.inner_text("body")
        for t in optuna_trials(study):
            assert f"Trial {t.number}" in body
        first = optuna_trials(study)[0]
        assert RunRecord.of(first).mlflow_run_id in body  # the launcher's records, as it stored them
        assert "model.residual" in body
        page.screenshot(path=str(SHOTS / "optuna_dashboard_trials.png"))
        page.goto(f"{url}/dashboard/studies/0")
        page.get_by_text("Pareto Front").first.wait_for(timeout=60_000)
        page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
        page.screenshot(path=str(SHOTS / "optuna_dashboard_history.png"))
    finally:
        page.close()
