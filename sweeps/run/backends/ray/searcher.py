"""`PlanSearcher`: a Ray Tune `Searcher` over the study's `Plan`.

`suggest` claims the next run (`Plan.claim`: enqueued grid points and repeats first, atomic among
launchers sharing an RDB study; while other launchers' last runs are still going it returns None
and Tune asks again), opens its MLflow child run and hands the worker the run's task;
`on_trial_complete` records the outcome and tells Optuna (COMPLETE with the objective values,
PRUNED when ASHA stopped it, FAIL with the reason otherwise). The searcher frees the placement
group of a data-parallel trial that Tune stopped.
"""

from __future__ import annotations

import contextlib
import time

from sweeps.run.backends.ray.outcome import outcome_of
from sweeps.run.backends.ray.train import PLACEMENT_GROUP, free_placement_group
from sweeps.run.plan import WAIT
from sweeps.run.worker import Outcome

# How often a launcher with nothing to claim looks again (at once when one of its own runs ends).
WAIT_POLL_S = 5.0


def searcher_class():
    from ray.tune.search import Searcher

    class PlanSearcher(Searcher):
        def __init__(self, plan, driver, limit: int, metric: str, mode: str):
            super().__init__(metric=metric, mode=mode)
            self.plan = plan
            self.driver = driver
            self.limit = limit
            self.asked = 0
            self.runs = {}
            self.finals = {}  # trial id -> its final report (the one with sweep_status)
            self.groups = {}  # trial id -> the placement group of its Ray Train workers
            self.next_look = 0.0

        def suggest(self, trial_id: str):
            if self.asked >= self.limit:
                return Searcher.FINISHED
            if time.time() < self.next_look:
                return None
            run = self.plan.claim()
            if run is None:
                return Searcher.FINISHED
            if run == WAIT:  # every run is taken; other launchers' may still come back
                self.next_look = time.time() + WAIT_POLL_S
                return None
            task = self.driver.begin(run)
            self.runs[trial_id] = run
            self.asked += 1
            return {"task": task}  # the frozen task itself: the worker parses nothing

        def on_trial_result(self, trial_id: str, result: dict) -> None:
            # A Ray Train trial's last intermediate report can reach Tune after the trial's final
            # one (it travels through Ray Train's callback queue): the final report is kept here.
            if "sweep_status" in result:
                self.finals[trial_id] = result
            if result.get(PLACEMENT_GROUP):
                self.groups[trial_id] = result[PLACEMENT_GROUP]

        def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False):
            run = self.runs.pop(trial_id, None)
            final = self.finals.pop(trial_id, None)
            # A trial ASHA stops hands its last result here, not to on_trial_result.
            group = self.groups.pop(trial_id, None) or (result or {}).get(PLACEMENT_GROUP)
            if group and final is None:  # stopped by Tune: its Ray Train workers would stay
                free_placement_group(group)
            if run is None:
                return
            outcome = outcome_of(final or result, error)
            values = self.driver.end(run, outcome)
            self.tell(run, outcome, values)
            # One of this launcher's own runs ended: the next round of adaptive seeds may be
            # decided now. Look at once rather than wait out WAIT_POLL_S (docs/bench/test_suite.md).
            self.next_look = 0.0

        def tell(self, run, outcome: Outcome, values) -> None:
            from optuna.trial import TrialState

            if values is not None:
                self.plan.optuna.tell(run.trial, values)
            elif outcome.status == "pruned":
                self.plan.optuna.tell(run.trial, state=TrialState.PRUNED)
            else:
                self.plan.optuna.tell(run.trial, state=TrialState.FAIL)

        def save(self, checkpoint_path: str) -> None:  # the state lives in the Optuna storage
            pass

        def restore(self, checkpoint_path: str) -> None:
            pass

        def abandon(self, reason: str) -> int:
            """Runs still open when Tune stopped (Ctrl-C): interrupted, queued again next launch."""
            from optuna.trial import TrialState

            n = 0
            for group in self.groups.values():
                with contextlib.suppress(Exception):  # Ray may be going down already (Ctrl-C)
                    free_placement_group(group)
            self.groups.clear()
            for run in self.runs.values():
                self.driver.interrupt(run, reason)
                self.plan.optuna.tell(run.trial, state=TrialState.FAIL)
                n += 1
            self.runs.clear()
            return n

    return PlanSearcher
