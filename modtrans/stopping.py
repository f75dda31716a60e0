"""Stopping a command: SIGTERM (kill, timeout, a batch scheduler) and SIGHUP (a closed terminal)
stop it as Ctrl-C (SIGINT) does, so what it was doing unwinds the same way (temporaries removed,
children killed, every `finally` run); the process then dies of the signal, so the parent (a shell,
`timeout`, make) sees which one stopped it (exit status 128 + its number in a shell).

The program (cli.run) installs this; a Python caller of the library keeps its own handlers. A
signal that was ignored when the program started stays ignored (`nohup` ignores SIGHUP; a shell
starts background jobs with SIGINT ignored). A second signal while the first unwinds is recorded,
not raised: it would cut the cleanup short. Inside `held()` a signal waits for the block's end, so
a set of renames (one result: a workload and its .meta.json, a thousand traces) completes or does
not start.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

STOPPING = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
"""The signals that stop a command with its cleanup, those the platform has (SIGKILL cannot be
caught; SIGQUIT asks for a core dump, kept)."""

_received: int | None = None
_holding = 0
_pending = False


def catch() -> None:
    """Make every signal of STOPPING that is not ignored unwind the command (KeyboardInterrupt)."""
    for number in STOPPING:
        if signal.getsignal(number) is not signal.SIG_IGN:
            signal.signal(number, _stop)


def received() -> int | None:
    """The signal that stopped the command, if one did."""
    return _received


def _stop(number: int, frame: FrameType | None) -> None:
    global _received, _pending
    if _received is not None:
        return  # already unwinding
    _received = number
    if _holding:
        _pending = True
        return
    raise KeyboardInterrupt


@contextlib.contextmanager
def held() -> Iterator[None]:
    """A block no stopping signal cuts in two: one that arrives inside stops the command at its end."""
    global _holding, _pending
    _holding += 1
    try:
        yield
    finally:
        _holding -= 1
        if not _holding and _pending:
            _pending = False
            raise KeyboardInterrupt


def ending() -> None:
    """From here on a stopping signal is recorded, not raised: the process is ending (exit
    handlers, flushing), and die() ends it by the signal."""
    global _holding
    _holding += 1


def die() -> int:
    """End the process by the signal that stopped it, its default action restored (call last,
    with every output flushed); the status a shell would show, where the signal did not end it."""
    number = _received if _received is not None else signal.SIGINT
    signal.signal(number, signal.SIG_DFL)
    signal.raise_signal(number)  # delivered to this thread before it returns
    return 128 + number
