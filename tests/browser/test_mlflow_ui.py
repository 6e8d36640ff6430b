"""The MLflow UI as a user reads a finished study, in a real browser (Debian's chromium driven by
playwright): `make test-browser` (pytest -m browser).

A small finished study (stand-in fit: 3 designs x 2 seeds, local backend) is served by `mlflow ui`
exactly as `make mlflow-ui` serves it; the test follows the links the launcher printed. It checks
that the runs view lists the parent run and, expanded, every trial under `<design>/s<seed>`; that
the parent's interactive Pareto page renders its plot, with each design's label, inside MLflow's
artifact viewer; that the PNG front loads; and that a scaling ladder's parent run shows its
loss-vs-compute plot. Screenshots go to test-output/browser/ (kept by CI).
"""

import io
import re
import shutil
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from sweeps.run.launch import launch
from sweeps.study import load_study
from tests.cluster import services
from tests.sweeps import fake_fit
from tests.sweeps.helpers import mlflow_runs, write_study
from tests.sweeps.report.scaling.test_study_ladder import ladder_study, law_fit

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-output" / "browser"
DESIGNS = {
    "baseline": {"kind": "none"},
    "gated_token_head": {"kind": "value_residual", "granularity": "token_head"},
    "static_layer": {"kind": "value_residual", "mode": "static", "granularity": "layer"},
}
CHILDREN = sorted(f"{name}/s{seed}" for name in DESIGNS for seed in (0, 1))


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("Debian's chromium is not installed (make test-browser installs it)")
    return found


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (make test-browser installs it)")
    executable = chromium()
    with sync_api.sync_playwright() as p:
        # --no-sandbox: CI runs as root, where chromium's sandbox refuses to start
        b = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def finished_study(tmp_path_factory):
    folder = tmp_path_factory.mktemp("study")
    study = load_study(write_study(folder, name="ui_demo", space={"model.residual": {"choices": DESIGNS}}))
    out = io.StringIO()
    with redirect_stdout(out):
        assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE, stream=out) == 0
    # a scaling ladder beside it, in the same MLflow database (another experiment)
    ladder, ladder_out = load_study(ladder_study(folder)), io.StringIO()
    with redirect_stdout(ladder_out):
        assert launch(ladder, fit=law_fit, probe=fake_fit.PROBE, stream=ladder_out) == 0
    return study, out.getvalue(), ladder_out.getvalue()


@pytest.fixture(scope="module")
def ui(finished_study):
    study = finished_study[0]
    server = services.start_mlflow(study.mlflow_uri(), {}, proxy_artifacts=False)
    yield server.uri
    server.stop()


@pytest.fixture
def page(browser, ui):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    yield page
    page.close()


def printed_link(output: str, label: str, ui: str) -> str:
    """A link the launcher printed, pointed at this test's UI (the launcher names port 5000)."""
    link = re.search(rf"^{label}:\s+(\S+)$", output, re.M).group(1)
    return re.sub(r"^http://127\.0\.0\.1:5000", ui, link)


def close_assistant(page) -> None:
    """MLflow 3.17 opens its assistant panel beside every page; it covers the tables."""
    close = page.get_by_role("button", name="Close")
    if close.count():
        close.first.click()


def test_runs_view_lists_the_parent_and_every_trial_by_design_name(page, ui, finished_study):
    study, output, _ = finished_study
    page.goto(printed_link(output, "MLflow runs", ui))
    parent = page.locator("[role=row]").filter(has_text="ui_demo/").first
    parent.wait_for(timeout=60_000)
    close_assistant(page)
    assert "Model training" in page.inner_text("body")  # not the GenAI traces view
    parent.locator("button[data-component-id*=runnamecellrenderer]").click()  # expand the children
    cells = "[col-id='attributes.`Run Name`'] a"
    names = page.locator(cells)
    expanded = "([sel, n]) => document.querySelectorAll(sel).length >= n"
    page.wait_for_function(expanded, arg=[cells, 1 + len(CHILDREN)])
    shown = names.all_inner_texts()
    assert shown[0].startswith("ui_demo/") and sorted(shown[1:]) == CHILDREN
    page.screenshot(path=str(SHOTS / "runs_view.png"))
    # what the table's charts can use: design descriptors as params, and no config among metrics
    for run in mlflow_runs(study, "trial"):
        assert {"kind", "seed"} <= set(run.data.params)
        assert not [m for m in run.data.metrics if "config" in m]


def test_parent_run_shows_the_interactive_front_and_the_png(page, ui, finished_study):
    _, output, _ = finished_study
    run_link = printed_link(output, "MLflow parent run", ui)
    base, query = run_link.split("?", 1)
    page.goto(f"{base}/artifacts/pareto/pareto.html?{query}")
    page.get_by_text("pareto/pareto.html").first.wait_for(timeout=60_000)
    close_assistant(page)
    plot = None
    for _ in range(60):  # the viewer renders the HTML into a blob: iframe once it is fetched
        plot = next((f for f in page.frames if f.locator(".js-plotly-plot").count()), None)
        if plot is not None:
            break
        page.wait_for_timeout(500)
    assert plot is not None, "no plotly figure rendered in MLflow's artifact viewer"
    plot.locator(".scatterlayer .point").first.wait_for(timeout=30_000)
    labels = plot.locator(".scatterlayer .textpoint text").all_text_contents()  # SVG: no innerText
    assert set(DESIGNS) <= set(labels)  # every point labelled with its design's name
    assert plot.locator(".gtitle").count() and "val_loss vs tokens_per_s" in plot.inner_text("body")
    page.screenshot(path=str(SHOTS / "pareto_html.png"))

    page.get_by_text("front_val_loss_vs_tokens_per_s.png", exact=True).click()  # in the artifact tree
    page.get_by_text("pareto/front_val_loss_vs_tokens_per_s.png").first.wait_for(timeout=60_000)
    width = shown_image_width(page)  # the viewer's <img> of the fetched file, once decoded
    assert width >= 600  # the 6.4 in x 110 dpi figure, not a broken-image icon
    close_assistant(page)
    page.screenshot(path=str(SHOTS / "front_png.png"))


def shown_image_width(page) -> int:
    """The widest decoded <img> of a fetched artifact (blob:) in the page: 0 while none is."""
    return page.wait_for_function(
        "() => Math.max(0, ...[...document.querySelectorAll(\"img[src^='blob:']\")]"
        ".filter(e => e.complete).map(e => e.naturalWidth))",
        timeout=60_000,
    ).json_value()


def test_a_ladders_parent_run_shows_its_loss_vs_compute_plot(page, ui, finished_study):
    *_, output = finished_study
    base, query = printed_link(output, "MLflow parent run", ui).split("?", 1)
    page.goto(f"{base}/artifacts/scaling/loss_vs_compute.png?{query}")
    page.get_by_text("scaling/loss_vs_compute.png").first.wait_for(timeout=60_000)
    assert shown_image_width(page) >= 600  # the figure itself, not a broken-image icon
    close_assistant(page)
    page.screenshot(path=str(SHOTS / "scaling_loss_vs_compute.png"))
