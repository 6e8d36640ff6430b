"""`arch`, copied into an export folder as flat modules that import each other relatively.

transformers' remote code copies a folder's modeling file and the files it imports relatively
(`from .x import y`, one level, no sub-packages) into its module cache, so each module of `arch`
becomes one file named by its dotted name (`arch.designs.base` -> `arch_designs_base.py`) and
every `from arch... import ...` becomes the relative import of that file. The copy imports
nothing from this project: the folder loads where the project is not installed, and a project
installed beside it cannot shadow it (its modules live under transformers' own package).
"""

from __future__ import annotations

import ast
import functools
from importlib import resources
from pathlib import Path

ROOT = "arch"
# What the modeling file needs: the config, the model, every registered design (arch.designs
# imports each design's module) and the cache. Not `arch` itself: its torch side is lazy.
ENTRY = ("arch.config", "arch.model", "arch.designs", "arch.decoding", "arch.layers")
HEADER = "# Vendored from the satsweep project's `{module}` by trainers.export: do not edit.\n"


def flat_name(module: str) -> str:
    return module.replace(".", "_")


def _source_file(module: str) -> Path:
    parts = module.split(".")
    base = Path(str(resources.files(ROOT))).parent.joinpath(*parts)
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def _is_module(name: str) -> bool:
    return _source_file(name).is_file()


def _rewrite(node: ast.ImportFrom) -> list[str]:
    """The relative imports that replace one `from arch... import ...` statement."""
    lines, names = [], []
    for alias in node.names:
        sub = f"{node.module}.{alias.name}"
        if _is_module(sub):  # a submodule imported for what importing it does (registration)
            name = alias.asname or alias.name
            lines.append(f"from .{flat_name(sub)} import __name__ as {name}  # noqa: F401")
        else:
            names.append(alias.name if alias.asname is None else f"{alias.name} as {alias.asname}")
    if names:
        lines.insert(0, f"from .{flat_name(node.module)} import {', '.join(names)}  # noqa: F401")
    return lines


def _imports(tree: ast.Module) -> list[ast.ImportFrom]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == ROOT for a in node.names):
            raise ValueError(f"`import {node.names[0].name}`: the vendored copy needs `from arch... import`")
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == ROOT:
            out.append(node)
    return out


@functools.cache  # arch's sources do not change within a process
def vendored_sources() -> dict[str, str]:
    """File name -> text of every module of `arch` the entry points reach, imports rewritten."""
    todo, done, files = list(ENTRY), set(), {}
    while todo:
        module = todo.pop()
        if module in done:
            continue
        done.add(module)
        text = _source_file(module).read_text()
        tree = ast.parse(text)
        lines = text.splitlines(keepends=True)
        for node in sorted(_imports(tree), key=lambda n: n.lineno, reverse=True):
            indent = lines[node.lineno - 1][: node.col_offset]
            new = "".join(f"{indent}{line}\n" for line in _rewrite(node))
            lines[node.lineno - 1 : node.end_lineno] = [new]
            todo.append(node.module)
            subs = (f"{node.module}.{a.name}" for a in node.names)
            todo.extend(sub for sub in subs if _is_module(sub))
        files[f"{flat_name(module)}.py"] = HEADER.format(module=module) + "".join(lines)
    return files


def write_vendored(folder: Path) -> list[str]:
    """Writes the vendored modules into `folder`; returns their file names."""
    files = vendored_sources()
    for name, text in files.items():
        (folder / name).write_text(text)
    return sorted(files)
