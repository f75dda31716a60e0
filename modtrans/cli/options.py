"""The options of `translate` and a model side of `diff`, made from the option table
(modtrans/table.py): each row a typer option with the row's flags, type, default, bounds and help,
so that the command line and `modtrans.translate` cannot differ. A command declares its own
parameters (its arguments, how it prints) and takes the table's rows as keywords (`**given`)."""

from __future__ import annotations

import copy
import enum
import inspect
import types
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import typer

from modtrans import rules
from modtrans.rules import Option

F = TypeVar("F", bound=Callable[..., Any])


def finite(value: float | None) -> float | None:
    """Option callback: a float option takes finite values of sane size (no inf, nan, 1e400)."""
    why = None if value is None else rules.insane(value)
    if why is not None:
        raise typer.BadParameter(why)
    return value


_NAMES = {int: "N", float: "X", str: "TEXT", Path: "PATH"}
_LABELS = {"output": "FILE|-", "device": "NAME|FILE"}  # the table's rows that take more than their type says


def label(kind: Any, case_sensitive: bool = True) -> str | None:
    """--help's name for the value of an option or argument of type `kind`: N, X, TEXT, PATH,
    the choices (`a|b`, in lower case where the option ignores case, as it reads them), and
    `TEXT...` for a list; None for a flag, which takes no value."""
    if get_origin(kind) in (types.UnionType, Union):  # X | None: X
        kind = next((k for k in get_args(kind) if k is not type(None)), None)
    if get_origin(kind) is list:
        element = label(get_args(kind)[0], case_sensitive)
        return None if element is None else f"{element}..."
    if get_origin(kind) is Literal or (isinstance(kind, type) and issubclass(kind, enum.Enum)):
        names = [str(c.value if isinstance(c, enum.Enum) else c) for c in (get_args(kind) or kind)]
        return "|".join(names if case_sensitive else (n.lower() for n in names))
    return _NAMES.get(kind)


def _kind(row: Option) -> Any:
    """The row's type on the command line."""
    kind: Any = row.kind
    if row.text is not None:  # typed as text (0,9,18), parsed by the table's rule
        kind = list[str] if row.many else str
    elif row.choices is not None and not isinstance(kind, type):  # a tuple, or a registry's names
        kind = Literal.__getitem__(row.choices)
    return kind


def annotation(row: Option) -> Any:
    """The row as typer reads a parameter: its command-line type, Annotated with its typer.Option."""
    kind = _kind(row)
    return Annotated[kind | None if row.default is None else kind, option(row)]


def option(row: Option | str) -> Any:
    """The typer.Option of a row of the table (by name): its flags, help, bounds and choices."""
    if isinstance(row, str):
        from modtrans import table  # 70 ms: here, not where program.py reads label()

        row = table.BY_NAME[row]
    choices = row.choices is not None
    return typer.Option(
        *row.flags,
        help=row.help,
        min=row.low,
        max=row.high,
        callback=finite if row.kind is float else None,
        case_sensitive=not choices,
        metavar=row.metavar or _LABELS.get(row.name) or label(_kind(row), not choices),
    )


def _default(row: Option) -> Any:
    """The command line's default: the one that applies (shown by --help) where the table's None
    says "not given" (given() turns it back into None)."""
    return row.default if row.shown is None else row.shown


def given(ctx: typer.Context, values: dict[str, Any], rows: tuple[Option, ...]) -> dict[str, Any]:
    """The table's options among a command's `values`, each left at the default that applies
    (table.Option.shown) as None, "not given", the table's default."""
    found = {row.name: values[row.name] for row in rows}
    for row in rows:
        source = ctx.get_parameter_source(row.name)
        if row.shown is not None and (source is None or source.name == "DEFAULT"):
            found[row.name] = None
    return found


def command(function: F, rows: tuple[Option, ...]) -> F:
    """`function` (whose parameters are its own, then `**given`) with the table's `rows` as
    keyword parameters of its signature, where typer reads them: its arguments first, the rows,
    then its own options."""
    own = list(inspect.signature(function, eval_str=True).parameters.values())
    head = [p for p in own if p.default is inspect.Parameter.empty and p.kind is not p.VAR_KEYWORD]
    tail = [p for p in own if p.default is not inspect.Parameter.empty and p.kind is not p.VAR_KEYWORD]
    keyword = inspect.Parameter.KEYWORD_ONLY
    made = [inspect.Parameter(r.name, keyword, default=_default(r), annotation=annotation(r)) for r in rows]
    tail = [p.replace(kind=keyword) for p in tail]
    function.__signature__ = inspect.Signature([*head, *made, *tail])  # type: ignore[attr-defined]
    return function


def labelled(function: F) -> F:
    """`function` with a `metavar=` (label()) on each typer.Option of its signature that has none,
    so that --help names each value as the table's options do (N, TEXT, PATH...)."""
    signature = inspect.signature(function, eval_str=True)
    made = []
    for parameter in signature.parameters.values():
        found = get_origin(parameter.annotation) is Annotated and parameter.annotation.__metadata__
        info = next((m for m in found or () if isinstance(m, typer.models.OptionInfo)), None)
        kind = None if info is None else parameter.annotation.__origin__
        name = None if info is None or info.metavar is not None else _named(parameter.name, kind, info)
        if info is not None and name is not None:
            info = copy.copy(info)
            info.metavar = name
            parameter = parameter.replace(annotation=Annotated.__class_getitem__((kind, info)))  # type: ignore[attr-defined]
        made.append(parameter)
    function.__signature__ = signature.replace(parameters=made)  # type: ignore[attr-defined]
    return function


def _named(name: str, kind: Any, info: Any) -> str | None:
    """An option's metavar: its name's (_LABELS), or its type's; none for a flag."""
    if label(kind) is None:
        return None
    return _LABELS.get(name) or label(kind, info.case_sensitive)
