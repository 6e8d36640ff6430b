"""Which tests share a pytest-xdist worker (`make test` runs `pytest -n 2 --dist loadgroup`).

Every test that asks for `shared_ray` (tests/sweeps/conftest.py) goes to one worker, in one group:
that worker starts Ray once for all of them, where two workers would each start a Ray of their
own (a 2-core machine's worth of processes each). The group is the longest unit of work, so it is
collected first: its worker starts on it at once while the other worker takes the rest (started
where its first test falls, it would run last, alone). Without xdist the group does nothing.
"""

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
            if _on_ray(item) and not item.nodeid.endswith(f"@{RAY_GROUP}"):
                item._id = NodeId.parse(f"{item.nodeid}@{RAY_GROUP}")
    return result
