"""WorkloadDiff -> a report: rich text for people, a JSON document for machines, diagnostics for CI.

The text report reads top-down: a one-line summary, header differences, moved blocks, a table of
only the differing layers (one row per differing field, the changed value highlighted) and the
totals per phase on both sides with their ratio. When the first side's GEMM shapes are known (a
translated model), a note after the table names the differing compute cells where the reference
contradicts itself (it gives that GEMM shape other values elsewhere). It fits an 80-column CI log:
numbers never wrap, long layer names fold.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Sequence
from typing import Any, Literal

from rich.console import Console
from rich.table import Table
from rich.text import Text

from modtrans.diagnostics import Diagnostic, Span, diagnostic
from modtrans.diff.aicb import Named
from modtrans.diff.compare import FieldDiff, LayerDiff, Traffic, WorkloadDiff
from modtrans.diff.conventions import Contradictions, Finding, shape_text

_STATUS_STYLE = {
    "added": "green",
    "removed": "red",
    "changed": "yellow",
    "moved": "cyan",
    "renamed": "magenta",
}


def summary(diff: WorkloadDiff) -> str:
    c = diff.counts
    layers = f"{c.layers_a} layers" if c.layers_a == c.layers_b else f"{c.layers_a} vs {c.layers_b} layers"
    parts = [layers, f"{c.identical} identical", f"{c.moved} moved", f"{c.changed} changed"]
    if c.renamed:  # only when there are some: the line stays within 80 columns otherwise
        parts.append(f"{c.renamed} renamed")
    parts += [
        f"{c.added} added",
        f"{c.removed} removed",
    ]  # added: only in the first; removed: only in the reference
    return " · ".join(parts)


def _value(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, tuple):
        return ",".join(map(str, v)) or "(empty)"
    return str(v)


def _relative(f: FieldDiff) -> str:
    rel = f.relative
    if rel is None:
        return ""
    return f"{rel:+.1%}" if abs(rel) < 100 else f"{rel * 100:+.3g}%"  # +1.84e+21%, not 23 digits


def _delta(f: FieldDiff) -> str:
    d = f.delta
    return "" if d is None else f"{d:+d}"


def render(
    diff: WorkloadDiff,
    console: Console,
    *,
    first: str,
    reference: str,
    max_rows: int = 100,
    findings: Sequence[Finding] = (),
    advice: str | None = None,
    contradictions: Contradictions | None = None,
    named: Sequence[Named] = (),
    unexplained: Sequence[Traffic] | None = None,
) -> None:
    verdict = "equivalent" if diff.equivalent else "different"
    console.print(Text(f"{first} vs {reference} (reference): {verdict}", style="bold"))
    console.print(summary(diff))
    if findings:
        console.print("The two follow different conventions, so most rows below are not real differences:")
        for finding in findings:
            option = f" ({finding.option})" if finding.option else ""
            console.print(Text(f"  - {finding.what}{option}", style="yellow"))
        if advice:
            console.print("To compare like with like:")
            console.print(Text(f"  {advice}", style="bold"), soft_wrap=True)
    for f in diff.header:
        console.print(f"header {f.field}: {_value(f.a)} -> {_value(f.b)} in the reference", style="yellow")
    if diff.blocks and not diff.options.ignore_order:
        for line in _moves(diff):
            console.print(line, style="cyan")
    rows = [r for r in diff.differing if r.status != "moved"]
    if rows:
        console.print(_table(rows, max_rows, diff.options.ignore_names, console.width))
        if max_rows and len(rows) > max_rows:
            console.print(f"... {len(rows) - max_rows} more differing layers (--max-rows 0 shows all)")
    if contradictions is not None and contradictions.found and not findings:  # else: --like first
        console.print(Text(contradiction_note(contradictions, max_rows, console.width), style="yellow"))
    console.print(_totals(diff, console.width))
    if any(t.count_a != t.count_b or t.bytes_a != t.bytes_b for t in diff.traffic):
        console.print(_traffic(diff))
    if named:
        console.print(_named(named, unexplained or ()))


def _named(named: Sequence[Named], unexplained: Sequence[Traffic]) -> Text:
    """The collectives each convention explains, then what no convention explains."""
    lines = Text("named (count / bytes):\n")
    reasons: dict[str, list[Named]] = {}
    for n in named:
        reasons.setdefault(n.why, []).append(n)
    for why, items in reasons.items():
        lines.append(f"  - {why}:\n")
        for n in items:
            side = "in the reference" if n.reference else "here"
            where = f"{n.comm} over {n.group}" + (f" (counted over {n.regroup})" if n.regroup else "")
            lines.append(f"      {where}: {n.count} / {n.bytes:,} B {side}\n")
    if not unexplained:
        lines.append("unexplained: none: every difference in communication is named above", style="green")
        return lines
    lines.append("unexplained once those are taken out:\n", style="bold red")
    for t in unexplained:
        here, there = f"{t.count_a} / {t.bytes_a:,} B here", f"{t.count_b} / {t.bytes_b:,} B in the reference"
        lines.append(f"* {t.comm} over {t.group}: {here}, {there}\n")
    lines.rstrip()
    return lines


def _traffic(diff: WorkloadDiff) -> Text:
    """Collectives per type and group, each side: what a simulator moves per iteration, whatever
    the layers' granularity (compare AICB's one line per role with one line per module here)."""
    lines = Text("communication per iteration, by type and group (count / bytes)\n")
    for t in diff.traffic:
        mark = "  " if t.count_a == t.count_b and t.bytes_a == t.bytes_b else "* "
        lines.append(
            f"{mark}{t.comm} over {t.group}: {t.count_a} / {t.bytes_a:,} B here, "
            f"{t.count_b} / {t.bytes_b:,} B in the reference (ratio {_ratio(t.bytes_a, t.bytes_b)})\n"
        )
    lines.rstrip()
    return lines


def contradiction_note(found: Contradictions, max_rows: int = 0, width: int = 80) -> str:
    """Which differing compute cells the reference contradicts itself on, wrapped to `width`."""
    n, total = len(found.found), found.cells
    head = (
        f"{n} of the {total} differing compute cells with a known GEMM shape are where the reference "
        "contradicts itself: it gives that shape (M x K x N as the phase computes it) other values "
        f"elsewhere, so no function of the shape matches it there; the other {total - n} are "
        "consistent within the reference. The files still differ (exit 1)."
    )
    lines = textwrap.wrap(head, width, break_on_hyphens=False)
    for c in found.found[: max_rows or None]:
        values = ", ".join(
            f"{s.layer} {s.field}: {s.value}{f' in {s.cells} cells' if s.cells > 1 else ''}" for s in c.values
        )
        item = (
            f"- {c.first} {c.field} ({shape_text(c.gemms)}): the reference gives this GEMM shape "
            f"{len(c.values)} different values ({values})"
        )
        lines += textwrap.wrap(
            item, width, initial_indent="  ", subsequent_indent="    ", break_on_hyphens=False
        )
    if max_rows and n > max_rows:
        lines.append(f"  ... {n - max_rows} more (--max-rows 0 shows all)")
    return "\n".join(lines)


def contradictions_json(found: Contradictions | None) -> dict[str, Any] | None:
    """The note's facts: None when the GEMM shapes are unknown (two workload files)."""
    if found is None:
        return None
    return {
        "differing_compute_cells": found.cells,
        "cells": [
            {
                "first": c.first,
                "reference": c.reference,
                "field": c.field,
                "gemms": [list(g) for g in c.gemms],
                "values": [dataclasses.asdict(s) for s in c.values],
            }
            for c in found.found
        ],
    }


