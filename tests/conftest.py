"""Which tests share a pytest-xdist worker (`make test` runs `pytest -n 2 --dist loadgroup`).

Every test that asks for `shared_ray` (below) goes to one worker, in one group:
that worker starts Ray once for all of them, where two workers would each start a Ray of their
own (a 2-core machine's worth of processes each). The group is the longest unit of work, so it is
collected first: its worker starts on it at once while the other worker takes the rest (started
where its first test falls, it would run last, alone). A module whose module-scoped fixture is
costly (a training, an export) marks itself `xdist_group` too, so one worker builds it once instead
of each worker building its own. Without xdist the groups do nothing.

Also here: the modules tests import are frozen out of garbage collection (below).
"""

import gc
import sys

import pytest

RAY_GROUP = "ray"


def _on_ray(item) -> bool:
    return "shared_ray" in item.fixturenames


@pytest.hookimpl(wrapper=True)  # around xdist's hook, which reads the group markers
def pytest_collection_modifyitems(config, items):
    for item in items:
        if _on_ray(item):
            item.add_marker(pytest.mark.xdist_group(RAY_GROUP))
    items[:] = [item for item in items if _on_ray(item)] + [item for item in items if not _on_ray(item)]
    result = yield
    if getattr(config.option, "loadgroup", False):
        # Name the group as xdist means to ("<nodeid>@group") where pytest reads a node's id
        # (item._id): xdist's own naming sets item._nodeid, which the pinned pytest does not read,
        # so its scheduler would split the Ray tests over both workers, each starting its own Ray
        # (the versions: docs/bench/test_suite.md).
        from _pytest.nodeid import NodeId

        for item in items:
            group = _group(item)
            if group and not item.nodeid.endswith(f"@{group}"):
                item._id = NodeId.parse(f"{item.nodeid}@{group}")
    return result


def _group(item) -> str | None:
    """The item's xdist group: the Ray tests', or a module's own `xdist_group` mark (a module whose
    module-scoped fixture is costly keeps its tests on one worker, which builds the fixture once)."""
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        return None
    return marker.args[0] if marker.args else marker.kwargs.get("name")


# Garbage collection: Optuna's `gc_after_trial` (backend local) and the step memory meter
# (trainers.step_memory) run a full `gc.collect()` for every trial. In a test process holding
# torch, Lightning, Ray, MLflow and matplotlib that walks millions of live objects each time, for
# trials (stand-in fits) that take milliseconds. The modules a test imported live until the end
# of the session: after a test that imported new ones, collect once and freeze what is left
# (`gc.freeze`), so later collections walk only what tests make. Nothing changes what a test checks.
_modules_at_freeze = 0
FREEZE_AFTER_NEW_MODULES = 50


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _modules_at_freeze
    result = yield  # after the test's teardown and pytest's release of its fixtures
    if len(sys.modules) - _modules_at_freeze >= FREEZE_AFTER_NEW_MODULES:
        gc.collect()
        gc.freeze()
        _modules_at_freeze = len(sys.modules)
    return result


# One local Ray for the in-process Ray launches (the sweeps and bench tests). A launch on the ray
# backend starts Ray (`ray.init`: seconds, many more on a busy machine) and shuts it down at its
# end. Tests that ask for `shared_ray` keep the Ray the first of them started (through the
# launcher's own `connect`, so the start itself is still the launcher's); the next ones join it, as
# a launch joins any Ray already running in its process. Ray is shut down once, after the last
# test. Launches in subprocesses (the Ctrl-C and kill -9 tests) start and stop their own Ray.
@pytest.fixture(scope="session")
def _ray_after_the_last_test():
    yield
    import ray

    if ray.is_initialized():
        ray.shutdown()


@pytest.fixture
def shared_ray(_ray_after_the_last_test, monkeypatch):
    """While the test runs, the launcher's `ray.shutdown()` leaves Ray running for the next test."""
    import ray

    monkeypatch.setattr(ray, "shutdown", lambda *args, **kwargs: None)
