"""What the whole-process benches share: a child process timed, its CPU time and peak memory read."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Usage:
    """What one child cost: wall seconds, CPU seconds (user and system) and peak RSS in MB."""

    wall: float
    cpu: float
    rss: float


def measure(args: list[str], cwd: str | None = None, env: dict[str, str] | None = None) -> Usage:
    """One child's cost, from its own rusage (os.wait4); exits with its error output when it fails."""
    start = time.perf_counter()
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if status != 0:
        sys.exit(f"failed: {' '.join(args)}\n{child.stderr.read().decode()[-2000:] if child.stderr else ''}")
    return Usage(seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def run(args: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one child (measure)."""
    used = measure(args)
    return used.wall, used.rss
