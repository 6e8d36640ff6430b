"""`python -m bench.mlflow_ui`: MLflow's UI over a study of thousands of runs (issue 52, part 6).

For each size asked, in a fresh temporary folder:

1. an experiment as a search of that many stand-in trials leaves it: the parent run made by the
   launcher's own `Tracker`, and one child run per trial under it with the tags, params and final
   metrics `Tracker.start_child` / `finish_child` give a run, written straight into MLflow's SQLite
   tables in one transaction (`children`: thousands of launches would take hours; the UI reads the
   same rows);
2. the report's MLflow step over them (`sweeps.report.analysis.publish`: the parent's summary.md,
   description and `front` tag, the children's tags and metrics), timed; then timed again over the
   same trials, when no child changes;
3. `mlflow server` on loopback over that database, and a headless chromium (playwright, Debian's
   chromium) that opens the experiment's runs table, searches `tags.on_front = 'true'` in it and
   opens the parent run's page: each timed from the navigation to its content on screen.

One JSON line per size (`--jsonl` appends it), with the machine's load. The browser suite runs the
same at 2,000 runs (tests/browser/test_mlflow_ui_scale.py).

Without the browser: `--report N,...` times the launcher's whole report over such an experiment
whose children also logged `EVALS` evaluations of val_loss and tokens (with `--profile`: under
cProfile, stage by stage); `--histories N,...` times only the report's read of those curves, run
by run (`paired_curves.history`: one request a run and metric) against in bulk
(`paired_curves.prefetch`), alternated A B A B, each on a fresh client; the two reads must agree.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench import scale
from sweeps.report import paired_curves, summary
from sweeps.report.analysis import fronts_for, printed_sections, publish, report_fronts
from sweeps.run.tracking import Tracker
from sweeps.study import load_study
from sweeps.study.space import point_name
from tests.cluster import services

LAUNCH = "bench"
RUNS_VIEW = "#/experiments/{experiment}/runs?workflowType=machine_learning"
RUN_PAGE = "#/experiments/{experiment}/runs/{run}?workflowType=machine_learning"


@dataclass
class Experiment:
    folder: Path
    study: object
    trials: list
    tracker: Tracker
    result: dict
    timings: dict

    @property
    def front_run_ids(self) -> set[str]:
        front = set(self.result["front"])
        return {t.user_attrs["mlflow_run_id"] for t in self.trials if t.user_attrs["point"] in front}


def build(folder: Path, runs: int) -> Experiment:
    """The experiment of a search of `runs` stand-in trials (one seed a point, two objectives: the
    points of `bench.scale.search_trials`), reported."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(scale.study_tree(folder, "tpe", runs, "local", 2), sort_keys=False))
    study = load_study(path)
    timings = {}
    start = time.time()
    tracker = Tracker(study.mlflow_uri(), study.experiment_name, study.name, LAUNCH)
    tracker.start_parent(study.to_dict(), {"n_runs": runs, "sampler": "tpe", "backend": "local"})
    trials = scale.search_trials(runs, objectives=2)
    children(tracker, study, trials)
    timings["write_runs_s"] = time.time() - start
    start = time.time()
    result = fronts_for(study, trials)
    render = functools.partial(printed_sections)
    study.results_dir().mkdir(parents=True, exist_ok=True)
    written = summary.write(result, render, study.name, study.results_dir())
    timings["statistics_s"] = time.time() - start
    for label in ("publish_first", "publish_again"):  # every child new; then none changed
        start, cpu = time.time(), time.process_time()
        timings[f"{label}_runs_written"] = publish(tracker, study, trials, result, render, written)
        timings[f"{label}_s"], timings[f"{label}_cpu_s"] = time.time() - start, time.process_time() - cpu
    tracker.finish_parent("FINISHED", {"points": len(result["points"]), "front_size": len(result["front"]),
                                       "hypervolume": result["hypervolume"]})  # fmt: skip
    return Experiment(folder, study, trials, tracker, result, timings)


