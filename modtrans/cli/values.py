"""The text forms of --input-shape and --input-value (modtrans/rules.py) for the commands that
take them outside the option table's Request (extract, inspect): a bad one is a usage error."""

from __future__ import annotations

from modtrans import rules
from modtrans.cli.common import _usage


def _shapes(specs: list[str] | None) -> dict[str, tuple[int, ...]]:
    """--input-shape NAME=1x3x224x224, each an input's whole shape."""
    try:
        return rules.shapes(specs or (), "--input-shape")
    except ValueError as error:
        _usage(str(error))


def _values(specs: list[str] | None) -> dict[str, float]:
    """--input-value NAME=V, each a finite number."""
    try:
        return rules.values(specs or (), "--input-value")
    except ValueError as error:
        _usage(str(error))
