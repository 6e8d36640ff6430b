"""Which tests share a pytest-xdist worker (`make test` runs `pytest -n 2 --dist loadgroup`).

Every test that asks for `shared_ray` (tests/sweeps/conftest.py) goes to one worker, in one group:
that worker starts Ray once for all of them, where two workers would each start a Ray of their
own (a 2-core machine's worth of processes each). Without xdist the group marker does nothing.
"""

import pytest

RAY_GROUP = "ray"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "shared_ray" in item.fixturenames:
            item.add_marker(pytest.mark.xdist_group(RAY_GROUP))
