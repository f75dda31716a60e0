"""`modtrans inspect MODEL --tp ...`: one rank's memory per pipeline stage of the layout the
options give, as the translation computes it (strategy/llm/memory.py, the plan's memory): its
parameters, weights, gradients, optimizer state and activations, and what PyTorch's caching
allocator reserves where it keeps more. No workload is written."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

import typer

from modtrans import formats, pipeline, report, sidecar, table
from modtrans.cli.common import _refused, _usage
from modtrans.report import COLLAPSED, Format
from modtrans.request import UsageError, prepare, request_of

# The table's rows inspect takes: the layout and schedule, the sequence, and what the activations
# and the fit (X516) and the weights' bytes depend on.
ROWS = tuple(
    row
    for row in table.OPTIONS
    if row.group in (table.LAYOUT, table.SCHEDULE)
    or row.name in ("seq_len", "attention", "device", "precision")
)
_LAYOUT = {row.name for row in ROWS if row.layout}
GIB = 1 << 30


def asked(ctx: typer.Context) -> bool:
    """Whether the command line gives a layout option (a single rank's, --tp 1, too); another of
    ROWS (--seq-len, --device ...) without one is a usage error, not silently ignored."""
    given = [r for r in ROWS if (s := ctx.get_parameter_source(r.name)) is not None and s.name != "DEFAULT"]
    if given and not any(r.name in _LAYOUT for r in given):
        _usage(f"{given[0].flag}: the memory per stage takes it, with a layout option (--tp, --pp ...)")
    return bool(given)


def show(model: str, options: dict[str, Any], fmt: str, no_color: bool) -> None:
    """The model translated with `options` (the table's names), its memory per stage printed."""
    if fmt == "csv":
        raise _refused(UsageError("--format csv: the memory per stage is shown as a table or JSON"))
    try:
        prepared = prepare(request_of(model, options), say=lambda line: typer.echo(line, err=True))
        # as for traces: the plan, no workload text (whose dialect may not hold the layout, D310)
        planned = dataclasses.replace(prepared.options, format=formats.Format.CHAKRA_ET)
        with report.status(f"laying out {model}"):
            result = pipeline.translate_checked(model, planned)
    except UsageError as error:
        raise _refused(error) from None
    color = False if no_color else None
    report.emit(result.diagnostics, Format.TEXT, stream=sys.stderr, color=color, **COLLAPSED)
    stages = () if result.plan is None else result.plan.memory
    if not stages:
        code = report.exit_code(result.diagnostics)
        if not code:
            typer.echo(f"modtrans: {model}: its activations are not modelled: no memory per stage", err=True)
        raise typer.Exit(code or 1)
    if fmt == "json":
        sys.stdout.write(json.dumps(sidecar.memory(stages), indent=1) + "\n")
    else:
        typer.echo("\n".join(_lines(stages, result.plan.npus if result.plan else 1)))
    raise typer.Exit(report.exit_code(result.diagnostics))


def _lines(stages: Any, npus: int) -> list[str]:
    """A row per pipeline stage: one rank's parameters and GiB by part, and what the caching
    allocator reserves where it keeps more than the peak (StageMemory.reserved)."""
    head: tuple[str, ...] = (
        "stage",
        "parameters",
        "weights",
        "gradients",
        "optimizer",
        "activations",
        "total GiB",
    )
    parts: tuple[str, ...] = ("weights", "gradients", "optimizer", "activations", "total")
    if any(m.cached for m in stages):
        head, parts = (*head, "reserved GiB"), (*parts, "reserved")
    rows = [
        (str(s), f"{m.parameters:,}", *(f"{getattr(m, p) / GIB:.2f}" for p in parts))
        for s, m in enumerate(stages)
    ]
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    title = f"{npus} rank{'s' if npus != 1 else ''}; one rank's memory per pipeline stage:"
    return [title, *("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in (head, *rows))]
