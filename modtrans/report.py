"""Diagnostic sinks: text (file:line:col + source line + caret), json, github, sarif.

The library never prints; the CLI hands every diagnostic to one of these. rich is used here only.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich costs 40 ms to import: only a report that prints something loads it
    from rich.console import Console

from modtrans.diagnostics import CATALOG, UNUSABLE, Diagnostic, Severity

Sources = Mapping[str, Callable[[int], str | None]]  # path -> line number -> line text


class Format(enum.StrEnum):
    AUTO = "auto"
    TEXT = "text"
    JSON = "json"
    GITHUB = "github"
    SARIF = "sarif"


_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan", Severity.HINT: "dim"}


def resolve(fmt: Format) -> Format:
    if fmt is Format.AUTO:
        return Format.GITHUB if os.environ.get("GITHUB_ACTIONS") == "true" else Format.TEXT
    return fmt


def exit_code(diagnostics: Sequence[Diagnostic], *, strict: bool = False) -> int:
    """0 clean, 1 findings (errors; warnings too with strict), 2 an input could not be read or used
    as given (F codes, and diagnostics.UNUSABLE: a model or configuration modtrans cannot read, an
    option that does not fit the model, as for every other bad option value)."""
    errors = [d for d in diagnostics if d.severity is Severity.ERROR]  # not an F warning (F006)
    if any(d.code.startswith("F") or d.code in UNUSABLE for d in errors):
        return 2
    failing = Severity.WARNING if strict else Severity.ERROR
    return 1 if any(d.severity <= failing for d in diagnostics) else 0


def emit(
    diagnostics: Sequence[Diagnostic],
    fmt: Format,
    *,
    stream: IO[str],
    sources: Sources | None = None,
    color: bool | None = None,
    checked: int = 0,
    everything: bool = True,
    strict: bool = False,
    more: str = "--all shows every finding",
) -> None:
    """Write `diagnostics` in `fmt`; the text report may collapse repeats (`everything=False`,
    saying `more` of what was left out), the machine formats never do."""
    fmt = resolve(fmt)
    if fmt is Format.JSON:
        stream.write(json.dumps([_plain(d) for d in diagnostics], indent=2) + "\n")
    elif fmt is Format.SARIF:
        stream.write(json.dumps(sarif(diagnostics), indent=2) + "\n")
    elif fmt is Format.GITHUB:
        for d in diagnostics:
            stream.write(github(d) + "\n")
    else:
        text(
            diagnostics,
            stream=stream,
            sources=sources or {},
            color=color,
            checked=checked,
            everything=everything,
            strict=strict,
            more=more,
        )


def _plain(d: Diagnostic) -> dict[str, Any]:
    entry = asdict(d)
    entry["severity"] = d.severity.label
    return entry


COLLAPSED: dict[str, Any] = {"everything": False, "more": "repeats of one code are collapsed"}
"""How translate, extract and inspect report a model's diagnostics on stderr: repeats collapsed."""

SHOWN_PER_CODE = 3
"""The text report shows the first few findings of one code in one file, then a count (--all)."""


def text(
    diagnostics: Sequence[Diagnostic],
    *,
    stream: IO[str],
    sources: Sources,
    color: bool | None,
    checked: int,
    everything: bool = True,
    strict: bool = False,
    more: str = "--all shows every finding",
) -> None:
    if not diagnostics:  # one plain line or nothing: rich, 20-40 ms to import, prints findings only
        if checked:
            stream.write(_summary(diagnostics, checked, strict) + "\n")
        return
    lines: list[_Line] = []
    seen: dict[tuple[str | None, str], int] = {}
    for d in diagnostics:
        key = (d.path, d.code)
        seen[key] = seen.get(key, 0) + 1
        if not everything and seen[key] > SHOWN_PER_CODE:
            continue
        where = d.path or "<input>"
        if d.span is not None:
            where += f":{d.span.line}:{d.span.column}"
        lines.append(
            [
                (f"{where}: ", "bold"),
                (f"{d.severity.label} {d.code}", _STYLE[d.severity]),
                (f" {d.message}", ""),
            ]
        )
        source = sources.get(d.path or "") if d.span is not None else None
        if source is not None and d.span is not None:
            lines += _excerpt(d, source(d.span.line))
        if d.hint:
            lines.append([(f"    = hint: {d.hint}", "dim")])
    hidden = {key: n - SHOWN_PER_CODE for key, n in seen.items() if n > SHOWN_PER_CODE}
    if not everything:
        for (path, code), n in hidden.items():
            lines.append([(f"{path or '<input>'}: ... and {n} more {code} ({more})", "dim")])
    if checked:
        lines.append([(_summary(diagnostics, checked, strict), "bold")])
    if _plain_text(lines, stream, color):
        stream.write("".join("".join(text for text, _ in line) + "\n" for line in lines))
        return
    from rich.text import Text

    console = _console(stream, color, soft_wrap=True)
    for line in lines:
        console.print(Text.assemble(*((text, style) if style else text for text, style in line)))


