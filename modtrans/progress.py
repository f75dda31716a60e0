"""Progress of long runs: the library says what it is doing and how far it is; whoever listens (the
CLI, in a terminal: report.Display) shows it. Nobody listening costs one context-variable read a
task and a no-op call a step.

    with progress.task("writing traces", total=len(files)) as advance:
        for f in files:
            ...
            advance()
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Protocol


class Listener(Protocol):
    def start(self, label: str, total: int | None) -> object:
        """A task began; the handle `step` and `stop` get."""

    def step(self, handle: object, amount: int) -> None: ...

    def stop(self, handle: object) -> None: ...


_LISTENER: ContextVar[Listener | None] = ContextVar("modtrans_progress", default=None)


def _nothing(amount: int = 1) -> None:
    return None


@contextlib.contextmanager
def task(label: str, total: int | None = None) -> Iterator[Callable[..., None]]:
    """A unit of work of `total` steps (None: not known); yields the function that counts one."""
    listener = _LISTENER.get()
    if listener is None:
        yield _nothing
        return
    handle = listener.start(label, total)

    def advance(amount: int = 1) -> None:
        listener.step(handle, amount)

    try:
        yield advance
    finally:
        listener.stop(handle)


@contextlib.contextmanager
def listening(listener: Listener | None) -> Iterator[None]:
    """Tell `listener` (None: nobody) of every task inside the block."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)
