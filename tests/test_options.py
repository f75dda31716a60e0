"""One option table (modtrans/table.py): `modtrans translate`'s options as the click command typer
builds reads them, `modtrans.translate`'s keywords and the Request's fields are one set, with the
same name, type, default and rule; a value a rule refuses is refused alike by both."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest
import typer
from typer.testing import Result

import modtrans
from modtrans import table
from modtrans.cli import app
from modtrans.diagnostics import DiagnosticError
from modtrans.request import Request, UsageError
from modtrans.rules import Option
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm.options import Recompute, Schedule

Run = Callable[..., Result]

OWN = {"model", "quiet", "no_color", "help", "ctx"}
"""translate's parameters that are the command line's own: the model argument, how it prints."""


def _command(name: str) -> Any:
    """The command typer builds (its click, vendored in typer 0.29: read through attributes)."""
    group: Any = typer.main.get_command(app)
    return group.commands[name]


def _cli() -> dict[str, Any]:
    return {p.name: p for p in _command("translate").params if p.name not in OWN and p.name is not None}


def _api() -> dict[str, inspect.Parameter]:
    return {n: p for n, p in inspect.signature(modtrans.translate).parameters.items() if n != "model"}


def test_translate_the_api_and_the_request_take_one_set_of_options() -> None:
    """A bijection: every option of the command is a keyword of the API and a Request field, and back."""
    rows = {row.name for row in table.OPTIONS}
    assert set(_cli()) == rows
    assert set(_api()) == rows
    assert {f.name for f in dataclasses.fields(Request)} - {"model"} == rows


def test_the_issues_options_are_keywords_of_the_api(tmp_path: Path) -> None:
    """The issue's example: cp raised TypeError, as overlap_grad_reduce, the capacity factor and
    the rest of those the API had not listed would have."""
    result = modtrans.translate(
        "llama-3-8b", tp=2, cp=2, seq_len=1024, format="chakra-et", output=f"{tmp_path}/llama"
    )
    assert result.plan is not None
    assert result.plan.npus == 4
    assert json.loads((tmp_path / "llama.et-meta.json").read_text())["parallel"]["llm"]["cp"] == 2
    given = {
        "overlap_grad_reduce": True,
        "make_vocab_size_divisible_by": 64,
        "attention": "eager",
        "efficiency": "0.9",
        "per_expert": False,
        "dp": 2,
    }
    assert modtrans.translate("gpt2", **given, dialect="simai").workload is not None
    with pytest.raises(DiagnosticError, match="X501 --moe-expert-capacity-factor"):  # reached the model
        modtrans.translate("gpt2", tp=2, moe_expert_capacity_factor=1.5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'virtual_stages'"):
        modtrans.translate("gpt2", virtual_stages=2)


def _kind(param: Any) -> Any:
    """What the command typer built takes: a type, or the choices (lower case). typer 0.29 keeps
    the annotation it read (type_descriptor); click's own parameters a ParamType (type)."""
    described = getattr(param, "type_descriptor", None)
    kind = described.annotation if described is not None else param.type
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return tuple(str(m.value).lower() for m in kind)
    if get_origin(kind) is Literal:
        return tuple(str(c).lower() for c in get_args(kind))
    if getattr(kind, "choices", None) is not None:
        return tuple(str(c).lower() for c in kind.choices)
    if getattr(param, "is_flag", False):
        return bool
    if get_origin(kind) is list:
        return get_args(kind)[0]
    if isinstance(kind, type):
        return kind
    found = {"integer": int, "integer range": int, "float": float, "float range": float, "path": Path}
    return found.get(kind.name, str)


