"""MLflow records of a study: one experiment per study, a parent run per launch, a child per trial.

The launcher (driver) owns every run's life: it creates the parent and the children, logs their
params, tags and the resolved configs, and terminates them with their final status. A trial's
worker only streams metric curves into its child run (Lightning's MLFlowLogger with `run_id`); on
the local backend its last batch of them goes with the run's final metrics (`finish_child`).

Names: the parent `<study>/<launch id>`, a child `<point name>/s<seed>` (`gated_token_head/s2`).
Params of a child: the point's key paths, `seed` and the design's descriptors (MLflow's charts
read params, not tags). The experiment is tagged as model development (`EXPERIMENT_TAGS`);
`ui_links` are the runs view and a run in the UI's model-training view.

Tags (filter in the UI with e.g. `tags.kind = "value_residual" and tags.pareto_rank = "0"`):
  parent: sweep.study, sweep.launch, sweep.role=parent, git_commit, host, ...
  child:  sweep.study, sweep.launch, sweep.role=trial, sweep.trial, sweep.point, sweep.seed,
          sweep.status (ok | diverged | oom | error | pruned | interrupted), sweep.error,
          sweep.resumes and sweep.resumed_from (a run resumed from its checkpoint by a later launch),
          the design's own descriptors (`descriptors()` of its config: kind, and e.g. mode,
          granularity, activation, tap_layer, consumers for the value-residual family),
          and the report's (sweeps.report.analysis): pareto_rank (-1 for runs outside every
          front), on_front (true | false: `tags.on_front = 'true'` finds the front's runs), p_front,
          verdict, verdict.<metric>, ...; pareto_rank and p_front also as metrics (sortable)
  parent, after the report: its summary as the description (mlflow.note.content), front
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from sweeps.run.store_template import quiet_mlflow, seed_store
from sweeps.study.space import point_name
from trainers.machine import cpu_model, kernels
from trainers.mlflow_names import EXPERIMENT_TAGS

PACKAGES = ("torch", "lightning", "ray", "optuna", "mlflow", "numpy", "satsweep")


_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's emitter when built: ~4x faster


def yaml_text(tree: Mapping) -> str:
    """`yaml.safe_dump(tree, sort_keys=False)`'s text (a trial's config.yaml is one a trial)."""
    return yaml.dump(tree, Dumper=_DUMPER, sort_keys=False)


def client(uri: str):
    """MLflow's client of `uri`; a SQLite database that does not exist yet starts as a copy of an
    empty one (sweeps.run.store_template: a file copy, not MLflow's ~50 migrations)."""
    quiet_mlflow()
    from mlflow.tracking import MlflowClient

    seed_store(uri)
    return MlflowClient(tracking_uri=uri)


def open_store(uri: str) -> None:
    """Opens MLflow's store at `uri` once (its imports, a new database's tables), so that the next
    client of this process finds it ready; errors are left to that client to raise."""
    with contextlib.suppress(Exception):
        client(uri).search_experiments(max_results=1)


def git_commit() -> str:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=here, capture_output=True, text=True
        ).stdout.strip()
        return out + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[name] = metadata.version(name)
    return out


def machine() -> dict[str, str]:
    """The launcher's machine: host, platform, CPUs, CPU model and torch's installed version; with
    torch imported in this process (a local launch's trials run here), also torch's CPU kernel level
    and the GPUs. A launch whose trials run elsewhere (Ray) does not import torch for this (2.4 s of
    its start): the kernel level its digits depend on is the trials' own, printed under the
    verdicts (sweeps.report.analysis.machines)."""
    info = {"host": socket.gethostname(), "platform": platform.platform(), "cpus": str(os.cpu_count())}
    torch = sys.modules.get("torch")
    if torch is None:
        info["cpu"] = cpu_model()
        with contextlib.suppress(metadata.PackageNotFoundError):
            info["torch"] = metadata.version("torch")
    else:
        info.update(kernels())  # CPU model, torch and its CPU kernel level: what the digits depend on
        with contextlib.suppress(Exception):
            if torch.cuda.is_available():
                info["gpus"] = f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    return info


def artifact_location(uri: str, name: str) -> str | None:
    """Artifacts of a SQLite store live next to its file (MLflow's default, ./mlruns of whatever
    folder the launcher ran in, scatters them); a server decides for itself (None)."""
    if not uri.startswith("sqlite:///"):
        return None
    return (Path(uri[len("sqlite:///") :]).absolute().parent / "mlruns" / name).as_uri()


