"""The cluster set-up for real, on loopback: PostgreSQL, an MLflow server on it, a 2-node Ray.

`make test-cluster` (pytest -m cluster). Studies run through `python -m sweeps.launch
--ray-address` exactly as on a cluster: trials on both Ray nodes, every run in the MLflow
server (whose backend is PostgreSQL), the Optuna study in PostgreSQL; two launchers started at
once on one study end with exactly the requested runs, none twice.
"""

import contextlib
import os
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from sweeps.study.run_record import RunRecord
from tests.cluster import services

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]

TRIAL = {
    "model": {"preset": "tiny", "n_layers": 2, "d_model": 32, "n_heads": 2, "d_ff": 64, "max_seq_len": 32},
    "data": {"kind": "mqar", "seq_len": 32, "vocab": 64, "num_kv_pairs": 4, "train_examples": 256,
             "val_examples": 64},
    "train": {"tokens": 4096, "batch_size": 8, "eval_every": 8, "eval_batches": 2, "log_every": 4,
              "num_threads": 1},
}  # fmt: skip
SPACE = {"model.residual": {"choices": {"baseline": {"kind": "none"}, "sat": {"kind": "value_residual"}}}}


@pytest.fixture(scope="module")
def postgres():
    if services.pg_bindir() is None:
        pytest.skip("PostgreSQL is not installed (make test-cluster installs it)")
    pg = services.start_postgres()
    saved = os.environ.get("PGPASSWORD")
    os.environ["PGPASSWORD"] = pg.password  # libpq reads it; URLs carry no password
    try:
        yield pg
    finally:
        if saved is None:
            os.environ.pop("PGPASSWORD", None)
        else:
            os.environ["PGPASSWORD"] = saved
        pg.stop()


@pytest.fixture(scope="module")
def mlflow_server(postgres):
    server = services.start_mlflow(postgres.url("mlflow"), postgres.env())
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module", autouse=True)
def _ray_starting():
    """The 2-node Ray starts in a thread before anything else, so that its start-up (two `ray
    start` processes, mostly waiting) overlaps PostgreSQL's and the MLflow server's."""
    if services.pg_bindir() is None:
        pytest.skip("PostgreSQL is not installed (make test-cluster installs it)")
    pool = ThreadPoolExecutor(1, thread_name_prefix="ray-start")
    starting = pool.submit(services.start_ray)
    try:
        yield starting
    finally:
        pool.shutdown()  # a start still under way ends (or fails) before its processes are stopped
        if starting.exception() is None:
            starting.result().stop()


@pytest.fixture(scope="module")
def ray_cluster(_ray_starting):
    cluster = _ray_starting.result()
    nodes = cluster.nodes()
    assert len(nodes) == 2, nodes
    custom = sorted(k for n in nodes for k in ("head", "second") if k in n["resources"])
    assert custom == ["head", "second"]
    return cluster


