"""What a step of a run costs in this process: wall seconds and peak resident memory."""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager


def peak_rss_mb() -> float:
    """This process's peak RSS since the last reset (Linux VmHWM; elsewhere since it started)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # glibc's mallopt parameter


@functools.cache  # once a process: every step calls it, for a Dask worker's first
def limit_malloc_arenas() -> None:
    """Let at most MALLOC_ARENAS malloc arenas serve this process's threads. glibc gives
    threads arenas of their own, up to 8 a core, and each keeps what was freed in it: the
    thread pools that each call opens (n-gram hashing, MinHash batches) took contamination's
    build from 0.71 to 1.42 GB on 10M spine records, its peak growing with every batch until
    16 arenas held some (and the build was slower). glibc fixes its limit the first time a
    process has more than 8 arenas: call it before a process starts threads (later, it may do
    nothing). A MALLOC_ARENA_MAX set in the environment wins; elsewhere than glibc it does
    nothing."""
    import ctypes

    if "MALLOC_ARENA_MAX" in os.environ:
        return
    with contextlib.suppress(OSError, AttributeError):  # not glibc
        ctypes.CDLL("libc.so.6").mallopt(_M_ARENA_MAX, MALLOC_ARENAS)


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc: under a millisecond), so that
    a long-lived worker's resident memory is what it holds, not what earlier tasks freed."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):  # not glibc
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def reset_peak_rss() -> None:
    """Start a new peak-RSS window, so that each step's own peak can be read (Linux only)."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        pass


@contextmanager
def measured() -> Iterator[dict]:
    """Yield a dict that gets `seconds` and `peak_rss_mb` of the block when it ends. Steps
    measured this way must not overlap in one process: the peak window is the process's."""
    found: dict = {}
    reset_peak_rss()
    started = time.perf_counter()
    try:
        yield found
    finally:
        found["seconds"] = round(time.perf_counter() - started, 3)
        found["peak_rss_mb"] = peak_rss_mb()
