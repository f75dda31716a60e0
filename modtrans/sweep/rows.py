"""The sweep's table: a row per layout that fits, best first, and its CSV and JSON forms (written
together, atomically: fileio.write_all). A row holds every layout option, the iteration time by
tier (the fast tier's estimate; for the finalists the exact tier's, of the translated plan, and
ASTRA-sim 2.x's), the throughput in tokens/s,
TFLOP/s per GPU and MFU (of the simulation where there is one, else of the estimate), memory per
stage, the exposed communication and the bubble."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from modtrans.outputs import save
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm.degrees import named


@dataclass
class Row:
    model: str
    gpus: int
    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    dp_replicate: int  # HSDP's replicas R (1: none)
    vpp: int
    schedule: str
    micro_batch: int
    micro_batches: int
    recompute: str
    distributed_optimizer: bool  # ZeRO-1 or more: the optimizer's state sharded
    zero: int  # the ZeRO stage (Megatron's distributed optimizer: 1)
    sp: bool
    tp_comm_overlap: bool  # Megatron-Core's --tp-comm-overlap: TE's userbuffers in the SP GEMMs
    memory_gib: float  # the most loaded stage's rank
    memory_per_stage_gib: list[float]
    estimate_s: float | None = None  # the fast tier's iteration (modtrans.estimate.layout)
    compute_s: float | None = None  # of the stage the iteration waits for (the estimate's)
    exposed_comm_s: float | None = None
    bubble_s: float | None = None
    exact_s: float | None = None  # the exact tier's: the finalist's translated plan walked
    simulated_s: float | None = None  # ASTRA-sim 2.x's iteration (--simulate)
    tokens_per_s: float | None = None
    tflops_per_gpu: float | None = None
    mfu: float | None = None
    tier: str = ""  # what the rates are of: estimate or simulation
    rank: int = 0  # 1 the fastest
    pareto: bool = False  # no other row is faster with less memory
    finalist: bool = False  # simulated
    error: str | None = None  # why the estimate or simulation did not come
    framework: str = Framework.MEGATRON.value  # --framework: whose ZeRO-1 the label names

    @property
    def iteration_s(self) -> float | None:
        """The best tier's iteration: the simulation's where there is one."""
        return self.simulated_s if self.simulated_s is not None else self.estimate_s

    @property
    def label(self) -> str:
        """TP8 PP4 DP32 CP2 V2 M1 full DO TPO (ZeRO-1: DO where it is Megatron-LM's distributed
        optimizer, Framework.distributed_optimizer, else Z1; Z2, Z3; TPO: --tp-comm-overlap): the
        degrees as degrees.named names them."""
        always, rest = named(vars(self))
        parts = [*always, *rest] + [f"V{self.vpp}"] * (self.vpp > 1)
        parts += [f"M{self.micro_batch}", self.recompute]
        megatron = Framework(self.framework).distributed_optimizer
        parts += ["DO" if megatron and self.zero == 1 else f"Z{self.zero}"] * (self.zero > 0)
        parts += ["TPO"] * self.tp_comm_overlap
        return " ".join(parts)


COLUMNS = tuple(f.name for f in fields(Row))


def front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the Pareto front of (cost, throughput) points, by cost: those no other point
    beats with a cost as low or lower and a higher throughput."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    out, best = [], -math.inf
    for i in order:
        if points[i][1] > best:
            out.append(i)
            best = points[i][1]
    return out


def ranked(rows: list[Row]) -> list[Row]:
    """Rows best first (the shortest iteration by the best tier; those without one last), each
    given its rank and whether it is on the Pareto front of throughput and memory."""
    order = sorted(rows, key=lambda r: (r.iteration_s is None, r.iteration_s or 0.0, r.memory_gib, r.label))
    timed = [r for r in order if r.tokens_per_s]
    marked = {id(timed[i]) for i in front([(r.memory_gib, r.tokens_per_s or 0.0) for r in timed])}
    for rank, row in enumerate(order, 1):
        row.rank = rank
        row.pareto = id(row) in marked
    return order


def agreement(rows: Sequence[Row]) -> dict[str, Any] | None:
    """How the fast tier agrees with ASTRA-sim 2.x on the simulated rows: the largest relative
    error and Kendall's tau-b of their orders (Kendall 1945: concordant minus discordant pairs
    over the square root of the pairs untied in each order; without ties it is tau-a, over all
    pairs; None where either order ties every pair); None with fewer than two rows. Ties are common
    (ZeRO-1 and ZeRO-2 rows of one time): tau-a counted two orders that agree in every untied
    pair as 2/3 on three rows with one tie in each."""
    both = [r for r in rows if r.simulated_s and r.estimate_s]
    if len(both) < 2:
        return None
    pairs = [(a, b) for i, a in enumerate(both) for b in both[i + 1 :]]
    by_estimate = [(a.estimate_s or 0.0) - (b.estimate_s or 0.0) for a, b in pairs]
    by_simulation = [(a.simulated_s or 0.0) - (b.simulated_s or 0.0) for a, b in pairs]
    sign = [x * y for x, y in zip(by_estimate, by_simulation, strict=True)]
    untied = math.sqrt(sum(x != 0 for x in by_estimate) * sum(y != 0 for y in by_simulation))
    tau = (sum(s > 0 for s in sign) - sum(s < 0 for s in sign)) / untied if untied else None
    error = max(abs(r.estimate_s / r.simulated_s - 1) for r in both)  # type: ignore[operator]
    return {"simulated": len(both), "largest_error": error, "kendall_tau": tau}


def as_csv(rows: Sequence[Row]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        values = asdict(row)
        writer.writerow([_cell(values[c]) for c in COLUMNS])
    return out.getvalue()


def _cell(value: Any) -> Any:
    if isinstance(value, list):
        return ";".join(f"{v:g}" for v in value)
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else value


def as_json(rows: Sequence[Row], summary: dict[str, Any]) -> str:
    return json.dumps({**summary, "rows": [asdict(r) for r in rows]}, indent=1) + "\n"


def read_json(text: str) -> list[Row]:
    """The rows of a table's JSON (as_json)."""
    return [Row(**{k: v for k, v in row.items() if k in COLUMNS}) for row in json.loads(text)["rows"]]


def files(prefix: Path) -> list[Path]:
    """What a table written at `prefix` is: PREFIX.csv, PREFIX.json, PREFIX.svg."""
    return [prefix.with_name(f"{prefix.name}.{suffix}") for suffix in ("csv", "json", "svg")]


def write(prefix: Path, rows: Sequence[Row], summary: dict[str, Any], picture: str | None) -> list[Path]:
    """PREFIX.csv, PREFIX.json and (given) PREFIX.svg, all or none (outputs.save: a failure is
    one line naming the file). Raises OSError."""
    csv_path, json_path, svg_path = files(prefix)
    made: list[tuple[Path, str]] = [(csv_path, as_csv(rows)), (json_path, as_json(rows, summary))]
    if picture is not None:
        made.append((svg_path, picture))
    problems = save(made)
    if problems:
        raise OSError(problems[0].message)
    return [path for path, _ in made]
