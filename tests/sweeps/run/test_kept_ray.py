"""A local Ray kept between launches (sweeps.run.backends.ray.kept): its record, when a launch joins
it, a stale record, `--stop-ray`; and, in the Ray group, two launches that share one."""

import dataclasses
import os
import subprocess
import sys
import time

import psutil
import pytest

from arch.configtree import ConfigError
from sweeps.run.backends.ray import kept
from sweeps.run.launch import main, parse_args
from sweeps.study import load_study
from tests.sweeps.helpers import write_study


def sleeper(*args) -> subprocess.Popen:
    """A process that stands in for one of Ray's (a shell with a child, for `args == ("family",)`)."""
    cmd = ["sh", "-c", "sleep 60 & wait"] if args == ("family",) else ["sleep", "60"]
    return subprocess.Popen(cmd)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE  # ended, not yet reaped
    except psutil.NoSuchProcess:
        return True


def record(tmp_path, procs, **fields) -> kept.KeptRay:
    session = tmp_path / "session"
    session.mkdir(exist_ok=True)
    rec = kept.KeptRay(
        address="127.0.0.1:1",
        processes={str(p.pid): psutil.Process(p.pid).create_time() for p in procs},
        num_cpus=2,
        num_gpus=0,
        session_dir=str(session),
        ray_version="2.60.0",
        python=sys.executable,
        project="/checkout",
        started=time.time(),
        **fields,
    )
    kept.record_path().write_text(rec.to_json())
    return rec


def want(**changes) -> dict:
    return {"num_cpus": 2, "num_gpus": 0, "ray_version": "2.60.0", "python": sys.executable,
            "project": "/checkout", **changes}  # fmt: skip


@pytest.fixture(autouse=True)
def own_record(tmp_path, monkeypatch):
    monkeypatch.setenv(kept.RECORD_ENV, str(tmp_path / "kept-ray.json"))


@pytest.fixture
def procs():
    started = []
    yield started
    for p in started:
        p.kill()
        p.wait()


def test_a_live_matching_record_is_joined_and_a_different_one_is_named_and_left(tmp_path, procs):
    procs.append(sleeper())
    rec = record(tmp_path, procs)
    assert kept.read() == rec and kept.alive(rec)
    said = []
    assert kept.join_or_start(want(), None, said.append) == rec
    assert "joining the kept Ray at 127.0.0.1:1" in said[-1] and kept.STOP_HINT in said[-1]
    assert kept.mismatch(rec, want(num_cpus=4, project="/other")) == [
        "num_cpus 4 here, 2 kept", "project /other here, /checkout kept"]  # fmt: skip
    # workers read the environment of the launch that started the kept Ray, not the joining one's
    assert kept.mismatch(rec, want(env={"OMP_NUM_THREADS": "1"})) == [
        "environment variables OMP_NUM_THREADS differ"
    ]
    assert kept.join_or_start(want(num_cpus=4), None, said.append) is None  # this launch: its own Ray
    assert "does not fit this launch (num_cpus 4 here, 2 kept)" in said[-1]
    assert procs[0].poll() is None and kept.read() == rec  # the kept one is left as it is


def test_no_record_starts_one(tmp_path, monkeypatch):
    started = []

    def fake_start(wanted, temp_dir, path):
        started.append((wanted, temp_dir, path))
        return dataclasses.replace(record(tmp_path, []), address="127.0.0.1:2")

    monkeypatch.setattr(kept, "start", fake_start)
    kept.record_path().unlink(missing_ok=True)
    said = []
    assert kept.join_or_start(want(), "/tmp/t", said.append).address == "127.0.0.1:2"
    assert started == [(want(), "/tmp/t", kept.record_path())]
    assert "started a kept Ray" in said[0] and "for this and later launches" in said[0]


def test_a_stale_record_is_removed_with_what_is_left_of_it(tmp_path, procs):
    procs += [sleeper(), sleeper()]
    rec = record(tmp_path, procs)
    procs[0].kill()
    procs[0].wait()
    assert not kept.alive(rec)
    assert kept.clean_stale() is None
    assert not kept.record_path().exists()
    assert procs[1].wait(10) is not None  # the recorded process still running was ended
    # a session folder removed (a temporary folder's Ray) is stale too
    procs.append(sleeper())
    rec = record(tmp_path, procs[2:])
    (tmp_path / "session").rmdir()
    assert not kept.alive(rec)