def _moves(diff: WorkloadDiff) -> list[str]:
    by_a = {r.a: r for r in diff.layers if r.a is not None}
    lines = []
    for block in diff.blocks:
        first, last = by_a[block.a], by_a[block.a + block.length - 1]
        what = (
            f"{first.name_a}"
            if block.length == 1
            else f"{block.length} layers {first.name_a} .. {last.name_a}"
        )
        lines.append(f"moved: {what} (#{block.a + 1} here, #{block.b + 1} in the reference)")
    return lines


def _table(rows: list[LayerDiff], max_rows: int, ignore_names: bool, width: int) -> Table | Text:
    """Differing layers, one row per differing field. Numbers never wrap or get cut: their columns
    are as wide as their widest value and only the layer name folds; where that does not fit
    `width`, the delta column, then the row numbers are left out, and where even that does not
    fit, each layer is a line and each field an indented line (wrapped between values only)."""
    body: list[tuple[str | Text, ...]] = []
    for row in rows[: max_rows or None]:
        style = _STATUS_STYLE.get(row.status, "")
        index = f"{_index(row.a)}/{_index(row.b)}"
        name = Text(str(row.name_a if row.name_a is not None else row.name_b), style=style)
        if row.b is None or row.a is None:
            body.append((index, name, Text(row.status, style=style), "", "", "", ""))
            continue
        if row.renamed and not ignore_names:
            name.append(f" (reference: {row.name_b})", style="magenta")
        cells = [(f.field, _value(f.a), _value(f.b), _delta(f), _relative(f)) for f in row.fields]
        for k, (field_name, a, b, delta, rel) in enumerate(cells or [("name", "", "", "", "")]):
            first = Text(a, style="bold yellow")
            body.append((index if k == 0 else "", name if k == 0 else "", field_name, first, b, delta, rel))
    headers = ("#", "layer", "field", "first", "reference", "delta", "%")
    widest = [max([len(h), *(len(str(line[c])) for line in body)]) for c, h in enumerate(headers)]
    shown = list(range(len(headers)))

    def needed() -> int:
        return sum(widest[c] if c != 1 else _NAME_WIDTH for c in shown) + 2 * (len(shown) - 1)

    for dropped in (5, 0):  # delta, then the row numbers
        if needed() > width:
            shown.remove(dropped)
    if needed() > width:
        return _stacked(body)
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for c in shown:
        if headers[c] == "layer":
            table.add_column("layer", overflow="fold", min_width=_NAME_WIDTH, ratio=1)
        else:
            justify: Literal["left", "right"] = "left" if headers[c] == "field" else "right"
            table.add_column(headers[c], justify=justify, no_wrap=True, min_width=widest[c])
    for line in body:
        table.add_row(*(line[c] for c in shown))
    return table


