"""Commands on models and the catalog: inspect, zoo list, fetch, cost list."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from modtrans import cost, inputs, pipeline, report, sidecar, zoo
from modtrans import fetch as fetching
from modtrans.cli.common import (
    Batch,
    Command,
    InputShape,
    InputValue,
    Model,
    NoColor,
    ParamsOpt,
    _usage,
    commands,
    cost_app,
    zoo_app,
)
from modtrans.cli.extract import ir_json
from modtrans.cli.values import _shapes, _values
from modtrans.cost import roofline
from modtrans.diagnostics import has_errors
from modtrans.fileio import read_binary
from modtrans.report import COLLAPSED, Format
from modtrans.strategy import Params

if TYPE_CHECKING:
    from modtrans.chakra.read import Trace


@commands.command(cls=Command)
def inspect(
    model: Model,
    fmt: Annotated[
        Literal["table", "json", "csv"],
        typer.Option("--format", "-f", help="A table, the IR as JSON, or CSV."),
    ] = "table",
    params: ParamsOpt = Params.TRAINABLE,
    all_layers: Annotated[bool, typer.Option("--all", help="Also list layers without parameters.")] = False,
    batch: Batch = None,
    input_shape: InputShape = None,
    input_value: InputValue = None,
    no_color: NoColor = False,
    ranks: Annotated[
        bool, typer.Option("--ranks", help="Traces: every rank, not one per pipeline stage.")
    ] = False,
    timeline: Annotated[
        Path | None,
        typer.Option(
            help="Traces: also draw the schedule as a picture (FILE.svg, or FILE.png), a lane per "
            "pipeline stage, with a free network.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Show a model's layers, or a Chakra trace set's totals per stage (per rank with --ranks).

    Per layer: parameters, dtype, bytes, output shape, FLOPs; then totals. For traces (a set's
    PREFIX or one of its .et files): per rank, compute time, FLOPs, bytes per collective and
    group, sends and receives.

    \b
    Examples:
      modtrans inspect resnet50
      modtrans inspect mobilenet_v2 --format csv --all
      modtrans translate gpt2 --format chakra-et --npus 4 -o traces/ && modtrans inspect traces/gpt2
    """
    from modtrans.chakra.read import is_trace_spec  # inspect's: not every command's

    if is_trace_spec(Path(model)):
        _inspect_traces(Path(model), fmt, every_rank=ranks, picture=timeline)
        return
    if timeline is not None:
        _usage(
            "--timeline draws a trace set's schedule: give its PREFIX (translate --timeline draws a model's)"
        )
    if pipeline.reads_as_workload(model):
        _inspect_workload(model, fmt)
        return
    with report.status(f"reading {model}"):
        shapes, values = _shapes(input_shape), _values(input_value)
        ir, found = pipeline.extract_checked(
            model, batch=batch, input_shapes=shapes, input_values=values, file_hash=False
        )
    report.emit(found, Format.TEXT, stream=sys.stderr, color=False if no_color else None, **COLLAPSED)
    if ir is None or has_errors(found):
        raise typer.Exit(report.exit_code(found) or 1)
    from modtrans.ir import render  # rich: only the command that prints with it

    selected = render.rows(ir, weights_only=params is Params.WEIGHTS, all_layers=all_layers)
    if fmt == "json":
        text = ir_json(ir, model, found)
        if text is None:
            report.emit(found, Format.TEXT, stream=sys.stderr, color=False if no_color else None, **COLLAPSED)
            raise typer.Exit(1)
        sys.stdout.write(text)
    elif fmt == "csv":
        sys.stdout.write(render.to_csv(selected))
    else:
        title = f"{ir.provenance.file} ({params.value})"
        render.print_table(ir, selected, title, color=False if no_color else None, width=None)


def _inspect_traces(spec: Path, fmt: str, *, every_rank: bool = False, picture: Path | None = None) -> None:
    from modtrans.chakra.summary import lines, representatives, stages, summarize

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
    typer.echo("\n".join([*lines(rows, _peak(meta)), *stages(traces, rows, per_stage)]))
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


