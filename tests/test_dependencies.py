"""What the project imports is what it declares: every third-party module imported by the packages
is a dependency in pyproject.toml (the tests' own, e.g. pytest, an extra), and every declared
dependency is pinned in constraints.txt. A module that arrives through another package (scipy
came with optuna and mlflow) breaks the day that package drops it."""

import ast
import functools
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("arch", "trainers", "sweeps", "gates", "bench", "evals")
# The official SATFormer code the interop tests run (a checkout named by SATFORMER_OFFICIAL) and the
# CPU stand-ins for its kernels' packages (tests/trainers/interop/official_shim): none is installed.
OFFICIAL_CODE = {"models", "fla", "flash_attn", "einops"}
OWN = {*PACKAGES, "tests", *OFFICIAL_CODE}


def imported(folders, at_import_only: bool = False) -> dict[str, set[str]]:
    """Top-level module -> the files importing it (absolute imports); with `at_import_only`, only
    the imports that run when the file is imported (not inside a function)."""
    found: dict[str, set[str]] = {}
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            for node in _nodes(ast.parse(path.read_text(), str(path)), at_import_only):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for name in names:
                    found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return {m: f for m, f in found.items() if m not in sys.stdlib_module_names and m not in OWN}


def _nodes(node, at_import_only: bool):
    for child in ast.iter_child_nodes(node):
        if at_import_only and isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        yield child
        yield from _nodes(child, at_import_only)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(spec: str) -> str:
    return canonical(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", spec).group(0))


def declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = {k: {requirement_name(s) for s in v} for k, v in project["optional-dependencies"].items()}
    return {requirement_name(s) for s in project["dependencies"]}, extras


# Modules of extras this venv may not have installed: their distribution by name.
OPTIONAL = {
    "psycopg2": "psycopg2-binary",
    "optuna_dashboard": "optuna-dashboard",
    "pynvml": "nvidia-ml-py",
    "lm_eval": "lm-eval",
    "liger_kernel": "liger-kernel",
    "transformers": "transformers",
    "safetensors": "safetensors",
}
# Files that only an extra's tool imports, by folder: the modeling files an export folder carries,
# imported by transformers there (never inside the project).
EXTRA_OF_FOLDER = {"trainers/interop/remote/": "interop"}


def extra_of(file: str) -> str:
    """The extra a file's imports may come from: its folder's, else the one named after its package."""
    return next((e for folder, e in EXTRA_OF_FOLDER.items() if file.startswith(folder)), file.split("/")[0])


@functools.cache
def _installed() -> dict[str, list[str]]:
    """Top-level module -> its installed distributions (reading every installed package's
    metadata: seconds, so once)."""
    return metadata.packages_distributions()


def distributions(module: str) -> set[str]:
    """The distributions that provide a top-level module (yaml -> PyYAML): installed ones, else
    the extras' by name."""
    found = {canonical(d) for d in _installed().get(module, [])}
    return found or ({canonical(OPTIONAL[module])} if module in OPTIONAL else set())


def test_every_module_the_packages_import_is_a_declared_dependency():
    """Imported when a module is: a dependency, or an extra named after the module's own package
    (the `evals` extra's lm-eval in evals/, whose adapter subclasses lm-eval's model class);
    imported inside a function (an optional command's package: optuna-dashboard): a dependency or
    an extra."""
    deps, extras = declared()
    packages = [p for p in PACKAGES if (ROOT / p).is_dir()]
    missing = {}
    for module, files in imported(packages, at_import_only=True).items():
        # the dependencies, and the extra named after each importing file's package
        outside = [f for f in files if not distributions(module) & (deps | extras.get(extra_of(f), set()))]
        if outside:
            missing[module] = sorted(outside)[:3]
    assert not missing, f"imported but not in pyproject's dependencies: {missing}"
    anywhere = deps.union(*extras.values())
    missing = {
        module: sorted(files)[:3]
        for module, files in imported(packages).items()
        if not distributions(module) & anywhere
    }
    assert not missing, f"imported in a function but neither a dependency nor an extra: {missing}"


def test_every_module_the_tests_import_is_declared_as_a_dependency_or_an_extra():
    deps, extras = declared()
    everything = deps.union(*extras.values())
    missing = {
        module: sorted(files)[:3]
        for module, files in imported(["tests"]).items()
        if not distributions(module) & everything and module != "_pytest"  # pytest's own internals
    }
    assert not missing, f"the tests import, undeclared: {missing}"


def test_every_declared_dependency_is_pinned_in_the_constraints():
    deps, extras = declared()
    pinned = {
        canonical(line.split("==")[0])
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if "==" in line and not line.lstrip().startswith("#")
    }
    unpinned = sorted(d for d in deps.union(*extras.values()) if d not in pinned and d != "satsweep")
    assert not unpinned, f"declared but not pinned in constraints.txt: {unpinned}"
