"""Option and argument values converted by the option rules (rules.number, rules.choice) rather
than by typer's adapters: typer 0.29 imports pydantic for the first value it converts (53 ms of
CPU) and builds a pydantic adapter for each parameter (63 ms for 40, translate's count), and
`parser=`, its public way to convert, still builds one each. Without this module `translate` took
104 ms and `validate` 78 ms more CPU (best of 7, the two trees interleaved, 2-core VM; with it
they cost what typer's internals patched did). Our parameters are str, int, float, bool, Path,
enums, Literals and lists of them; each is converted as typer's adapter would convert it
(tests/test_cli_conversion.py), and any other keeps typer's conversion.

Through typer's public classes only: program.Command and program.Program (given as `cls=`) make
each parameter they can convert a subclass of typer.core.TyperOption or TyperArgument whose
process_value (click's hook for a parameter's value) converts it here.
"""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import typer
from typer.core import TyperArgument, TyperOption

from modtrans import rules

Convert = Callable[[Any], Any]


class _Option(TyperOption):
    convert: Convert

    def process_value(self, ctx: Any, value: Any) -> Any:
        return _value(self, ctx, value, super().process_value)


class _Argument(TyperArgument):
    convert: Convert

    def process_value(self, ctx: Any, value: Any) -> Any:
        return _value(self, ctx, value, super().process_value)


def _value(param: Any, ctx: Any, value: Any, typers: Callable[[Any, Any], Any]) -> Any:
    """The parameter's value converted, checked and passed to its callback, as typer's
    process_value does; a missing required one is `typers` to report (its message)."""
    if value is None:
        value = () if param.multiple or param.nargs == -1 else None
    else:
        try:
            value = param.convert(value)
        except ValueError as error:
            raise typer.BadParameter(str(error), ctx=ctx, param=param) from None
    if param.required and param.value_is_missing(value):
        return typers(ctx, value)
    return value if param.callback is None else param.callback(ctx, param, value)


def plain(command: Any) -> None:
    """Each parameter of `command` (a click command typer made) that converter() can convert,
    made one that converts its value without typer's adapters."""
    if command.callback is None:
        return
    signature = inspect.signature(command.callback, eval_str=True).parameters
    for param in command.params:
        declared = signature.get(param.name)
        made = _Option if type(param) is TyperOption else _Argument if type(param) is TyperArgument else None
        if declared is None or made is None or get_origin(declared.annotation) is not Annotated:
            continue
        kind, *metadata = get_args(declared.annotation)
        info = next((m for m in metadata if isinstance(m, typer.models.ParameterInfo)), None)
        convert = None if info is None else converter(kind, info)
        if convert is not None:
            _converting(param, made, convert)


def flag(option: Any) -> Any:
    """A flag typer made (--help: click's get_help_option), converting as plain() makes the others."""
    if type(option) is TyperOption:
        _converting(option, _Option, _boolean)
    return option


def _converting(param: Any, made: type, convert: Convert) -> None:
    """`param` made one of our subclasses (its class's layout: no copy of typer's state)."""
    param.__class__ = made
    param.convert = convert


def converter(kind: Any, info: Any) -> Convert | None:
    """How a value of type `kind` (the parameter's annotation, `X | None` read as X) is
    converted, with the bounds and case rule of its typer.Option `info`; None: typer's way."""
    if info.parser is not None or info.clamp or info.exists or info.resolve_path or info.allow_dash:
        return None
    if type(None) in get_args(kind):
        (kind,) = [k for k in get_args(kind) if k is not type(None)] or [None]
    if get_origin(kind) is list:
        one = _leaf(get_args(kind)[0], info)
        return None if one is None else (lambda values: [one(v) for v in values])
    return _leaf(kind, info)


def _leaf(kind: Any, info: Any) -> Convert | None:
    enumerated = isinstance(kind, type) and issubclass(kind, enum.Enum)
    if enumerated or get_origin(kind) is Literal:
        named = {str(c.value if enumerated else c): c for c in (kind if enumerated else get_args(kind))}
        return lambda v: named[rules.choice(v, tuple(named), info.case_sensitive)]  # the API's rule
    if kind is int or kind is float:
        return functools.partial(rules.number, kind, low=info.min, high=info.max)
    if kind is bool:  # a flag's value is a bool already; an environment variable's is text
        return _boolean
    if kind is str:
        return lambda v: v if isinstance(v, str) else str(v)
    if kind is Path:
        return lambda v: v if isinstance(v, Path) else Path(v)
    return None


_TRUE, _FALSE = {"1", "true", "t", "yes", "y", "on"}, {"", "0", "false", "f", "no", "n", "off"}


def _boolean(value: Any) -> bool:
    """A flag's value, or a boolean's text as typer reads it."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise ValueError(f"{value!r} is not a boolean (true or false)")
