"""The house rule, read from the code's own imports (README, "Layout"; docs/extending.md):
each room imports only the rooms below it, no modules import each other in a circle, and a
function-level import of a project module says why on its line or the line above. An import
under `if TYPE_CHECKING:` counts as an arrow: a circle the type checker sees is still a circle."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("arch", "trainers", "sweeps", "gates", "evals", "bench")
# room -> the rooms it may import (a room is the longest prefix of a module's dotted name listed here)
ALLOWED = {
    "arch": {"arch"},
    "trainers": {"arch", "trainers"},
    "evals": {"arch", "trainers", "evals"},  # scores a trained trial: beside trainers, below sweeps
    "sweeps.study": {"arch", "trainers", "evals", "sweeps.study"},
    "sweeps.report": {"arch", "trainers", "sweeps.study", "sweeps.report"},
    "sweeps.run": {"arch", "trainers", "evals", "sweeps", "sweeps.study", "sweeps.report", "sweeps.run"},
    "sweeps": {"arch", "trainers", "sweeps", "sweeps.study", "sweeps.report", "sweeps.run"},
}


def modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            out[name] = path
    return out


def room(module: str) -> str:
    return max((r for r in ALLOWED if module == r or module.startswith(r + ".")), key=len, default="")


def project_imports(path: Path, names: set[str]):
    """(imported module, line, inside a function?) for every import of a project module."""
    tree = ast.parse(path.read_text())
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            inside.update(id(n) for n in ast.walk(node) if n is not node)
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        for target in targets:
            if target.split(".")[0] in PACKAGES:
                found = next((t for t in (target, target.rsplit(".", 1)[0]) if t in names), None)
                if found:
                    yield found, node.lineno, id(node) in inside, _type_checking(tree, node)
                    break


def _type_checking(tree, node) -> bool:
    return any(
        isinstance(block, ast.If)
        and "TYPE_CHECKING" in ast.unparse(block.test)
        and any(n is node for n in ast.walk(block))
        for block in ast.walk(tree)
    )


MODULES = modules()


@pytest.mark.parametrize("name", [m for m in MODULES if room(m)])
def test_a_room_imports_only_the_rooms_below_it(name):
    rooms = {room(target) for target, *_ in project_imports(MODULES[name], set(MODULES))}
    assert rooms <= ALLOWED[room(name)], f"{name} imports {sorted(rooms - ALLOWED[room(name)])}"


def test_no_modules_import_each_other_in_a_circle():
    """Function-level imports count: one that closes a circle only hides it until it runs."""
    graph = {name: {t for t, *_ in project_imports(path, set(MODULES))} for name, path in MODULES.items()}
    done, on_path, circles = set(), [], []

    def visit(node):
        if node in on_path:
            circles.append(on_path[on_path.index(node) :] + [node])
            return
        if node in done:
            return
        on_path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt != node and not (node.startswith(nxt + ".") or nxt.startswith(node + ".")):
                visit(nxt)  # a package's face and its own modules are not a circle
        on_path.pop()
        done.add(node)

    for name in sorted(graph):
        visit(name)
    assert not circles, "\n".join(" -> ".join(c) for c in circles)


def test_a_function_level_import_of_a_project_module_says_why():
    unexplained = []
    for path in MODULES.values():
        lines = path.read_text().splitlines()
        for target, line, lazy, _ in project_imports(path, set(MODULES)):
            if lazy and not _explained(lines, line - 1):
                unexplained.append(f"{path.relative_to(ROOT)}:{line}: {target}")
    assert not unexplained, "\n".join(unexplained)


def _explained(lines: list[str], index: int) -> bool:
    """A comment on the import's line, or above the block of imports it belongs to."""
    if "#" in lines[index]:
        return True
    while index > 0 and lines[index - 1].lstrip().startswith(("import ", "from ")):
        index -= 1
    return index > 0 and lines[index - 1].lstrip().startswith("#")


def test_the_launcher_starts_without_what_only_trials_and_reports_need():
    """`python -m sweeps.launch` imports the study, the backends and the report at start: torch and
    Lightning (the trials' trainer, in the trials' processes; torch also for the cost probe and a GPU
    study's memory plan, when they run here), scikit-learn and pandas (optuna's importance
    evaluators, at the report) cost seconds of every launch's fixed cost (docs/bench/launch_costs.md).
    Loading a CPU study (parsing and the preflight: resources, files, trials) on either backend
    imports none of them either."""
    code = (
        "import sys, sweeps.run.launch as L; "
        "[L.load('studies/gate_granularity.yaml', [f'backend={b}']) for b in ('local', 'ray')]; "
        "print(sorted(m for m in ('lightning', 'torch', 'sklearn', 'pandas', 'matplotlib') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
