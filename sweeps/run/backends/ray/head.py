"""The local Ray a launch starts, without the head processes that do no work for it.

`ray.init()` with no cluster to join starts a head node with three Python daemons besides GCS and
the raylet: the autoscaler monitor (a local Ray of fixed size has nothing to scale), the log
monitor (it forwards workers' output to drivers that ask for it; the launcher passes
`log_to_driver=False`) and the dashboard's API server (with `include_dashboard=False` it loads only
the usage-stats module, and `ray.init` turns usage stats off). On a 2-core machine their imports
take the CPUs that Ray's own start needs (docs/bench/launch_costs.md has the measurement).
`ray start` can leave out the first two (`--no-monitor`, `--include-log-monitor=false`) but
`ray.init` cannot ask for any of them, so while it starts the head, `ray._private.node.Node` is
the subclass below. Everything else is Ray's own: the same processes are owned by the driver and
ended by `ray.shutdown()`. Ray is pinned to one minor version (pyproject.toml);
tests/sweeps/run/test_ray_head.py fails if a Ray release moves these names.
"""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def bare_head():
    """Within this block, a head node started by `ray.init` has no monitor, log monitor or API
    server; nodes that only connect (a cluster joined, every worker process) are untouched."""
    import ray._private.node as node_module

    ray_node = node_module.Node

    class BareHead(ray_node):
        def __init__(self, ray_params, head: bool = False, **kwargs):
            if head:
                ray_params.no_monitor = True
                ray_params.include_log_monitor = False
            super().__init__(ray_params, head=head, **kwargs)

        def start_api_server(self, **kwargs) -> None:
            return None

    node_module.Node = BareHead
    try:
        yield
    finally:
        node_module.Node = ray_node
