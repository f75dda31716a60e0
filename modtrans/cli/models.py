"""Commands on models and the catalog: inspect, zoo list, fetch, cost list."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from modtrans import cost, inputs, pipeline, report, zoo
from modtrans import fetch as fetching
from modtrans.cli import memory
from modtrans.cli.common import Command, Model, NoColor, _usage, commands, cost_app, zoo_app
from modtrans.cli.extract import Batch, InputShape, InputValue, ParamsOpt, ir_json
from modtrans.cli.options import command, given
from modtrans.cli.traces import inspect_traces
from modtrans.cli.values import _shapes, _values
from modtrans.cost import roofline
from modtrans.diagnostics import has_errors
from modtrans.report import COLLAPSED, Format
from modtrans.strategy import Params


def inspect(
    ctx: typer.Context,
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
    **values: Any,
) -> None:
    """Show a model's layers, or a Chakra trace set's totals per stage (per rank with --ranks).

    Per layer: parameters, dtype, bytes, output shape, FLOPs; then totals. With a layout option
    (--tp, --pp, --dp, --ep, --cp ...; --tp 1 for one rank): one rank's memory per pipeline stage,
    as translate computes it. For traces (a set's PREFIX or one of its .et files): per rank,
    compute time, FLOPs, bytes per collective and group, sends and receives.

    \b
    Examples:
      modtrans inspect resnet50
      modtrans inspect mobilenet_v2 --format csv --all
      modtrans inspect llama-3-8b --tp 2 --pp 2 --dp 2 --recompute selective
      modtrans translate gpt2 --format chakra-et --npus 4 -o traces/ && modtrans inspect traces/gpt2
    """
    from modtrans.chakra.read import is_trace_spec  # inspect's: not every command's

    if is_trace_spec(Path(model)):
        inspect_traces(Path(model), fmt, every_rank=ranks, picture=timeline)
        return
    if timeline is not None:
        _usage(
            "--timeline draws a trace set's schedule: give its PREFIX (translate --timeline draws a model's)"
        )
    if memory.asked(ctx):
        inputs_ = {"params": params, "batch": batch, "input_shape": input_shape, "input_value": input_value}
        memory.show(model, {**given(ctx, values, memory.ROWS), **inputs_}, fmt, no_color)
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


commands.command(cls=Command)(command(inspect, memory.ROWS))


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
        shapes = " ".join(f"{k}={'x'.join(map(str, v))}" for k, v in entry.shapes.items())
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
