"""File input and output: bounded, streaming reads that never raise, atomic writes.

Reading yields (content, line ending) pairs ready for the parser, or a one-line F0xx diagnostic
when the path is not a readable text file. A line longer than the parser's limit is cut at the
limit while reading, so a 1 GB line never enters memory.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from modtrans.diagnostics import Diagnostic, Span, diagnostic
from modtrans.workload.parse import MAX_LINE

_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class TextFile:
    """A file read as lines, or the reason it could not be read (`lines` is None then)."""

    path: str
    lines: list[tuple[str, str]] | None
    diagnostics: tuple[Diagnostic, ...] = ()

    @property
    def text(self) -> str:
        return "".join(content + eol for content, eol in self.lines or ())


def read_lines(path: str | Path) -> TextFile:
    """Read a workload file line by line; never raises for a bad path or bad bytes."""
    name = str(path)
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below in every branch
    except IsADirectoryError:
        return _unreadable(name, "is a directory")
    except FileNotFoundError:
        return _unreadable(name, "no such file")
    except OSError as error:
        return _unreadable(name, error.strerror or str(error))
    with handle:
        try:
            return _read(name, handle)
        except OSError as error:
            return _unreadable(name, error.strerror or str(error))


def _read(name: str, handle: object) -> TextFile:
    import io

    assert isinstance(handle, io.BufferedReader)
    lines: list[tuple[str, str]] = []
    found: list[Diagnostic] = []
    lineno = 0
    while True:
        raw = handle.readline(MAX_LINE + 2)
        if not raw:
            break
        lineno += 1
        if not raw.endswith(b"\n") and len(raw) > MAX_LINE:
            while (rest := handle.readline(_CHUNK)) and not rest.endswith(b"\n"):
                pass
            raw = raw[: MAX_LINE + 1] + b"\n"
        if b"\0" in raw:
            column = raw.index(b"\0") + 1
            return TextFile(
                name,
                None,
                (
                    diagnostic(
                        "F002",
                        f"NUL byte at line {lineno}, column {column}: not a workload text file",
                        path=name,
                    ),
                ),
            )
        body, eol = (
            (raw[:-2], "\r\n")
            if raw.endswith(b"\r\n")
            else ((raw[:-1], "\n") if raw.endswith(b"\n") else (raw, ""))
        )
        try:
            content = body.decode("utf-8")
        except UnicodeDecodeError as error:
            column = len(body[: error.start].decode("utf-8", "replace")) + 1
            found.append(
                diagnostic(
                    "P101",
                    f"byte 0x{body[error.start]:02X} is not UTF-8 (workload files are ASCII)",
                    path=name,
                    span=Span.at(lineno, column),
                )
            )
            content = body.decode("utf-8", "replace")
        lines.append((content, eol))
    return TextFile(name, lines, tuple(found))


def _unreadable(name: str, reason: str) -> TextFile:
    return TextFile(name, None, (diagnostic("F001", f"cannot read {name}: {reason}", path=name),))


def write_atomic(path: str | Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same folder and a rename.

    Either the whole new content is there afterwards or the old file is untouched. Raises OSError.
    """
    target = Path(path)
    mode = target.stat().st_mode & 0o777 if target.exists() else None
    fd, temporary = tempfile.mkstemp(dir=target.parent or ".", prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
