"""A run's workers: the processes its steps run in, opened once for the whole run.

- `local`, one worker: the run's own process, one step after another.
- `local`, N workers: a pool of N processes of this machine, started by a fork server that
  imported the pipeline once, so that work holding the GIL (language identification,
  MinHash, regex scans) keeps every core busy; threads did not (CPU time ≈ wall time).
- `dask`: the cluster at `runner.address`, or a temporary one on this machine for the run.

Steps are plain functions of picklable arguments that write their outputs and return small
results; they are not Prefect tasks (a task run per part cost its API calls, 0.1–0.3 s, and
made small parts expensive). A step that fails raises in the run's process; on Dask a step
whose worker died is run again on another (Dask's own rescheduling)."""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any

import psutil
from threadpoolctl import threadpool_limits

from pipeline.config import RunnerConfig
from pipeline.core.errors import ThresherError
from pipeline.core.resources import limit_malloc_arenas

# what the fork server imports once, before it forks the pool's processes
PRELOAD = ["flows.runner.steps"]
_in_pool = False  # set in a pool process by `_start_pool_process`
_current: Workers | None = None


class Workers:
    """Runs `function(**call)` for each call, yielding (index, result) as each finishes."""

    count = 1  # how many steps run at once

    def map(self, function: Callable, calls: list[dict[str, Any]]) -> Iterator[tuple[int, Any]]:
        for index, call in enumerate(calls):
            yield index, function(**call)


class Processes(Workers):
    def __init__(self, count: int):
        self.count = count
        context = _fork_server()
        self.pool = ProcessPoolExecutor(
            count,
            mp_context=context,
            initializer=_start_pool_process,
            initargs=(os.getpid(), thread_share(count)),
        )
        # start the processes now, while the run's first step (ingest planning, its one part
        # or a gate) works here: the fork server's imports take seconds
        for _ in range(count):
            self.pool.submit(_started_process)

    def map(self, function: Callable, calls: list[dict[str, Any]]) -> Iterator[tuple[int, Any]]:
        futures = {self.pool.submit(function, **call): index for index, call in enumerate(calls)}
        try:
            for future in as_completed(futures):
                yield futures[future], future.result()
        except BrokenProcessPool:
            raise ThresherError(
                f"a worker process of this run ended while running "
                f"{getattr(function, '__name__', 'a step')} (killed, or out of memory): lower "
                "runner.part_rows, or run fewer runner.workers"
            ) from None
        finally:
            for future in futures:
                future.cancel()


class OnDask(Workers):
    def __init__(self, address: str):
        from distributed import Client

        self.address = address
        self.client = Client(address, timeout=60)
        self.count = max(1, sum(self.client.nthreads().values()))

    def map(self, function: Callable, calls: list[dict[str, Any]]) -> Iterator[tuple[int, Any]]:
        from distributed import as_completed as dask_completed

        token = uuid.uuid4().hex[:8]
        name = function.__name__
        futures = [
            self.client.submit(function, **call, key=f"{name}-{index}-{token}", pure=False)
            for index, call in enumerate(calls)
        ]
        place = {future.key: index for index, future in enumerate(futures)}
        try:
            for future in dask_completed(futures):
                yield place[future.key], future.result()
        finally:
            self.client.cancel(futures)


def start_early(runner: RunnerConfig) -> None:
    """Start the fork server of a run that will use a pool now: `thresher run` calls this
    before it starts Prefect, so that the server's imports and Prefect's start overlap."""
    if runner.kind == "local" and runner.workers > 1:
        _fork_server()
        multiprocessing.forkserver.ensure_running()


def _fork_server() -> multiprocessing.context.ForkServerContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def in_worker() -> bool:
    """Whether this process is a worker (a pool's process, or a Dask worker's task thread)."""
    if _in_pool:
        return True
    dask = sys.modules.get("distributed")  # imported in every Dask worker; never import it
    try:
        return dask is not None and bool(dask.get_worker())
    except ValueError:  # not a worker's thread
        return False


def current() -> Workers:
    """The workers of the run in progress (the run's process alone outside a run)."""
    return _current or Workers()


@contextmanager
def opened(runner: RunnerConfig) -> Iterator[Workers]:
    """Open the run's workers; they are `current()` until the block ends, then stopped (a
    temporary cluster with them; an existing cluster's workers stay)."""
    global _current
    with _started(runner) as workers:
        _current = workers
        try:
            yield workers
        finally:
            _current = None


@contextmanager
def _started(runner: RunnerConfig) -> Iterator[Workers]:
    if runner.kind == "local":
        if runner.workers == 1:
            yield Workers()
            return
        workers = Processes(runner.workers)
        try:
            yield workers
        finally:
            workers.pool.shutdown(cancel_futures=True)
        return
    if runner.address:
        workers = OnDask(runner.address)
        with workers.client:
            yield workers
        return
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=runner.workers,
        threads_per_worker=1,
        dashboard_address=None,
        memory_limit=runner.memory_limit or "auto",
    ) as cluster:
        workers = OnDask(cluster.scheduler_address)
        with workers.client:
            yield workers


def thread_share(processes: int) -> int:
    """The compute threads each of `processes` busy processes may use on this machine."""
    return max(1, len(os.sched_getaffinity(0)) // processes)


def _start_pool_process(run_pid: int, threads: int) -> None:
    """A pool process computes on its share of the cores, unless OMP_NUM_THREADS says how
    many: torch's and faiss's OpenMP threads and numpy's BLAS default to every core in
    every process, and two processes of two threads on two cores embedded 3.1× slower than
    two of one thread each (bench/bench_pool_threads.py). Dask gives its worker processes
    one thread each itself.

    A pool process ends when the run's process does: one killed with SIGKILL leaves no
    worker waiting for work forever, holding its output pipes (a pool process's parent is
    the fork server, which itself waits for its children to end)."""
    global _in_pool
    _in_pool = True
    limit_malloc_arenas()
    if os.environ.setdefault("OMP_NUM_THREADS", str(threads)).isdigit():
        threads = int(os.environ["OMP_NUM_THREADS"])
    # the libraries loaded already (numpy's BLAS, with the fork server's imports) read the
    # variable no more: threadpoolctl sets their pools; torch, when imported, reads it
    threadpool_limits(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    run = psutil.Process(run_pid)
    threading.Thread(target=_end_with, args=(run,), daemon=True).start()


def _end_with(run: psutil.Process) -> None:
    try:
        while run.status() != psutil.STATUS_ZOMBIE:  # killed, not yet reaped: ended too
            time.sleep(0.5)
    except psutil.NoSuchProcess:
        pass
    os._exit(1)


def _started_process() -> None:
    """Nothing: submitted once per process to start the pool."""
