"""Positions between the workload reader and an LSP client (plain data, no LSP types).

The reader has one definition of a line (`workload.parse.split_lines`: LF ends a line, CRLF too;
a lone CR, VT or FF is a character of the line). A client counts lines as the protocol says: LF,
CRLF and a lone CR each end one. Columns are code points for the reader and code units of the
negotiated encoding (UTF-16 unless the client chose UTF-8 or UTF-32) for the client. `Positions`
converts both ways; `apply_change` applies a client's incremental edit to a buffer's text.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

from modtrans.workload.parse import split_lines

Range = tuple[int, int, int, int]  # start line, start character, end line, end character (0-based)

_CLIENT_BREAK = re.compile(r"\r\n|\r|\n")


def units(text: str, encoding: str) -> int:
    """The length of `text` in the client's code units."""
    if encoding == "utf-8":
        return len(text.encode("utf-8", "surrogatepass"))
    if encoding == "utf-32":
        return len(text)
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)  # UTF-16: two units above the BMP


def _code_points(segment: str, count: int, encoding: str) -> int:
    """How many code points of `segment` `count` client units cover (clamped to the segment)."""
    if encoding == "utf-32":
        return min(count, len(segment))
    seen = 0
    for index, char in enumerate(segment):
        width = units(char, encoding)
        if seen + width > count:
            return index
        seen += width
    return len(segment)


class Positions:
    """The reader's (line, code point) <-> the client's (line, code unit) for one text."""

    def __init__(self, text: str, encoding: str = "utf-16") -> None:
        self.encoding = encoding
        if "\r" not in text:  # the usual text: each reader line is a client line (100,000: 5 ms, not 80)
            self.lines = text.split("\n")
            self.first: list[int] = list(range(len(self.lines)))
            return
        self.lines = [content for content, _ in split_lines(text)] or [""]
        if text.endswith("\n"):
            self.lines.append("")  # the empty line after the final break exists for the client too
        self.first = []  # client line of each reader line's start
        line = 0
        for content in self.lines:
            self.first.append(line)
            line += 1 + content.count("\r")

    # reader -> client
    def position(self, line: int, column: int) -> tuple[int, int]:
        """0-based reader line and code point -> the client's line and character."""
        if line >= len(self.lines):
            line, column = len(self.lines) - 1, len(self.lines[-1])
        content = self.lines[max(line, 0)]
        prefix = content[: max(column, 0)]
        segment = prefix[prefix.rfind("\r") + 1 :]
        return self.first[max(line, 0)] + prefix.count("\r"), units(segment, self.encoding)

    def range(self, r: Range) -> Range:
        return (*self.position(r[0], r[1]), *self.position(r[2], r[3]))

    # client -> reader
    def reader(self, line: int, character: int) -> tuple[int, int]:
        """The client's line and character -> 0-based reader line and code point."""
        index = max(bisect.bisect_right(self.first, max(line, 0)) - 1, 0)
        content = self.lines[index]
        starts = [0, *(m.end() for m in re.finditer("\r", content))]
        segment = min(line - self.first[index], len(starts) - 1)
        start = starts[segment]
        end = starts[segment + 1] - 1 if segment + 1 < len(starts) else len(content)
        return index, start + _code_points(content[start:end], max(character, 0), self.encoding)

    def end(self) -> tuple[int, int]:
        """The client position after the last character."""
        return self.position(len(self.lines) - 1, len(self.lines[-1]))


def apply_change(text: str, where: Range | None, new: str, encoding: str = "utf-16") -> str:
    """`text` with the client's range `where` (None: the whole text) replaced by `new`."""
    if where is None:
        return new
    starts = line_starts(text, max(where[0], where[2]) + 1)
    start, end = (_offset(text, starts, line, char, encoding) for line, char in (where[:2], where[2:]))
    return text[:start] + new + text[max(start, end) :]


def line_starts(text: str, upto: int) -> list[int]:
    """The offsets where the client's lines 0..`upto` start (fewer when the text has fewer).
    Without CR, found by str.find up to the line edited: an edit of a 100,000-line buffer does
    not scan all of it (40 ms)."""
    if "\r" in text:
        return [0, *(m.end() for m in _CLIENT_BREAK.finditer(text))][: upto + 1]
    starts, at = [0], 0
    while len(starts) <= upto:
        at = text.find("\n", at) + 1
        if not at:
            break
        starts.append(at)
    return starts


def _offset(text: str, starts: Sequence[int], line: int, character: int, encoding: str) -> int:
    if line >= len(starts):
        return len(text)
    begin = starts[max(line, 0)]
    finish = starts[line + 1] if line + 1 < len(starts) else len(text)
    body = text[begin:finish].rstrip("\r\n") if line + 1 < len(starts) else text[begin:finish]
    return begin + _code_points(body, max(character, 0), encoding)
