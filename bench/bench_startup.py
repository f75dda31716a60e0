"""What each command costs before and around its work, as a ratio against two baselines measured in
the same run: `python -c pass` (the interpreter) and `python -c "import typer"` (the least any
typer command line can cost). The modules each command imports are counted by
tests/test_startup.py, against the budgets in docs/performance.md (Start-up).

Run by hand: `python bench/bench_startup.py [--runs N]` (about a minute). Each command runs in a
fresh process as an installed copy runs: bytecode cached (PYTHONDONTWRITEBYTECODE is dropped for
the children) and after one untimed run. Each figure is CPU time (user and system, from the
child's own rusage), the best of its rounds: a start-up is one core's work, and on a shared machine
its wall time measures the neighbours. The commands take turns, round after round, so a change in
the machine's load reaches every one of them.

Latest figures: docs/performance.md (Start-up).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from children import run  # bench/children.py: the script's own folder is on sys.path

PY = sys.executable
BASELINES = {"python -c pass": [PY, "-c", "pass"], "python -c 'import typer'": [PY, "-c", "import typer"]}
# Each reads what one before it wrote: `translate` -> `validate`.
COMMANDS = [
    "--help",
    "translate --help",
    "translate llama-3-8b --tp 2 -o {out}/l.txt",
    "validate {out}/l.txt",
    "translate llama-3-8b --tp 2 --pp 2 --format chakra-et -o {out}/l",
    "validate {out}/l.0.et {out}/l.1.et {out}/l.2.et {out}/l.3.et",
    "translate resnet50 -o {out}/r.txt",
]


def cpu(args: list[str]) -> float:
    """The child's CPU seconds, user and system."""
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        sys.exit(f"failed: {' '.join(args)}")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="rounds; each figure is the best of them")
    runs = parser.parse_args().runs
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as out:
        programs = dict(BASELINES)
        for command in COMMANDS:
            programs[command] = [PY, "-m", "modtrans", *command.format(out=out).split()]
        for args in programs.values():  # the warm-up, which also writes what `validate` reads
            run(args)
        best = {name: float("inf") for name in programs}
        for _ in range(runs):
            for name, args in programs.items():
                best[name] = min(best[name], cpu(args))
    bare, typer = best["python -c pass"], best["python -c 'import typer'"]
    print(f"{'':66} {'x pass':>7} {'x typer':>8}")
    for name, seconds in best.items():
        print(f"{name:66} {seconds / bare:7.1f} {seconds / typer:8.2f}")


if __name__ == "__main__":
    main()
