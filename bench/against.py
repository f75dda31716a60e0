"""What the benches that time this tree against a baseline revision share (bench_fusion.py,
bench_validate.py): their options, and the runs alternated between the versions, so a change in
the machine's load reaches both sides of a ratio."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from typing import TypeVar

Version = TypeVar("Version")
Times = TypeVar("Times")
Found = TypeVar("Found")


def options(what: str, npus: int = 32) -> argparse.Namespace:
    """--npus (the trace set's ranks), --baseline (the git revision compared against) and
    --repeat (runs of each version), parsed from the command line."""
    parser = argparse.ArgumentParser(description=what)
    parser.add_argument("--npus", type=int, default=npus, help="ranks in the trace set")
    parser.add_argument("--baseline", default="main", help="the git revision this tree is timed against")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each version, alternated")
    return parser.parse_args()


def alternated(
    versions: Mapping[str, Version], repeat: int, run: Callable[[Version], tuple[Times, Found]]
) -> tuple[dict[str, list[Times]], Found]:
    """Each version run `repeat` times, one after the other in turn: every run's times by version,
    and what they found, which must be the same for all (else the bench exits saying so)."""
    times: dict[str, list[Times]] = {name: [] for name in versions}
    found: list[Found] = []
    for _ in range(repeat):
        for name, version in versions.items():
            took, result = run(version)
            times[name].append(took)
            if result not in found:
                found.append(result)
    if len(found) != 1:
        sys.exit(f"the versions differ: {found}")
    return times, found[0]
