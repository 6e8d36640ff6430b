"""The local Ray a launch starts has no autoscaler monitor, log monitor or dashboard API server
(sweeps.run.backends.ray.head), runs trials all the same, and leaves Ray's own class in place."""

import psutil
import ray
import ray._private.node as node_module

from sweeps.run.backends.ray.backend import RayBackend
from sweeps.run.backends.ray.head import bare_head
from sweeps.study import load_study
from tests.sweeps.helpers import write_study

DAEMONS = {"monitor.py": "monitor", "log_monitor.py": "log_monitor", "dashboard.py": "dashboard"}


def ray_children() -> list[str]:
    return [" ".join(p.cmdline()) for p in psutil.Process().children(recursive=True) if p.is_running()]


def test_the_local_ray_starts_without_the_daemons_that_do_no_work_and_runs_tasks(tmp_path, shared_ray):
    study = load_study(write_study(tmp_path, backend="ray", ray={"num_cpus": 2}))
    RayBackend().connect(study)  # starts the shared Ray through the launcher's own path, or joins it
    processes = ray_children()
    assert any("raylet" in cmd for cmd in processes) and any("gcs_server" in cmd for cmd in processes)
    started = {name for script, name in DAEMONS.items() if any(script in cmd for cmd in processes)}
    assert started == set()
    assert ray.get(ray.remote(lambda: 6 * 7).remote()) == 42
    assert node_module.Node.__name__ == "Node"  # Ray's class is back once the head is up


def test_only_a_head_node_loses_its_daemons(monkeypatch):
    seen = []

    def fake_init(self, ray_params, head=False, **kwargs):
        seen.append((head, ray_params.no_monitor, ray_params.include_log_monitor))

    monkeypatch.setattr(node_module.Node, "__init__", fake_init)
    params = ray._private.parameter.RayParams
    with bare_head():
        node_module.Node(params(), head=True)
        node_module.Node(params(), head=False, connect_only=True)
        assert node_module.Node(params(), head=True).start_api_server(include_dashboard=False) is None
    assert seen[0] == (True, True, False)
    assert seen[1] == (False, False, None)  # a node that connects keeps Ray's defaults
