"""A local Ray study starts its own Ray, even where a `ray start` cluster runs on the machine.

`ray.init()` with no address joins the last cluster `ray start` recorded in Ray's temp folder
(`ray_current_cluster`); the launcher must ask for "local" so that a study without
`ray.address` never lands on a cluster it was not pointed at. Checked through Ray's own address
resolution, without starting Ray.
"""

import pytest
import ray
from ray._private.services import canonicalize_bootstrap_address

from sweeps.run.backends.ray.backend import RayBackend
from sweeps.study import load_study
from tests.sweeps.helpers import write_study


class _Stop(Exception):
    pass


def init_kwargs(monkeypatch, study) -> dict:
    seen = {}

    def fake_init(**kwargs):
        seen.update(kwargs)
        raise _Stop

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", fake_init)
    with pytest.raises(_Stop):
        RayBackend().connect(study)
    return seen


def test_a_local_study_does_not_join_the_cluster_ray_start_left_on_the_machine(tmp_path, monkeypatch):
    temp = tmp_path / "ray"
    temp.mkdir()
    (temp / "ray_current_cluster").write_text("127.0.0.1:6399")  # what `ray start --head` writes
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    study = load_study(write_study(tmp_path, backend="ray", ray={"temp_dir": str(temp), "num_cpus": 2}))

    kwargs = init_kwargs(monkeypatch, study)
    assert canonicalize_bootstrap_address(None, str(temp)).endswith(":6399")  # the hazard
    assert canonicalize_bootstrap_address(kwargs["address"], kwargs["_temp_dir"]) is None  # starts its own
    assert kwargs["num_cpus"] == 2


def test_a_study_with_an_address_joins_that_cluster(tmp_path, monkeypatch):
    study = load_study(write_study(tmp_path, backend="ray", ray={"address": "127.0.0.1:6399"}))
    kwargs = init_kwargs(monkeypatch, study)
    assert kwargs["address"] == "127.0.0.1:6399" and "num_cpus" not in kwargs
