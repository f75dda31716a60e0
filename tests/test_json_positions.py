"""Workload JSON: every diagnostic at the line:column of the JSON value it is about; nothing the
text format cannot say is accepted; hostile documents are diagnostics, not tracebacks."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from modtrans import jsonsource
from modtrans.workload import jsonform
from modtrans.workload.parse import parse
from modtrans.workload.validate import check_parsed

TEXT = (
    "DATA\n2\n"
    "conv1\t-1\t5\tNONE\t0\t5\tNONE\t0\t5\tALLREDUCE\t64\t1\n"
    "fc\t-1\t1\tNONE\t0\t1\tNONE\t0\t1\tALLREDUCE\t8\t1\n"
)


def _document() -> dict[str, Any]:
    workload = parse(TEXT).workload
    assert workload is not None
    document: dict[str, Any] = json.loads(jsonform.dumps(workload))
    return document


def _codes_at(text: str) -> list[tuple[str, int, int]]:
    workload, found = jsonform.loads(text)
    if workload is not None:
        from modtrans.workload.parse import ParseResult

        found = check_parsed(ParseResult(workload, ()))
    lines = text.split("\n")
    for d in found:  # every span lies inside the file
        assert d.span is not None, d
        assert 1 <= d.span.line <= len(lines), d
        assert 1 <= d.span.column <= len(lines[d.span.line - 1]) + 1, d
    return [(d.code, d.span.line, d.span.column) for d in found if d.span]


def _where(text: str, needle: str) -> tuple[int, int]:
    offset = text.index(needle)
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda d: d["layers"][1]["fwd"].update(comm_size=1.0), "1.0"),  # integer-valued float
        (lambda d: d["layers"][1].update(name="fc\n"), '"fc\\n"'),  # $ would let a newline through
        (lambda d: d["layers"][1].update(name="f c"), '"f c"'),
        (lambda d: d["header"].update(extra=["ep:"]), '"ep:"'),  # would be read as a key
        (lambda d: d["layers"][0]["input_grad"].update(comm_type="SEND"), '"SEND"'),
    ],
)
def test_schema_errors_point_at_the_value(change: Callable[[dict[str, Any]], None], needle: str) -> None:
    document = _document()
    change(document)
    text = json.dumps(document, indent=2)
    assert _codes_at(text) == [("S402", *_where(text, needle))]


def test_a_dlrm_field_needs_a_dlrm_policy() -> None:
    document = _document()
    document["header"]["dlrm_last_bottom_layer"] = 0
    text = json.dumps(document, indent=2)
    assert [code for code, *_ in _codes_at(text)] == ["S402"]


def test_check_findings_on_json_point_at_the_field() -> None:
    document = _document()
    document["layers"][1]["input_grad"]["comm_size"] = 77  # NONE with a size: V211
    text = json.dumps(document, indent=2)
    assert _codes_at(text) == [("V211", *_where(text, "77"))]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested more than"),
        ("[" * 70 + "]" * 70, "nested more than"),
        ('{"format": "modtrans-workload", "version": ' + "1" * 4301 + "}", "4301 digits"),
        ('{"format": NaN}', "not JSON"),
        ('{"format": 1e400}', None),  # a float: JSON allows it; the schema refuses it (S402)
    ],
)
def test_hostile_json_is_a_positioned_diagnostic(text: str, message: str | None) -> None:
    workload, found = jsonform.loads(text)
    assert workload is None
    (problem,) = found[:1]
    assert problem.span is not None
    if message is not None:
        assert problem.code == "S401"
        assert message in problem.message
        assert 1 <= problem.span.column <= len(text)


def test_source_map_spans_match_the_values() -> None:
    text = json.dumps({"a": [1, {"b": "x y", "c": [[], {}]}], "d": -2.5e3}, indent=1)
    source = jsonsource.SourceMap(text)
    lines = text.split("\n")

    def cut(path: list[str | int]) -> str:
        span = source.span(path)
        assert span is not None
        assert span.line == span.end_line or path in (["a"], ["a", 1], ["a", 1, "c"])
        return (
            lines[span.line - 1][span.column - 1 : span.end_column - 1] if span.line == span.end_line else "*"
        )

    assert cut(["a", 0]) == "1"
    assert cut(["a", 1, "b"]) == '"x y"'
    assert cut(["d"]) == "-2500.0"
    assert cut(["a", 1, "c", 0]) == "[]"
    assert cut(["a", 1, "c", 1]) == "{}"
    assert source.span(["a", 7]) == source.span(["a"])  # a path that is not there: its parent


def test_a_text_with_findings_converts_to_json_with_the_same_findings() -> None:
    text = (
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 checkpoints: 0 "
        "checkpoint_initiates: 2 -1 0\n1\nl1 -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n"
    )
    parsed = parse(text)
    assert parsed.workload is not None
    from_text = sorted(d.code for d in check_parsed(parsed))
    assert "V242" in from_text
    document = jsonform.dumps(parsed.workload)
    assert sorted(code for code, *_ in _codes_at(document)) == from_text


_SHAPES: list[Any] = [
    {"a": [1, {"b": 'x\\n"y'}, []], "c": {}, "d": {"e": [1.5e3, None, True]}},
    [{"k": "\u00e9\ud83d\ude00"}, [[[]]], "s", -0.0, {"": 1}],
    {"dup": 1, "dup": 2},  # noqa: F601  (JSON allows it; the last one counts, as for json.loads)
    "just a string",
    {"layers": [{"name": "l\r1", "fwd": {"x": [1, 2, {"y": 3}]}}] * 3},
]


@pytest.mark.parametrize("indent", [None, 0, 1, 4, "\t"])
@pytest.mark.parametrize("shape", range(len(_SHAPES)))
def test_the_quick_index_and_the_scanner_agree(shape: int, indent: int | str | None) -> None:
    """SourceMap indexes a document's first two levels with the standard library's reader (it
    steps over deeper values in C) where the token scanner read every token: the same offsets,
    for every value, at every layout, and the same line:column for each (positions count from
    the line starts found so far)."""
    text = json.dumps(_SHAPES[shape], indent=indent, ensure_ascii=False)
    text = text.replace(",", " ,\r\n\t", 2)  # blanks JSON allows, and a CR that ends no line
    quick, scanned = jsonsource.SourceMap(text), jsonsource.SourceMap(text)
    scanned.scan()
    quick._ensure_index()
    assert quick._index == scanned._index
    assert quick._index  # something was indexed
    for path in list(scanned._index)[::-1]:  # backwards: positions found out of order
        assert quick.span(path) == scanned.span(path)


def test_a_large_document_is_indexed_without_reading_every_token() -> None:
    layers = [{"name": f"l{i}", "fwd": {"compute_time": i, "comm": [1, 2, 3]}} for i in range(3000)]
    text = json.dumps({"layers": layers}, indent=1)
    source = jsonsource.SourceMap(text)
    span = source.span(["layers", 2999, "fwd", "comm", 2])
    assert span is not None
    assert text.split("\n")[span.line - 1].strip() == "3"
    assert ("layers", 2999, "fwd") not in source._index  # deeper levels scanned on request only
    assert ("layers", 2999) in source._index
