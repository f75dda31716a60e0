"""`modtrans lsp` under malformed framing, spoken to by a raw JSON-RPC client (bytes over pipes
or a socket, no LSP library): every kind of broken frame is one line on stderr, never a
traceback, and the well-formed requests after it are answered."""

from __future__ import annotations

import asyncio
import json
import random
import re
import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("pygls")

from modtrans.lsp.server import READ_BYTES, Frames
from tests import fuzzing
from tests.conftest import tcp_server

SERVER = [sys.executable, "-m", "modtrans", "lsp"]
URI = "file:///w.txt"


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def _hover(request: int) -> dict[str, Any]:
    where = {"textDocument": {"uri": URI}, "position": {"line": 0, "character": 1}}
    return {"jsonrpc": "2.0", "id": request, "method": "textDocument/hover", "params": where}


def _symbols(request: int) -> dict[str, Any]:
    where = {"textDocument": {"uri": URI}}
    return {"jsonrpc": "2.0", "id": request, "method": "textDocument/documentSymbol", "params": where}


INITIALIZE = _frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})
OPEN = _frame(
    {
        "jsonrpc": "2.0",
        "method": "textDocument/didOpen",
        "params": {"textDocument": {"uri": URI, "languageId": "x", "version": 1, "text": "DATA\n0\n"}},
    }
)
END = _frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}) + _frame({"jsonrpc": "2.0", "method": "exit"})
SKIPPED = json.dumps(_hover(999)).encode()  # a request in a frame that must be skipped, not answered
JUNK = bytes(random.Random(7).randrange(256) for _ in range(3000)).replace(b"\n", b"\r")

# Each malformed piece of a stream, and the one stderr line it must cause (None: none, it is valid):
# framing, which the frame reader reports, then bodies, which the protocol reports.
FRAMING: list[tuple[str, bytes, str | None]] = [
    ("letters", b"Content-Length: abc\r\n\r\n" + SKIPPED, "Content-Length 'abc' is not a byte count"),
    ("negative", b"Content-Length: -5\r\n\r\n" + SKIPPED, "Content-Length '-5' is not a byte count"),
    ("float", b"Content-Length: 1e3\r\n\r\n" + SKIPPED, "Content-Length '1e3' is not a byte count"),
    ("empty", b"Content-Length:\r\n\r\n" + SKIPPED, "Content-Length '' is not a byte count"),
    ("huge", b"Content-Length: 1000000000000\r\n\r\n" + SKIPPED, "1000000000000 is over the 256 MiB"),
    ("5000 digits", b"Content-Length: " + b"9" * 5000 + b"\r\n\r\n" + SKIPPED, "of 5000 digits is over"),
    ("just over", b"Content-Length: 268435457\r\n\r\n" + SKIPPED, "268435457 is over the 256 MiB limit"),
    ("missing", b"Content-Type: application/vscode-jsonrpc\r\n\r\n" + SKIPPED, "without Content-Length"),
    ("lower case", b"content-length: %d\r\n\r\n%s" % (len(SKIPPED), SKIPPED), None),
    ("LF only", b"Content-Length: %d\n\n%s" % (len(SKIPPED), SKIPPED), None),
    ("mixed", b"CONTENT-LENGTH:%d\nContent-Type: x\r\n\n%s" % (len(SKIPPED), SKIPPED), None),
    ("blank lines", b"\r\n\r\n\n", None),
    ("200 KB line", b"X-Junk: " + b"a" * 200_000 + b"\r\n\r\n" + SKIPPED, "a header line over 8192 bytes"),
    ("200 KB length", b"Content-Length: " + b"0" * 200_000 + b"\r\n\r\n", "a header line over 8192 bytes"),
    ("binary junk", JUNK, "junk between messages"),
    ("junk glued", b"\x00\xff garbage", "junk between messages"),
    ("bad header", b"Content-Length: 5\r\n:::\r\n\r\n{}", "a header line that is not `name: value`"),
    ("two lengths", b"Content-Length: 5\r\nContent-Length: 6\r\n\r\n{}", "two different Content-Length"),
    ("many headers", b"A: b\r\n" * 40 + b"\r\n", "a header block of over 32 lines"),
]
BODIES: list[tuple[str, bytes, str | None]] = [
    ("invalid JSON", b"Content-Length: 5\r\n\r\n{{{{{", "a 5-byte message body is not JSON"),
    ("bad UTF-8", b"Content-Length: 4\r\n\r\n\xff\xfe\xfd\xfc", "a 4-byte message body is not JSON"),
    ("deep JSON", b"Content-Length: 200000\r\n\r\n" + b"[" * 100_000 + b"]" * 100_000, "is not JSON"),
    ("zero length", b"Content-Length: 0\r\n\r\n", "a 0-byte message body is not JSON"),
    ("array", b"Content-Length: 6\r\n\r\n[1, 2]", "JSON (list) but not a JSON-RPC message"),
    ("number", b"Content-Length: 1\r\n\r\n5", "JSON (int) but not a JSON-RPC message"),
    ("no jsonrpc", _frame({"id": 6, "method": "x"}), "JSON (an object without a jsonrpc string)"),
    ("bad params", _frame(_hover(5) | {"params": {"textDocument": 5}}), "request 5 'textDocument/hover'"),
    (
        "bad notification",
        _frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": []}),
        "notification 'textDocument/didOpen': Invalid Params",
    ),
]
CASES = FRAMING + BODIES