_Line = list[tuple[str, str]]
"""A report line as (text, rich style) pieces; "" for no style."""


def _plain_text(lines: Sequence[_Line], stream: IO[str], color: bool | None) -> bool:
    """Whether rich would write `lines` as their bare text, so they are written without importing
    it (20-40 ms): no colour asked for, a stream that is not a terminal by rich's own tests
    (Console.is_terminal: TTY_COMPATIBLE, FORCE_COLOR, isatty), and printable ASCII only (rich
    expands tabs and strips control codes; other characters it may measure in cells)."""
    if color or os.environ.get("TTY_COMPATIBLE", "") == "1" or os.environ.get("FORCE_COLOR") is not None:
        return False
    if os.environ.get("TTY_COMPATIBLE", "") != "0":
        try:
            if stream.isatty():
                return False
        except (AttributeError, ValueError):
            pass
    return all(text.isascii() and text.isprintable() for line in lines for text, _ in line)


def _summary(diagnostics: Sequence[Diagnostic], checked: int, strict: bool) -> str:
    """`N files checked: 2 errors, 1 warning`, or `... no problems`."""
    counts = {s: sum(1 for d in diagnostics if d.severity is s) for s in Severity}
    summary = ", ".join(
        f"{n} {s.label}{'s' * (n != 1)}" for s, n in counts.items() if n and s <= Severity.INFO
    )
    files = f"{checked} file{'s' * (checked != 1)}"
    warned = strict and counts[Severity.WARNING] and not counts[Severity.ERROR]
    because = " (--strict: warnings fail)" if warned else ""
    return f"{files} checked: {summary or 'no problems'}{because}"


def _excerpt(d: Diagnostic, line: str | None) -> list[_Line]:
    """The source line a finding points into and its caret line."""
    assert d.span is not None
    if line is None:
        return []
    shown = line.expandtabs(1).rstrip("\r")
    if len(shown) > 200:
        return []
    start = d.span.column - 1
    width = max(1, (d.span.end_column - d.span.column) if d.span.end_line == d.span.line else 1)
    gutter = f"{d.span.line:>5} | "
    caret = " " * start + "^" * min(width, max(1, len(shown) - start + 1))
    return [
        [(gutter, "dim"), (shown, "")],
        [(" " * (len(gutter) - 2) + "| ", "dim"), (caret, _STYLE[d.severity])],
    ]


