"""Loading a workload from a path: text in any dialect, or workload JSON; never raises."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from modtrans import inputs, sidecar
from modtrans.diagnostics import Diagnostic
from modtrans.fileio import TextFile, read_lines
from modtrans.workload import jsonform
from modtrans.workload.model import Dialect
from modtrans.workload.parse import LineCache, ParseResult, parse_lines, shape
from modtrans.workload.validate import check_parsed


@dataclass(frozen=True, slots=True)
class Loaded:
    """A parsed file and its lines (for showing diagnostics in context)."""

    path: str
    result: ParseResult
    lines: list[tuple[str, str]]
    is_json: bool = False

    def line(self, number: int) -> str | None:
        if 1 <= number <= len(self.lines):
            return self.lines[number - 1][0]
        return None


def load(path: str | Path, *, cache: LineCache | None = None, takes: str = inputs.WORKLOAD) -> Loaded:
    """Read and parse `path`; unreadable or empty files give an F0xx diagnostic and no workload
    (`takes`: what the command reads, named for an empty one). `cache`: the layer lines of a text
    parsed before (parse.LineCache), reused where this one has them."""
    file = read_lines(path)
    name = file.path  # `<stdin>` for standard input
    lines = file.lines
    if lines is None:
        return Loaded(name, ParseResult(None, file.diagnostics), [])
    if all(inputs.blank(content) for content, _ in lines):
        return Loaded(name, ParseResult(None, (inputs.refused(name, takes),)), lines)
    if str(path) != "-" and (stale := sidecar.check(path)) is not None:
        file = TextFile(file.path, lines, (*file.diagnostics, stale))
    if _looks_like_json(name, lines):
        workload, problems = jsonform.loads(file.text, path=name)
        diagnostics = (*file.diagnostics, *problems)
        result = ParseResult(workload, diagnostics, *shape(lines))
        return Loaded(name, result, lines, is_json=True)
    result = parse_lines(lines, path=name, cache=cache)
    if file.diagnostics:
        # The reader's P102 knows a long line's real length; the parser saw it cut.
        long = {d.span.line for d in file.diagnostics if d.code == "P102" and d.span is not None}
        parsed = [d for d in result.diagnostics if not (d.code == "P102" and d.span and d.span.line in long)]
        result = dataclasses.replace(result, diagnostics=(*file.diagnostics, *parsed))
    return Loaded(name, result, lines)


def validate_file(
    path: str | Path, *, dialect: Dialect | str | None = None, ignore: Iterable[str] = ()
) -> tuple[Loaded, list[Diagnostic]]:
    """Load `path` and run every check on it."""
    loaded = load(path)
    return loaded, check_parsed(loaded.result, dialect=dialect, path=loaded.path, ignore=ignore)


def _looks_like_json(name: str, lines: list[tuple[str, str]]) -> bool:
    if name.endswith(".json"):
        return True
    for content, _ in lines:
        if content.strip():
            return content.lstrip().startswith(("{", "["))
    return False
