"""`modtrans extract`: a model's intermediate document (IR)."""

from __future__ import annotations

from typing import Annotated

import typer

from modtrans import pipeline, report
from modtrans.cli.common import Command, Model, NoColor, Quiet, _finish, commands
from modtrans.cli.options import option
from modtrans.cli.values import _shapes, _values
from modtrans.diagnostics import Diagnostic, DiagnosticError, has_errors
from modtrans.ir import document
from modtrans.ir.document import ModelIR
from modtrans.strategy import Params

Batch = Annotated[int | None, option("batch")]
InputShape = Annotated[list[str] | None, option("input_shape")]
InputValue = Annotated[list[str] | None, option("input_value")]
ParamsOpt = Annotated[Params, option("params")]
Output = Annotated[str | None, option("output")]
Force = Annotated[bool, option("force")]
FullHash = Annotated[bool, option("full_hash")]
Precision = Annotated[str | None, option("precision")]
"""The option table's rows (modtrans/table.py) that extract takes, and inspect too."""


@commands.command(cls=Command)
def extract(
    model: Model,
    output: Output = None,
    batch: Batch = None,
    input_shape: InputShape = None,
    input_value: InputValue = None,
    precision: Precision = None,
    no_hash: Annotated[
        bool, typer.Option("--no-hash", help="No digest of the file in the provenance.")
    ] = False,
    full_hash: FullHash = False,
    force: Force = False,
    quiet: Quiet = False,
    no_color: NoColor = False,
) -> None:
    """Extract a model's intermediate document (IR).

    The IR (schemas/model-ir.schema.json) of an ONNX file or built-in; weights are never read.

    \b
    Examples:
      modtrans extract resnet50 -o resnet50.ir.json
      modtrans extract mobilenet_v2 --input-shape input=8x3x224x224
    """
    shapes = _shapes(input_shape)
    with report.status(f"reading {model}"):
        ir, found = pipeline.extract_checked(
            model,
            batch=batch,
            input_shapes=shapes,
            input_values=_values(input_value),
            file_hash=not no_hash,
            full_hash=full_hash,
            precision=precision,
        )
    text = None if ir is None or has_errors(found) else ir_json(ir, model, found)
    _finish(found, text, output, pipeline.inputs_of(model), force, no_color, quiet=quiet)


def ir_json(ir: ModelIR, model: str, found: list[Diagnostic]) -> str | None:
    """The IR as JSON; None (the error added to `found`) when it cannot be written."""
    try:
        return document.dumps(ir, path=model)
    except DiagnosticError as error:  # a ModTrans bug: report it, write nothing
        found += error.diagnostics
        return None
