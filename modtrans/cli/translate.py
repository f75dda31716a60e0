"""`modtrans translate`: the option table's options (modtrans/table.py) made a Request by the
library's rules (modtrans/request.py), the translation and writers (modtrans/api.py) run, what was
written said and the findings reported."""

from __future__ import annotations

import sys
from typing import Any

import typer

from modtrans import api, report, table
from modtrans.cli.common import Command, Model, NoColor, Quiet, _refused, commands
from modtrans.cli.options import command, given
from modtrans.outputs import said
from modtrans.report import COLLAPSED, Format
from modtrans.request import UsageError, prepare, request_of


def translate(
    ctx: typer.Context, model: Model, quiet: Quiet = False, no_color: NoColor = False, **values: Any
) -> None:
    """Translate a model into a workload.

    An ONNX file, a built-in architecture or a fetched model, into a workload file, workload JSON
    or Chakra traces.

    \b
    Examples:
      modtrans translate resnet50 -o resnet50.txt
      modtrans translate resnet50 --like resnet50.txt -o generated.txt
      modtrans translate gpt2 -p HYBRID_TRANSFORMER --npus 8 --model-parallel-group 4
      modtrans translate resnet50 --batch 32 --compute roofline --device h100
      modtrans translate llama-3-8b --tp 4 --pp 2 --dp 2 --dialect simai -o llama.txt
      modtrans translate resnet50 --format chakra-et --npus 8 -o traces/
    """
    try:
        request = request_of(model, given(ctx, values, table.OPTIONS))  # modtrans.translate's rules
        prepared = prepare(request, say=lambda line: _say(line, quiet))
        with report.status(f"translating {model}", quiet=quiet):
            result = api.run(prepared)
            result = api.write(result, model, force=request.force)
    except UsageError as error:
        raise _refused(error) from None
    if result.written and not quiet:
        typer.echo(said(result.written), err=True)
    if prepared.output.traces:
        code = report.exit_code(result.diagnostics, strict=request.strict) or (0 if result.files else 1)
    else:
        if result.text is not None and request.output in (None, "-"):
            sys.stdout.write(result.text)
        code = report.exit_code(result.diagnostics) or (0 if result.text is not None else 1)
    color = False if no_color else None
    report.emit(result.diagnostics, Format.TEXT, stream=sys.stderr, color=color, **COLLAPSED)
    raise typer.Exit(code)


commands.command(cls=Command)(command(translate, table.OPTIONS))


def _say(line: str, quiet: bool) -> None:
    """A note of the request's rules: warnings always, what --like took unless `quiet`."""
    if not quiet or line.startswith("modtrans: warning:"):
        typer.echo(line, err=True)
