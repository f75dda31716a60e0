"""typer, adapted through its internals where its public API has no means (the one-line usage
errors and the help groups are public: program.py's classes, given as `cls=`); each adaptation
leaves typer as it is when its internals are not where 0.29 has them.

- help labels: `N`, `TEXT`, `PATH`, `FILE...` for Python types (typer 0.29's parameters have no
  make_metavar to override; `metavar=` on every option of every command would be the public way);
- option values are converted without pydantic, which typer 0.29 imports for every command it
  runs and asks for an adapter per option: 40 ms and 13 ms of each command (translate has 40
  options). Our options are str, int, float, bool, Path, enums, Literal and lists of them; each is
  converted as typer's adapter would, and anything else keeps typer's own conversion.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from modtrans import rules


def _friendly_types() -> None:
    """--help shows `N`, `TEXT`, `PATH`, `FILE...` where typer would show Python types
    (`<int range>`, `<list[Path]>`); choice lists stay as typer shows them."""
    from typer import core

    original = getattr(getattr(core, "_TyperParameter", None), "display_type", None)
    if original is None:  # another typer: its own labels, nothing breaks
        return
    names = {"int": "N", "int range": "N", "float": "X", "float range": "X", "str": "TEXT", "path": "PATH"}
    labels = {"device": "NAME|FILE", "output": "FILE|-", "tcp": "HOST:PORT"}
    listed = dict.fromkeys(("gpus", "tp", "pp", "cp", "ep", "vpp", "micro_batch"), "LIST")
    by_command = {"sweep": {**listed, "output": "PREFIX", "simulate": "top:K|all|none"}}  # its own meanings

    def display_type(self: core._TyperParameter, ctx: object) -> str:
        own = by_command.get(getattr(getattr(ctx, "command", None), "name", None) or "", {})
        if self.name in own or self.name in labels:
            return own.get(self.name) or labels[self.name]
        label = str(original(self, ctx))
        inner = label[1:-1] if label.startswith("<") else label
        if inner.startswith("list[") and inner.endswith("]"):
            element = inner[5:-1]
            return f"{names.get(element.lower(), element)}..."
        return names.get(inner.lower(), inner)

    core._TyperParameter.display_type = display_type  # type: ignore[method-assign]


def _plain_conversion() -> None:
    try:
        from typer import core
        from typer._click.exceptions import BadParameter
        from typer._coercion import RuntimeParam
        from typer._param_types import coerce_cli_path
    except ImportError:  # another typer: its own conversion, nothing breaks
        return
    original = getattr(core._TyperParameter, "get_runtime_param", None)
    if original is None or not hasattr(RuntimeParam, "_coerce_value"):
        return

    @dataclass(frozen=True)
    class Plain(RuntimeParam):
        convert: Callable[[Any, Any, Any], Any]

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            try:
                return self.convert(value, param, ctx)
            except ValueError as error:
                raise BadParameter(str(error), ctx=ctx, param=param) from None

    def leaf(annotation: Any, info: Any) -> Callable[[Any, Any, Any], Any] | None:
        enumerated = isinstance(annotation, type) and issubclass(annotation, enum.Enum)
        if enumerated or get_origin(annotation) is Literal:
            kinds: Any = annotation  # an Enum class iterates over its members, aliases left out
            named = {str(c.value if enumerated else c): c for c in (kinds if enumerated else get_args(kinds))}
            sensitive = info.case_sensitive
            return lambda v, _p, _c: named[rules.choice(v, tuple(named), sensitive)]  # the API's rule
        if annotation is int or annotation is float:
            return functools.partial(_number, annotation, info.min, info.max)
        if annotation is bool:  # a flag's value is a bool already; an environment variable's is text
            return _boolean
        if annotation is str:
            return lambda v, _p, _c: v if isinstance(v, str) else str(v)
        if annotation is Path:  # typer's own checks (exists, readable ...), given a Path
            return lambda v, p, c: coerce_cli_path(Path(v), info, path_type=Path, param=p, ctx=c)
        return None

    def converter(descriptor: Any) -> Callable[[Any, Any, Any], Any] | None:
        info, annotation = descriptor.parameter_info, descriptor.annotation
        if descriptor.file_annotation is not None or info.parser is not None or info.clamp:
            return None
        if get_origin(annotation) is list:
            (element,) = get_args(annotation)
            one = leaf(element, info)
            return None if one is None else (lambda v, p, c: [one(x, p, c) for x in v])
        return leaf(annotation, info)

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None:
            descriptor = self.type_descriptor
            convert = converter(descriptor)
            if convert is None:
                return original(self)
            self._runtime_param = Plain(descriptor.parameter_info, descriptor.annotation, convert)
        return self._runtime_param

    core._TyperParameter.get_runtime_param = get_runtime_param  # type: ignore[method-assign]


_TRUE, _FALSE = {"1", "true", "t", "yes", "y", "on"}, {"", "0", "false", "f", "no", "n", "off"}


def _boolean(value: Any, _param: Any, _ctx: Any) -> Any:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise ValueError(f"{value!r} is not a boolean (true or false)")


def _number(kind: type, low: float | None, high: float | None, value: Any, _param: Any, _ctx: Any) -> Any:
    """An int or float option's value, within its min and max, by the API's rule (rules.number)."""
    return rules.number(kind, value, low, high)


_friendly_types()
_plain_conversion()
