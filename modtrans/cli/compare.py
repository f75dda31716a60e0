"""`modtrans diff`: two workloads (or models) compared layer by layer."""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from modtrans import report, table
from modtrans.cli.common import Command, NoColor, _refused, _usage, commands
from modtrans.cli.options import command, finite, given
from modtrans.cli.sides import like_with_like, refuse_trace_sets, sides
from modtrans.fileio import STDIN_NAME
from modtrans.report import Format
from modtrans.request import UsageError, request_of

if TYPE_CHECKING:
    from modtrans.diff import aicb, conventions
    from modtrans.diff.compare import Traffic, WorkloadDiff


def diff(
    ctx: typer.Context,
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
    no_color: NoColor = False,
    **values: Any,
) -> None:
    """Compare two workloads layer by layer.

    Exit 0 equivalent, 1 different, 2 unreadable input.

    \b
    Examples:
      modtrans translate resnet50 --params weights -o reference.txt
      modtrans translate resnet50 -o generated.txt
      modtrans diff generated.txt reference.txt
      modtrans diff resnet50 reference.txt --like
      modtrans diff generated.txt reference.txt --fields comm --ignore-order --format json

    Layers pair by name, then by identical compared fields, then by position; moved blocks are
    reported as moves. Models (ONNX files, built-ins) are translated first with --params, the
    layout (--tp ...) etc.; --like takes the reference's conventions and layout
    (model_parallel_NPU_group is --tp; SimAI's pp, ep, ga, all_gpus), as for an AICB workload:
    `modtrans diff gpt3-13b AICB_WORKLOAD.txt --like`.
    """
    refuse_trace_sets(first, reference)
    from modtrans import diff as comparison  # this command's own modules: not every command's
    from modtrans.diff import aicb, conventions

    try:
        chosen = comparison.parse_fields(fields)
    except ValueError as error:
        _usage(str(error))
    try:
        options = {**given(ctx, values, table.SIDE), "like": reference if like else None}
        request = request_of(first, options, "diff")
    except UsageError as error:
        raise _refused(error) from None
    pair, gemms = sides(first, reference, request, no_color)
    a, b = (side.workload for side in pair)
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
    named = aicb.named(a, b)
    shown = Shown(
        first,
        reference,
        findings,
        like_with_like(first, reference, findings, like) if findings else None,
        None if gemms is None else conventions.contradictions(result, b, gemms),
        tuple(named),
        aicb.residual(result.traffic, named) if named else None,
    )
    _print(result, shown, fmt, max_rows, no_color)
    raise typer.Exit(0 if result.equivalent else 1)


commands.command(cls=Command)(command(diff, table.SIDE))


@dataclass(frozen=True)
class Shown:
    """What a diff report says beside the differences."""

    first: str
    reference: str
    findings: list[conventions.Finding]
    advice: str | None
    contradicted: conventions.Contradictions | None
    named: tuple[aicb.Named, ...] = ()  # collectives a convention explains (the reference AICB's)
    unexplained: tuple[Traffic, ...] | None = None  # the traffic rows left once those are out


def _print(result: WorkloadDiff, shown: Shown, fmt: str, max_rows: int | None, no_color: bool) -> None:
    from modtrans.diff import render as diff_render  # rich: only the command that prints with it

    first, reference, findings = shown.first, shown.reference, shown.findings
    if fmt == "json":
        document = diff_render.to_json(result, first=first, reference=reference)
        document["conventions"] = [{"difference": f.what, "option": f.option} for f in findings]
        document["compare_like_with_like"] = shown.advice
        document["reference_contradicts_itself"] = diff_render.contradictions_json(shown.contradicted)
        document["named_communication"] = [dataclasses.asdict(n) for n in shown.named]
        unexplained = shown.unexplained
        document["unexplained_communication"] = (
            None if unexplained is None else [dataclasses.asdict(t) for t in unexplained]
        )
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
            named=shown.named,
            unexplained=shown.unexplained,
        )