def experiment_id(mlflow_client, name: str) -> str:
    """The id of experiment `name`, created if needed; safe when launchers start at once."""
    from mlflow.exceptions import MlflowException

    found = mlflow_client.get_experiment_by_name(name)
    if found is None:
        where = artifact_location(mlflow_client.tracking_uri, name)
        try:
            created = mlflow_client.create_experiment(name, artifact_location=where, tags=EXPERIMENT_TAGS)
            found = mlflow_client.get_experiment(created)
        except MlflowException as err:  # another launcher created it between the lookup and here
            if err.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            found = mlflow_client.get_experiment_by_name(name)
    for key, value in EXPERIMENT_TAGS.items():  # also on experiments made before the tag existed
        if found.tags.get(key) != value:
            mlflow_client.set_experiment_tag(found.experiment_id, key, value)
    return found.experiment_id


SEARCH_PAGE = 50_000  # the most runs one `search_runs` page returns (MLflow's limit)
UI_DEFAULT = "http://127.0.0.1:5000"  # where `make mlflow-ui` serves a local SQLite store


def _now(fn, *args, **kwargs):
    return fn(*args, **kwargs)


def ui_base(uri: str) -> str:
    """The MLflow UI's address for a tracking URI: the server itself, else `make mlflow-ui`'s."""
    return uri.rstrip("/") if uri.startswith(("http://", "https://")) else UI_DEFAULT


def ui_hint(uri: str) -> str | None:
    """How to start a UI on a tracking URI that is not a server (None for a server)."""
    if uri.startswith(("http://", "https://")):
        return None
    local = f"sqlite:///{Path('mlflow.db').absolute()}"
    return "make mlflow-ui" + ("" if uri == local else f" MLFLOW_URI={uri}")


def ui_links(uri: str, experiment: str, run_id: str | None = None) -> dict[str, str]:
    """Direct links to the experiment's runs table and to a run, in the model-training view."""
    base = f"{ui_base(uri)}/#/experiments/{experiment}"
    query = "?workflowType=machine_learning"
    links = {"runs": f"{base}/runs{query}"}
    if run_id:
        links["run"] = f"{base}/runs/{run_id}{query}"
    return links


