"""`modtrans diff`: two workloads (or models) compared layer by layer."""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from modtrans import cost, pipeline, report
from modtrans.cli.common import (
    Array,
    Batch,
    BytesPerCycle,
    ClockGhz,
    Compute,
    ComputeModel,
    Dataflow,
    Device,
    InputShape,
    NoColor,
    ParamsOpt,
    TimeUnit,
    _usage,
    app,
    finite,
)
from modtrans.cli.values import _conventions_of, _cost, _shapes
from modtrans.fileio import STDIN_NAME
from modtrans.report import Format
from modtrans.strategy import Params
from modtrans.workload.parse import LineCache

if TYPE_CHECKING:
    from modtrans.diff import conventions
    from modtrans.diff.compare import WorkloadDiff


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
    ignore_header: Annotated[
        bool, typer.Option(help="Header lines (keyword, group, SimAI keys) are not a difference.")
    ] = False,
    like: Annotated[
        bool,
        typer.Option(
            help="Translate a model side with the reference's conventions (--params, --compute, names) "
            "as detected from the reference's content."
        ),
    ] = False,
    fmt: Annotated[
        Literal["text", "json", "github"],
        typer.Option("--format", "-f", help="A report, a JSON document or GitHub annotations."),
    ] = "text",
    max_rows: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Differing layers shown in text (0: all; default 100, or 10 when the two follow "
            "different conventions).",
        ),
    ] = None,
    params: ParamsOpt = Params.TRAINABLE,
    batch: Batch = None,
    input_shape: InputShape = None,
    compute: Compute = ComputeModel.ROOFLINE,
    device: Device = None,
    array: Array = None,
    dataflow: Dataflow = None,
    bytes_per_cycle: BytesPerCycle = None,
    time_unit: TimeUnit = cost.Unit.NS,
    clock_ghz: ClockGhz = 1.0,
    no_color: NoColor = False,
) -> None:
    """Compare two workloads layer by layer.

    Exit 0 equivalent, 1 different, 2 unreadable input.

    \b
    Examples:
      modtrans diff generated.txt Resnet50_DataParallel.txt
      modtrans diff resnet50 Resnet50_DataParallel.txt --like
      modtrans diff a.txt b.txt --fields comm --ignore-order --format json

    Layers pair by name, then by identical compared fields, then by position; moved blocks are
    reported as moves. Models (ONNX files, built-ins) are translated first with --params etc.
    """
    _refuse_trace_sets(first, reference)
    from modtrans import diff as comparison  # this command's own modules: not every command's
    from modtrans.diff import conventions

    try:
        chosen = comparison.parse_fields(fields)
    except ValueError as error:
        _usage(str(error))
    settings = _cost(device, array, dataflow, bytes_per_cycle, time_unit, clock_ghz)
    options = pipeline.Options(
        params=params, batch=batch, input_shapes=_shapes(input_shape), compute=compute, cost=settings
    )
    sides, gemms = _sides(first, reference, options, like, no_color)
    a, b = (side.workload for side in sides)
    assert a is not None
    assert b is not None
    if like and conventions.names_differ(a, b):
        ignore_names = True
    compared = comparison.Options(
        fields=chosen,
        rtol=rtol,
        atol=atol,
        ignore_order=ignore_order,
        ignore_names=ignore_names,
        ignore_header=ignore_header,
    )
    first, reference = (STDIN_NAME if spec == "-" else spec for spec in (first, reference))
    result = comparison.compare(a, b, compared)
    findings = conventions.explain(a, b, result)
    shown = Shown(
        first,
        reference,
        findings,
        _like_with_like(first, reference, findings) if findings else None,
        None if gemms is None else conventions.contradictions(result, b, gemms),
    )
    _print(result, shown, fmt, max_rows, no_color)
    raise typer.Exit(0 if result.equivalent else 1)


def _refuse_trace_sets(*specs: str) -> None:
    """Exit 2 naming the commands that read a trace set, when a side is one."""
    for spec in specs:
        if (prefix := _trace_set(spec)) is not None:
            what = "trace" if spec.endswith(".et") else "trace set"
            typer.echo(
                f"modtrans: {spec} is a Chakra {what}, not a workload: diff compares workloads and "
                f"models; `modtrans validate {prefix}` checks a trace set, `modtrans inspect {prefix}` "
                "shows its per-rank totals",
                err=True,
            )
            raise typer.Exit(2)


Gemms = dict[str, dict[str, "conventions.Gemms"]]


