"""keep_freed_memory: a step's freed activations are reused without new page faults."""

import subprocess
import sys

import pytest

ROUNDS = """
import resource, sys, torch
from trainers.host import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()

def step():  # 30 activations of 1 MiB each, written, then all freed (one training step's pattern)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [torch.ones(2**18) for _ in range(30)]
    del blocks
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

step()
print(min(step() for _ in range(3)))
"""


def faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", ROUNDS, mode], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_activations_come_back_without_page_faults():
    pages = 30 * 2**20 // 4096
    assert faults("default") > pages // 2  # glibc gives the freed top of the heap back: faults again
    assert faults("keep") < pages // 20
