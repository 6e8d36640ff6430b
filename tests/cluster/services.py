"""Real services on loopback for the cluster tests: PostgreSQL, an MLflow server, a 2-node Ray.

Each starter returns a handle whose `stop()` ends exactly the processes it started (by process
group id; never `ray stop`, which would end every Ray on the machine). The database password is
generated per run, written to a 0600 file in the service's temporary folder and handed to
clients through PGPASSWORD (libpq); no URL carries it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

from sweeps.run.backends.ray.kept import end_in_ray_order

PG_USER = "satsweep"
DATABASES = ("mlflow", "optuna")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _wait(check, what: str, timeout: float, proc: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-3000:] if log and log.exists() else ""
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{tail}")
        with contextlib.suppress(Exception):
            if check():
                return
        time.sleep(0.5)
    tail = log.read_text()[-3000:] if log and log.exists() else ""
    raise TimeoutError(f"{what} not ready after {timeout:.0f} s\n{tail}")


def _killpg(proc: subprocess.Popen, timeout: float = 20) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


# --- PostgreSQL ---------------------------------------------------------------------------------
@dataclasses.dataclass
class Postgres:
    bindir: Path
    root: Path
    port: int
    password: str
    as_postgres: bool

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg2://{PG_USER}@127.0.0.1:{self.port}/{database}"

    def env(self) -> dict[str, str]:
        return {"PGPASSWORD": self.password}

    def _cmd(self, *args: str) -> list[str]:
        return (["runuser", "-u", "postgres", "--"] if self.as_postgres else []) + list(args)

    def stop(self) -> None:
        subprocess.run(
            self._cmd(str(self.bindir / "pg_ctl"), "stop", "-D", str(self.datadir), "-m", "fast", "-w"),
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def start_postgres() -> Postgres:
    bindir = pg_bindir()
    if bindir is None:
        raise RuntimeError("PostgreSQL is not installed (make test-cluster installs it with apt-get)")
    as_postgres = os.geteuid() == 0  # initdb refuses root: run the server as the postgres user
    root = Path(tempfile.mkdtemp(prefix="satsweep-pg-"))
    os.chmod(root, 0o700)
    password = secrets.token_urlsafe(24)
    pwfile = root / "pwfile"
    pwfile.write_text(password + "\n")
    os.chmod(pwfile, 0o600)
    if as_postgres:
        shutil.chown(root, "postgres", "postgres")
        shutil.chown(pwfile, "postgres", "postgres")
    pg = Postgres(bindir, root, free_port(), password, as_postgres)
    subprocess.run(
        pg._cmd(str(bindir / "initdb"), "-D", str(pg.datadir), "-U", PG_USER, "--pwfile", str(pwfile),
                "--auth", "scram-sha-256", "-E", "UTF8", "--no-sync"),
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    pwfile.unlink()
    options = f"-c listen_addresses=127.0.0.1 -p {pg.port} -k {root} -c fsync=off -c max_connections=100"
    subprocess.run(
        pg._cmd(str(bindir / "pg_ctl"), "start", "-D", str(pg.datadir), "-w", "-t", "60",
                "-l", str(root / "server.log"), "-o", options),
        check=True, capture_output=True, timeout=90,
    )  # fmt: skip
    import psycopg2

    with contextlib.closing(
        psycopg2.connect(host="127.0.0.1", port=pg.port, user=PG_USER, password=password, dbname="postgres")
    ) as conn:
        conn.autocommit = True
        with conn.cursor() as cur:
            for db in DATABASES:
                cur.execute(f"CREATE DATABASE {db}")
    return pg


# --- MLflow server ------------------------------------------------------------------------------
@dataclasses.dataclass
class MlflowServer:
    uri: str
    proc: subprocess.Popen
    root: Path

    def stop(self) -> None:
        _killpg(self.proc)
        shutil.rmtree(self.root, ignore_errors=True)


def start_mlflow(
    backend_uri: str, env: dict[str, str], timeout: float = 120, proxy_artifacts: bool = True
) -> MlflowServer:
    """`mlflow server` as on a cluster (artifacts uploaded through it into a folder of its own),
    or with proxy_artifacts=False what `make mlflow-ui` starts (`mlflow ui`: the experiments'
    own artifact folders)."""
    root = Path(tempfile.mkdtemp(prefix="satsweep-mlflow-"))
    port = free_port()
    log = root / "server.log"
    full_env = {**os.environ, **env, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    mlflow = Path(sys.executable).with_name("mlflow")
    command = ["server", "--artifacts-destination", str(root / "artifacts"), "--serve-artifacts"]
    proc = subprocess.Popen(
        [str(mlflow), *(command if proxy_artifacts else ["ui"]), "--backend-store-uri", backend_uri,
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        stdout=log.open("w"), stderr=subprocess.STDOUT, env=full_env, start_new_session=True,
    )  # fmt: skip
    uri = f"http://127.0.0.1:{port}"
    server = MlflowServer(uri, proc, root)
    try:
        _wait(lambda: urllib.request.urlopen(uri + "/health", timeout=2).status == 200,
              "mlflow server", timeout, proc, log)  # fmt: skip
    except BaseException:
        server.stop()
        raise
    return server


# --- Ray ----------------------------------------------------------------------------------------
@dataclasses.dataclass
class RayCluster:
    address: str
    procs: list[subprocess.Popen]
    root: Path
    _nodes: list[dict] | None = None

    def env(self) -> dict[str, str]:
        return {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}

    def nodes(self) -> list[dict]:
        """Alive nodes with their resources, read once in a separate process (no driver kept here;
        a Python start and a Ray connection each time otherwise): the cluster's nodes are fixed."""
        if self._nodes is None:
            self._nodes = self._read_nodes()
        return self._nodes

    def _read_nodes(self) -> list[dict]:
        code = (
            f"import json, ray; ray.init(address={self.address!r}, logging_level='ERROR');"
            "print(json.dumps([{'id': n['NodeID'], 'resources': n['Resources']} "
            "for n in ray.nodes() if n['Alive']]))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
            env={**os.environ, **self.env()}, check=True,
        ).stdout  # fmt: skip
        return json.loads(out.strip().splitlines()[-1])

    def stop(self) -> None:
        """Both nodes' processes in `ray stop`'s order (`kept.end_in_ray_order`: all at once, the
        raylets and the GCS outlived SIGTERM, 10 s of waiting every stop); then what is left of
        each `ray start --block` process group, which should be nothing."""
        family = []
        for proc in self.procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                started = psutil.Process(proc.pid)
                family += [started, *started.children(recursive=True)]
        end_in_ray_order(family)
        for proc in self.procs:
            _killpg(proc, timeout=5)
        shutil.rmtree(self.root, ignore_errors=True)