def _sides(
    first: str, reference: str, options: pipeline.Options, like: bool, no_color: bool
) -> tuple[list[pipeline.Side], Gemms | None]:
    """Both sides read or translated (with --like, the first with the reference's conventions),
    and the first side's GEMM shapes when it is a model; exit 2 when either cannot be had."""
    from modtrans.diff import conventions

    lines = LineCache()  # the two sides share the lines they have in common
    reference_side = pipeline.workload_or_model(reference, options, cache=lines)  # a model: as said
    if like and reference_side.workload is not None:  # the first side follows the reference
        params, compute, _ = _conventions_of(
            reference_side.workload, options.params, ComputeModel(options.compute)
        )
        options = dataclasses.replace(options, params=params, compute=compute)
    gemms: Gemms | None = None  # the first side's, when a model
    if pipeline.reads_as_workload(first):
        first_side = pipeline.workload_or_model(first, options, cache=lines)
    else:  # translated here: its IR's GEMM shapes find where the reference contradicts itself
        translated = pipeline.translate_checked(first, options)
        first_side = pipeline.Side(translated.workload, translated.diagnostics, lambda _: None)
        gemms = conventions.gemm_shapes(translated.ir) if translated.ir is not None else None
    sides = [first_side, reference_side]
    color = False if no_color else None
    # once each: an option that fits neither model (--device bad) is the same error on both sides
    problems = list(dict.fromkeys(d for side in sides for d in side.diagnostics if d.severity == 1))
    if problems or any(side.workload is None for side in sides):
        sources = {spec: side.line for spec, side in zip((first, reference), sides, strict=True)}
        report.emit(problems, Format.TEXT, stream=sys.stderr, sources=sources, color=color)
        raise typer.Exit(2)
    if stale := [d for side in sides for d in side.diagnostics if d.code == "F006"]:  # sidecar.py
        report.emit(stale, Format.TEXT, stream=sys.stderr, color=color)
    return sides, gemms


@dataclass(frozen=True)
class Shown:
    """What a diff report says beside the differences."""

    first: str
    reference: str
    findings: list[conventions.Finding]
    advice: str | None
    contradicted: conventions.Contradictions | None


def _print(result: WorkloadDiff, shown: Shown, fmt: str, max_rows: int | None, no_color: bool) -> None:
    from modtrans.diff import render as diff_render  # rich: only the command that prints with it

    first, reference, findings = shown.first, shown.reference, shown.findings
    if fmt == "json":
        document = diff_render.to_json(result, first=first, reference=reference)
        document["conventions"] = [{"difference": f.what, "option": f.option} for f in findings]
        document["compare_like_with_like"] = shown.advice
        document["reference_contradicts_itself"] = diff_render.contradictions_json(shown.contradicted)
        sys.stdout.write(json.dumps(document, indent=1) + "\n")
    elif fmt == "github":
        report.emit(diff_render.to_diagnostics(result, first=first), Format.GITHUB, stream=sys.stdout)
    else:
        console = report.console(sys.stdout, color=False if no_color else None)
        rows = max_rows if max_rows is not None else (10 if findings else 100)
        diff_render.render(
            result,
            console,
            first=first,
            reference=reference,
            max_rows=rows,
            findings=findings,
            advice=shown.advice,
            contradictions=shown.contradicted,
        )


def _trace_set(spec: str) -> str | None:
    """The prefix of the Chakra trace set `spec` names: a trace file (`*.et`) or a set's PREFIX
    that names no model or file itself; None when `spec` is something else."""
    from modtrans.chakra.read import prefix_of

    path = Path(spec)
    try:
        if path.suffix == ".et" and path.is_file():
            return _quoted(prefix_of(spec) or spec)
        if pipeline.model_file(spec) is None and Path(f"{spec}.0.et").is_file():
            return _quoted(spec)
    except OSError:  # a name the file system refuses: reading it says so
        return None
    return None


def _like_with_like(first: str, reference: str, findings: list[conventions.Finding]) -> str:
    """The command line that compares like with like: the model itself (named by the first side's
    .meta.json when the first side is a translated file) with the reference's conventions."""
    model = (
        first if pipeline.model_file(first) is not None and not pipeline.reads_as_workload(first) else None
    )
    if model is None:
        model = _translated_from(first)
    if model is not None:
        return f"modtrans diff {_quoted(model)} {_quoted(reference)} --like"
    flags = " ".join(f.option for f in findings if f.option == "--ignore-names")
    others = " ".join(f.option for f in findings if f.option and f.option != "--ignore-names")
    line = f"modtrans diff {_quoted(first)} {_quoted(reference)} {flags}".rstrip()
    if others:
        line += f"   # and translate the model again with {others} (or: modtrans translate MODEL --like REF)"
    return line


def _translated_from(path: str) -> str | None:
    """The model a workload file was translated from, as its .meta.json names it (if it resolves)."""
    try:
        meta = json.loads(Path(f"{path}.meta.json").read_text(encoding="utf-8"))
        name = str(meta["model"]["file"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return name if pipeline.model_file(name) is not None else None


def _quoted(text: str) -> str:
    import shlex

    return shlex.quote(text)
