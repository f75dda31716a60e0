"""Temporary outputs: a file is written beside its name under a temporary one, then renamed into
place, so a reader never sees half of it. No temporary outlives its command:

- this process removes every one it made and did not rename, however the command ends (an error,
  Ctrl-C, SIGTERM or SIGHUP: see stopping.py; at exit: an atexit handler);
- a run that SIGKILL or a power cut stopped cannot, so the next run that writes in the same folder
  removes the temporaries of processes that are gone, whatever output they were for.

A temporary is named `.NAME.<pid>-<hex>.modtrans-partial`: hidden, beside NAME (one file system, so
the rename is atomic), and carrying the pid of the process that owns it. Only regular files so
named and owned by this user are ever removed; a process that is alive (or whose liveness cannot
be told) keeps its own.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import stat
from pathlib import Path

PARTIAL = ".modtrans-partial"
"""The end of every temporary's name."""

_NAME = re.compile(r"\..+\.(?P<pid>[0-9]+)-[0-9a-f]+" + re.escape(PARTIAL), re.DOTALL)
"""A temporary's whole name; `pid` is its owner's."""

_OURS: set[str] = set()
"""The temporaries this process made and has neither renamed nor removed."""


def open_partial(real: Path) -> tuple[int, str]:
    """A new temporary beside `real`, open for writing: its descriptor and path (the writer sweeps
    the folder first, once for all its outputs there). Raises OSError naming `real`."""
    temporary = name_partial(real)
    return create_partial(temporary, real), temporary


def name_partial(real: Path) -> str:
    """A new temporary's name beside `real`, this process's from now on (removed however the
    command ends, made or not): it, or a worker it forked, makes it (create_partial)."""
    # os.urandom is what secrets.token_hex reads; secrets would bring hmac and random (3 ms at start-up)
    temporary = str(real.parent / f".{real.name}.{os.getpid()}-{os.urandom(4).hex()}{PARTIAL}")
    _OURS.add(temporary)  # before it exists: a signal after os.open still finds it here
    return temporary


def create_partial(temporary: str, real: Path) -> int:
    """Make a temporary name_partial named, open for writing: its descriptor. Raises OSError
    naming `real`."""
    # 0o666 through os.open: the kernel applies the umask, as for any file the shell creates.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(temporary, flags, 0o666)
    except OSError as error:  # say the file the user named, not our temporary
        _OURS.discard(temporary)  # O_EXCL: whatever is there is not ours
        raise OSError(error.errno, error.strerror, str(real)) from None


def commit(temporary: str, real: Path) -> None:
    """Rename a temporary onto its output. Raises OSError."""
    os.replace(temporary, real)
    _OURS.discard(temporary)


def discard(temporary: str) -> None:
    """Remove a temporary (gone already is fine)."""
    with contextlib.suppress(OSError):
        os.unlink(temporary)
    _OURS.discard(temporary)


def remove_ours() -> None:
    """Remove every temporary this process made and did not rename."""
    for temporary in list(_OURS):
        discard(temporary)


atexit.register(remove_ours)


def sweep(folder: Path) -> None:
    """Remove the temporaries in `folder` whose process is gone (the folder read once: call it
    once per folder a command writes in, not once per file)."""
    mine = os.getpid()
    ours = {os.path.basename(t) for t in _OURS}
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            owner = stale_owner(entry)
            if owner is None or entry.name in ours:
                continue
            # Our pid on a temporary we did not make: a dead run's (a container reuses pids).
            if owner == mine or not _alive(owner):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def stale_owner(entry: os.DirEntry[str]) -> int | None:
    """The pid in a temporary's name, when `entry` is a temporary of this user: a regular file
    (never a link, a folder or a device, whatever its name) named as open_partial names them."""
    if not entry.name.endswith(PARTIAL):
        return None
    named = _NAME.fullmatch(entry.name)
    if named is None:
        return None
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        return None
    return int(named["pid"])


def _alive(pid: int) -> bool:
    """Whether process `pid` exists (another user's counts: signal 0 is refused it, not ESRCH)."""
    if pid <= 0:
        return True  # not a process: signal 0 to it would mean a group
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True
    return True
