"""Option values parsed for the library: --array, --input-shape, --input-value, lists of indices;
whether an option was given (the library takes a default not given as None)."""

from __future__ import annotations

import math
import sys
from typing import Annotated

import typer

from modtrans.cli.common import _usage

InputValue = Annotated[
    list[str] | None,
    typer.Option(
        "--input-value",
        help="NAME=V: a scalar input's value (repeatable), so that an If on it takes one branch "
        "(Silero VAD's sr=16000) where otherwise both are costed (X513).",
        show_default=False,
    ),
]


def _array(array: str | None) -> tuple[int, int] | None:
    """--array ROWSxCOLS."""
    if array is None:
        return None
    try:
        rows, cols = (int(v) for v in array.lower().split("x"))
    except ValueError:
        rows = cols = 0
    if rows < 1 or cols < 1:
        _usage(f"--array {array!r}: expected ROWSxCOLS, e.g. 256x256")
    return rows, cols


def _indices(
    spec: str | None, option: str, expected: str = "layer indices like 0,9,18"
) -> tuple[int, ...] | None:
    if spec is None:
        return None
    try:
        values = tuple(int(x) for x in spec.replace(" ", "").split(",") if x and len(x) < 12)
        if len(values) != len([x for x in spec.split(",") if x.strip()]):
            raise ValueError(spec)
        return values
    except ValueError:
        _usage(f"{option} {spec!r}: expected {expected}")


def _shapes(specs: list[str] | None) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs or ():
        name, _, dims = spec.rpartition("=")
        try:
            values = tuple(int(d) for d in dims.lower().split("x"))
        except ValueError:
            values = ()
        if not name or not values or any(v < 1 for v in values):
            _usage(f"--input-shape {spec!r}: expected NAME=1x3x224x224 with positive sizes")
        shapes[name] = values
    return shapes


def _values(specs: list[str] | None) -> dict[str, float]:
    """--input-value NAME=V, each a finite number."""
    values: dict[str, float] = {}
    for spec in specs or ():
        name, _, text = spec.rpartition("=")
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not name or not math.isfinite(value):
            _usage(f"--input-value {spec!r}: expected NAME=V with V a number, e.g. sr=16000")
        values[name] = value
    return values


def _given(name: str) -> bool:
    """Whether the user gave the parameter `name` (its Python name: "time_unit"), not its default."""
    try:
        from typer._click.core import ParameterSource
        from typer._click.globals import get_current_context
    except ImportError:  # another typer: the command line itself
        option = "--" + name.replace("_", "-")
        return any(arg == option or arg.startswith(f"{option}=") for arg in sys.argv[1:])
    context = get_current_context(silent=True)
    source = context.get_parameter_source(name) if context is not None else None
    return source is not None and source is not ParameterSource.DEFAULT
