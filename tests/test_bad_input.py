"""Hostile input never escapes as an exception: empty, binary, non-UTF-8, huge lines, bad paths, fuzz."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import modtrans
from modtrans.fileio import read_lines
from modtrans.workload.load import validate_file
from modtrans.workload.parse import MAX_LINE
from tests.conftest import corpus_files


def _codes(path: Path) -> list[str]:
    _, found = validate_file(path)
    return [d.code for d in found]


def test_missing_file_and_directory(tmp_path: Path) -> None:
    assert _codes(tmp_path / "nope.txt") == ["F001"]
    assert _codes(tmp_path) == ["F001"]


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\x08\x07\x12\x07pytorch\x00\x00\xff\xfe" * 100)
    assert _codes(path) == ["F002"]


def test_non_utf8_is_positioned_and_the_rest_still_checked(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("DATA\n2\nconv\xe9 -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1\nb -1 x\n".encode("latin-1"))
    _, found = validate_file(path)
    assert [(d.code, d.span.line, d.span.column) for d in found if d.span] == [("P101", 3, 5), ("P130", 4, 7)]


@pytest.mark.slow
@pytest.mark.alone
def test_one_gigabyte_line_is_reported_without_reading_it_into_memory(tmp_path: Path) -> None:
    path = tmp_path / "huge.txt"
    size = 1 << 30
    with path.open("wb") as out:
        out.write(b"DATA\n1\n")
        out.truncate(size)  # a sparse 1 GiB run of NUL bytes would be binary: fill with a letter
    with path.open("r+b") as out:
        out.seek(7)
        block = b"a" * (1 << 24)
        for _ in range((size - 7) // len(block)):
            out.write(block)
        out.write(b"a" * ((size - 7) % len(block)) + b"\nb -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n")
    file = read_lines(path)
    assert file.lines is not None
    assert max(len(c) for c, _ in file.lines) == MAX_LINE + 1
    _, found = validate_file(path)
    assert [(d.code, d.span.line if d.span else 0) for d in found] == [("P102", 3), ("V201", 2)] or [
        (d.code, d.span.line if d.span else 0) for d in found
    ] == [("V201", 2), ("P102", 3)]


def test_empty_and_blank_files() -> None:
    assert [d.code for d in modtrans.validate("")] == ["P110"]
    assert [d.code for d in modtrans.validate("\n\n")] == ["P110", "V250", "V250"]
    assert [d.code for d in modtrans.validate("DATA\n")] == ["P120"]


def _mutations(text: str, rng: random.Random) -> str:
    kind = rng.randrange(4)
    if kind == 0 and text:  # byte flip
        i = rng.randrange(len(text))
        return text[:i] + chr(rng.randrange(1, 0x250)) + text[i + 1 :]
    if kind == 1:  # truncation
        return text[: rng.randrange(len(text) + 1)]
    tokens = text.split()
    if kind == 2 and len(tokens) > 2:  # token swap
        i, j = rng.randrange(len(tokens)), rng.randrange(len(tokens))
        a, b = tokens[i], tokens[j]
        return text.replace(a, "\0", 1).replace(b, a, 1).replace("\0", b, 1)
    lines = text.split("\n")  # line duplication / deletion
    i = rng.randrange(len(lines))
    return "\n".join(lines[:i] + lines[i + 1 :] if rng.random() < 0.5 else lines[: i + 1] + lines[i:])


@pytest.mark.fuzz
def test_fuzz_mutations_of_real_files_never_raise() -> None:
    rng = random.Random(20261130)
    sources = [p.read_bytes().decode() for p in corpus_files() if p.stat().st_size < 20_000]
    cases = 0
    for _ in range(2500):
        text = _mutations(rng.choice(sources), rng)
        for _ in range(rng.randrange(3)):
            text = _mutations(text, rng)
        found = modtrans.validate(text, dialect=rng.choice(list(modtrans.Dialect)))
        assert all(d.span is not None for d in found), [str(d) for d in found if d.span is None]
        result = modtrans.parse(text)
        if result.workload is not None and result.ok:
            assert modtrans.write(result.workload) == text
        cases += 1
    assert cases == 2500


@pytest.mark.parametrize("garbage", ["\x00\x01\x02", "DATA\n1\n" + "\x7f" * 10, "\ufeff", "\r", "\r\r\n"])
def test_odd_strings(garbage: str) -> None:
    for d in modtrans.validate(garbage):
        assert d.span is not None


_FILES = [
    b"DATA\n1\nl -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n",
    b"DATA\r\n1\r\nl -1 1 NONE 0 1 NONE 0 1 NONE 0 1",  # CRLF, no final line break
    b"\xef\xbb\xbfDATA\n\n\n1\n \t\nl\r -1\n",  # a BOM, blank lines, a lone CR
    b"DATA\n1\nl\xff -1\n",  # not UTF-8: P101 at its column
    b"DATA\n1\nl\x00\n",  # NUL: F002
    b"DATA\n1\n" + b"x" * (1 << 20) + b"y" * 5 + b"\n" + b"z\n",  # a line past MAX_LINE: P102
    b"DATA\n1\n" + "\u00e9".encode() * ((1 << 18) + 1) + b"\n",  # 2 bytes a character: fast path refuses
    b"",
    b"\n",
]


@pytest.mark.parametrize("index", range(len(_FILES)))
def test_a_file_read_in_one_piece_is_what_reading_it_line_by_line_gives(index: int, tmp_path: Path) -> None:
    """fileio reads the usual file whole and splits it in C; every other file line by line. Both
    give the same lines and the same findings, whichever reads it."""
    from modtrans import fileio

    path = tmp_path / "w.txt"
    path.write_bytes(_FILES[index])
    with path.open("rb") as handle:
        slow = fileio._read(str(path), handle)
    assert fileio.read_lines(path) == slow
