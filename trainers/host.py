"""Process settings for training on the CPU.

glibc's malloc hands every block over its mmap threshold (128 KiB at start, moving up to 32 MiB
as such blocks are freed) to the kernel as fresh pages and unmaps it again on free, and it trims
the heap's free top back to the kernel: a training step's activations, allocated and freed every
step, then cost page faults (zero-filled pages) on every step. Keeping freed memory in the process
makes every CPU training step measurably faster, the plain reference GPT's too (figures:
docs/bench/backbone.md).
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
MMAP_THRESHOLD = 32 * 2**20  # glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit)
TRIM_THRESHOLD = 2**31 - 1  # mallopt takes an int: keep up to 2 GiB of free heap


def keep_freed_memory() -> bool:
    """Serves blocks up to 32 MiB from the heap and keeps freed memory for the next step (the
    process's RSS stays at its peak). True when set (Linux with glibc); idempotent."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (musl): leave its allocator alone
        return False
    return bool(
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
