"""Validation: parse (if given text) and run the semantic and dialect checks; diagnostics sorted."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from modtrans.diagnostics import Diagnostic, Span
from modtrans.workload.checks import run_checks
from modtrans.workload.dialects import detect
from modtrans.workload.model import Dialect, Workload
from modtrans.workload.parse import ParseResult, parse


def validate(
    source: str | Workload,
    *,
    dialect: Dialect | str | None = None,
    path: str | None = None,
    ignore: Iterable[str] = (),
) -> list[Diagnostic]:
    """Every finding for workload text (or an already built Workload), for the given consumer.

    Without `dialect` the file is checked for the consumer it was written for (detected: SimAI
    when it uses SimAI-only keys or comm types, else ASTRA-sim 1.0).
    """
    result = ParseResult(source, ()) if isinstance(source, Workload) else parse(source, path=path)
    return check_parsed(result, dialect=dialect, path=path, ignore=ignore)


def check_parsed(
    result: ParseResult,
    *,
    dialect: Dialect | str | None = None,
    path: str | None = None,
    ignore: Iterable[str] = (),
) -> list[Diagnostic]:
    """The parse diagnostics plus the checks' findings on the parsed workload, in file order."""
    skip = frozenset(ignore)
    found = [d for d in result.diagnostics if d.code not in skip]
    workload = result.workload
    if workload is not None:
        target = Dialect(dialect) if dialect else (workload.dialect or detect(workload))
        found += run_checks(workload, target, path=path, ignore=skip)
    if result.widths is not None:
        found = [inside(d, result.widths, result.final_break) for d in found]
    return sorted(found, key=_order)


def inside(d: Diagnostic, widths: Sequence[int], final_break: bool) -> Diagnostic:
    """`d` with its span kept inside the text: a caret one past the end of a line (a missing field,
    a blank line) becomes a point at the line's end; a line past the last one, the file's end."""
    span = d.span
    if span is None:
        return d
    last = len(widths) + (1 if final_break or not widths else 0)

    def point(line: int, column: int) -> tuple[int, int]:
        line = min(max(line, 1), last)
        width = widths[line - 1] if line <= len(widths) else 0
        return line, min(max(column, 1), width + 1)

    start = point(span.line, span.column)
    end = max(point(span.end_line, span.end_column), start)
    if (*start, *end) == (span.line, span.column, span.end_line, span.end_column):
        return d
    return dataclasses.replace(d, span=Span(*start, *end))


def _order(d: Diagnostic) -> tuple[int, int, str]:
    if d.span is None:
        return (0, 0, d.code)
    return (d.span.line, d.span.column, d.code)
