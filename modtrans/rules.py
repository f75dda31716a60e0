"""An option's value by its rule: a number within its bounds, one of its choices, or a list in
the text form the command line types (0,9,18; ROWSxCOLS; NAME=1x3x224x224; NAME=V; a sweep's
values 1,2,8:16 or on,off). The option
table (table.py) gives each option its rule; the command line's conversion (cli/convert.py) and
`modtrans.translate` (through request.request_of) both check it here, with the same messages."""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from modtrans.integers import integer, shown

SANE = 1e15
"""The largest magnitude a float option takes (no inf, nan, 1e400)."""


@dataclass(frozen=True)
class Option:
    """One option: its value's type (`kind`: int, float, bool, str, Path, an enum, a tuple of
    literal choices or Registered ones), help, help group, default and rule. `flags`: the command
    line's spellings (empty: --name, and --no-name for a bool); `text`: the text form the command
    line takes and the API accepts too (0,9,18), parsed to the value; `shown`: the default that
    applies where the default None says "not given" (--like may fill it; --help shows it).
    `layout`: giving it lays a transformer out (the LLM layout); `like`: --like fills it from a
    reference when not given; `diff`: diff's model side takes it too; `metavar`: --help's name for
    the value where its type says too little (a sweep's LIST)."""

    name: str
    kind: Any
    help: str
    group: str
    default: Any = None
    flags: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    text: Callable[[Any, str], Any] | None = None
    shown: Any = None
    layout: bool = False
    like: bool = False
    diff: bool = False
    many: bool = False
    metavar: str | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def choices(self) -> tuple[str, ...] | None:
        if isinstance(self.kind, tuple):
            return self.kind
        if isinstance(self.kind, Registered):
            return tuple(self.kind.names())
        if isinstance(self.kind, type) and issubclass(self.kind, enum.Enum):
            return tuple(str(m.value) for m in self.kind)
        return None


@dataclass(frozen=True)
class Registered:
    """The choices of an option that a registry holds (formats.formats: --format), read when
    the value is checked, so that a choice registered after the table was made is taken too."""

    names: Callable[[], list[str]]


class OptionError(ValueError):
    """A value an option's rule refuses; `str()` is `--flag: why`, as the command line says it."""


def insane(value: float) -> str | None:
    """Why a float option's `value` is refused (inf, nan, 1e400), or None."""
    if math.isfinite(value) and abs(value) <= SANE:
        return None
    return f"{value} is not a finite number of sane size"


def within(value: float, low: float | None, high: float | None) -> str | None:
    """Why `value` is outside [low, high], or None."""
    if low is not None and not value >= low:
        return f"{value} is less than {low}, the least it can be"
    if high is not None and not value <= high:
        return f"{value} is more than {high}, the most it can be"
    return None


_WHOLE = re.compile(r"([+-]?[0-9](?:_?[0-9])*)(?:\.0+)?")


def number(kind: type, given: Any, low: float | None = None, high: float | None = None) -> Any:
    """An int or float option's value from its text or a number, within [low, high]; raises
    ValueError saying why not. "4.0" is the integer 4, as typer's own conversion has it."""
    if isinstance(given, str):
        text = given.strip()
        if kind is int:
            whole = _WHOLE.fullmatch(text)
            if whole is None:
                raise ValueError(f"{given!r} is not an integer")
            given = integer(whole.group(1).replace("_", ""))
            if given is None:  # int() would refuse it with an interpreter setting in the message
                raise ValueError(f"{shown(text)} has more digits than any value it can take")
        else:
            try:
                given = float(text)
            except ValueError:
                raise ValueError(f"{given!r} is not a number") from None
    if isinstance(given, bool) or not isinstance(given, int | float):
        raise ValueError(f"{given!r} is not {'an integer' if kind is int else 'a number'}")
    if kind is int and not float(given).is_integer():
        raise ValueError(f"{given!r} is not an integer")
    given = int(given) if kind is int else float(given)
    why = within(given, low, high)
    if why is not None:
        raise ValueError(why)
    return given


def choice(given: Any, choices: tuple[str, ...], case_sensitive: bool = False) -> str:
    """The one of `choices` that `given` (a text, or an enum member) names, case ignored unless
    `case_sensitive` (an option of the table's never is); raises ValueError listing them."""
    text = str(getattr(given, "value", given))
    fold = (lambda t: t) if case_sensitive else str.lower
    found = next((c for c in choices if fold(c) == fold(text)), None)
    if found is None:
        raise ValueError(f"{text!r} is not one of {', '.join(map(repr, choices))}")
    return found


def value(row: Option, given: Any) -> Any:
    """`given` for the option `row` as a Request holds it (enums as their values, a text form
    parsed); raises OptionError naming the option for what its rule refuses."""
    if given is None:
        return None
    if row.text is not None and (
        isinstance(given, str) or (row.many and _texts(given)) or isinstance(row.text, Grid)
    ):
        try:
            return row.text(given, row.flag)
        except ValueError as error:
            raise OptionError(str(error)) from None
    kind, choices = row.kind, row.choices
    if choices is not None or kind in (int, float):
        try:
            found: Any = (
                choice(given, choices) if choices is not None else number(kind, given, row.low, row.high)
            )
        except ValueError as error:
            raise OptionError(f"{row.flag}: {error}") from None
        why = insane(found) if kind is float else None
        if why is not None:  # the command line's `finite` callback, after the conversion
            raise OptionError(f"{row.flag}: {why}")
        return found
    if kind is bool and not isinstance(given, bool):
        raise OptionError(f"{row.flag}: {given!r} is not a boolean (true or false)")
    return given