def test_stop_ends_the_recorded_processes_and_their_children_and_nothing_else(tmp_path, procs):
    procs += [sleeper("family"), sleeper(), sleeper()]
    family, recorded, other = procs
    time.sleep(0.2)  # the shell starts its child
    child = psutil.Process(family.pid).children()[0]
    record(tmp_path, [family, recorded])
    assert "3 process(es)" in kept.stop()  # the shell, its child and the sleeper
    assert family.wait(10) is not None and recorded.wait(10) is not None
    assert gone(child.pid)
    assert other.poll() is None and not kept.record_path().exists()


def test_stop_returns_once_the_killed_processes_have_ended(tmp_path, procs, monkeypatch):
    """A process that outlives SIGTERM is killed; `stop` says "stopped" only once it has ended
    (SIGKILL takes a while on a loaded machine: `--stop-ray` returned first, once, in CI)."""
    procs.append(subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 60"]))  # its sleep ignores TERM too
    time.sleep(0.2)
    record(tmp_path, procs)
    looks, ended = [], kept._ended

    def slow(proc):  # seen ended only at its third look after it ended, as a slow teardown would be
        if not ended(proc):
            return False
        looks.append(proc.pid)
        return len(looks) > 2

    monkeypatch.setattr(kept, "_ended", slow)
    assert "still ending" not in kept.stop(grace_s=0.5)
    assert len(looks) > 2 and gone(procs[0].pid)


def test_stop_does_not_wait_out_its_grace_for_an_ended_process_its_parent_has_not_reaped(tmp_path, procs):
    """A recorded process that ends at SIGTERM but whose parent (not this process) does not reap it
    stays a zombie: it has ended, so `stop` goes on at once (it waited the whole grace before)."""
    parent = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; exec sleep 60"], stdout=subprocess.PIPE)
    procs.append(parent)  # `exec sleep` never reaps the first sleep: its zombie outlives it
    child = subprocess.Popen.__new__(subprocess.Popen)
    child.pid = int(parent.stdout.readline())
    parent.stdout.close()
    record(tmp_path, [child])
    start = time.monotonic()
    said = kept.stop(grace_s=20)
    assert time.monotonic() - start < 10 and "still ending" not in said, said
    assert psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE and parent.poll() is None


def test_stop_ends_the_raylet_first_and_the_gcs_last_as_ray_stop_does(tmp_path, procs, monkeypatch):
    """Sent SIGTERM all at once, Ray's raylet and GCS outlived it: every `--stop-ray` waited out its
    whole grace (5 s) before SIGKILL."""
    import shutil

    for name in ("gcs_server", "ray_agent", "raylet"):  # a process's name is its executable's
        (tmp_path / name).symlink_to(shutil.which("sleep"))
        procs.append(subprocess.Popen([str(tmp_path / name), "60"]))
    record(tmp_path, procs)
    order, terminate = [], psutil.Process.terminate

    def spy(proc):
        order.append(proc.name())
        terminate(proc)

    monkeypatch.setattr(psutil.Process, "terminate", spy)
    kept.stop()
    assert order == ["raylet", "ray_agent", "gcs_server"]
    assert all(p.wait(10) is not None for p in procs)


def test_a_record_of_another_version_is_still_read_and_stopped(tmp_path, procs):
    import json

    procs.append(sleeper())
    rec = record(tmp_path, procs)
    path = kept.record_path()
    path.write_text(json.dumps({**json.loads(path.read_text()), "a_later_field": 1}))
    assert kept.read() == rec  # the field it does not know is left out, not the record
    assert "stopped the kept Ray" in kept.stop()
    procs[0].wait(timeout=10)
    assert not path.exists()


def test_a_reused_pid_is_not_ours(tmp_path, procs):
    procs.append(sleeper())
    rec = record(tmp_path, procs)
    moved = dataclasses.replace(rec, processes={str(procs[0].pid): rec.processes[str(procs[0].pid)] - 100})
    kept.record_path().write_text(moved.to_json())
    kept.stop()
    assert procs[0].poll() is None  # another process under a recorded pid is left alone


def test_stop_ray_alone_needs_no_study(tmp_path, procs, capsys):
    procs.append(sleeper())
    record(tmp_path, procs)
    assert main(["--stop-ray"]) == 0
    assert procs[0].wait(10) is not None
    assert "stopped the kept Ray at 127.0.0.1:1" in capsys.readouterr().err
    assert main(["--stop-ray"]) == 0
    assert "no kept Ray recorded" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args([])


def test_a_kept_ray_fits_a_launch_with_no_more_slots_than_it_starts_workers_at_once(tmp_path, procs):
    procs.append(sleeper())
    rec = record(tmp_path, procs, startup_concurrency=8)
    assert kept.mismatch(rec, want(startup_concurrency=8)) == []
    assert kept.mismatch(rec, want(startup_concurrency=2)) == []  # a floor, not an equality
    assert kept.mismatch(rec, want(startup_concurrency=32)) == [
        "32 trial slots here, the kept Ray starts 8 workers at once"
    ]
    older = record(tmp_path, procs)  # a record from before the field: Ray's own limit, its 2 CPUs
    assert kept.mismatch(older, want(startup_concurrency=2)) == []
    assert kept.mismatch(older, want(startup_concurrency=4)) == [
        "4 trial slots here, the kept Ray starts 2 workers at once"
    ]


@pytest.mark.parametrize(
    ("ray", "extra", "expected"),
    [
        ({"num_cpus": 2}, {}, 2),  # one CPU a trial: Ray's own limit (its CPUs)
        ({"num_cpus": 2}, {"max_concurrent": 32, "resources": {"cpus": 2 / 32}}, 32),  # a worker a slot
        ({"num_cpus": 4}, {"resources": {"cpus": 0.25}}, 16),  # the slots the CPUs hold
        ({"num_cpus": 8}, {"max_concurrent": 2}, 8),  # never under Ray's own
    ],
)
def test_a_local_ray_starts_a_worker_a_trial_slot_at_once(tmp_path, monkeypatch, ray, extra, expected):
    from sweeps.run.backends.ray.backend import RayBackend, startup_concurrency

    study = load_study(write_study(tmp_path, backend="ray", ray=ray, **extra))
    assert startup_concurrency(RayBackend(), study) == expected
    assert kept.system_config(expected)["worker_maximum_startup_concurrency"] == expected
    monkeypatch.setenv("RAY_worker_maximum_startup_concurrency", "3")  # the user's own, as it is
    assert startup_concurrency(RayBackend(), study) == 3


def test_keep_is_for_a_local_ray_only(tmp_path):
    with pytest.raises(ConfigError, match="ray.keep"):
        load_study(write_study(tmp_path, backend="ray", ray={"address": "auto", "keep": True}))


def test_two_launches_share_one_kept_ray_and_stop_ray_ends_it(tmp_path, shared_ray):
    """Launches in subprocesses (a kept Ray outlives its launcher); in the Ray group, not beside it."""
    path = write_study(tmp_path, space={}, repeats=1, backend="ray", ray={"num_cpus": 2, "keep": True})
    env = {**os.environ, kept.RECORD_ENV: str(tmp_path / "kept-ray.json"), "RAY_AUTH_MODE": "disabled",
           "FAKE_LAUNCH_MODULES": "1"}  # fmt: skip
    launch = [sys.executable, "-m", "tests.sweeps.fake_launch"]
    first = subprocess.run([*launch, str(path)], env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "launcher imported: []" in first.stderr  # its trials' torch is theirs (docs/bench/launch_costs.md)
    rec = kept.read(tmp_path / "kept-ray.json")
    assert f"started a kept Ray at {rec.address}" in first.stderr and kept.alive(rec)
    assert "stays up for the next launch" in first.stderr
    # the same study again (done: nothing to run, a short launch) joins the same Ray
    second = subprocess.run([*launch, str(path)], env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"joining the kept Ray at {rec.address}" in second.stderr
    stop = subprocess.run([sys.executable, "-m", "sweeps.launch", "--stop-ray"], env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert stop.returncode == 0 and "stopped the kept Ray" in stop.stderr
    assert all(gone(int(pid)) for pid in rec.processes)
