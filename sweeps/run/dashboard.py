"""`python -m sweeps.dashboard <study.yaml | name> [--port 8080]` (`make dashboard STUDY=...`):
optuna-dashboard over the study's own Optuna storage (the journal file results/<name>/optuna.journal
or the RDB URL of `output.storage`), served on 127.0.0.1 only, until Ctrl-C.

It shows what the launcher stored: every trial with its state, params (the study's key paths),
objective values (named after the study's objectives) and user attributes (point, seed, status,
MLflow run id), the Pareto front plot, parallel coordinates, importances and history. The
storage is opened as it is, without the launcher's journal repair or heartbeats: a running launch
may be writing its last record, which the dashboard must not cut. The dashboard can also edit
(notes, deleting a study): use it to read. Needs the optional extra `dashboard`
(`pip install -e '.[dashboard]' -c constraints.txt`; `make dashboard` installs it).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from arch.configtree import ConfigError
from sweeps.study import load_study
from sweeps.study.load import study_path

HOST = "127.0.0.1"  # loopback only: the dashboard has no authentication
EXIT_CONFIG = 2


def storage_of(study):
    """The study's Optuna storage, opened read-as-is (None when the launch has stored nothing)."""
    import optuna

    url = study.storage_url()
    if url.startswith("journal:"):
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        path = Path(url[len("journal:") :])
        return JournalStorage(JournalFileBackend(str(path))) if path.is_file() else None
    return optuna.storages.RDBStorage(url)


def serve(study, port: int) -> None:
    """Blocks serving the dashboard (raises SystemExit when the study was never launched)."""
    # optional extra `dashboard`: only this command needs it
    from optuna_dashboard import run_server

    storage = storage_of(study)
    if storage is None:
        raise SystemExit(f"{study.name}: no Optuna storage yet at {study.storage_url()}; launch it first")
    print(f"optuna-dashboard of {study.name} ({study.storage_url()}): http://{HOST}:{port}/", flush=True)
    run_server(storage, host=HOST, port=port)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m sweeps.dashboard", description=__doc__.split("\n\n")[0])
    p.add_argument("study", help="a study YAML file, or the name of one in studies/")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    p.add_argument("--port", type=int, default=8080)
    args = p.parse_args(argv)
    try:
        study = load_study(study_path(args.study), args.overrides)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return EXIT_CONFIG
    try:
        import optuna_dashboard  # noqa: F401
    except ImportError:
        print(
            "optuna-dashboard is not installed: pip install -e '.[dashboard]' -c constraints.txt",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends it
        serve(study, args.port)
    return 0