def _inspect_workload(spec: str, fmt: str) -> None:
    """A workload text or JSON file: per layer, then totals (workload/summary.py)."""
    from modtrans.workload.load import load
    from modtrans.workload.summary import lines, summarize

    loaded = load(spec, takes=inputs.EITHER)
    workload = loaded.result.workload
    if workload is None:
        report.emit(loaded.result.diagnostics, Format.TEXT, stream=sys.stderr, color=False)
        raise typer.Exit(2)
    summary = summarize(workload)
    if fmt == "json":
        document = {
            "layers": list(summary.rows),
            "compute": summary.compute,
            "comm_bytes": summary.comm_bytes,
            "collectives": [
                dict(zip(("type", "group", "count", "bytes"), c, strict=True)) for c in summary.collectives
            ],
        }
        sys.stdout.write(json.dumps(document, indent=1) + "\n")
    elif fmt == "csv":
        import csv

        writer = csv.DictWriter(sys.stdout, fieldnames=list(summary.rows[0]) if summary.rows else ["layer"])
        writer.writeheader()
        writer.writerows(summary.rows)
    else:
        title = f"{loaded.path}: {workload.header.policy.value}, {len(workload.layers)} layers"
        typer.echo("\n".join(lines(summary, title)))


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


def _peak(meta: Mapping[str, Any]) -> float | None:
    """The device's BF16 peak FLOP/s from a trace set's .meta.json (its compute model's device;
    the peak Megatron-LM's MFU is stated against), None without one."""
    compute = meta.get("compute")
    peaks = compute.get("peak_flops") if isinstance(compute, dict) else None
    if not isinstance(peaks, dict):
        return None
    value = peaks.get("bfloat16") or peaks.get("default") or peaks.get("float")
    return float(value) if isinstance(value, int | float) and value > 0 else None


@zoo_app.command("list", cls=Command)
def zoo_list() -> None:
    """List built-in and fetchable models.

    \b
    Example:
      modtrans zoo list
    """
    for name in zoo.names():
        entry = zoo.get(name)
        assert entry is not None
        shapes = " ".join(f"{k}={'x'.join(map(str, v))}" for k, v in entry.input_shapes().items())
        typer.echo(f"{name:<14} {entry.description}  [{shapes}; from {entry.source}]")
    typer.echo("\nfetchable (modtrans fetch NAME):")
    for item in fetching.remotes():
        typer.echo(f"{item.name:<20} {item.bytes / 1e6:8.1f} MB  {item.description}")


@commands.command(cls=Command)
def fetch(
    name: Annotated[str, typer.Argument(help="A model listed by `modtrans zoo list`.", show_default=False)],
    cache: Annotated[
        Path | None, typer.Option(help="Cache folder (default: MODTRANS_CACHE or ~/.cache/modtrans).")
    ] = None,
    mirror: Annotated[
        str | None, typer.Option(help="Download from this origin instead of github.com.")
    ] = None,
) -> None:
    """Download a model from the ONNX Model Zoo.

    Into the cache, verified by SHA-256; then use its name as MODEL.

    \b
    Example:
      modtrans fetch mnist-8 && modtrans translate mnist-8
    """
    try:
        with report.status(f"fetching {name}"):
            path = fetching.fetch(name, cache=cache, mirror=mirror)
    except fetching.FetchError as error:
        typer.echo(f"modtrans: {error}", err=True)
        raise typer.Exit(2) from None
    typer.echo(str(path))


@cost_app.command("list", cls=Command)
def cost_list() -> None:
    """List compute models and device profiles.

    \b
    Example:
      modtrans cost list
    """
    for entry in cost.models():
        typer.echo(f"{entry.name:<20} {entry.summary}")
    typer.echo("\ndevice profiles (--device NAME, or a FILE.json per schemas/device.schema.json; gpu needs")
    typer.echo("a kernel calibration, marked *):")
    for key, dev in roofline.builtin_devices().items():
        peaks = ", ".join(f"{k} {v / 1e12:g} TFLOP/s" for k, v in dev.peak_flops.items())
        memory = dev.kernels.get("memory_bytes") if dev.kernels else None
        held = f"; {memory / 2**30:,.0f} GiB" if isinstance(memory, int) else ""
        mark = "*" if dev.kernels else " "
        typer.echo(f"{key:<7}{mark} {dev.name}: {peaks}; {dev.bandwidth / 1e9:g} GB/s{held}")