def _value(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


@pytest.mark.parametrize("row", table.OPTIONS, ids=lambda row: row.name)
def test_an_option_has_one_type_default_and_bounds(row: Option) -> None:
    """The click parameter typer built, the API's keyword and the Request's field agree with the row."""
    param, keyword = _cli()[row.name], _api()[row.name]
    field = next(f for f in dataclasses.fields(Request) if f.name == row.name)
    assert keyword.default == field.default == row.default
    choices = row.choices
    if row.text is not None:  # typed as text, the table's rule parses it
        assert _kind(param) is str
        assert param.multiple is row.many
    elif choices is not None:
        assert _kind(param) == tuple(c.lower() for c in choices)
    else:
        assert _kind(param) is row.kind
    default = _value(param.default)
    assert default == (row.default if row.shown is None else _value(row.shown)) or (
        row.default is None and default in (None, ())
    )
    assert row.flag in getattr(param, "opts", ()) + getattr(param, "secondary_opts", ()) or (
        row.flags and row.flags[0].startswith(row.flag + "/")
    )
    bounds = getattr(param, "min", None), getattr(param, "max", None)
    assert bounds in ((row.low, row.high), (None, None))  # typer's range, or our conversion's


def _bad(row: Option) -> list[str]:
    """Values the row's rule refuses, as the command line types them."""
    bad = []
    if row.low is not None:
        bad.append(str(int(row.low) - 1 if row.kind is int else 0))
    if row.high is not None:
        bad.append(str(int(row.high) + 1))
    if row.kind in (int, float) and row.text is None:
        bad += ["many", "inf"] if row.kind is float else ["many", "2.5"]
    if row.choices is not None:
        bad.append("nonsense")
    if row.text is not None:
        bad.append("x=,y")
    return bad


REFUSED = [(row, bad) for row in table.OPTIONS for bad in _bad(row)]


@pytest.mark.parametrize(("row", "bad"), REFUSED, ids=[f"{r.name}={b}" for r, b in REFUSED])
def test_a_bad_value_is_refused_alike_by_the_command_line_and_the_api(
    run_cli: Run, row: Option, bad: str
) -> None:
    """The same value, typed on the command line and given to the API: exit 2 with one line, and
    the UsageError whose message that line carries."""
    with pytest.raises(UsageError) as refused:
        modtrans.translate("gpt2", **{row.name: [bad] if row.many else bad})
    done = run_cli("translate", "gpt2", row.flag, bad)
    assert done.exit_code == 2, done.output
    (line,) = done.stderr.splitlines()
    said = line.removeprefix("modtrans: ").split(" (see `")[0].rstrip(".")
    assert said == str(refused.value)
    assert "Traceback" not in done.output


def test_a_choice_is_every_member_of_its_enum() -> None:
    """The choices come from the library's enums (independent of the table's text): all six
    schedules, where the API's docstring once listed three."""
    rows = table.BY_NAME
    assert rows["schedule"].choices == tuple(s.value for s in Schedule)
    assert rows["recompute"].choices == tuple(r.value for r in Recompute)
    assert rows["framework"].choices == tuple(f.value for f in Framework)
    doc = inspect.getdoc(modtrans.translate) or ""
    for row in table.OPTIONS:
        assert f"    {row.name}: " in doc
        for choice in row.choices or ():
            assert f'"{choice}"' in doc, (row.name, choice)


def test_the_layout_fields_lay_a_transformer_out() -> None:
    """Each layout row, given alone to a model that is no transformer (resnet50), is refused as
    the layout's; every other option is not refused for that reason."""
    samples = {int: 2, bool: True, float: 1.5, tuple: "2,2"}
    for row in table.OPTIONS:
        if not row.layout:
            continue
        value = (
            row.choices[0] if row.choices else {"recompute_modules": "mlp"}.get(row.name, samples[row.kind])
        )
        with pytest.raises(UsageError, match="lay out a transformer"):
            modtrans.translate("resnet50", parallel="DATA", **{row.name: value})


def test_like_fills_only_the_options_the_table_says(tmp_path: Path) -> None:
    """What --like took from a transformer reference (ModTrans's own SimAI file), option by option,
    is among the table's like rows."""
    reference = tmp_path / "reference.txt"
    modtrans.translate("gpt2", tp=2, pp=2, dp=2, zero=1, sp=True, dialect="simai", output=str(reference))
    result = modtrans.translate("gpt2", like=str(reference))
    (note,) = [n for n in result.notes if n.startswith("--like")]
    taken = [word for word in note.split(": ", 1)[1].split() if word.startswith("--")]
    assert taken
    names = {word.removeprefix("--no-").removeprefix("--").replace("-", "_") for word in taken}
    assert names <= set(table.LIKE_FIELDS), names - set(table.LIKE_FIELDS)


def test_the_metadatas_layout_section_names_options_as_the_table_does(tmp_path: Path) -> None:
    """.meta.json's parallel.llm: each key an option's name, or one of the derived figures."""
    result = modtrans.translate(
        "gpt2", tp=2, pp=2, dp=2, vpp=2, ep=1, format="chakra-et", output=f"{tmp_path}/gpt2"
    )
    llm = result.metadata["parallel"]["llm"]
    derived = {"ga", "pp_comm_bytes", "chunks", "memory"}
    assert set(llm) - derived <= set(table.BY_NAME)
    assert {"tp", "pp", "dp", "cp", "vpp", "schedule", "recompute"} <= set(llm)


def test_the_sweeps_search_space_is_its_table_group() -> None:
    """`modtrans sweep`'s search-space rows (the table's group) are the degrees the sweep searches
    (the registry's, strategy/llm/degrees.py) and sweep/space.py's other Space fields, in one
    order: request.py builds the Space from that group (Space.of), so a row without a field or a
    degree, or a field or degree without a row, is found here."""
    from modtrans.strategy.llm.degrees import registered
    from modtrans.sweep.space import Space, searched

    rows = tuple(o.name for o in table.SWEEP_OWN if o.group == table.SPACE)
    others = tuple(f.name for f in dataclasses.fields(Space) if f.name != "degrees")
    assert tuple(r for r in rows if r not in registered()) == others
    assert {r for r in rows if r in registered()} == {d.token for d in searched()}
    assert set(Space.of(**dict.fromkeys(rows, (1,))).degrees) == {d.token for d in searched()}
