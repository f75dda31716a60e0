"""Validation: parse (if given text) and run the semantic and dialect checks; diagnostics sorted."""

from __future__ import annotations

from collections.abc import Iterable

from modtrans.diagnostics import Diagnostic
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
    return sorted(found, key=_order)


def _order(d: Diagnostic) -> tuple[int, int, str]:
    if d.span is None:
        return (0, 0, d.code)
    return (d.span.line, d.span.column, d.code)
