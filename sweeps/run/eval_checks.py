"""What lm-eval and this machine refuse in a study's `evals:` section, checked when a launch (or
its dry run) loads the study, before anything is created: lm-eval not installed, a task folder that
is not there, unknown task names, tasks whose data cannot be read here (offline and not in the
local cache, as `python -m evals` refuses them) and objectives whose direction contradicts
lm-eval's. The section's own keys are checked as the study parses (sweeps.study.sections.EvalsConfig,
sweeps.study.checks), which asks neither lm-eval nor the files."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from arch.configtree import Issue
from trainers.metrics import eval_parts

EVALS_EXTRA = 'pip install -e ".[evals]"'  # the optional extra that brings lm-eval


def eval_issues(study) -> list[Issue]:
    if study.evals is None:
        return []
    if issues := _here(study.evals):
        return issues
    # lm-eval's task index (seconds; ~15,000 tasks unless include_path holds them all): only for evals:
    from evals.in_trial import launch_problems

    objectives = {o.metric: o.direction for o in study.objectives if eval_parts(o.metric) is not None}
    problems = launch_problems(study.evals.tasks, include_path(study.evals), objectives)
    return [Issue("evals.tasks", problem) for problem in problems]


def include_path(evals) -> str | None:
    """The task folder as an absolute path: a Ray trial runs in its own working directory."""
    return str(Path(evals.include_path).absolute()) if evals.include_path is not None else None


def _here(evals) -> list[Issue]:
    """The task folder and lm-eval itself, on this machine."""
    issues = []
    if evals.include_path is not None and not Path(evals.include_path).is_dir():
        why = f"no such folder {str(Path(evals.include_path).absolute())!r}"
        issues.append(
            Issue(
                "evals.include_path", f"given {evals.include_path!r}; {why}; allowed: a folder of task YAMLs"
            )
        )
    if importlib.util.find_spec("lm_eval") is None:
        issues.append(
            Issue(
                "evals",
                f"needs lm-eval, which is not installed; allowed: install the extra ({EVALS_EXTRA}) "
                "or remove evals:",
            )
        )
    return issues
