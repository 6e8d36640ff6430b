"""The local Ray a launch starts, remembered so that the next launch can end what a dead one
left behind (kill -9 of the launcher leaves Ray's dashboard and runtime-env agents running)."""

from __future__ import annotations

import json
import os
from pathlib import Path

RAY_PROCESSES = "ray-processes.json"  # the local Ray this launch started (pid, start time)


def remember_processes(path: Path) -> None:
    """Writes the processes of the local Ray just started here (all children of this launcher)."""
    import psutil

    procs = [{"pid": p.pid, "started": p.create_time()} for p in psutil.Process().children(recursive=True)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"launcher": os.getpid(), "processes": procs}))


def end_leftovers(path: Path) -> int:
    """Kills what is left of the local Ray of an earlier launch that died (kill -9 leaves Ray's
    dashboard and runtime-env agents behind, which ignore SIGTERM for a while); returns how many."""
    import psutil

    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return 0
    if psutil.pid_exists(record.get("launcher", -1)):
        return 0  # its launcher lives: not ours to end
    killed = 0
    for entry in record.get("processes", []):
        try:
            proc = psutil.Process(entry["pid"])
            if abs(proc.create_time() - entry["started"]) < 1e-3:  # the same process, not a reused pid
                proc.kill()
                killed += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    path.unlink(missing_ok=True)
    return killed