def start_ray(timeout: float = 120) -> RayCluster:
    """`ray start --head` and a second `ray start --address` on loopback, 1 CPU each."""
    root = Path(tempfile.mkdtemp(prefix="satsweep-ray-", dir="/tmp"))
    port = free_port()
    ray = str(Path(sys.executable).with_name("ray"))
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_worker_niceness": "0",
    }
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--num-gpus", "0", "--block"]
    head_log, second_log = root / "head.log", root / "second.log"
    head = subprocess.Popen(
        [ray, "start", "--head", "--port", str(port), "--resources", json.dumps({"head": 1}),
         "--include-dashboard=false", "--temp-dir", str(root / "tmp"), "--disable-usage-stats", *common],
        stdout=head_log.open("w"), stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )  # fmt: skip
    cluster = RayCluster(f"127.0.0.1:{port}", [head], root)
    try:
        _wait(lambda: "Ray runtime started" in head_log.read_text(), "ray head", timeout, head, head_log)
        second = subprocess.Popen(
            [ray, "start", "--address", cluster.address, "--resources", json.dumps({"second": 1}), *common],
            stdout=second_log.open("w"), stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
        cluster.procs.append(second)
        started = lambda: "Ray runtime started" in second_log.read_text()
        _wait(started, "ray node", timeout, second, second_log)
    except BaseException:
        cluster.stop()
        raise
    return cluster
