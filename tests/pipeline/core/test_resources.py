"""A process's malloc arenas: threads that each take an arena of their own keep what they
freed in it, so a run's processes cap how many there are."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

# Six threads allocate at once, each holding its memory until all have some, then glibc's
# malloc_info lists the arenas (<heap nr=...>) that served them.
ARENAS_USED = """
import ctypes, os, sys, tempfile, threading
import numpy as np
from pipeline.core.resources import limit_malloc_arenas
if sys.argv[1] == "limited":
    limit_malloc_arenas()
together = threading.Barrier(6)
def work():
    held = [np.ones(4096) for _ in range(64)]  # 32 KB each: from the thread's arena
    together.wait()
threads = [threading.Thread(target=work) for _ in range(6)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
libc = ctypes.CDLL("libc.so.6")
libc.fopen.restype = ctypes.c_void_p
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "malloc.xml")
    out = libc.fopen(path.encode(), b"w")
    libc.malloc_info(0, ctypes.c_void_p(out))
    libc.fclose(ctypes.c_void_p(out))
    print(open(path).read().count("<heap nr="))
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc")
def test_a_run_process_lets_at_most_two_arenas_serve_its_threads():
    env = {key: value for key, value in os.environ.items() if key != "MALLOC_ARENA_MAX"}

    def arenas(mode: str) -> int:
        found = subprocess.run(
            [sys.executable, "-c", ARENAS_USED, mode],
            capture_output=True, text=True, check=True, env=env,
        )  # fmt: skip
        return int(found.stdout)

    assert arenas("limited") <= 2
    assert arenas("free") >= 4  # without the cap each thread takes its own