def _texts(given: Any) -> bool:
    return (
        isinstance(given, Iterable)
        and not isinstance(given, Mapping)
        and all(isinstance(g, str) for g in given)
    )


def indices(spec: str, option: str, expected: str = "layer indices like 0,9,18") -> tuple[int, ...]:
    """`0,9,18` as (0, 9, 18)."""
    try:
        found = tuple(int(x) for x in spec.replace(" ", "").split(",") if x and len(x) < 12)
        if len(found) == len([x for x in spec.split(",") if x.strip()]):
            return found
    except ValueError:
        pass
    raise ValueError(f"{option} {spec!r}: expected {expected}")


def array(spec: str, option: str) -> tuple[int, int]:
    """A systolic array's `ROWSxCOLS`."""
    try:
        rows, cols = (int(v) for v in spec.lower().split("x"))
    except ValueError:
        rows = cols = 0
    if rows < 1 or cols < 1:
        raise ValueError(f"{option} {spec!r}: expected ROWSxCOLS, e.g. 256x256")
    return rows, cols


def shapes(specs: str | Iterable[str], option: str) -> dict[str, tuple[int, ...]]:
    """Each `NAME=1x3x224x224`, an input's whole shape."""
    found: dict[str, tuple[int, ...]] = {}
    for spec in [specs] if isinstance(specs, str) else specs:
        name, _, dims = spec.rpartition("=")
        try:
            sizes = tuple(int(d) for d in dims.lower().split("x"))
        except ValueError:
            sizes = ()
        if not name or not sizes or any(v < 1 for v in sizes):
            raise ValueError(f"{option} {spec!r}: expected NAME=1x3x224x224 with positive sizes")
        found[name] = sizes
    return found


def values(specs: str | Iterable[str], option: str) -> dict[str, float]:
    """Each `NAME=V`, a scalar input's finite value."""
    found: dict[str, float] = {}
    for spec in [specs] if isinstance(specs, str) else specs:
        name, _, text = spec.rpartition("=")
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if not name or not math.isfinite(number):
            raise ValueError(f"{option} {spec!r}: expected NAME=V with V a number, e.g. sr=16000")
        found[name] = number
    return found


def integers(spec: str, option: str, low: int = 1, high: int | None = None) -> tuple[int, ...]:
    """`1,2,4,8`, `1:16` (inclusive) or both (`1,2,8:16`) as the sorted distinct values, each
    within [low, high] (a degree's size from 1; a ZeRO stage 0-3)."""
    found: set[int] = set()
    for part in spec.replace(" ", "").split(","):
        match = re.fullmatch(r"([0-9]{1,9})(?::([0-9]{1,9}))?", part)
        if match is None:
            raise ValueError(f"{option} {spec!r}: expected values like 1,2,4,8 or a range like 1:16")
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if first < low or last < first or last - first > 1 << 20:
            least = "positive values" if low == 1 else f"values from {low}"
            raise ValueError(f"{option} {spec!r}: {part} is not a range of {least}, low:high")
        found.update(range(first, last + 1))
    return _bounded(found, spec, option, low, high)


def _bounded(found: Iterable[int], spec: Any, option: str, low: int, high: int | None) -> tuple[int, ...]:
    out = tuple(sorted(set(found)))
    for v in out:
        why = within(v, low, high)
        if why is not None:
            raise ValueError(f"{option} {spec!r}: {why}")
    return out


@dataclass(frozen=True)
class Grid:
    """A sweep's list of integers (rules.integers) within [low, high], from its text (`1,2,8:16`)
    or, as the API takes it, the integers themselves: both held to the same bounds."""

    low: int = 1
    high: int | None = None

    def __call__(self, given: Any, option: str) -> tuple[int, ...]:
        if isinstance(given, str):
            return integers(given, option, self.low, self.high)
        values = (given,) if isinstance(given, int) else tuple(given)
        if any(isinstance(v, bool) or not isinstance(v, int) for v in values):
            raise ValueError(f"{option} {given!r}: expected integers like 1,2,4,8")
        if not values:
            raise ValueError(f"{option} {given!r}: expected at least one value")
        return _bounded(values, ",".join(map(str, values)), option, self.low, self.high)


def words(spec: str, option: str, choices: dict[str, Any]) -> tuple[Any, ...]:
    """`none,selective,full` or `on,off` as the values they name, in the order given."""
    out: list[Any] = []
    for part in spec.replace(" ", "").lower().split(","):
        if part not in choices:
            named = repr(part) if part else "an empty name"
            raise ValueError(f"{option} {spec!r}: {named} is not one of {', '.join(choices)}")
        if choices[part] not in out:
            out.append(choices[part])
    return tuple(out)


def switches(spec: str, option: str) -> tuple[bool, ...]:
    """`on,off` as (True, False)."""
    return words(spec, option, {"on": True, "off": False})
