"""keep_freed_memory: a step's freed activations are reused without new page faults."""

import subprocess
import sys

import pytest

from trainers import host

ROUNDS = """
import resource, sys, torch
import ctypes, importlib.util
# trainers/host.py alone: `from trainers import host` would first import Lightning (trainers/__init__),
# seconds of start-up in each of the two processes for nothing this test uses
spec = importlib.util.spec_from_file_location("host", sys.argv[2])
host = importlib.util.module_from_spec(spec)
spec.loader.exec_module(host)
if sys.argv[1] == "keep":
    assert host.keep_freed_memory()
else:  # glibc's documented start values, pinned (its dynamic thresholds depend on what ran before)
    libc = ctypes.CDLL("libc.so.6")
    assert libc.mallopt(host.M_MMAP_THRESHOLD, 128 * 1024) and libc.mallopt(host.M_TRIM_THRESHOLD, 128 * 1024)

def step():  # 100 activations of 1 MiB, written, then all freed (one training step's pattern)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [torch.ones(2**18) for _ in range(100)]
    del blocks
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

step()
print(min(step() for _ in range(3)))
"""


def faults(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", ROUNDS, mode, host.__file__], capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_activations_come_back_without_page_faults():
    pages = 100 * 2**20 // 4096
    assert faults("default") > pages // 2  # freed blocks go back to the kernel: they fault again
    assert faults("keep") < pages // 20
