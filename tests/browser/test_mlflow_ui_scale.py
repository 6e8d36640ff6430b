"""MLflow's UI over a search of 2,000 runs (issue 52), in a real browser: `make test-browser`.

The experiment is built by `bench.mlflow_ui` (the parent by the launcher's Tracker, 2,000 children
written straight into MLflow's tables, then the report's real MLflow step over them) and served by
`mlflow server` on loopback. The runs table opens with the parent's row, the UI's search box finds
exactly the front's runs with `tags.on_front = 'true'`, and the parent run's page shows the
report's summary as its description. The page times go to test-output/browser/scale_timings.json
(docs/bench/scale.md has measured ones).
"""

import json
import os

import pytest

from bench import mlflow_ui
from sweeps.report.analysis import CHILD_TAG_CAP
from sweeps.report.summary import FRONT_SEARCH, NOTE
from tests.browser.test_mlflow_ui import SHOTS, browser  # noqa: F401 (the module's chromium fixture)
from tests.cluster import services

pytestmark = pytest.mark.browser
RUNS = 2000


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    return mlflow_ui.build(tmp_path_factory.mktemp("scale"), RUNS)


@pytest.fixture(scope="module")
def ui(experiment):
    server = services.start_mlflow(experiment.study.mlflow_uri(), {})
    yield server.uri
    server.stop()


def test_the_report_tags_the_likeliest_children_once_and_the_search_finds_the_front(experiment):
    tracker = experiment.tracker
    assert len(tracker.study_runs()) == RUNS
    found = tracker.client.search_runs([tracker.experiment_id], FRONT_SEARCH, max_results=RUNS)
    assert {r.info.run_id for r in found} == experiment.front_run_ids and found
    assert experiment.timings["publish_first_runs_written"] == CHILD_TAG_CAP  # one seed a point
    assert len(tracker.study_runs(carrying="pareto_rank")) == CHILD_TAG_CAP
    assert experiment.timings["publish_again_runs_written"] == 0  # nothing changed: nothing written
    parent = tracker.client.get_run(tracker.parent_id)
    assert len(parent.data.tags[NOTE]) <= 8000 and "rows a reader looks for first" in parent.data.tags[NOTE]


def test_a_2000_run_experiment_opens_searches_and_shows_its_summary(browser, ui, experiment):  # noqa: F811
    SHOTS.mkdir(parents=True, exist_ok=True)
    pages = mlflow_ui.open_pages(browser, ui, experiment, SHOTS)
    text = pages.pop("parent_page_text")
    assert pages["rows_shown"] > 1  # the runs table lists rows, the parent's among them
    assert pages["front_names_shown"] == pages["front_names"]  # the search: exactly the front's runs
    assert f"{len(experiment.result['points'])} point(s); front:" in text  # the description, rendered
    assert "rank" in text and "p_front" in text and "vs reference" in text  # the table in it
    timings = {**experiment.timings, **pages, "runs": RUNS, "load_1min": os.getloadavg()[0]}
    (SHOTS / "scale_timings.json").write_text(json.dumps(timings, indent=2))
    print(json.dumps(timings))