def children(tracker: Tracker, study, trials: list) -> None:
    """One FINISHED child run per trial under the tracker's parent, as the launcher's Tracker
    names and tags it, written with SQLAlchemy into MLflow's own tables (its models' columns);
    each trial gets its run's id (`mlflow_run_id`, as the driver records it)."""
    import sqlalchemy
    from mlflow.store.tracking.dbmodels.models import SqlLatestMetric, SqlMetric, SqlParam, SqlRun, SqlTag

    location = tracker.client.get_experiment(tracker.experiment_id).artifact_location
    designs = {}  # a design's descriptors, as the driver reads them from the trial's config
    now = int(time.time() * 1000)
    runs, tags, params, metrics = [], [], [], []
    for number, trial in enumerate(trials):
        run_id = uuid.uuid4().hex
        trial.set_user_attr("mlflow_run_id", run_id)
        point = dict(trial.params)
        seed = trial.user_attrs["seed"]
        if point["model.residual"] not in designs:
            config = study.trial_config(point)
            designs[point["model.residual"]] = config.model.residual.descriptors()
        design = designs[point["model.residual"]]
        name = f"{point_name(point)}/s{seed}"
        start = now + number  # in the order of their trials
        runs.append({"run_uuid": run_id, "name": name, "source_type": "UNKNOWN", "source_name": "",
                     "entry_point_name": "", "user_id": "bench", "status": "FINISHED", "start_time": start,
                     "end_time": start + 900, "source_version": "", "lifecycle_stage": "active",
                     "artifact_uri": f"{location}/{run_id}/artifacts",
                     "experiment_id": int(tracker.experiment_id)})  # fmt: skip
        tags += [{"run_uuid": run_id, "key": k, "value": str(v)} for k, v in {
            "mlflow.runName": name, "mlflow.parentRunId": tracker.parent_id, "sweep.study": tracker.study,
            "sweep.launch": tracker.launch, "sweep.role": "trial", "sweep.trial": number,
            "sweep.point": trial.user_attrs["point"], "sweep.seed": seed, "sweep.status": "ok",
            "sweep.workers": 1, **design}.items()]  # fmt: skip
        shown = {**point, "seed": seed, **design}
        params += [{"run_uuid": run_id, "key": k, "value": v if isinstance(v, str) else json.dumps(v)}
                   for k, v in shown.items()]  # fmt: skip
        values = {f"final/{o.metric}": v for o, v in zip(study.objectives, trial.values, strict=True)}
        values["sweep/wall_s"] = 0.9
        for key, value in values.items():
            row = {"run_uuid": run_id, "key": key, "value": value, "timestamp": start + 900, "step": 0,
                   "is_nan": False}  # fmt: skip
            metrics.append(row)
    engine = sqlalchemy.create_engine(tracker.uri)
    with engine.begin() as connection:
        connection.execute(SqlRun.__table__.insert(), runs)
        connection.execute(SqlTag.__table__.insert(), tags)
        connection.execute(SqlParam.__table__.insert(), params)
        connection.execute(SqlMetric.__table__.insert(), metrics)
        connection.execute(SqlLatestMetric.__table__.insert(), metrics)
    engine.dispose()


def chromium_executable() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def close_assistant(page) -> None:
    """MLflow 3.17 opens its assistant panel beside every page; it covers the tables."""
    close = page.get_by_role("button", name="Close")
    if close.count():
        close.first.click()


ROWS = "[role=row]"
RUN_NAMES = "[col-id='attributes.`Run Name`'] a"
AT_LEAST = "([selector, n]) => document.querySelectorAll(selector).length >= n"
SHOWS_EXACTLY = """([selector, names]) => {
    const shown = [...document.querySelectorAll(selector)].map(e => e.innerText.trim());
    return shown.length === names.length && names.every(n => shown.includes(n));
}"""  # the runs table lists these run names and no other