_NAME_WIDTH = 12  # the layer column never gets narrower than this (it folds)


def _stacked(body: list[tuple[str | Text, ...]]) -> Text:
    """The table as lines, for terminals too narrow for its columns: a layer per line, then its
    fields indented, `field first -> reference delta %`."""
    out = Text()
    for index, name, field_name, first, reference, delta, rel in body:
        if str(name):
            out.append(f"{index} ", style="dim")
            out.append(name if isinstance(name, Text) else Text(name))
            if str(field_name) in ("added", "removed"):
                out.append(" ")
                out.append(field_name if isinstance(field_name, Text) else Text(field_name))
                out.append("\n")
                continue
            out.append("\n")
        values = " ".join(str(v) for v in (first, "->", reference, delta, rel) if str(v))
        out.append(f"    {field_name} {values}\n" if str(first) or str(reference) else f"    {field_name}\n")
    out.rstrip()
    return out


def _index(i: int | None) -> str:
    return "-" if i is None else str(i + 1)


def _ratio(a: int, b: int) -> str:
    if b == 0:
        return "-" if a == 0 else "inf"
    ratio = a / b
    return f"{ratio:.3f}" if ratio < 1000 else f"{ratio:.4g}"


def _totals(diff: WorkloadDiff, width: int = 80) -> Table | Text:
    """Sums per phase, first / reference / ratio: compute ticks, then comm bytes. Numbers are
    never cut: lines instead of columns where the columns do not fit."""
    rows = [
        (f"{t.phase} compute", str(t.compute_a), str(t.compute_b), _ratio(t.compute_a, t.compute_b))
        for t in diff.totals
    ]
    rows += [
        (f"{t.phase} comm bytes", str(t.bytes_a), str(t.bytes_b), _ratio(t.bytes_a, t.bytes_b))
        for t in diff.totals
        if t.phase != "update"
    ]
    headers = ("phase", "first", "reference", "ratio")
    widest = [max([len(h), *(len(r[c]) for r in rows)]) for c, h in enumerate(headers)]
    if sum(widest) + 6 > width:
        lines = Text("totals per phase\n")
        for phase, a, b, ratio in rows:
            lines.append(f"  {phase}: {a} vs {b} in the reference (ratio {ratio})\n")
        lines.rstrip()
        return lines
    table = Table(title="totals per phase", title_justify="left", box=None, pad_edge=False)
    for c, header in enumerate(headers):
        table.add_column(header, justify="left" if c == 0 else "right", no_wrap=True, min_width=widest[c])
    for row in rows:
        table.add_row(*row)
    return table


