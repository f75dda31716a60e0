"""A Chakra trace set as `inspect` and `simulate` read it: its PREFIX, files and .meta.json, each
trace decoded, its totals per stage or rank, its schedule drawn."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from modtrans import report, sidecar
from modtrans.cli.common import _usage
from modtrans.fileio import read_binary
from modtrans.report import Format

if TYPE_CHECKING:
    from modtrans.chakra.read import Trace


def inspect_traces(spec: Path, fmt: str, *, every_rank: bool = False, picture: Path | None = None) -> None:
    from modtrans.chakra.summary import lines, representatives, stages, summarize
    from modtrans.estimate.result import peak_of  # the peak% column's: the set's compute model's

    if fmt != "table":
        _usage(f"--format {fmt}: a trace set is shown as a table only")
    prefix, members, meta = trace_set(str(spec))
    firsts = representatives(members, _mesh(meta))
    chosen = members if every_rank else firsts
    traces = read_traces(chosen)
    if picture is not None:
        _draw(prefix, [t for t in traces if t.path in {str(p) for p in firsts}], meta, picture, members)
    broken = [t.problem for t in traces if t.problem is not None]
    report.emit(broken, Format.TEXT, stream=sys.stderr, color=False)
    rows = summarize(traces)
    if len(chosen) < len(members):
        typer.echo(f"{len(members)} ranks; the first of each pipeline stage (its ranks run one program):")
        typer.echo("--ranks shows every rank")
    per_stage = len(members) // len(chosen) if len(chosen) < len(members) else None
    typer.echo("\n".join([*lines(rows, peak_of(meta.get("compute"))), *stages(traces, rows, per_stage)]))
    raise typer.Exit(1 if broken else 0)


def trace_set(spec: str) -> tuple[str, list[Path], dict[str, Any]]:
    """A trace set's PREFIX, its files PREFIX.<rank>.et (exit 2 when there are none) and its
    .meta.json ({} without one: a set another tool wrote)."""
    from modtrans.chakra.read import prefix_of
    from modtrans.chakra.validate import expand

    prefix = prefix_of(spec) or spec
    members = next(iter(expand([Path(prefix)]).values()), [])
    if not members:
        _usage(f"{spec}: no trace files {prefix}.<rank>.et")
    return prefix, members, sidecar.read(sidecar.of_set(prefix))


def read_traces(paths: Sequence[Path]) -> list[Trace]:
    """Each file decoded; exit 2 at the first that cannot be read."""
    from modtrans.chakra.read import read
    from modtrans.progress import task as progress_task

    traces = []
    with report.status("reading the traces"), progress_task("reading", total=len(paths)) as advance:
        for path in paths:
            data, problem = read_binary(path)
            if data is None:
                _usage(problem.message if problem else str(path))
            traces.append(read(data, str(path)))
            advance()
    return traces


def _draw(
    prefix: str, firsts: Sequence[Trace], meta: Mapping[str, Any], target: Path, inputs: Sequence[Path]
) -> None:
    """The set's schedule with a free network (chakra/programs.py, plan/timeline.py), drawn."""
    from modtrans import picture
    from modtrans.chakra.programs import TICK_NS, ProgramsError, programs
    from modtrans.outputs import refuse_inputs, save
    from modtrans.plan.timeline import TimelineError, schedule
    from modtrans.request import UsageError

    llm, npus = sidecar.llm_of(meta), sidecar.parallel_of(meta).get("npus")
    try:
        refuse_inputs([target], inputs, force=False)
        ops, chunks = programs(firsts, _mesh(meta), llm)
        half = llm.get("ga", 0) // 2 if llm.get("schedule") == "dualpipe" else None
        drawn = schedule(ops, chunks, reverse_from=half)
        title = picture.title_of(Path(prefix).name, llm, npus)
        content = picture.draw(drawn, title, target, tick_ns=TICK_NS)
    except (ProgramsError, TimelineError, UsageError, picture.PictureError) as error:
        _usage(f"--timeline {target}: {error}")
    if problems := save([(target, content)]):
        _usage(problems[0].message)
    typer.echo(f"wrote {target}", err=True)


def _mesh(meta: Mapping[str, Any]) -> dict[str, int]:
    """The trace set's mesh from its .meta.json (axis -> ranks, the first the fastest), or {}."""
    mesh = sidecar.parallel_of(meta).get("mesh")
    return {k: v for k, v in mesh.items() if isinstance(v, int) and v > 0} if isinstance(mesh, dict) else {}