def open_pages(
    browser, ui: str, built: Experiment, shots: Path | None = None, timeout_ms: int = 180_000
) -> dict:
    """The UI as a reader opens it, timed from each action to its content on screen:
    `runs_table_s` the experiment's runs table until the parent's row shows; `expand_s` its ⊞
    until its children are listed (`rows_shown`: the run names listed, the UI's first page);
    `search_s` the search `tags.on_front = 'true'` typed into the search box until the table lists
    the parent and exactly the front's runs (`front_names_shown`, beside `front_names`);
    `parent_page_s` the parent run's page until its description shows (`parent_page_text`)."""
    experiment, parent = built.tracker.experiment_id, built.tracker.parent_id
    title = f"{built.study.name}/{LAUNCH}"
    out = {}
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        start = time.time()
        page.goto(f"{ui}/{RUNS_VIEW.format(experiment=experiment)}")
        row = page.locator(ROWS).filter(has_text=title).first
        row.wait_for(timeout=timeout_ms)
        out["runs_table_s"] = time.time() - start
        close_assistant(page)
        start = time.time()
        row.locator("button[data-component-id*=runnamecellrenderer]").click()  # expand the children
        page.wait_for_function(AT_LEAST, arg=[RUN_NAMES, 2], timeout=timeout_ms)
        out["expand_s"] = time.time() - start
        out["rows_shown"] = page.locator(RUN_NAMES).count()
        if shots:
            page.screenshot(path=str(shots / "scale_runs_view.png"))
        front = set(built.result["front"])
        names = sorted(f"{point_name(r['params'])}/s0" for r in built.result["points"] if r["point"] in front)
        box = page.get_by_placeholder("metrics.rmse", exact=False).first
        box.fill(summary.FRONT_SEARCH)
        start = time.time()
        box.press("Enter")
        page.wait_for_function(SHOWS_EXACTLY, arg=[RUN_NAMES, [title, *names]], timeout=timeout_ms)
        out["search_s"] = time.time() - start
        out["front_names_shown"] = sorted(set(page.locator(RUN_NAMES).all_inner_texts()) - {title})
        out["front_names"] = names
        if shots:
            page.screenshot(path=str(shots / "scale_front_search.png"))
        start = time.time()
        page.goto(f"{ui}/{RUN_PAGE.format(experiment=experiment, run=parent)}")
        page.get_by_text("The front's runs: search", exact=False).first.wait_for(timeout=timeout_ms)
        out["parent_page_s"] = time.time() - start
        close_assistant(page)
        out["parent_page_text"] = page.inner_text("body")
        if shots:
            page.screenshot(path=str(shots / "scale_parent_run.png"), full_page=True)
    finally:
        page.close()
    return out


EVALS = 8  # evaluations a child logged in `--histories` (a short trial's)
CURVE_METRICS = ("val_loss", "tokens")


@dataclass
class Curves:
    study: object
    tracker: Tracker
    trials: list
    ids: list[str]


def with_curves(folder: Path, runs: int) -> Curves:
    """A search's experiment (`children`) whose runs also logged `EVALS` evaluations of val_loss and
    tokens, as a trial's logger does."""
    import sqlalchemy
    from mlflow.store.tracking.dbmodels.models import SqlMetric

    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(scale.study_tree(folder, "tpe", runs, "local", 2), sort_keys=False))
    study = load_study(path)
    tracker = Tracker(study.mlflow_uri(), study.experiment_name, study.name, LAUNCH)
    tracker.start_parent(study.to_dict(), {"n_runs": runs})
    trials = scale.search_trials(runs, objectives=2)
    children(tracker, study, trials)
    ids = [t.user_attrs["mlflow_run_id"] for t in trials]
    rows = [{"run_uuid": run_id, "key": key, "value": step * 1e3 if key == "tokens" else 2 - step / 10,
             "timestamp": 0, "step": step, "is_nan": False}
            for run_id in ids for key in CURVE_METRICS for step in range(1, EVALS + 1)]  # fmt: skip
    with sqlalchemy.create_engine(tracker.uri).begin() as connection:
        connection.execute(SqlMetric.__table__.insert(), rows)
    return Curves(study, tracker, trials, ids)


def histories(runs: int, rounds: int = 2) -> dict:
    """CPU seconds of the report's read of `runs` children's curves, run by run against in bulk."""
    with tempfile.TemporaryDirectory(prefix=f"bench-histories-{runs}-") as folder:
        built = with_curves(Path(folder), runs)
        ids, tracker = built.ids, built.tracker

        def per_run(client):
            return {(r, m): paired_curves.history(client, r, m) for r in ids for m in CURVE_METRICS}

        def bulk(client):
            paired_curves.prefetch(client, ids, CURVE_METRICS)
            return per_run(client)  # served from the cache the prefetch filled

        times = {"per_run": [], "bulk": []}
        read = {}
        for _ in range(rounds):
            for label, how in (("per_run", per_run), ("bulk", bulk)):
                client = type(tracker.client)(tracker.uri)  # a fresh cache
                cpu, start = time.process_time(), time.time()
                read[label] = how(client)
                times[label].append((time.process_time() - cpu, time.time() - start))
        if read["per_run"] != read["bulk"]:
            raise AssertionError("the bulk read differs from the per-run read")
        with contextlib.suppress(Exception):
            tracker.finish_parent("FINISHED", {})
    return {"mode": "histories", "runs": runs, "evals": EVALS,
            **{f"{k}_cpu_s": [round(c, 3) for c, _ in v] for k, v in times.items()},
            **{f"{k}_wall_s": [round(w, 3) for _, w in v] for k, v in times.items()},
            "load_1min": os.getloadavg()[0]}  # fmt: skip