def github(d: Diagnostic) -> str:
    """A GitHub Actions workflow command (annotation)."""
    level = {Severity.ERROR: "error", Severity.WARNING: "warning"}.get(d.severity, "notice")
    props = [f"file={_escape_property(d.path)}"] if d.path else []
    if d.span is not None:
        props += [
            f"line={d.span.line}",
            f"col={d.span.column}",
            f"endLine={d.span.end_line}",
            f"endColumn={d.span.end_column}",
        ]
    props.append(f"title={d.code}")
    message = d.message + (f" ({d.hint})" if d.hint else "")
    return f"::{level} {','.join(props)}::{_escape_data(message)}"


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def sarif(diagnostics: Sequence[Diagnostic]) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run; rules are the catalog entries that occur."""
    from modtrans._version import __version__

    used = sorted({d.code for d in diagnostics})
    index = {code: i for i, code in enumerate(used)}
    rules = [
        {
            "id": code,
            "name": CATALOG[code].title.title().replace(" ", "").replace("-", ""),
            "shortDescription": {"text": CATALOG[code].title},
            "fullDescription": {"text": CATALOG[code].explanation},
            "defaultConfiguration": {"level": _sarif_level(CATALOG[code].severity)},
        }
        for code in used
    ]
    results = []
    for d in diagnostics:
        result: dict[str, Any] = {
            "ruleId": d.code,
            "ruleIndex": index[d.code],
            "level": _sarif_level(d.severity),
            "message": {"text": d.message + (f" ({d.hint})" if d.hint else "")},
        }
        if d.path:
            location: dict[str, Any] = {"artifactLocation": {"uri": d.path.replace(os.sep, "/")}}
            if d.span is not None:
                location["region"] = {
                    "startLine": d.span.line,
                    "startColumn": d.span.column,
                    "endLine": d.span.end_line,
                    "endColumn": d.span.end_column,
                }
            result["locations"] = [{"physicalLocation": location}]
        results.append(result)
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "modtrans",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "results": results,
                "columnKind": "unicodeCodePoints",
            }
        ],
    }


def _sarif_level(severity: Severity) -> str:
    return {Severity.ERROR: "error", Severity.WARNING: "warning"}.get(severity, "note")


def explain(code: str) -> str | None:
    """The catalog entry for `code` as text, or None if there is no such code."""
    info = CATALOG.get(code.upper())
    if info is None:
        return None
    return f"{info.code} ({info.severity.label}): {info.title}\n\n{info.explanation}\n"


def console(stream: IO[str], color: bool | None, *, width: int | None = None) -> Console:
    """A console for reports: colours on a terminal unless NO_COLOR / --no-color; `color=True` forces."""
    return _console(stream, color, width=width)


def _console(
    stream: IO[str], color: bool | None, *, soft_wrap: bool = False, width: int | None = None
) -> Console:
    from rich.console import Console

    return Console(
        file=stream,
        no_color=color is False or None,
        highlight=False,
        soft_wrap=soft_wrap,
        width=width,
        force_terminal=color or None,
        color_system="standard" if color else "auto",
    )


def status(message: str, *, quiet: bool = False) -> contextlib.AbstractContextManager[object]:
    """While long work runs: after a second, a spinner with `message` on standard error and a bar
    for each task the library reports (modtrans/progress.py); nothing when standard error is not
    a terminal, under CI, or `quiet`."""
    if quiet or not sys.stderr.isatty() or os.environ.get("CI"):
        return contextlib.nullcontext()
    return _Display(message)


class _Display:
    """rich's Progress, started by a timer a second in (a run shorter than that shows nothing),
    listening to the library's tasks meanwhile."""

    DELAY_S = 1.0

    def __init__(self, message: str, console: Console | None = None) -> None:
        import threading

        self.message = message
        self.console = console
        self.lock = threading.Lock()
        self.tasks: dict[int, list[Any]] = {}  # id -> [label, total, done, rich task id or None]
        self.bar: Any = None
        self.timer = threading.Timer(self.DELAY_S, self._show)
        self.timer.daemon = True
        self.listening: contextlib.AbstractContextManager[None] | None = None

    def __enter__(self) -> _Display:
        from modtrans.progress import listening

        self.listening = listening(self)
        self.listening.__enter__()
        self.timer.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.timer.cancel()
        if self.listening is not None:
            self.listening.__exit__(None, None, None)
        with self.lock:
            if self.bar is not None:
                self.bar.stop()
                self.bar = None

    def _show(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        with self.lock:
            columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn())
            self.bar = Progress(
                *columns,
                TextColumn("{task.fields[count]}"),
                TimeElapsedColumn(),
                console=self.console or Console(stderr=True),
                transient=True,
            )
            self.bar.add_task(self.message, total=None, count="")
            for task in self.tasks.values():
                task[3] = self.bar.add_task(task[0], total=task[1], completed=task[2], count=_count(task))
            self.bar.start()

    def start(self, label: str, total: int | None) -> object:
        with self.lock:
            handle = len(self.tasks) + 1
            task: list[Any] = [label, total, 0, None]
            if self.bar is not None:
                task[3] = self.bar.add_task(label, total=total, count=_count(task))
            self.tasks[handle] = task
        return handle

    def step(self, handle: object, amount: int) -> None:
        task = self.tasks.get(handle if isinstance(handle, int) else -1)
        if task is None:
            return
        task[2] += amount
        if self.bar is not None and task[3] is not None:
            self.bar.update(task[3], completed=task[2], count=_count(task))

    def stop(self, handle: object) -> None:
        with self.lock:
            task = self.tasks.pop(handle if isinstance(handle, int) else -1, None)
            if task is not None and self.bar is not None and task[3] is not None:
                self.bar.remove_task(task[3])


def _count(task: Sequence[Any]) -> str:
    """`done/total` of a task, or how many so far where the total is not known."""
    return f"{task[2]:,}/{task[1]:,}" if task[1] is not None else (f"{task[2]:,}" if task[2] else "")
