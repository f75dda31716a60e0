"""JSON text read with positions: values from the standard library's reader, spans from a scanner.

`loads` never raises anything but `JSONSyntaxError` (line and column of the problem): nesting
deeper than MAX_DEPTH, integers longer than MAX_DIGITS and NaN/Infinity are refused, where the
standard reader would recurse, refuse int() or accept what JSON does not allow. `SourceMap`
finds the span of the value at a JSON path (["layers", 3, "fwd", "comm_size"]) with an
iterative scanner; it indexes the first two levels once and scans deeper only on request.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Sequence
from typing import Any

from modtrans.diagnostics import Span
from modtrans.integers import integer  # one limit for text and JSON

MAX_DEPTH = 64  # far deeper than any document ModTrans reads (a workload is 4 deep)

_TOKEN = re.compile(
    r"""(?P<ws>[ \t\n\r]+)
      | (?P<str>"(?:[^"\\\x00-\x1f]|\\.)*")
      | (?P<num>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
      | (?P<lit>true|false|null)
      | (?P<punct>[{}\[\]:,])""",
    re.VERBOSE,
)

Path = tuple[str | int, ...]
_DECODE = json.JSONDecoder().raw_decode
_BLANK = re.compile(r"[ \t\n\r]*")


def _skip(text: str, offset: int) -> int:
    return _BLANK.match(text, offset).end()  # type: ignore[union-attr]  # `*` always matches


class JSONSyntaxError(ValueError):
    """Text that is not JSON ModTrans reads, with the 1-based line and column of the problem."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"{message} (line {line}, column {column})")
        self.message, self.line, self.column = message, line, column


class _Refused(Exception):
    pass


def _integer(text: str) -> int:
    value = integer(text)
    if value is None:
        raise _Refused
    return value


def _constant(text: str) -> Any:
    raise _Refused


def loads(text: str) -> Any:
    """The value of a JSON document; raises JSONSyntaxError (positioned) for anything else."""
    try:
        value = json.loads(text, parse_int=_integer, parse_constant=_constant)
    except json.JSONDecodeError as error:
        raise JSONSyntaxError(error.msg, error.lineno, error.colno) from None
    except (_Refused, RecursionError):
        SourceMap(text).scan()  # finds the refused value and raises with its position
        raise JSONSyntaxError("not a JSON document ModTrans reads", 1, 1) from None
    if _too_deep(value):
        SourceMap(text).scan()  # raises at the first container past MAX_DEPTH
        raise JSONSyntaxError(f"nested more than {MAX_DEPTH} deep", 1, 1)
    return value


def _too_deep(value: Any) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > MAX_DEPTH:
                    return True
                stack.append((child, depth + 1))
    return False


class SourceMap:
    """Where the values of one JSON text are. Nothing is scanned until a span is asked for (a
    valid 100,000-layer document never needs one: its scan took 5 s). scan() raises
    JSONSyntaxError on what `loads` refuses."""

    def __init__(self, text: str) -> None:
        self.text = text
        # Line starts known so far, and their line numbers: a position is counted from the
        # nearest one before it (lines as the workload reader counts them: LF ends a line, a
        # lone CR does not, so a JSON span and a text span mean the same place).
        self._starts, self._numbers = [0], [1]
        self._index: dict[Path, tuple[int, int]] = {}
        self._indexed = False

    def scan(self) -> None:
        """Read the whole document as `loads` does; raises JSONSyntaxError where it refuses."""
        self._index.clear()
        self._scan(0, (), depth_to_index=2)
        self._indexed = True

    def _ensure_index(self) -> None:
        """The first two levels, indexed once. The document is one `loads` read, so the standard
        library's reader can step over every value in C (0.3 s for 100,000 layers, where the
        token scanner took 5 s); anything it does not expect gets the scanner's own answer."""
        if self._indexed:
            return
        self._indexed = True
        try:
            self._value(_skip(self.text, 0), (), 2)
        except (ValueError, IndexError):  # not JSON after all: the scanner says where
            self.scan()

    def _value(self, offset: int, path: Path, levels: int) -> int:
        """Index the value at `offset` and, `levels` deep, the values inside it; its end."""
        if levels and self.text[offset] in "{[":
            end = self._members(offset, path, levels - 1)
        else:
            end = _DECODE(self.text, offset)[1]
        self._index[path] = (offset, end)
        return end

    def _members(self, offset: int, path: Path, levels: int) -> int:
        text = self.text
        closing, count = ("}" if text[offset] == "{" else "]"), 0
        position = _skip(text, offset + 1)
        while text[position] != closing:
            if closing == "}":
                key, position = _DECODE(text, position)
                member: Path = (*path, key)
                position = _skip(text, _skip(text, position) + 1)  # past the colon
            else:
                member, count = (*path, count), count + 1
            position = _skip(text, self._value(position, member, levels))
            if text[position] == ",":
                position = _skip(text, position + 1)
        return position + 1

    def span(self, path: Sequence[str | int]) -> Span | None:
        """The span of the value at `path`, or of its nearest ancestor that exists."""
        self._ensure_index()
        path = tuple(path)
        for cut in range(min(len(path), 2), -1, -1):
            if path[:cut] in self._index:
                start, end = self._index[path[:cut]]
                break
        else:
            return None
        if len(path) > cut:
            deeper = self._find(start, path[:cut], path)
            if deeper is not None:
                start, end = deeper
        return self._span(start, end)

    def _span(self, start: int, end: int) -> Span:
        line, column = self._position(start)
        end_line, end_column = self._position(end)
        return Span(line, column, end_line, end_column)

    def _position(self, offset: int) -> tuple[int, int]:
        at = bisect.bisect_right(self._starts, offset) - 1
        known, line = self._starts[at], self._numbers[at]
        start = self.text.rfind("\n", known, offset) + 1 or known
        if start > known:
            line += self.text.count("\n", known, start)
            self._starts.insert(at + 1, start)  # in order: the next position counts from here
            self._numbers.insert(at + 1, line)
        return line, offset - start + 1

    def _error(self, message: str, offset: int) -> JSONSyntaxError:
        line, column = self._position(offset)
        return JSONSyntaxError(message, line, column)

    def _find(self, start: int, base: Path, wanted: Path) -> tuple[int, int] | None:
        found: dict[Path, tuple[int, int]] = {}
        self._scan(start, base, want=wanted, into=found)
        for cut in range(len(wanted), len(base), -1):
            if wanted[:cut] in found:
                return found[wanted[:cut]]
        return None

    def _scan(
        self,
        start: int,
        base: Path,
        *,
        depth_to_index: int = 0,
        want: Path | None = None,
        into: dict[Path, tuple[int, int]] | None = None,
    ) -> None:
        """Walk one value from `start`, recording (start, end) offsets of values by path: every
        value up to `depth_to_index` levels below `base` into the index, or the prefixes of
        `want` into `into`."""
        text, match, record = self.text, _TOKEN.match, self._index if into is None else into
        # A frame: [path, start offset, is_object, next key or index, expecting a key]
        stack: list[list[Any]] = []
        offset, key_pending = start, False
        pending: Path = base
        while True:
            token = match(text, offset)
            if token is None:
                raise self._error("not JSON here (NaN, Infinity and comments are not JSON)", offset)
            kind, end = token.lastgroup, token.end()
            if kind == "ws":
                offset = end
                continue
            value = token.group()
            if kind == "punct" and value in ":,":
                if value == "," and stack:
                    frame = stack[-1]
                    if frame[2]:
                        key_pending = True
                    else:
                        frame[3] += 1
                        pending = (*frame[0], frame[3])
                offset = end
                continue
            if key_pending and kind == "str":
                try:
                    name = json.loads(value)
                except json.JSONDecodeError:
                    raise self._error("a key that is not a JSON string", offset) from None
                pending = (*stack[-1][0], name)
                key_pending = False
                offset = end
                continue
            if kind == "punct" and value in "}]":
                frame = stack.pop()
                key_pending = False
                self._keep(record, frame[0], frame[1], end, base, depth_to_index, want)
                if not stack:
                    return
                offset = end
                continue
            if kind == "punct":  # { or [
                if len(stack) + len(base) >= MAX_DEPTH:
                    raise self._error(f"nested more than {MAX_DEPTH} deep", offset)
                is_object = value == "{"
                stack.append([pending, offset, is_object, 0, is_object])
                key_pending = is_object
                if not is_object:
                    pending = (*pending, 0)
                offset = end
                continue
            whole = kind == "num" and not any(c in value for c in ".eE")
            if whole and integer(value) is None:
                raise self._error(f"an integer of {len(value.lstrip('-'))} digits", offset)
            self._keep(record, pending, offset, end, base, depth_to_index, want)
            if not stack:
                return
            offset = end

    @staticmethod
    def _keep(
        record: dict[Path, tuple[int, int]],
        path: Path,
        start: int,
        end: int,
        base: Path,
        depth: int,
        want: Path | None,
    ) -> None:
        if want is None:
            if len(path) - len(base) <= depth:
                record[path] = (start, end)
        elif want[: len(path)] == path:
            record[path] = (start, end)