class Tracker:
    """MLflow client for one launch of one study (driver side)."""

    def __init__(self, uri: str, experiment: str, study: str, launch: str):
        self.uri = uri
        self.client = client(uri)
        self.study = study
        self.launch = launch
        self.experiment_id = experiment_id(self.client, experiment)
        self.parent_id: str | None = None

    @classmethod
    def of_latest_launch(cls, uri: str, experiment: str, study: str) -> Tracker | None:
        """A tracker on the parent run of the study's latest launch (None before the first)."""
        tracker = cls(uri, experiment, study, "latest")
        runs = tracker.client.search_runs(
            [tracker.experiment_id],
            filter_string=f"tags.`sweep.study` = '{study}' and tags.`sweep.role` = 'parent'",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        if not runs:
            return None
        tracker.parent_id = runs[0].info.run_id
        tracker.launch = runs[0].data.tags.get("sweep.launch", "latest")
        return tracker

    # --- parent -----------------------------------------------------------------------------
    def start_parent(self, study_dict: Mapping, plan: Mapping[str, Any]) -> str:
        tags = {
            "mlflow.runName": f"{self.study}/{self.launch}",
            "sweep.study": self.study,
            "sweep.launch": self.launch,
            "sweep.role": "parent",
            "git_commit": git_commit(),
            "command": " ".join(sys.argv),
            **{f"machine.{k}": v for k, v in machine().items()},
            **{f"version.{k}": v for k, v in versions().items()},
        }
        run = self.client.create_run(self.experiment_id, tags=tags)
        self.parent_id = run.info.run_id
        self.log_params(self.parent_id, {key: str(value)[:6000] for key, value in plan.items()})
        self.log_text(self.parent_id, yaml_text(dict(study_dict)), "study.yaml")
        return self.parent_id

    def finish_parent(self, status: str, summary: Mapping[str, float]) -> None:
        """The summary's metrics, the machine again (with torch's kernel level, once trials ran
        here: `machine`), and the end."""
        self.set_tags(self.parent_id, {f"machine.{k}": v for k, v in machine().items()})
        for key, value in summary.items():
            self.client.log_metric(self.parent_id, key, float(value))
        self.client.set_terminated(self.parent_id, status)

    def log_params(self, run_id: str, params: Mapping[str, str]) -> None:
        """Params of a run, one request per 100 (MLflow's batch limit), not one per param."""
        from mlflow.entities import Param

        rows = [Param(key, str(value)) for key, value in params.items()]
        for i in range(0, len(rows), 100):
            self.client.log_batch(run_id, params=rows[i : i + 100])

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        """Tags of a run in one request. Another launcher of a shared study may tag the same run
        at the same moment (both analyse the front, both close an orphan): MLflow's batch path
        retries the insert its rival won, where `set_tag` fails on the unique key."""
        from mlflow.entities import RunTag

        self.client.log_batch(run_id, tags=[RunTag(key, str(value)) for key, value in tags.items()])

    def study_runs(self, role: str = "trial", carrying: str | None = None) -> dict:
        """The study's runs of `role` in this experiment, every launch's, {run id: Run}: one paged
        search (MLflow's page limit), not one request per run; `carrying`: only the runs that
        carry that tag."""
        query = f"tags.`sweep.study` = '{self.study}' and tags.`sweep.role` = '{role}'"
        if carrying:
            query += f" and tags.`{carrying}` LIKE '%'"
        out, token = {}, None
        while True:
            page = self.client.search_runs(
                [self.experiment_id], filter_string=query, max_results=SEARCH_PAGE, page_token=token
            )
            out.update((run.info.run_id, run) for run in page)
            token = page.token
            if not token:
                return out

    def update_runs(
        self,
        tags: Mapping[str, Mapping[str, str]],
        metrics: Mapping[str, Mapping[str, float]] | None = None,
        *,
        mark: str,
        tail: Collection[str] = (),
    ) -> int:
        """Tags ({run id: {key: value}}) and metrics (step 0) of many of the study's children, each
        run's in one `log_batch`, written only to runs that do not already carry those values (a
        report again over the same trials, a resumed launch's report, writes nothing new).
        `mark`: a tag every run's `tags` hold; only the runs already carrying it are read back
        (the others hold none of these values yet). `tail`: runs written only where they carry
        `mark` already, i.e. were read back (an earlier write brought up to date; the rest left
        as they are).
        Returns the number of runs written."""
        from mlflow.entities import Metric, RunTag

        metrics = metrics or {}
        known = self.study_runs(carrying=mark)
        stamp = int(time.time() * 1000)
        written = 0
        for run_id in dict.fromkeys([*tags, *metrics]):
            want_tags = {key: str(value) for key, value in tags.get(run_id, {}).items()}
            want_metrics = {key: float(value) for key, value in metrics.get(run_id, {}).items()}
            run = known.get(run_id)
            if run_id in tail and run is None:
                continue
            if run is not None:
                want_tags = {k: v for k, v in want_tags.items() if run.data.tags.get(k) != v}
                want_metrics = {k: v for k, v in want_metrics.items() if run.data.metrics.get(k) != v}
            if not want_tags and not want_metrics:
                continue
            self.client.log_batch(
                run_id,
                metrics=[Metric(key, value, stamp, 0) for key, value in want_metrics.items()],
                tags=[RunTag(key, value) for key, value in want_tags.items()],
            )
            written += 1
        return written

    # --- children ---------------------------------------------------------------------------
    def start_child(
        self,
        number: int,
        point: Mapping,
        seed: int,
        pid: str,
        resolved: Mapping,
        design: Mapping[str, str],
        later=None,
    ) -> str:
        """A child run under the parent, named `<point name>/s<seed>`: `design` are the design's
        descriptors (tags and params). The run is created here; its params and config.yaml are
        written by `later(fn, *args)` when given (sweeps.run.driver: off the Tune loop)."""
        tags = {
            "mlflow.runName": f"{point_name(point)}/s{seed}",
            "mlflow.parentRunId": self.parent_id,
            "sweep.study": self.study,
            "sweep.launch": self.launch,
            "sweep.role": "trial",
            "sweep.trial": str(number),
            "sweep.point": pid,
            "sweep.seed": str(seed),
            "sweep.status": "running",
            "sweep.workers": str(resolved.get("train", {}).get("workers", 1)),  # data-parallel processes
            **design,
        }
        run = self.client.create_run(self.experiment_id, tags=tags, run_name=tags["mlflow.runName"])
        run_id = run.info.run_id
        params = {**point, "seed": seed, **design}  # descriptors as params too: MLflow's charts read params
        params = {k: v if isinstance(v, str) else json.dumps(v) for k, v in params.items()}
        config_yaml = yaml_text(dict(resolved))
        (later or _now)(self.describe_child, run_id, run.info.artifact_uri, params, config_yaml)
        return run_id

    def describe_child(
        self, run_id: str, artifact_uri: str, params: Mapping[str, str], config_yaml: str
    ) -> None:
        self.log_params(run_id, params)
        self.write_artifact(artifact_uri, config_yaml, "config.yaml")

    def write_artifact(self, artifact_uri: str, text: str, name: str) -> None:
        """A text file into a run's artifacts (`artifact_uri`: the run's, as `create_run` gave it),
        straight through its artifact repository: `MlflowClient.log_artifact` would first read the
        run back for that URI, 6-7 ms of its ~11 ms on SQLite (docs/bench/scale.md)."""
        from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            path.write_text(text)
            get_artifact_repository(artifact_uri, tracking_uri=self.uri).log_artifact(str(path))

    def reopen_child(self, run_id: str, number: int, checkpoint: str) -> None:
        """A child run an earlier launch left (interrupted) continues under this launch's parent:
        RUNNING again, `sweep.resumes` counted up, `sweep.resumed_from` the checkpoint's name."""
        run = self.client.get_run(run_id)
        resumes = int(run.data.tags.get("sweep.resumes", "0")) + 1
        self.client.update_run(run_id, status="RUNNING")
        self.set_tags(
            run_id,
            {
                "mlflow.parentRunId": self.parent_id,
                "sweep.launch": self.launch,
                "sweep.trial": str(number),
                "sweep.status": "running",
                "sweep.resumes": str(resumes),
                "sweep.resumed_from": checkpoint,
            },
        )
        if "sweep.error" in run.data.tags:
            self.client.delete_tag(run_id, "sweep.error")

    def finish_child(
        self,
        run_id: str,
        status: str,
        metrics: Mapping[str, float],
        error: str = "",
        wall_s: float | None = None,
        curves: Sequence = (),
    ) -> None:
        """The run's final metrics (`final/<name>`, and `sweep/wall_s` when given), status tags and
        `curves` (the trial logger's last metrics, `mlflow.entities.Metric`s it handed back:
        sweeps.run.worker.execute) in one request (per 1000 metrics, MLflow's batch limit), then
        its end."""
        from mlflow.entities import Metric, RunTag

        stamp = int(time.time() * 1000)
        final = [*curves] + [
            Metric(f"final/{key}", float(value), stamp, 0)
            for key, value in metrics.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        ]
        if wall_s is not None:
            final.append(Metric("sweep/wall_s", float(wall_s), stamp, 0))
        tags = {"sweep.status": status, **({"sweep.error": error[:4900]} if error else {})}
        tags = [RunTag(key, value) for key, value in tags.items()]
        for i in range(0, max(1, len(final)), 1000):
            self.client.log_batch(run_id, metrics=final[i : i + 1000], tags=tags if i == 0 else [])
        if error:
            self.log_text(run_id, error, "error.txt")
        mlflow_status = {"ok": "FINISHED", "pruned": "KILLED", "interrupted": "KILLED"}.get(status, "FAILED")
        self.client.set_terminated(run_id, mlflow_status)

    def close_orphans(self, keep=frozenset(), parents: bool = True) -> list[str]:
        """Runs of this study still RUNNING from an earlier launch: marked KILLED with the reason.
        A shared study (other launchers may be alive) keeps `keep` (the MLflow runs of its open
        trials) and, with parents=False, every parent run."""
        runs = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`sweep.study` = '{self.study}' and attributes.status = 'RUNNING'",
            max_results=5000,
        )
        closed = []
        for run in runs:
            if run.data.tags.get("sweep.launch") == self.launch or run.info.run_id in keep:
                continue
            if not parents and run.data.tags.get("sweep.role") == "parent":
                continue
            reason = f"interrupted: launch {run.data.tags.get('sweep.launch')} ended before this run finished"
            self.set_tags(run.info.run_id, {"sweep.status": "interrupted", "sweep.error": reason})
            self.client.set_terminated(run.info.run_id, "KILLED")
            closed.append(run.info.run_id)
        return closed

    def log_text(self, run_id: str, text: str, name: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            path.write_text(text)
            self.client.log_artifact(run_id, str(path))

    def log_file(self, run_id: str, path: str | Path, folder: str | None = None) -> None:
        self.client.log_artifact(run_id, str(path), folder)
