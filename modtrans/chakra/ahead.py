"""A big set's programs checked and written by worker processes: every core at work, no bytes
passed back.

Building and encoding a program is most of a big translation's work (GPT 1T at TP 8 x PP 64,
512 micro-batches: 64 programs of 34,000 operations, 5 us each to build and 7.5 to encode, 27 s
of CPU, against 11 s for the plan, its groups and the sampled self-check), and writing its ranks'
traces is the rest (Llama-3-70B's 1,024 ranks: 1.3 GB). Each worker owns some programs (the
caller says which: chakra/write.py gives program p to worker p % count), makes each once and
writes its ranks' traces itself, into temporaries this process made: what comes back is a
check's findings, or nothing. Requests to a worker are served in the order they are sent.

The workers are forked (Linux): they start with the plan this process holds. Where the platform
does not fork, or one core is all there is, `start` returns None and the caller does the jobs
itself.

    workers = start(job, count=2)     job(request) -> answer, in a worker
    workers.send(0, request)          queued for worker 0
    workers.receive(0)                the answer to worker 0's oldest request, waited for
    workers.close()                   the workers stopped (also at exit)
"""

from __future__ import annotations

import atexit
import errno
import gc
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

RANKS = 64
"""Sets above this many ranks are made by workers. Starting the workers costs 8-16 ms of wall time
(25 ms of CPU the first time, multiprocessing's import included; 2 loaded cores), against seconds
of encoding and writing above it (Llama-3-70B's 64 ranks: 1.5 s of CPU for the whole translation)."""

WORKERS = 4
"""At most this many workers: past them this process's own part bounds the time (GPT 1T: some 11 s
of CPU for the plan, its groups and the sampled self-check, against 27 s of building and encoding
shared by the workers), and each worker holds the programs it has checked and not yet written
(some 200 MB resident at 34,000 operations a program)."""


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform
        return os.cpu_count() or 1


def start(job: Callable[[Any], Any], count: int) -> Workers | None:
    """`count` forked Workers running `job`, or None where workers do not pay or cannot be: one of
    them, a platform that does not fork (macOS's fork is unsafe once system frameworks are loaded;
    Windows has none), a daemonic process (multiprocessing.Pool's workers)."""
    if count < 2 or not sys.platform.startswith("linux"):
        return None
    import multiprocessing

    if multiprocessing.current_process().daemon:  # a daemon's children are refused (a Pool's worker)
        return None
    return Workers(job, count)


def _quiet() -> None:
    """A worker's start: Ctrl-C and the stop signals left to the parent, which stops the workers
    itself (close) instead of each printing its own interruption."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in ("SIGTERM", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)


def _serve(job: Callable[[Any], Any], connection: Any, parents: list[Any]) -> None:
    """A worker: each request answered in turn, (True, job's answer) or (False, its exception),
    until None or the parent's end closes. The parent's ends of this worker's pipe and of those
    forked before it are closed here first: held, they would keep a dead parent's pipes open, and
    the workers waiting for requests that never come."""
    _quiet()
    for end in parents:
        end.close()
    parent = os.getppid()
    while True:
        try:
            request = connection.recv()
        except EOFError:
            return
        if request is None or os.getppid() != parent:  # a parent killed (SIGKILL) asks nothing more
            return
        try:
            answer: tuple[bool, Any] = (True, job(request))
        except BaseException as error:  # raised again in the parent, where it is asked for
            answer = (False, error)
        try:
            connection.send(answer)
        except Exception as error:  # an answer that does not pickle: said in words
            connection.send((False, OSError(errno.EIO, f"a worker's answer: {error}")))


class Workers:
    """Forked processes answering requests with `job` (start)."""

    def __init__(self, job: Callable[[Any], Any], count: int) -> None:
        import multiprocessing  # 18-26 ms (python -X importtime, 2 loaded cores) a small set spares

        context = multiprocessing.get_context("fork")
        # This process's objects out of the collector's sight until close: the workers' collections
        # then never write to the pages they share with it (a copy each). GPT 1T at 128
        # micro-batches: 12.1 -> 11.3 s of CPU (Python's gc.freeze documentation recommends it).
        gc.freeze()
        self.count = count
        self.connections: list[Any] = []
        self.processes: list[Any] = []
        try:
            for _ in range(count):
                ours, theirs = context.Pipe()
                self.connections.append(ours)
                process = context.Process(target=_serve, args=(job, theirs, self.connections), daemon=True)
                process.start()  # forgets job and args once started (no cycle through it)
                theirs.close()
                self.processes.append(process)
        except BaseException:
            self.close()
            raise
        self.waiting = [0] * count  # requests sent to each worker, not yet answered
        atexit.register(self.close)

    def send(self, worker: int, request: Any) -> None:
        """Queue a request for a worker (answered in the order sent: receive)."""
        self.connections[worker].send(request)
        self.waiting[worker] += 1

    def receive(self, worker: int) -> Any:
        """The answer to the worker's oldest request not yet received; its exception raised here
        (the workers stopped), and an OSError where the worker died (killed, out of memory)."""
        try:
            done, answer = self.connections[worker].recv()
        except (EOFError, OSError):
            self.close()
            raise OSError(errno.EIO, "a worker writing the traces stopped") from None
        self.waiting[worker] -= 1
        if not done:
            self.close()
            raise answer
        return answer

    def close(self) -> None:
        """The workers stopped: told to, or terminated where they are at work; reaped (so their
        CPU time counts in this process's children's)."""
        if not self.processes:
            return
        processes, self.processes = self.processes, []
        atexit.unregister(self.close)
        gc.unfreeze()
        busy = any(getattr(self, "waiting", [1]))
        for process, connection in zip(processes, self.connections, strict=False):
            try:
                if busy:
                    process.terminate()
                else:
                    connection.send(None)
            except OSError:  # gone already
                pass
        for process in processes:
            process.join()
        for connection in self.connections:
            connection.close()
