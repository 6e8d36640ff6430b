"""Everything that touches the Optuna storage below the public Study API: opening the storage,
heartbeats, the study lock, and the few private names of Optuna this project relies on.

- Journal file (the default, results/<name>/optuna.journal): one launcher per study at a time
  (`launch.lock`); a RUNNING trial found at start-up belonged to a launcher that died.
- RDB (SQLite, PostgreSQL): Optuna heartbeats (`RDBStorage(heartbeat_interval=, grace_period=)`)
  let several launchers share one study; a trial whose heartbeat went stale is failed
  (`optuna.storages.fail_stale_trials`) and its run queued again (`requeue_stale`). Optuna beats
  only inside `study.optimize`; ask/tell runs (Ray Tune) beat through `Heartbeats`.
- `study_lock`: one launcher at a time in a block (a PostgreSQL advisory lock across hosts, a
  file lock beside a SQLite or journal file on one host).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import threading
import warnings
from pathlib import Path

import optuna
from optuna.trial import TrialState

from sweeps.study.run_record import RunRecord

HEARTBEAT_S = 20  # RDB storages: an open trial's heartbeat; stale (its launcher died) after GRACE_S
GRACE_S = 90


def requeue_stale(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
    """Heartbeat-stale trial callback: the run of a dead launcher is queued again (same point and
    repeat). Grid runs need nothing here: `Plan.claim` enqueues every missing (point, repeat)."""
    record = RunRecord.of(trial)
    if record.repeat is not None and record.point is not None:
        attrs = RunRecord.attrs(repeat=record.repeat, point=record.point)
        study.enqueue_trial(dict(trial.params), user_attrs=attrs)


def open_storage(url: str):
    """`journal:<path>` or an SQLAlchemy URL (with heartbeats)."""
    if url.startswith("journal:"):
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        path = Path(url[len("journal:") :])
        path.parent.mkdir(parents=True, exist_ok=True)
        repair_journal(path)
        return JournalStorage(JournalFileBackend(str(path)))
    with warnings.catch_warnings():  # heartbeats are marked experimental (since Optuna 2.9)
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RDBStorage(
            url,
            heartbeat_interval=HEARTBEAT_S,
            grace_period=GRACE_S,
            heartbeat_stale_trial_callback=requeue_stale,
        )


def repair_journal(path: Path) -> int:
    """Cuts an incomplete last record (a crash in the middle of a write) off an Optuna journal.

    Optuna appends one JSON record per line and skips an unterminated last line when reading,
    but its next append would join that fragment into a corrupt line in the middle of the file,
    and every later read would fail. The fragment was never acknowledged (its trial is still
    RUNNING, and is recovered as interrupted), so it is moved to `<journal>.fragment` and
    dropped. Returns the number of bytes cut."""
    if not path.is_file() or path.stat().st_size == 0:
        return 0
    from optuna.storages.journal import JournalFileSymlinkLock

    lock = JournalFileSymlinkLock(str(path))  # the lock Optuna's own writers take
    lock.acquire()
    with open(path, "rb+") as f:
        try:
            data = f.read()
            if data.endswith(b"\n"):
                return 0
            keep = data.rfind(b"\n") + 1
            Path(f"{path}.fragment").write_bytes(data[keep:])
            f.truncate(keep)
            logging.getLogger(__name__).warning(
                "%s: cut an incomplete last record of %d bytes (saved in %s.fragment)",
                path, len(data) - keep, path,
            )  # fmt: skip
            return len(data) - keep
        finally:
            lock.release()


def load_trials(name: str, url: str) -> list[optuna.trial.FrozenTrial]:
    """Every trial of study `name` in the storage at `url` (KeyError when there is no such study)."""
    return optuna.load_study(study_name=name, storage=open_storage(url)).get_trials()


def shared(store) -> bool:
    """RDB storages with heartbeats: several launchers may run one study at once."""
    from optuna.storages._heartbeat import is_heartbeat_enabled

    return is_heartbeat_enabled(store)


def _trial_id(trial) -> int:
    """The storage's id of a trial (`optuna.Trial` or `FrozenTrial`); private in Optuna."""
    return trial._trial_id


def mark_failed(store, trial, reason: str) -> None:
    """Fails a trial from outside its run (a launcher died while it ran), with the reason."""
    for name, value in RunRecord.attrs(fail_reason=reason).items():
        store.set_trial_user_attr(_trial_id(trial), name, value)
    store.set_trial_state_values(_trial_id(trial), TrialState.FAIL)


def fail_stale(study: optuna.Study) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


def beat(store, trial) -> None:
    store.record_heartbeat(_trial_id(trial))


@contextlib.contextmanager
def study_lock(store, url: str, name: str):
    """One launcher at a time in the block, across hosts for PostgreSQL (an advisory lock on the
    study's name, released with its connection), on one host (or NFS with locking) for files."""
    if isinstance(store, optuna.storages.RDBStorage) and store.engine.dialect.name == "postgresql":
        import sqlalchemy

        key = int.from_bytes(hashlib.sha256(f"satsweep:{name}".encode()).digest()[:8], "big", signed=True)
        with store.engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": key})
            try:
                yield
            finally:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                conn.commit()
        return
    if url.startswith("journal:"):
        path = Path(url[len("journal:") :])
    elif url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///") :])
    else:  # other databases: no cross-launcher lock (run one launcher per study)
        yield
        return
    with open(f"{path}.{name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Heartbeats:
    """Records the Optuna heartbeat of every open run while the launcher lives (shared RDB
    studies). Optuna's own heartbeat thread exists only inside `study.optimize`; ask/tell runs
    (Ray Tune trials) need this one. `runs` maps any key to an object with `.trial`."""

    def __init__(self, store, runs: dict):
        self.store, self.runs = store, runs
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, name="optuna-heartbeats", daemon=True)

    def _beat(self) -> None:
        interval = self.store.get_heartbeat_interval()
        while not self.stop.wait(interval):
            for run in list(self.runs.values()):
                try:
                    beat(self.store, run.trial)
                except Exception as err:  # a database hiccup: the next beat tries again
                    logging.getLogger(__name__).warning("heartbeat of trial %s: %s", run.number, err)

    def __enter__(self):
        if shared(self.store):
            self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(10)
