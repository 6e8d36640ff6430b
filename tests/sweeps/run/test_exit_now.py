"""The launcher's end (`sweeps.run.launch.exit_now`): everything a launch started finishes and is
written, only the interpreter's teardown is skipped."""

import subprocess
import sys

from tests.sweeps.helpers import ROOT

SCRIPT = """
import atexit, threading, time
from pathlib import Path
from sweeps.run.launch import exit_now
out = Path({folder!r})
atexit.register(lambda: (out / "atexit").write_text("ran"))
threading.Thread(target=lambda: (time.sleep(0.3), (out / "thread").write_text("done"))).start()
print("no newline at the end", end="")
exit_now(3)
print("never")
"""


def test_exit_now_joins_threads_runs_exit_handlers_flushes_and_keeps_the_status(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(folder=str(tmp_path))], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "no newline at the end"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "done"
