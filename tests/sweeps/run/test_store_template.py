"""A new SQLite MLflow store is a copy of an empty one of this MLflow version (sweeps.run.store_template)."""

from pathlib import Path

from sweeps.run import store_template
from sweeps.run.tracking import client


def test_a_new_sqlite_store_is_a_working_copy_of_the_empty_one(tmp_path, monkeypatch):
    template = tmp_path / "cache" / "mlflow-empty.db"
    monkeypatch.setattr(store_template, "template_path", lambda: template)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a").mkdir()
    uri = f"sqlite:///{tmp_path / 'a' / 'mlflow.db'}"
    assert store_template.seed_store(uri)
    made = template.stat().st_mtime_ns
    c = client(uri)
    (default,) = c.search_experiments()
    assert default.artifact_location == str(tmp_path / "mlruns" / "0")  # where MLflow would put it
    run = c.create_run(c.create_experiment("e"))
    c.log_metric(run.info.run_id, "m", 1.0)
    assert c.get_run(run.info.run_id).data.metrics == {"m": 1.0}
    assert not store_template.seed_store(uri)  # an existing database is left as it is
    assert c.get_experiment_by_name("e") is not None
    (tmp_path / "b").mkdir()
    assert store_template.seed_store(f"sqlite:///{tmp_path / 'b' / 'mlflow.db'}")
    assert template.stat().st_mtime_ns == made  # made once
    assert not store_template.seed_store("http://127.0.0.1:5000")
    assert not store_template.seed_store(f"sqlite:///{tmp_path / 'nowhere' / 'mlflow.db'}")
    assert not store_template.seed_store("sqlite:///:memory:") and not (tmp_path / ":memory:").exists()
    assert not list(Path(tmp_path / "a").glob(".*.tmp"))


def test_the_projects_client_seeds_a_new_sqlite_store_and_leaves_an_existing_one(tmp_path, monkeypatch):
    template = tmp_path / "cache" / "mlflow-empty.db"
    monkeypatch.setattr(store_template, "template_path", lambda: template)
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    c = client(uri)
    assert template.is_file() and (tmp_path / "mlflow.db").is_file()  # the empty one made, then copied
    c.create_experiment("e")
    client(uri).create_experiment("f")  # an existing store is opened, not copied over
    assert {e.name for e in client(uri).search_experiments()} == {"Default", "e", "f"}
    assert not store_template.seed_store(uri)