def _replies(stream: bytes) -> list[dict[str, Any]]:
    return list(fuzzing._replies(stream))


def _answered(replies: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {r["id"]: r for r in replies if "id" in r and "method" not in r}


def _stream(cases: list[tuple[str, bytes, str | None]]) -> tuple[bytes, list[str]]:
    """Every case, each followed by two well-formed requests (ids 100+2i, 101+2i); the first case
    comes before initialize. The request inside case i has id 900+i."""
    stream, expected = b"", []
    for index, (_, piece, line) in enumerate(cases):
        stream += piece.replace(b'"id": 999', b'"id": %d' % (900 + index))
        stream += INITIALIZE + OPEN if index == 0 else b""
        stream += _frame(_hover(100 + 2 * index)) + _frame(_symbols(101 + 2 * index))
        expected += [line] if line else []
    return stream + END, expected


def test_every_malformed_frame_is_one_line_and_the_next_requests_are_answered() -> None:
    stream, expected = _stream(CASES)
    done = subprocess.run(SERVER, input=stream, capture_output=True, timeout=120, check=False)
    stderr = done.stderr.decode()
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == len(expected), stderr
    for reported, want in zip(lines, expected, strict=True):
        assert reported.startswith("modtrans lsp: ")
        assert want in reported, (want, reported)
    answered = _answered(_replies(done.stdout))
    for index, (name, piece, line) in enumerate(CASES):
        hover, symbols = answered[100 + 2 * index], answered[101 + 2 * index]
        assert "**DATA**" in hover["result"]["contents"]["value"], name
        assert [s["name"] for s in symbols["result"]] == ["DATA"], name
        if SKIPPED in piece:  # answered when the frame is valid, not guessed at when it is refused
            assert (900 + index in answered) is (line is None), name
    assert answered[5]["error"]["code"] == -32602  # the request with bad params gets its error
    assert answered[6]["error"]["code"] == -32600  # and one without "jsonrpc" InvalidRequest
    assert answered[2]["result"] is None  # shutdown
    assert done.returncode == 0


def test_a_stream_that_ends_in_a_body_is_one_line_and_a_clean_exit() -> None:
    tail = b'Content-Length: 100\r\n\r\n{"jsonrpc"'
    done = subprocess.run(
        SERVER, input=INITIALIZE + _frame(_hover(3)) + tail, capture_output=True, timeout=60
    )
    assert [r["id"] for r in _replies(done.stdout)] == [1, 3]
    stderr = done.stderr.decode()
    assert stderr == "modtrans lsp: the stream ended 10 bytes into a 100-byte message body\n"
    assert done.returncode == 0


def _frames(data: bytes, chunk: int) -> tuple[list[bytes], list[str]]:
    """What the frame reader makes of `data` read `chunk` bytes at a time (in process)."""
    view = memoryview(data)
    reports: list[str] = []

    async def read(size: int) -> bytes:
        nonlocal view
        piece, view = bytes(view[: min(size, chunk)]), view[min(size, chunk) :]
        return piece

    async def every() -> list[bytes]:
        frames = Frames(read, reports.append)
        bodies = []
        while (body := await frames.next()) is not None:
            bodies.append(body)
        return bodies

    return asyncio.run(every()), reports


@pytest.mark.parametrize("chunk", [2, 14, 1 << 16])
def test_the_frame_reader_resynchronises_whatever_the_reads(chunk: int) -> None:
    """The same bodies and reports whether the stream arrives in small reads or at once (a
    header, or the `Content-Length:` the scan looks for, cut by a read)."""
    stream, expected = _stream(FRAMING)
    bodies, reports = _frames(stream, chunk)
    assert len(reports) == len(expected)
    assert all(want in report for report, want in zip(reports, expected, strict=True))
    ids = [json.loads(b).get("id") for b in bodies]
    assert [i for i in ids if i is not None and 100 <= i < 900] == list(range(100, 100 + 2 * len(FRAMING)))


@pytest.mark.parametrize(
    ("tail", "report"),
    [
        (b"Content-Len", "the stream ended inside a message header"),
        (b"Content-Length: abc\r\n\r\n{}", "Content-Length 'abc' is not a byte count: skipped 25 bytes"),
        (b"\x00junk", "the stream ended inside a message header"),
        (b"\x00junk\r\n", "junk between messages: skipped 7 bytes, up to the end of the stream"),
        (b"\r\n\n", None),
    ],
)
def test_the_end_of_the_stream_anywhere_is_one_report(tail: bytes, report: str | None) -> None:
    bodies, reports = _frames(_frame(_hover(3)) + tail, 1 << 16)
    assert [json.loads(b)["id"] for b in bodies] == [3]
    assert len(reports) == (report is not None)
    assert report is None or report in reports[0]


def test_a_body_over_the_limit_is_scanned_not_allocated() -> None:
    """A body over the limit is skipped in reads of at most READ_BYTES: the buffer never holds
    it (here its first 16 MiB, then the end of the stream)."""
    sizes: list[int] = []
    reports: list[str] = []
    left = 16 << 20

    async def read(size: int) -> bytes:
        nonlocal left
        sizes.append(size)
        if len(sizes) == 1:
            return b"Content-Length: 314572800\r\n\r\n"
        piece = min(size, left, READ_BYTES)
        left -= piece
        return b"x" * piece

    async def first() -> bytes | None:
        return await Frames(read, reports.append).next()

    assert asyncio.run(first()) is None
    assert max(sizes) == READ_BYTES
    assert left == 0
    assert len(reports) == 1
    assert (
        f"314572800 is over the 256 MiB limit: skipped {(16 << 20) + 29} bytes, up to the end" in reports[0]
    )


def test_over_tcp_malformed_framing_is_survived_the_same_way() -> None:
    stream = INITIALIZE + OPEN
    for index, (_, piece, _) in enumerate(FRAMING[:12]):
        stream += piece + _frame(_hover(100 + index))
    with tcp_server(SERVER) as (process, client):
        client.sendall(stream + END)
        received = b""
        while chunk := client.recv(1 << 16):
            received += chunk
        assert process.wait(timeout=30) == 0
        assert process.stderr is not None
        stderr = process.stderr.read().decode()
    assert "Traceback" not in stderr
    assert len(stderr.splitlines()) == sum(1 for _, _, line in FRAMING[:12] if line) == 8
    answered = _answered(_replies(received))
    assert all("**DATA**" in answered[100 + i]["result"]["contents"]["value"] for i in range(12))


def test_the_hostile_session_check_can_fail() -> None:
    """The range check of the fuzzer's session is real: a range past a line's end, past the last
    line, or backwards is outside; a lone CR ends a client line."""
    point = {"start": {"line": 1, "character": 2}, "end": {"line": 1, "character": 2}}
    assert fuzzing._inside("ab\rcd", point)
    assert not fuzzing._inside("ab\ncd", point | {"end": {"line": 2, "character": 0}})
    assert not fuzzing._inside("ab\ncd", point | {"end": {"line": 1, "character": 3}})
    assert not fuzzing._inside("ab\ncd", point | {"end": {"line": 1, "character": 1}})
    assert not fuzzing._inside("abcd", point)
    assert fuzzing._inside(
        "\U0001f600\n", {"start": {"line": 0, "character": 2}, "end": {"line": 1, "character": 0}}
    )


def test_the_hostile_generator_holds_every_framing_problem() -> None:
    messages = list(fuzzing.lsp_messages(3, 400))
    wire = b"".join(m.data for m in messages)
    for problem in (
        b"content-length: ",
        b"Content-Length: abc",
        b"Content-Type: text/plain\r\n\r\n",
        b"X-Junk",
    ):
        assert problem in wire
    assert re.search(rb"Content-Length: \d+\n\n", wire)
    assert sum(m.known is not None for m in messages) > 50


@pytest.mark.parametrize("closed", [0, 1])
def test_a_closed_stdin_or_stdout_is_one_line(closed: int) -> None:
    """Started with `<&-` or `>&-` (Python then has no sys.stdin or sys.stdout)."""
    import os

    def close() -> None:
        os.close(closed)

    pipe = subprocess.PIPE
    done = subprocess.run(
        SERVER, stdin=pipe, stdout=pipe, stderr=pipe, preexec_fn=close, timeout=60, check=False
    )
    assert done.stderr.decode() == "modtrans lsp: standard input or output is closed: no client to serve\n"
    assert done.returncode == 1
