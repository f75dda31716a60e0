"""`modtrans diff`: two workloads (or models) compared layer by layer."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from modtrans import cost, pipeline, report
from modtrans import diff as comparison
from modtrans.cli.common import (
    Array,
    Batch,
    BytesPerCycle,
    ClockGhz,
    Compute,
    Dataflow,
    Device,
    InputShape,
    NoColor,
    ParamsOpt,
    TimeUnit,
    _cost,
    _shapes,
    _usage,
    app,
    finite,
)
from modtrans.diff import render as diff_render
from modtrans.report import Format
from modtrans.strategy import Parallelism, Params


@app.command()
def diff(
    first: Annotated[
        str, typer.Argument(help="Workload file, ONNX file or built-in model.", show_default=False)
    ],
    reference: Annotated[str, typer.Argument(help="The reference (same kinds).", show_default=False)],
    fields: Annotated[
        str, typer.Option(help="comm, compute, update, all, or field names: wg_size,fwd_compute,...")
    ] = "all",
    rtol: Annotated[
        float, typer.Option(min=0, callback=finite, help="Relative tolerance against the reference.")
    ] = 0.0,
    atol: Annotated[float, typer.Option(min=0, callback=finite, help="Absolute tolerance.")] = 0.0,
    ignore_order: Annotated[bool, typer.Option(help="Moved layers are not a difference.")] = False,
    ignore_names: Annotated[bool, typer.Option(help="Pair layers by content and position only.")] = False,
    fmt: Annotated[str, typer.Option("--format", "-f", help="text, json or github.")] = "text",
    max_rows: Annotated[int, typer.Option(min=0, help="Differing layers shown in text (0: all).")] = 100,
    params: ParamsOpt = Params.TRAINABLE,
    batch: Batch = None,
    input_shape: InputShape = None,
    compute: Compute = "roofline",
    device: Device = None,
    array: Array = None,
    dataflow: Dataflow = None,
    bytes_per_cycle: BytesPerCycle = None,
    time_unit: TimeUnit = cost.Unit.NS,
    clock_ghz: ClockGhz = 1.0,
    no_color: NoColor = False,
) -> None:
    """Compare two workloads layer by layer; exit 0 equivalent, 1 different, 2 unreadable input.

    Layers pair by name, then by identical compared fields, then by position; moved blocks are
    reported as moves. Models (ONNX files, built-ins) are translated first with --params etc.
    """
    if fmt not in ("text", "json", "github"):
        _usage(f"--format must be text, json or github, not {fmt!r}")
    try:
        chosen = comparison.parse_fields(fields)
    except ValueError as error:
        _usage(str(error))
    settings = _cost(device, array, dataflow, bytes_per_cycle, time_unit, clock_ghz)
    options = pipeline.Options(Parallelism(), params, batch, _shapes(input_shape), None, compute, settings)
    sides = [pipeline.workload_or_model(spec, options) for spec in (first, reference)]
    problems = [d for side in sides for d in side.diagnostics if d.severity == 1]
    if problems or any(side.workload is None for side in sides):
        sources = {spec: side.line for spec, side in zip((first, reference), sides, strict=True)}
        report.emit(
            problems, Format.TEXT, stream=sys.stderr, sources=sources, color=False if no_color else None
        )
        raise typer.Exit(2)
    a, b = (side.workload for side in sides)
    assert a is not None
    assert b is not None
    result = comparison.compare(a, b, comparison.Options(chosen, rtol, atol, ignore_order, ignore_names))
    if fmt == "json":
        sys.stdout.write(
            json.dumps(diff_render.to_json(result, first=first, reference=reference), indent=1) + "\n"
        )
    elif fmt == "github":
        report.emit(diff_render.to_diagnostics(result, first=first), Format.GITHUB, stream=sys.stdout)
    else:
        console = report.console(sys.stdout, color=False if no_color else None)
        diff_render.render(result, console, first=first, reference=reference, max_rows=max_rows)
    raise typer.Exit(0 if result.equivalent else 1)
