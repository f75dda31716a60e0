"""modtrans simulate: run ASTRA-sim 2.x on a trace set, or read a run's log, and print per rank
the wall, compute, communication and exposed time, the TFLOP/s and MFU (modtrans/simulate.py)."""

from __future__ import annotations

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
    from modtrans.simulate import Planned, Result

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
    ranks: Annotated[bool, typer.Option("--ranks", help="A row per rank (default: per stage).")] = False,
) -> None:
    """Simulate a trace set on ASTRA-sim 2.x and show each rank's times.

    A row per pipeline stage (its slowest rank), or per rank with --ranks; then the iteration and
    the TFLOP/s per GPU over it. Exit 0 every rank finished, 1 some did not, 2 unusable input."""
    from modtrans import simulate as sim
    from modtrans.chakra.summary import representatives, summarize

    if fmt not in ("table", "json"):
        _stop(f"--format {fmt}: table or json")
    base, members, meta = trace_set(prefix)
    npus = len(members)
    read = summarize(read_traces(representatives(members, _mesh(meta))))
    planned = sim.Planned.from_read(
        {r.rank: (r.stage, r.flops, r.compute_us) for r in read if r.rank is not None}, npus
    )
    try:
        if from_log is not None:
            result = sim.parse(_log_text(from_log), npus)
        else:
            result, _ = sim.run(sim.binary(astra_sim), base, npus, sim.network(network, npus))
    except sim.SimulateError as error:
        _stop(str(error))
    _show(result, planned, _peak(meta), fmt, by_stage=not ranks)
    gaps = sim.replay_gaps(result, planned)
    if gaps:
        rank, simulated, plan = gaps[0]
        typer.echo(
            f"modtrans: warning: {len(gaps)} ranks' GPU time is not their traces' compute (rank {rank}: "
            f"{simulated:,} ns, its trace {plan:,}): a roofline-mode run computes its own times",
            err=True,
        )
    if not result.finished:
        typer.echo(
            f"modtrans: {len(result.ranks)} of {npus} ranks finished: the simulator stopped before the end",
            err=True,
        )
        raise typer.Exit(1)


def _log_text(path: Path) -> str:
    data, problem = read_binary(path)
    text = utf8(data)[0] if data is not None else None
    if text is None:
        _stop(f"cannot read --from-log {path}: {problem.message if problem else 'not text'}")
    return text


def _show(result: Result, planned: Planned, peak: float | None, fmt: str, *, by_stage: bool) -> None:
    from modtrans.simulate import achieved, replay_gaps, rows

    shown = rows(result, planned, peak, by_stage=by_stage)
    rate = achieved(result, planned)
    if fmt == "json":
        document = {
            "iteration_ns": result.iteration,
            "finished": result.finished,
            "tflops_per_gpu": round(rate, 2),
            "mfu": round(rate * 1e12 / peak, 4) if peak else None,
            "replay_exact": not replay_gaps(result, planned),
            "rows": [dataclasses.asdict(r) for r in shown],
        }
        sys.stdout.write(json.dumps(document, indent=1) + "\n")
        return
    typer.echo(f"{'':>9} {'ranks':>5} {'wall ms':>12} {'compute ms':>11} {'comm ms':>10} ", nl=False)
    typer.echo(f"{'exposed ms':>11} {'TFLOP/s':>8} {'MFU':>6}")
    for row in shown:
        mfu = f"{row.mfu:.1%}" if row.mfu is not None else "-"
        typer.echo(
            f"{row.label:>9} {row.ranks:>5} {row.wall / 1e6:>12.3f} {_ms(row.gpu):>11} {_ms(row.comm):>10} "
            f"{row.exposed / 1e6:>11.3f} {row.tflops:>8.1f} {mfu:>6}"
        )
    utilisation = f", MFU {rate * 1e12 / peak:.1%}" if peak else ""
    typer.echo(
        f"iteration: {result.iteration / 1e6:,.3f} ms (the slowest rank's wall time); "
        f"{rate:.1f} TFLOP/s per GPU{utilisation}"
    )


def _ms(value: int | None) -> str:
    return "-" if value is None else f"{value / 1e6:.3f}"


def _stop(message: str) -> NoReturn:
    typer.echo(f"modtrans: {message}", err=True)
    raise typer.Exit(2)
