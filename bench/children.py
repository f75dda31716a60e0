"""What the whole-process benches share: a child process timed and its peak memory read."""

from __future__ import annotations

import os
import subprocess
import sys
import time


def run(args: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one child, from its own rusage (os.wait4); exits with its
    error output when it fails."""
    start = time.perf_counter()
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if status != 0:
        sys.exit(f"failed: {' '.join(args)}\n{child.stderr.read().decode()[-2000:] if child.stderr else ''}")
    return seconds, usage.ru_maxrss / 1024