# The report's stages, by the functions that do them (cumulative time under cProfile).
REPORT_STAGES = {
    "fronts_s": "fronts_for", "files_s": "write_files", "importance_s": "report",
    "histories_bulk_s": "prefetch", "equal_cost_s": "_loss_at_equal_cost", "paired_curves_s": "compute",
    "publish_s": "publish",
}  # fmt: skip


def whole_report(runs: int, profiled: bool = False) -> dict:
    """The launcher's whole report (`report_fronts` with its tracker) over `runs` children with
    curves, as the end of a launch runs it: wall and CPU time; `profiled`: under cProfile (about
    twice as slow), with each stage's time."""
    import cProfile
    import pstats

    with tempfile.TemporaryDirectory(prefix=f"bench-report-{runs}-") as folder:
        built = with_curves(Path(folder), runs)
        profile = cProfile.Profile() if profiled else None
        report = functools.partial(report_fronts, built.study, built.trials, built.tracker, io.StringIO())
        cpu, start = time.process_time(), time.time()
        profile.runcall(report) if profile else report()
        wall, cpu = time.time() - start, time.process_time() - cpu
        stages = {}
        if profile:
            stats = pstats.Stats(profile).stats  # {(file, line, name): (cc, nc, tt, ct, callers)}
            for label, name in REPORT_STAGES.items():
                where = "importance" if label == "importance_s" else "sweeps/report"
                stages[label] = round(
                    sum(v[3] for (f, _, n), v in stats.items() if n == name and where in f), 2
                )
    return {"mode": "report", "runs": runs, "evals": EVALS, "profiled": profiled, "wall_s": round(wall, 1),
            "cpu_s": round(cpu, 1), **stages, "load_1min": os.getloadavg()[0]}  # fmt: skip


def measure(runs: int, keep: bool = False, shots: Path | None = None) -> dict:
    from playwright.sync_api import sync_playwright  # the optional extra `browser`

    folder = Path(tempfile.mkdtemp(prefix=f"bench-mlflow-ui-{runs}-"))
    try:
        built = build(folder, runs)
        start = time.time()
        server = services.start_mlflow(built.study.mlflow_uri(), {})
        serve_s = time.time() - start
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium_executable(), args=["--no-sandbox"])
                try:
                    pages = open_pages(browser, server.uri, built, shots)
                finally:
                    browser.close()
        finally:
            server.stop()
        pages.pop("parent_page_text", None)
        size = (folder / "mlflow.db").stat().st_size / 2**20
        return {"mode": "mlflow_ui", "runs": runs, **built.timings, "server_start_s": serve_s, **pages,
                "front_runs": len(built.front_run_ids), "mlflow_db_mb": size,
                "load_1min": os.getloadavg()[0]}  # fmt: skip
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.mlflow_ui", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", default="2000", help="child runs, comma-separated")
    p.add_argument("--jsonl", default=None, help="append one JSON line per size here")
    p.add_argument("--shots", default=None, help="a folder for the pages' screenshots")
    p.add_argument("--keep", action="store_true", help="keep each experiment's folder")
    p.add_argument("--histories", default=None, help="runs, comma-separated: the curves' read alone")
    p.add_argument("--report", default=None, help="runs, comma-separated: the whole report")
    p.add_argument("--profile", action="store_true", help="--report under cProfile, by stage")
    args = p.parse_args(argv)
    if args.histories or args.report:
        for runs, how in [(int(x), histories) for x in (args.histories or "").split(",") if x] + [
            (int(x), functools.partial(whole_report, profiled=args.profile))
            for x in (args.report or "").split(",")
            if x
        ]:
            line = how(runs)
            print(json.dumps(line), flush=True)
            if args.jsonl:
                with open(args.jsonl, "a") as handle:
                    handle.write(json.dumps(line) + "\n")
        return 0
    if chromium_executable() is None:
        print("chromium is not installed (make test-browser installs Debian's)", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    shots = Path(args.shots) if args.shots else None
    if shots:
        shots.mkdir(parents=True, exist_ok=True)
    for runs in (int(x) for x in args.runs.split(",")):
        line = measure(runs, args.keep, shots)
        print(json.dumps(line), flush=True)
        if args.jsonl:
            with open(args.jsonl, "a") as handle:
                handle.write(json.dumps(line) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
