"""What lm-eval refuses in a study's `evals:` section, checked when a launch (or its dry run)
loads the study, before anything is created: unknown task names, tasks whose data cannot be read
here (offline and not in the local cache, as `python -m evals` refuses them) and objectives whose
direction contradicts lm-eval's. The section's own keys are checked as the study parses
(sweeps.study.sections.EvalsConfig, sweeps.study.checks)."""

from __future__ import annotations

from pathlib import Path

from arch.configtree import Issue
from trainers.metrics import eval_parts


def eval_issues(study) -> list[Issue]:
    if study.evals is None:
        return []
    # lm-eval's task index (seconds; ~15,000 tasks unless include_path holds them all): only for evals:
    from evals.in_trial import launch_problems

    objectives = {o.metric: o.direction for o in study.objectives if eval_parts(o.metric) is not None}
    problems = launch_problems(study.evals.tasks, include_path(study.evals), objectives)
    return [Issue("evals.tasks", problem) for problem in problems]


def include_path(evals) -> str | None:
    """The task folder as an absolute path: a Ray trial runs in its own working directory."""
    return str(Path(evals.include_path).absolute()) if evals.include_path is not None else None