def to_json(diff: WorkloadDiff, *, first: str, reference: str) -> dict[str, Any]:
    """The same facts as the text report, every differing layer included."""
    return {
        "format": "modtrans-diff",
        "version": 1,
        "first": first,
        "reference": reference,
        "equivalent": diff.equivalent,
        "summary": dataclasses.asdict(diff.counts),
        "options": dataclasses.asdict(diff.options),
        "header": [_field_json(f) for f in diff.header],
        "moves": [dataclasses.asdict(b) for b in diff.blocks],
        "layers": [
            {
                "status": r.status,
                "first": None if r.a is None else {"index": r.a, "name": r.name_a, "line": r.line_a},
                "reference": None if r.b is None else {"index": r.b, "name": r.name_b, "line": r.line_b},
                "moved": r.moved,
                "fields": [_field_json(f) for f in r.fields],
            }
            for r in diff.differing
        ],
        "totals": [dataclasses.asdict(t) for t in diff.totals],
        "traffic": [dataclasses.asdict(t) for t in diff.traffic],
    }


def _field_json(f: FieldDiff) -> dict[str, Any]:
    a, b = (list(v) if isinstance(v, tuple) else v for v in (f.a, f.b))
    return {"field": f.field, "first": a, "reference": b, "delta": f.delta, "relative": f.relative}


def to_diagnostics(diff: WorkloadDiff, *, first: str) -> list[Diagnostic]:
    """Each difference as a diagnostic on the first file, for GitHub annotations and SARIF."""
    found = [
        diagnostic(
            "C606",
            f"header {f.field}: {_value(f.a)}, reference {_value(f.b)}",
            path=first,
            span=Span.at(1, 1),
        )
        for f in diff.header
    ]
    for r in diff.differing:
        span = Span.at(r.line_a, 1) if r.line_a else None
        if r.b is None:
            found.append(
                diagnostic("C602", f"layer {r.name_a} is not in the reference", path=first, span=span)
            )
        elif r.a is None:
            found.append(
                diagnostic("C603", f"reference layer {r.name_b} (#{r.b + 1}) is missing", path=first)
            )
        else:
            changes = "; ".join(f"{x.field} {_value(x.a)}, reference {_value(x.b)}" for x in r.fields)
            if changes:
                found.append(diagnostic("C601", f"layer {r.name_a}: {changes}", path=first, span=span))
            if r.moved and not diff.options.ignore_order:
                found.append(
                    diagnostic(
                        "C604", f"layer {r.name_a} is #{r.b + 1} in the reference", path=first, span=span
                    )
                )
            if r.renamed and not diff.options.ignore_names:
                found.append(
                    diagnostic(
                        "C605",
                        f"layer {r.name_a} is called {r.name_b} in the reference",
                        path=first,
                        span=span,
                    )
                )
    return found
