"""modtrans simulate: run ASTRA-sim 2.x on a trace set, or read a run's log, and print per rank
the wall, compute, communication and exposed time, the TFLOP/s and MFU (modtrans/simulate.py)."""

from __future__ import annotations

import bisect
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from modtrans.cli.common import app
from modtrans.cli.models import _mesh, _peak, read_traces, trace_set
from modtrans.fileio import read_binary, utf8

if TYPE_CHECKING:
    from modtrans.simulate import Result

SimFormat = Annotated[str, typer.Option("--format", "-f", help="table or json.")]


@app.command()
def simulate(
    prefix: Annotated[str, typer.Argument(help="A trace set: PREFIX.<rank>.et and PREFIX.comm_groups.json.")],
    astra_sim: Annotated[
        str | None, typer.Option(help="The ASTRA-sim 2.x binary (default: $MODTRANS_ASTRA_SIM).")
    ] = None,
    network: Annotated[
        str, typer.Option(help="switch:NPUS:GBPS, dgx-a100 or hgx-h100 (nodes of 8 GPUs).")
    ] = "dgx-a100",
    from_log: Annotated[
        Path | None, typer.Option(help="Read a run's output instead of running the simulator.")
    ] = None,
    fmt: SimFormat = "table",
) -> None:
    """Simulate a trace set on ASTRA-sim 2.x and show each rank's times.

    Exit 0 every rank finished, 1 some did not, 2 unusable input."""
    from modtrans import simulate as sim
    from modtrans.chakra.summary import representatives, summarize

    if fmt not in ("table", "json"):
        _stop(f"--format {fmt}: table or json")
    base, members, meta = trace_set(prefix)
    npus = len(members)
    read = summarize(read_traces(representatives(members, _mesh(meta))))
    flops = _per_rank({r.rank: r.flops for r in read if r.rank is not None}, npus)
    try:
        if from_log is not None:
            data, problem = read_binary(from_log)
            text = utf8(data)[0] if data is not None else None
            if text is None:
                why = problem.message if problem else "not text"
                _stop(f"cannot read --from-log {from_log}: {why}")
            result = sim.parse(text, npus)
        else:
            result, _ = sim.run(sim.binary(astra_sim), base, npus, sim.network(network, npus))
    except sim.SimulateError as error:
        _stop(str(error))
    _show(result, flops, _peak(meta), fmt)
    if not result.finished:
        typer.echo(
            f"modtrans: {len(result.ranks)} of {npus} ranks finished: the simulator stopped before the end",
            err=True,
        )
        raise typer.Exit(1)


def _per_rank(firsts: dict[int, int], npus: int) -> dict[int, int]:
    """Each rank's FLOPs from the ranks read: a stage's ranks run one program, so a rank not read
    has the FLOPs of the nearest rank read below it (its stage's first)."""
    read = sorted(firsts)
    if not read:
        return {}
    return {rank: firsts[read[max(bisect.bisect_right(read, rank) - 1, 0)]] for rank in range(npus)}


def _show(result: Result, flops: dict[int, int], peak: float | None, fmt: str) -> None:
    rows = []
    for rank, r in sorted(result.ranks.items()):
        rate = flops.get(rank, 0) / r.wall / 1e3 if r.wall else 0.0  # FLOP / ns -> TFLOP/s
        rows.append(
            {
                **dataclasses.asdict(r),
                "tflops": round(rate, 2),
                "mfu": round(rate * 1e12 / peak, 4) if peak else None,
            }
        )
    if fmt == "json":
        document = {"iteration_ns": result.iteration, "finished": result.finished, "ranks": rows}
        sys.stdout.write(json.dumps(document, indent=1) + "\n")
        return
    typer.echo(
        f"{'rank':>5} {'wall ms':>12} {'compute ms':>11} {'comm ms':>10} {'exposed ms':>11} ", nl=False
    )
    typer.echo(f"{'TFLOP/s':>8} {'MFU':>6}")
    for row in rows:
        gpu, comm = row["gpu"], row["comm"]
        mfu = f"{row['mfu']:.1%}" if row["mfu"] is not None else "-"
        typer.echo(
            f"{row['rank']:>5} {row['wall'] / 1e6:>12.3f} {_ms(gpu):>11} {_ms(comm):>10} "
            f"{row['exposed'] / 1e6:>11.3f} {row['tflops']:>8.1f} {mfu:>6}"
        )
    typer.echo(f"iteration: {result.iteration / 1e6:,.3f} ms (the slowest rank's wall time)")


def _ms(value: int | None) -> str:
    return "-" if value is None else f"{value / 1e6:.3f}"


def _stop(message: str) -> NoReturn:
    typer.echo(f"modtrans: {message}", err=True)
    raise typer.Exit(2)
