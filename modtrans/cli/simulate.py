"""modtrans simulate: run ASTRA-sim 2.x on a trace set, or read a run's log, and print per rank
the wall, compute, communication and exposed time, the TFLOP/s and MFU (modtrans/simulate.py)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from modtrans import sidecar
from modtrans.cli.common import Command, commands
from modtrans.cli.traces import _mesh, read_traces, trace_set
from modtrans.fileio import read_binary, utf8

if TYPE_CHECKING:
    from modtrans.simulate import Planned, Result
    from modtrans.simulate.astra2 import Row
    from modtrans.simulate.endtoend import TextResult

SimFormat = Annotated[str, typer.Option("--format", "-f", help="table or json.")]


@commands.command(cls=Command)
def simulate(
    prefix: Annotated[
        str,
        typer.Argument(
            help="A trace set (PREFIX.<rank>.et, PREFIX.comm_groups.json), or a workload text file: "
            "SimAI's dialect runs on SimAI, the others on ASTRA-sim 1.0."
        ),
    ],
    astra_sim: Annotated[
        str | None, typer.Option(help="The ASTRA-sim 2.x binary (default: $MODTRANS_ASTRA_SIM).")
    ] = None,
    astra_sim_1: Annotated[
        str | None,
        typer.Option("--astra-sim-1", help="The ASTRA-sim 1.0 binary (default: $MODTRANS_ASTRA_SIM_1)."),
    ] = None,
    simai: Annotated[
        str | None, typer.Option(help="The SimAI analytical binary (default: $MODTRANS_SIMAI).")
    ] = None,
    npus: Annotated[
        int | None,
        typer.Option(min=1, max=1 << 20, help="A text workload's NPUs (default: its .meta.json's)."),
    ] = None,
    layers: Annotated[bool, typer.Option("--layers", help="A text workload: every layer's row.")] = False,
    network: Annotated[
        str,
        typer.Option(
            help="switch:NPUS:GBPS, dgx-a100, selene, hgx-h100 or jean-zay-a100 (nodes of 8 GPUs at NCCL's "
            "bandwidth)."
        ),
    ] = "dgx-a100",
    from_log: Annotated[
        Path | None,
        typer.Option(
            help="Read a run's output instead of running the simulator: ASTRA-sim 2.x's log, or for "
            "a workload file the EndToEnd.csv ASTRA-sim 1.0 or SimAI wrote."
        ),
    ] = None,
    fmt: SimFormat = "table",
    ranks: Annotated[bool, typer.Option("--ranks", help="A row per rank (default: per stage).")] = False,
) -> None:
    """Simulate a trace set on ASTRA-sim 2.x, or a workload file on ASTRA-sim 1.0 or SimAI.

    Traces: a row per pipeline stage (its slowest rank), or per rank with --ranks; then the
    iteration and the TFLOP/s per GPU over it. A workload file: the iteration, its compute and
    exposed communication, and the layers that expose the most (--layers: all). Exit 0 the run
    finished, 1 it did not, 2 unusable input."""
    from modtrans import simulate as sim
    from modtrans.chakra.read import is_trace_spec
    from modtrans.chakra.summary import representatives, summarize
    from modtrans.estimate.result import peak_of

    if fmt not in ("table", "json"):
        _stop(f"--format {fmt}: table or json")
    if not is_trace_spec(Path(prefix)) and Path(prefix).is_file():
        _text(Path(prefix), (astra_sim_1, simai, from_log), npus, network, fmt, every_layer=layers)
        return
    base, members, meta = trace_set(prefix)
    npus = len(members)
    read = summarize(read_traces(representatives(members, _mesh(meta))))
    planned = sim.Planned.from_read(
        {r.rank: (r.stage, r.model_flops, r.compute_us) for r in read if r.rank is not None}, npus
    )
    try:
        if from_log is not None:
            result = sim.parse(_log_text(from_log), npus)
            _same_set(result, from_log, npus)
        else:
            result, _ = sim.run(sim.binary(astra_sim), base, npus, sim.network(network, npus))
    except sim.SimulateError as error:
        _stop(str(error))
    gaps = sim.replay_gaps(result, planned)
    _show(
        result,
        planned,
        None if gaps else peak_of(meta.get("compute")),
        fmt,
        by_stage=not ranks,
        rated=not gaps,
    )
    if gaps:
        rank, simulated, plan = gaps[0]
        typer.echo(
            f"modtrans: warning: {len(gaps)} ranks' GPU time is not their traces' compute (rank {rank}: "
            f"{simulated:,} ns, its trace {plan:,}): a run of other traces, or a roofline-mode run "
            "computing its own times; no TFLOP/s or MFU derived from it",
            err=True,
        )
    if not result.finished:
        typer.echo(
            f"modtrans: {len(result.ranks)} of {npus} ranks finished: the simulator stopped before the end",
            err=True,
        )
        raise typer.Exit(1)


def _text(
    path: Path,
    given: tuple[str | None, str | None, Path | None],
    npus: int | None,
    preset: str,
    fmt: str,
    *,
    every_layer: bool,
) -> None:
    """A workload text file on the simulator of its dialect (simulate/astra1.py, simulate/simai.py):
    `given` the ASTRA-sim 1.0 and SimAI binaries, or a recorded EndToEnd.csv to read instead."""
    from modtrans.diagnostics import Severity
    from modtrans.simulate import astra1, network
    from modtrans.simulate import simai as simai_run
    from modtrans.simulate.network import SimulateError
    from modtrans.workload.dialects import detect
    from modtrans.workload.load import load
    from modtrans.workload.model import Dialect
    from modtrans.workload.validate import check_parsed

    parsed = load(path).result
    workload = parsed.workload
    if workload is None:
        problems = list(parsed.diagnostics)
        _stop(f"{path}: not a workload file ({problems[0].message if problems else 'unreadable'})")
    dialect = workload.dialect or detect(workload)
    reader = simai_run if dialect is Dialect.SIMAI else astra1
    found = check_parsed(parsed, dialect=dialect)
    errors = [d for d in found if d.severity is Severity.ERROR or d.code in reader.CANNOT_RUN]
    if errors:  # what the simulator would abort on or misread: said before it runs
        first = errors[0]
        where = f"{path}:{first.span.line}" if first.span else str(path)
        more = f"; {len(errors) - 1} more: modtrans validate {path}" if len(errors) > 1 else ""
        typer.echo(f"modtrans: {where}: {first.code} {first.message}{more}", err=True)
        raise typer.Exit(1)
    count = npus or _meta_npus(path) or workload.header.all_gpus
    if not count:
        _stop(f"{path}: how many NPUs? give --npus (the file's .meta.json says none)")
    astra_1, simai, recorded = given
    try:
        net = network(preset, count)
        if recorded is not None:
            result = reader.parse(None, _log_text(recorded))
        elif reader is simai_run:
            result, _ = simai_run.run(simai_run.binary(simai), path, count, net)
        else:
            result, _ = astra1.run(astra1.binary(astra_1), path, net)
    except SimulateError as error:
        _stop(str(error))
    _show_text(result, path, count, fmt, every_layer)
    if not result.finished:
        typer.echo(f"modtrans: {result.simulator} did not finish every pass", err=True)
        raise typer.Exit(1)


def _meta_npus(path: Path) -> int | None:
    found = sidecar.parallel_of(sidecar.read(Path(f"{path}{sidecar.SUFFIX}"))).get("npus")
    return found if isinstance(found, int) and found > 0 else None


def _show_text(result: TextResult, path: Path, npus: int, fmt: str, every_layer: bool) -> None:
    if fmt == "json":
        document = {**dataclasses.asdict(result), "workload": str(path), "npus": npus}
        sys.stdout.write(json.dumps(document, indent=1) + "\n")
        return
    typer.echo(f"{result.simulator} on {path} ({npus} NPUs)")
    shown = result.layers if every_layer else sorted(result.layers, key=lambda x: -sum(x.exposed_us))[:10]
    typer.echo(f"{'layer':<40} {'compute us (fwd ig wg)':>28} {'exposed comm us (fwd ig wg)':>30}")
    for x in shown:
        compute = " ".join(f"{v:,.1f}" for v in x.compute_us)
        exposed = " ".join(f"{v:,.1f}" for v in x.exposed_us)
        typer.echo(f"{x.name[:40]:<40} {compute:>28} {exposed:>30}")
    if not every_layer and len(result.layers) > len(shown):
        typer.echo(
            f"(the {len(shown)} of {len(result.layers)} exposing the most communication; --layers: all)"
        )
    typer.echo(
        f"iteration: {result.total_us / 1e3:,.3f} ms: compute {result.compute_us / 1e3:,.3f} ms, "
        f"exposed communication {result.exposed_us / 1e3:,.3f} ms"
    )


def _log_text(path: Path) -> str:
    data, problem = read_binary(path)
    text = utf8(data)[0] if data is not None else None
    if text is None:
        _stop(f"cannot read --from-log {path}: {problem.message if problem else 'not text'}")
    return text


def _same_set(result: Result, log: Path, npus: int) -> None:
    """Refuse a log whose ranks are not all this trace set's: ASTRA-sim numbers a run's ranks 0 to
    N-1 (`sys[i]`), so a rank at N or above was run on another trace set (the 16 ranks of
    mixtral-tp1-pp2-ep4-vpp8.log read against 8 traces gave '16 of 8 ranks finished')."""
    foreign = sorted(r for r in result.ranks if r >= npus)
    if foreign:
        _stop(
            f"--from-log {log}: its ranks go up to {foreign[-1]}, this trace set has {npus} (0 to "
            f"{npus - 1}): the log of another trace set"
        )


def _rounded(row: Row, rated: bool) -> dict[str, object]:
    """A row as JSON: its TFLOP/s and MFU rounded once, as the iteration's are (2 and 4 places;
    astra2.rows keeps them whole, so the table's one decimal is of the same number as the
    iteration line's), or null where the times are not these traces' (`rated` False)."""
    tflops = round(row.tflops, 2) if rated else None
    mfu = round(row.mfu, 4) if rated and row.mfu is not None else None
    return {**dataclasses.asdict(row), "tflops": tflops, "mfu": mfu}


def _show(
    result: Result, planned: Planned, peak: float | None, fmt: str, *, by_stage: bool, rated: bool = True
) -> None:
    """The rows and the iteration; `rated` False (the ranks' GPU time is not the traces' compute:
    the FLOPs are these traces', the times maybe not) shows no TFLOP/s and no MFU ("-", null)."""
    from modtrans.simulate import achieved, rows

    shown = rows(result, planned, peak, by_stage=by_stage)
    rate = achieved(result, planned) if rated else None
    if fmt == "json":
        document = {
            "iteration_ns": result.iteration,
            "finished": result.finished,
            "tflops_per_gpu": None if rate is None else round(rate, 2),
            "mfu": round(rate * 1e12 / peak, 4) if peak and rate is not None else None,
            "replay_exact": rated,
            "rows": [_rounded(r, rated) for r in shown],
        }
        sys.stdout.write(json.dumps(document, indent=1) + "\n")
        return
    typer.echo(f"{'':>9} {'ranks':>5} {'wall ms':>12} {'compute ms':>11} {'comm ms':>10} ", nl=False)
    typer.echo(f"{'exposed ms':>11} {'TFLOP/s':>8} {'MFU':>6}")
    for row in shown:
        mfu = f"{row.mfu:.1%}" if row.mfu is not None else "-"
        tflops = f"{row.tflops:.1f}" if rated else "-"
        typer.echo(
            f"{row.label:>9} {row.ranks:>5} {row.wall / 1e6:>12.3f} {_ms(row.gpu):>11} {_ms(row.comm):>10} "
            f"{row.exposed / 1e6:>11.3f} {tflops:>8} {mfu:>6}"
        )
    utilisation = f", MFU {rate * 1e12 / peak:.1%}" if peak and rate is not None else ""
    rated_as = f"{rate:.1f} TFLOP/s per GPU" if rate is not None else "no TFLOP/s (see the warning)"
    typer.echo(
        f"iteration: {result.iteration / 1e6:,.3f} ms (the slowest rank's wall time); {rated_as}{utilisation}"
    )


def _ms(value: int | None) -> str:
    return "-" if value is None else f"{value / 1e6:.3f}"


def _stop(message: str) -> NoReturn:
    typer.echo(f"modtrans: {message}", err=True)
    raise typer.Exit(2)
