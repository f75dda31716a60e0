"""A big set's programs encoded ahead of the writer, in worker processes: every core at work.

The writer asks for a program's template (chakra/patch.py) when it reaches the program's first
rank, in rank order; building and encoding the program is most of a big translation's work (GPT
1T at TP 8 x PP 64, 512 micro-batches: 64 programs of 34,000 operations, 5 us each to build and
7.5 to encode, 27 s of CPU, against 11 s for the plan, its groups and the sampled self-check).
Ahead keeps up to `window` programs in flight or made and not yet asked for, in the order they
will be asked for; a program asked for out of turn (the self-check's sample) goes first.

The workers are forked (Linux): they start with the plan this process holds, and send back only
what they made (a template's pieces, some 12 MB a program). Where the platform does not fork, or
one core is all there is, `start` returns None and the encoder makes each program itself.

    ahead = start(make, order, workers=2, window=4)    make(p) -> program p's pieces, in a worker
    ahead.get(p)                                         what make(p) returned, waited for
    ahead.close()                                        the workers stopped (also at exit)
"""

from __future__ import annotations

import atexit
import gc
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from multiprocessing.pool import AsyncResult

RANKS = 64
"""Sets above this many ranks are encoded ahead. Starting the workers costs 8-16 ms of wall time
(25 ms of CPU the first time, multiprocessing's import included; 2 loaded cores), against seconds
of encoding above it (Llama-3-70B's 64 ranks: 1.5 s of CPU for the whole translation)."""

WORKERS = 4
"""At most this many workers: past them this process's own part bounds the time (GPT 1T: some 11 s
of CPU for the plan, its groups and the sampled self-check, against 27 s of building and encoding
shared by the workers), and each worker holds its programs (some 200 MB resident at 34,000
operations a program)."""

_MAKE: Callable[[int], Any] | None = None  # a worker's job: set while the workers fork


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform
        return os.cpu_count() or 1


def start(make: Callable[[int], Any], order: Sequence[int], workers: int, window: int) -> Ahead | None:
    """An Ahead of `workers` forked processes making `order` (each item once), or None where
    workers do not pay: one of them, or a platform that does not fork (macOS's fork is unsafe
    once system frameworks are loaded; Windows has none)."""
    if workers < 2 or not sys.platform.startswith("linux") or len(order) < 2:
        return None
    return Ahead(make, order, workers, window)


def _quiet() -> None:
    """A worker's start: Ctrl-C and the stop signals left to the parent, which stops the workers
    itself (close) instead of each printing its own interruption."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in ("SIGTERM", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)


def _run(item: int) -> Any:
    if _MAKE is None:
        raise RuntimeError("an Ahead worker without its job")
    return _MAKE(item)


class Ahead:
    """Items made in worker processes ahead of being asked for (start)."""

    def __init__(self, make: Callable[[int], Any], order: Sequence[int], workers: int, window: int) -> None:
        import multiprocessing  # 18-26 ms (python -X importtime, 2 loaded cores) a small set spares

        global _MAKE
        _MAKE = make  # the workers fork with it; not kept here (make's owner may be dropped: close)
        # This process's objects out of the collector's sight until close: the workers' collections
        # then never write to the pages they share with it (a copy each). GPT 1T at 128
        # micro-batches: 12.1 -> 11.3 s of CPU (Python's gc.freeze documentation recommends it).
        gc.freeze()
        try:
            self.pool: Any = multiprocessing.get_context("fork").Pool(workers, _quiet)
        except BaseException:
            gc.unfreeze()
            raise
        finally:
            _MAKE = None
        self.order = list(dict.fromkeys(order))
        self.next = 0  # the first of `order` not yet submitted
        self.window = window
        self.pending: dict[int, AsyncResult[Any]] = {}  # submitted, not yet asked for
        self.done: set[int] = set()
        atexit.register(self.close)
        self._fill()

    def get(self, item: int) -> Any:
        """What make(item) returned (its exception raised here); each item is asked for once."""
        if item in self.done:
            raise KeyError(f"item {item} was already made and handed over")
        if item not in self.pending:
            self._submit(item)
        result = self.pending.pop(item)
        self.done.add(item)
        self._fill()
        try:
            made = result.get()
        except BaseException:
            self.close()
            raise
        if len(self.done) == len(self.order):
            self.close()
        return made

    def _submit(self, item: int) -> None:
        self.pending[item] = self.pool.apply_async(_run, (item,))

    def _fill(self) -> None:
        while len(self.pending) < self.window and self.next < len(self.order):
            item = self.order[self.next]
            self.next += 1
            if item not in self.pending and item not in self.done:
                self._submit(item)

    def close(self) -> None:
        """The workers stopped, what they were making dropped; the process reaps them (so their
        CPU time counts in its own children's)."""
        if self.pool is None:
            return
        pool, self.pool = self.pool, None
        atexit.unregister(self.close)
        gc.unfreeze()
        if self.pending:
            pool.terminate()
        else:
            pool.close()
        pool.join()
        self.pending.clear()
