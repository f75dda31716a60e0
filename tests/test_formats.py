"""The registry of outputs: every shipped format and dialect is registered, the pipeline asks
the registry, and a format registered from outside (a toy simulator's table, defined here and
shipped nowhere) is listed, accepted or refused by its own rule, and written, with no other
module edited."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import Result

import modtrans
from modtrans import api, formats, pipeline, request, table
from modtrans.cost import Unit
from modtrans.diagnostics import Diagnostic, DiagnosticError
from modtrans.formats import Format, Output
from modtrans.formats.registry import Ticks
from modtrans.plan import Plan, Purpose, project
from modtrans.plan.sizes import Consumer
from modtrans.request import UsageError
from modtrans.strategy import Parallelism
from modtrans.workload.model import Dialect, Workload

Run = Callable[..., Result]

TOY_LIMIT = 2
"""The toy simulator models at most this many tensor ranks (its rule, not the text format's)."""


def _toy_refuse(plan: Plan) -> str | None:
    tensor = plan.mesh.extent(Purpose.TENSOR)
    return (
        f"the toy simulator models at most {TOY_LIMIT} tensor ranks, not {tensor}"
        if tensor > TOY_LIMIT
        else None
    )


def _toy_project(plan: Plan, parallel: Parallelism) -> Workload:
    return project(plan, Consumer.ASTRA_SIM)


def _toy_render(workload: Workload, dialect: Dialect, found: list[Diagnostic], subject: str | None) -> str:
    rows = ["layer\tfwd\tinput_grad\tweight_grad"]
    rows += [
        f"{x.name}\t{x.fwd.compute_time}\t{x.input_grad.compute_time}\t{x.weight_grad.compute_time}"
        for x in workload.layers
    ]
    return "\n".join(rows) + "\n"


@pytest.fixture
def toy() -> Iterator[Output]:
    summary = "a toy simulator's layer table"
    ticks = Ticks(Unit.US, "the toy reads microseconds", "leave --time-unit out")
    output = formats.register(
        Output("toy-table", None, summary, _toy_project, _toy_render, _toy_refuse, ticks=ticks)
    )
    yield output
    formats.unregister(output)


def _text_times(text: str) -> list[tuple[str, int, int, int]]:
    """Each layer line of ASTRA-sim 1.0's text, read by its column positions (name, then the
    compute time of the forward, input-gradient and weight-gradient columns, every third field
    after the reserved -1): the file layout, read without modtrans's parser."""
    lines = text.splitlines()[2:]
    return [(f[0], int(f[2]), int(f[5]), int(f[8])) for f in (line.split() for line in lines)]


def test_a_format_registered_from_outside_is_listed(toy: Output) -> None:
    assert "toy-table" in formats.formats()
    assert toy in formats.outputs()
    assert formats.get("toy-table", "simai") is toy  # a format for any dialect


def test_a_registered_format_is_written_from_the_plan(toy: Output, tmp_path: Path) -> None:
    out = tmp_path / "gpt2.tsv"
    result = modtrans.translate("gpt2", tp=2, format="toy-table", output=out)
    text = modtrans.translate("gpt2", tp=2, time_unit="us").text  # the toy reads us
    assert text is not None
    rows = [line.split("\t") for line in out.read_text().splitlines()[1:]]
    assert [(r[0], int(r[1]), int(r[2]), int(r[3])) for r in rows] == _text_times(text)
    assert result.written == (out, Path(f"{out}.meta.json"))


def test_a_registered_format_says_the_unit_its_consumer_reads(toy: Output) -> None:
    told = modtrans.translate("gpt2", tp=2, format="toy-table")
    assert told.metadata["compute"]["unit"] == "us"  # its default tick, no option given
    assert not told.diagnostics
    other = modtrans.translate("gpt2", tp=2, format="toy-table", time_unit="ns")
    assert [(d.code, d.message) for d in other.diagnostics] == [
        ("X508", "compute times are in ns ticks; the toy reads microseconds")
    ]


def test_a_registered_format_refuses_by_its_own_rule(toy: Output, tmp_path: Path) -> None:
    assert modtrans.translate("gpt2", tp=4).text is not None  # the text accepts what the toy refuses
    out = tmp_path / "gpt2.tsv"
    with pytest.raises(DiagnosticError) as raised:
        modtrans.translate("gpt2", tp=4, format="toy-table", output=out)
    d310 = [d for d in raised.value.diagnostics if d.code == "D310"]
    assert [d.message for d in d310] == [f"the toy simulator models at most {TOY_LIMIT} tensor ranks, not 4"]
    assert not out.exists()


def test_an_unregistered_format_is_a_usage_error_naming_those_there_are() -> None:
    with pytest.raises(UsageError, match=r"--format: 'nope' is not one of 'text', 'json', 'chakra-et'"):
        modtrans.translate("gpt2", format="nope")


def test_every_format_the_options_offer_is_registered_for_every_dialect(run_cli: Run) -> None:
    assert table.BY_NAME["format"].choices == tuple(f.value for f in Format) == tuple(formats.formats())
    for name in formats.formats():
        for dialect in Dialect:
            assert formats.get(name, dialect).format == name
    bad = run_cli("translate", "gpt2", "--format", "nope")
    assert bad.exit_code == 2
    assert "'text', 'json', 'chakra-et'" in bad.output  # the command line offers the registry's


def test_simai_refuses_context_parallelism_by_its_rule() -> None:
    asked = request.Request("llama-3-8b", format="text", dialect="simai", tp=2, cp=2, seq_len=1024)
    result = api.run(request.prepare(asked))
    messages = [d.message for d in result.diagnostics if d.code == "D310"]
    assert len(messages) == 1
    assert messages[0].startswith("context parallelism: SimAI's workload has no context-parallel group")
    assert result.plan is not None
    assert formats.get(Format.TEXT, Dialect.ASTRA_SIM).refuse(result.plan) is None  # SimAI's rule alone


def test_a_trace_run_projects_no_workload(monkeypatch: pytest.MonkeyPatch) -> None:
    def projected(*_: object) -> Workload:
        raise AssertionError("a trace run projected a workload")

    for key, output in list(formats.registry.REGISTRY.items()):  # every projection registered
        if output.project is not None:
            monkeypatch.setitem(
                formats.registry.REGISTRY, key, dataclasses.replace(output, project=projected)
            )
    options = request.prepare(request.Request("gpt2", output="traces/", format="chakra-et", tp=2)).options
    result = pipeline.translate_checked("gpt2", options)
    assert result.plan is not None
    assert result.workload is None
    assert not [d for d in result.diagnostics if d.severity <= 1]
