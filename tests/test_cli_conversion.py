"""cli/convert.py converts option values without pydantic, through typer's public classes. On every
option and argument of every command (--help too), and on values a user types (and mistypes), it
accepts what typer 0.29's own pydantic adapters accept, gives the same value, and refuses what they
refuse: typer's adapters, read here through its internals, are the reference."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer import _coercion, core
from typer._click.exceptions import BadParameter

from modtrans.cli import app

_SAMPLES: dict[type, list[Any]] = {
    int: [
        "4",
        " 4",
        "+4",
        "-3",
        "0",
        "4.0",
        "007",
        "abc",
        "1.5",
        "1e3",
        "",
        "4_000",
        "4__0",
        "_4",
        "\u0664",
        "4.",
        ".0",
        "99999999999999999999",
    ],
    float: ["1.5", " 2", "1e3", "-0", "inf", "nan", "1e400", "abc", "", "0x10", "1_0.5"],
    str: ["text", "", " spaced ", "ünïcode"],
    bool: [True, False, "true", "False", "yes", "0", "on", "maybe"],
}


def _parameters() -> list[Any]:
    found: list[core._TyperParameter] = []
    pending = [typer.main.get_command(app)]
    while pending:
        command = pending.pop()
        pending.extend(getattr(command, "commands", {}).values())
        found.extend(p for p in command.params if isinstance(p, core._TyperParameter))
        with typer.Context(command) as ctx:
            found.extend(p for p in [command.get_help_option(ctx)] if p is not None)
    return found


def _outcome(runtime: Any, param: Any, value: Any) -> tuple[str, Any]:
    try:
        return "ok", runtime.coerce(value, param=param, ctx=None)
    except BadParameter:
        return "refused", None


def _ours(param: Any, value: Any) -> tuple[str, Any]:
    try:
        return "ok", param.convert(value)
    except ValueError:
        return "refused", None


def _samples(param: Any, tmp: Path) -> list[Any]:
    annotation = param.type_descriptor.annotation
    element = (
        getattr(annotation, "__args__", (annotation,))[0]
        if str(annotation).startswith("list[")
        else annotation
    )
    if element is Path:
        (tmp / "file").write_text("x")
        values: list[Any] = [str(tmp / "file"), str(tmp / "missing"), str(tmp), "-"]
    elif isinstance(element, type) and issubclass(element, enum.Enum):
        first = next(iter(element))
        values = [first.value, str(first.value).upper(), str(first.value).lower(), "nonsense", first]
    elif str(element).startswith("typing.Literal"):
        values = [*element.__args__, "nonsense", str(element.__args__[0]).upper()]
    else:
        values = list(_SAMPLES[element])
    return [[v] if element is not annotation else v for v in values]


def test_every_option_converts_as_typers_own_adapters_do(tmp_path: Path) -> None:
    checked = 0
    for param in _parameters():
        descriptor = param.type_descriptor
        assert type(param).__name__ in ("_Option", "_Argument"), (param.name, descriptor.annotation)
        theirs = _coercion.build_runtime_param(descriptor)
        for value in _samples(param, tmp_path):
            expected = _outcome(theirs, param, value)
            assert _ours(param, value) == expected, (param.name, value, expected)
            checked += 1
    assert checked > 300


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("translate", "gpt2", "--npus", "abc"), "modtrans: --npus: 'abc' is not an integer"),
        (("translate", "gpt2", "--npus", "0"), "modtrans: --npus: 0 is less than 1, the least it can be"),
        (("translate", "gpt2", "--zero", "4"), "modtrans: --zero: 4 is more than 3, the most it can be"),
        (("diff", "--rtol", "x", "a", "b"), "modtrans: --rtol: 'x' is not a number"),
        (
            ("translate", "gpt2", "--params", "all"),
            "modtrans: --params: 'all' is not one of 'weights', 'trainable' (see",
        ),
    ],
)
def test_a_refused_value_says_why_on_one_line(args: tuple[str, ...], message: str) -> None:
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 2
    assert result.output.startswith(message), result.output
    assert len(result.output.strip().splitlines()) == 1
