"""One local Ray for the in-process Ray launches of the sweeps tests.

A launch on the ray backend starts Ray (`ray.init`: seconds, many more on a busy machine) and
shuts it down at its end. Tests that ask for `shared_ray` keep the Ray the first of them
started (through the launcher's own `connect`, so the start itself is still the launcher's); the
next ones join it, as a launch joins any Ray already running in its process. Ray is shut down
once, after the last test. Launches in subprocesses (the Ctrl-C and kill -9 tests) start and
stop their own Ray as before.
"""

import pytest


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