def write_study(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tree = {
        "name": name,
        "trial": TRIAL,
        "space": SPACE,
        "repeats": 2,  # 2 points x 2 seeds = 4 runs
        "resources": {"cpus": 1},
        "max_concurrent": 2,
        "output": {"dir": str(folder / "results")},
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return path


def launcher(study: Path, cluster, pg, server, log: Path) -> subprocess.Popen:
    cmd = [
        sys.executable, "-m", "sweeps.launch", str(study), "--ray-address", cluster.address,
        "--set", f"output.mlflow_uri={server.uri}", "--set", f"output.storage={pg.url('optuna')}",
    ]  # fmt: skip
    env = {**os.environ, **pg.env(), **cluster.env(), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(cmd, cwd=study.parent, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def finish(proc: subprocess.Popen, log: Path, timeout: float = 240) -> None:
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, log.read_text()[-6000:]


def optuna_trials(pg, name: str):
    from sweeps.run.storage import load_trials

    return load_trials(name, pg.url("optuna"))


def mlflow_runs(server, name: str, role: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=server.uri)
    exp = client.get_experiment_by_name(name)
    assert exp is not None, f"no experiment {name} in the MLflow server"
    return client.search_runs([exp.experiment_id], filter_string=f"tags.`sweep.role` = '{role}'")


def sql(pg, database: str, query: str):
    import psycopg2

    with contextlib.closing(
        psycopg2.connect(host="127.0.0.1", port=pg.port, user=services.PG_USER, dbname=database)
    ) as conn, conn.cursor() as cur:  # fmt: skip
        cur.execute(query)
        return cur.fetchall()


def test_study_runs_on_both_ray_nodes_with_mlflow_server_and_optuna_on_postgres(
    tmp_path, postgres, mlflow_server, ray_cluster
):
    from optuna.trial import TrialState

    study = write_study(tmp_path, "cluster_one")
    log = tmp_path / "launch.log"
    start = time.time()
    finish(launcher(study, ray_cluster, postgres, mlflow_server, log), log)
    print(f"study of 4 runs on the 2-node cluster: {time.time() - start:.1f} s")
    assert "hypervolume" in log.read_text()

    trials = optuna_trials(postgres, "cluster_one")
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 4
    # ... and that study lives in PostgreSQL itself
    query = (
        "SELECT s.study_name, count(*) FROM trials t JOIN studies s USING (study_id)"
        " WHERE t.state = 'COMPLETE' GROUP BY s.study_name"
    )
    rows = sql(postgres, "optuna", query)
    assert ("cluster_one", 4) in rows

    children = mlflow_runs(mlflow_server, "cluster_one", "trial")
    assert len(children) == 4 and {c.info.status for c in children} == {"FINISHED"}
    assert all("final/val_loss" in c.data.metrics and "val_loss" in c.data.metrics for c in children)
    assert all("pareto_rank" in c.data.tags for c in children)
    (parent,) = mlflow_runs(mlflow_server, "cluster_one", "parent")
    assert parent.info.status == "FINISHED"
    nodes = {c.data.tags["ray.node_id"] for c in children}
    assert nodes == {n["id"] for n in ray_cluster.nodes()}, "the trials did not run on both nodes"
    # the MLflow server keeps its runs in PostgreSQL
    ((n_runs,),) = sql(postgres, "mlflow", "SELECT count(*) FROM runs")
    assert n_runs >= 5


def test_two_launchers_at_once_share_one_study_without_duplicates(
    tmp_path, postgres, mlflow_server, ray_cluster
):
    from optuna.trial import TrialState

    procs, logs = [], []
    start = time.time()
    for who in ("a", "b"):  # own output.dir (results, lock, Ray's trial folders); one shared study
        study = write_study(tmp_path / who, "cluster_two")
        logs.append(tmp_path / who / "launch.log")
        procs.append(launcher(study, ray_cluster, postgres, mlflow_server, logs[-1]))
    for proc, log in zip(procs, logs, strict=True):
        finish(proc, log)
    print(f"two launchers, one study of 4 runs: {time.time() - start:.1f} s")

    trials = optuna_trials(postgres, "cluster_two")
    assert Counter(t.state for t in trials) == {TrialState.COMPLETE: 4}, [(t.number, t.state) for t in trials]
    runs = [(RunRecord.of(t).point, RunRecord.of(t).repeat) for t in trials]
    assert len(set(runs)) == 4, runs
    by_launch = Counter(RunRecord.of(t).launch for t in trials)
    print(f"runs per launcher: {dict(by_launch)}")

    children = mlflow_runs(mlflow_server, "cluster_two", "trial")
    assert sorted(c.info.status for c in children) == ["FINISHED"] * 4
    assert len({(c.data.tags["sweep.point"], c.data.tags["sweep.seed"]) for c in children}) == 4
    parents = mlflow_runs(mlflow_server, "cluster_two", "parent")
    assert sorted(p.info.status for p in parents) == ["FINISHED", "FINISHED"]


def test_two_worker_trials_span_both_nodes_and_asha_prunes_them(
    tmp_path, postgres, mlflow_server, ray_cluster
):
    """Each node has 1 CPU, so a trial of 2 workers x 1 CPU (Ray Train, gloo) needs both; a pruned
    trial must give its workers back or the next one never starts; a diverging one (lr 1e30, at
    step 2) fails as diverged, the worker's `TrainingDiverged` carried through Ray Train."""
    from optuna.trial import TrialState

    study = write_study(tmp_path, "cluster_ddp")
    tree = yaml.safe_load(study.read_text())
    tree.update(
        repeats=1,
        max_concurrent=1,  # one 2-worker trial fills the cluster
        resources={"workers": 2, "cpus": 1},
        scheduler={"kind": "asha", "grace_tokens": 1024, "reduction_factor": 2},
        space={"train.lr": {"choices": [0.01, 1.0e-5, 1.0e30]}},  # trains, pruned, diverges
    )
    study.write_text(yaml.safe_dump(tree, sort_keys=False))
    log = tmp_path / "launch.log"
    start = time.time()
    finish(launcher(study, ray_cluster, postgres, mlflow_server, log), log, timeout=420)
    print(f"3 trials of 2 workers across the 2 nodes: {time.time() - start:.1f} s")

    trials = optuna_trials(postgres, "cluster_ddp")
    states = Counter(t.state for t in trials)
    # lr 1e-5 is far behind 0.01 at the first rung; lr 1e30 diverges at step 2 (grad_clip or not)
    assert states == {TrialState.COMPLETE: 1, TrialState.PRUNED: 1, TrialState.FAIL: 1}, states
    (failed,) = [t for t in trials if t.state == TrialState.FAIL]
    assert RunRecord.of(failed).fail_reason == "diverged" and failed.params["train.lr"] == 1.0e30
    children = mlflow_runs(mlflow_server, "cluster_ddp", "trial")
    assert len(children) == 3 and all(c.data.tags["sweep.workers"] == "2" for c in children)
    both = {n["id"] for n in ray_cluster.nodes()}
    for child in children:
        assert set(child.data.tags["ray.worker_nodes"].split(",")) == both, child.data.tags
    done = [c for c in children if c.data.tags["sweep.status"] == "ok"]
    assert done and all(c.info.status == "FINISHED" for c in done)
    assert all(c.data.metrics["final/tokens"] == TRIAL["train"]["tokens"] for c in done)
    for metrics in (c.data.metrics for c in done):  # recorded like a one-worker trial, plus DDP's buckets
        assert metrics["final/mem_ddp_buckets_mb"] == metrics["final/mem_grads_mb"] > 0
        assert {"final/val_loss", "final/tokens_per_s", "final/peak_mem_mb", "val_loss"} <= set(metrics)
    (diverged,) = [c for c in children if c.data.tags["sweep.status"] == "diverged"]
    assert diverged.info.status == "FAILED" and "diverged" in diverged.data.tags["sweep.error"]
    pruned = [c for c in children if c.data.tags["sweep.status"] == "pruned"]
    assert pruned and all(c.info.status == "KILLED" and c.data.tags["pareto_rank"] == "-1" for c in pruned)
