"""`PlanSearcher` (sweeps/backends/ray_searcher.py) on its own, without starting Ray."""

from types import SimpleNamespace

from sweeps.run.backends.ray.outcome import final_report
from sweeps.run.backends.ray.searcher import searcher_class
from sweeps.run.plan import WAIT
from sweeps.run.worker import Outcome


def test_a_run_that_ends_lets_the_searcher_claim_the_next_round_at_once():
    """Adaptive seeds: while the round's last run trains, the plan has nothing to claim (WAIT) and
    the searcher waits WAIT_POLL_S between looks; when that run ends (and so decides the next
    round), the next suggestion claims at once instead of up to 5 s later."""
    runs = [SimpleNamespace(trial=n, name=f"run {n}") for n in (0, 1)]
    claims = iter([runs[0], WAIT, runs[1]])
    told = []
    plan = SimpleNamespace(
        claim=lambda: next(claims),
        optuna=SimpleNamespace(tell=lambda trial, values=None, state=None: told.append((trial, values))),
    )
    driver = SimpleNamespace(
        begin=lambda run: f"task of {run.name}", end=lambda run, outcome: [outcome.metrics["val_loss"]]
    )
    searcher = searcher_class()(plan, driver, limit=10, metric="val_loss", mode="min")
    assert searcher.suggest("a") == {"task": "task of run 0"}
    assert searcher.suggest("b") is None  # WAIT: the plan is asked again only after WAIT_POLL_S
    assert searcher.suggest("b") is None  # (a claim here would take "run 1" from the iterator)
    searcher.on_trial_complete("a", final_report(Outcome("ok", {"val_loss": 2.5}, "", 1.0)))
    assert told == [(0, [2.5])]
    assert searcher.suggest("b") == {"task": "task of run 1"}
