"""Where a sweep's tasks run: in this process (--jobs 1), a local process pool (--jobs N, the
default), or a Dask cluster (--engine dask: a scheduler's address, or a local cluster of --jobs
workers), the `distributed` extra. Each yields (index, result) as tasks finish; results are the
same whichever runs them (a test holds Dask's table equal to the pool's).

Dask, not Ray, measured on this project's 2-core machine (bench/bench_engines.py): a local
cluster of 2 workers started in 6.2 s, ran a task in 19 ms of overhead and stopped in 2.4 s;
Ray's (2.60) did not start there ("The current node timed out during startup": its raylet did not
register with its control store on 2 busy cores). A sweep's tasks are batches of
layouts to estimate (tens of ms each) or one simulation (seconds to minutes): either overhead is
small against them; start-up and a working local cluster decided. `distributed` is imported here
only."""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol

LOCAL, DASK = "local", "dask"
ENGINES = (LOCAL, DASK)


class EngineError(ValueError):
    """An engine that cannot start: its extra not installed, a scheduler not reached (one line)."""


class WorkerError(RuntimeError):
    """A worker that ended abruptly, its task unfinished: killed (the kernel's out-of-memory
    killer, a signal) or crashed (one line). What finished before it stands."""


LOST = "a worker process ended abruptly (killed, perhaps for want of memory, or crashed)"


class Engine(Protocol):
    def run(self, function: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        """function(item) for every item, (its index, its result) as each finishes."""
        ...

    def close(self) -> None: ...


class Inline:
    """Every task in this process, in order (--jobs 1)."""

    def run(self, function: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        for index, item in enumerate(items):
            yield index, function(item)

    def close(self) -> None:
        return None


class Pool:
    """A local process pool of `jobs` workers. Forked where the platform forks: the workers start
    with what this process has loaded and made (the model, its IR and costs), not from nothing;
    but not once torch is loaded (a configuration read through transformers): a child forked
    after torch started its intra-op threads can wait for ever on their locks (a BLOOM sweep's
    workers hung in their first torch op, reading the model at another micro-batch), so the
    workers then come from a fresh server process (forkserver) and read the model themselves
    (the hf cache on disk keeps what this process read)."""

    def __init__(self, jobs: int) -> None:
        methods = multiprocessing.get_all_start_methods()
        safe = [m for m in ("forkserver", "spawn") if m in methods]
        fork = "fork" in methods and not ("torch" in sys.modules and safe)
        context = multiprocessing.get_context("fork" if fork else (safe[0] if safe else None))
        self._pool = ProcessPoolExecutor(max_workers=jobs, mp_context=context)

    def run(self, function: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        futures: dict[Future[Any], int] = {
            self._pool.submit(function, item): i for i, item in enumerate(items)
        }
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                try:
                    found = future.result()
                except BrokenProcessPool:  # every task pending fails with it: the pool is gone
                    raise WorkerError(LOST) from None
                yield futures[future], found

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class Dask:
    """A Dask cluster: the scheduler at `address`, or a local cluster of `jobs` worker processes."""

    def __init__(self, jobs: int, address: str | None) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise EngineError(
                "--engine dask needs Dask's distributed: pip install 'modtrans[distributed]'"
            ) from None
        self._cluster = None
        try:
            if address is None:
                self._cluster = LocalCluster(
                    n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None
                )
                self._client = Client(self._cluster)
            else:
                self._client = Client(address, timeout=30)
        except (OSError, TimeoutError) as error:
            raise EngineError(f"--engine dask: no scheduler at {address}: {error}") from None

    def run(self, function: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        from distributed import KilledWorker, as_completed

        futures = self._client.map(function, list(items), pure=False)
        index = {future.key: i for i, future in enumerate(futures)}
        for future in as_completed(futures):
            try:
                found = future.result()
            except KilledWorker:  # the scheduler's: the task's workers died (allowed-failures times)
                raise WorkerError(LOST) from None
            yield index[future.key], found

    def close(self) -> None:
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()


def start(name: str, jobs: int, address: str | None = None) -> Engine:
    """The engine `name` with `jobs` workers (the pool's, or a local Dask cluster's)."""
    if name == DASK:
        return Dask(jobs, address)
    if address is not None:
        raise EngineError("--scheduler is a Dask scheduler's address: give --engine dask")
    return Inline() if jobs <= 1 else Pool(jobs)
