"""The per-layer results ASTRA-sim 1.0 and SimAI write (`EndToEnd.csv`), read by column name.

ASTRA-sim 1.0 (astra-sim/workload/CSVWriter and Workload::report) writes a header row, then a
row per layer: its name, the run's name, and per phase the compute and the exposed and total
communication, in microseconds; its first layer row also carries the totals (`workload finished
at`, `total comp`, `total exposed comm`). SimAI's analytical simulator writes the same per-layer
columns (with algbw and busbw beside each total), after two summary rows of its own (astra2.py
reads ASTRA-sim 2.x, whose results are log lines).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass

from modtrans.simulate.network import SimulateError

PHASES = ("fwd", "ig", "wg")


@dataclass(frozen=True)
class LayerRow:
    name: str
    compute_us: tuple[float, float, float]  # forward, input gradient, weight gradient
    exposed_us: tuple[float, float, float]  # communication nothing overlapped, per phase


@dataclass(frozen=True)
class TextResult:
    """A run on a workload text file: its iteration, compute and exposed communication (us)."""

    simulator: str
    finished: bool  # the simulator said every pass finished
    total_us: float
    compute_us: float
    exposed_us: float
    layers: tuple[LayerRow, ...]


def number(cell: str) -> float:
    """`4649.249000`, `1804 (14.96%)`, `-nan` -> a float (nan and blanks: 0)."""
    head = cell.strip().split(" ")[0]
    try:
        value = float(head)
    except ValueError:
        return 0.0
    return value if value == value else 0.0


def layers(rows: Sequence[Sequence[str]]) -> tuple[LayerRow, ...]:
    """The layer rows under the first header row that names `fwd compute` (blank cells dropped)."""
    at = next((i for i, header in enumerate(rows) if "fwd compute" in (h.strip() for h in header)), None)
    if at is None:
        return ()
    names = [h.strip() for h in rows[at]]
    compute = [names.index(f"{p} compute") for p in PHASES]
    exposed = [names.index(f"{p} exposed comm") for p in PHASES]
    out = []
    for row in rows[at + 1 :]:
        if len(row) <= max(compute + exposed) or not row[0].strip():
            continue
        c0, c1, c2 = (number(row[i]) for i in compute)
        e0, e1, e2 = (number(row[i]) for i in exposed)
        out.append(LayerRow(row[0].strip(), (c0, c1, c2), (e0, e1, e2)))
    return tuple(out)


def read_rows(text: str) -> list[list[str]]:
    return [row for row in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in row)]


FINISHED = re.compile(r"all passes finished at time: (\d+)")
"""What both simulators print once every pass of the workload has run."""


def result(simulator: str, log: str | None, end_to_end: str, totals: tuple[str, str, str]) -> TextResult:
    """A run's stdout and EndToEnd.csv as one result: `totals` names the columns of the row under
    the header that hold the iteration, the compute and the exposed communication (us); without
    the stdout (a recorded EndToEnd.csv), finished when the iteration is there."""
    rows = read_rows(end_to_end)
    header = [h.strip() for h in rows[0]] if rows else []
    row = rows[1] if len(rows) > 1 else []
    _check_columns(rows, header, totals, simulator)
    at = [header.index(name) if name in header else len(row) for name in totals]
    total, compute, exposed = (number(row[i]) if i < len(row) else 0.0 for i in at)
    finished = bool(FINISHED.search(log)) if log is not None else total > 0
    return TextResult(simulator, finished, total, compute, exposed, layers(rows))


def _check_columns(
    rows: Sequence[Sequence[str]], header: Sequence[str], names: Sequence[str], who: str
) -> None:
    """A results file that is there but lacks the columns read is not the simulator's (or a
    version that names them otherwise): an error, not zeros. An empty one is a run that stopped
    before writing it (the caller says it did not finish)."""
    missing = [n for n in names if n not in header]
    if rows and missing:
        raise SimulateError(
            f"EndToEnd.csv has no `{missing[0]}` column: not {who}'s results as modtrans reads them"
        )
