"""The language server over raw JSON-RPC, as a sloppy client speaks it: requests before initialize
and after shutdown; and positions in UTF-16 code units on the client's lines (a lone CR ends one),
whatever the reader counts. Malformed framing: test_lsp_framing.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("pygls")

from modtrans.lsp.positions import Positions, apply_change, units
from tests.conftest import tcp_server

SERVER = [sys.executable, "-m", "modtrans", "lsp"]


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def _length(header: bytes) -> int:
    found = re.search(rb"Content-Length: (\d+)", header)
    assert found is not None, header
    return int(found.group(1))


def _session(*messages: dict[str, Any] | bytes, timeout: float = 60) -> tuple[list[dict[str, Any]], int, str]:
    """Send every message, close stdin, and return what the server said, its exit code, stderr."""
    raw = b"".join(m if isinstance(m, bytes) else _frame(m) for m in messages)
    done = subprocess.run(SERVER, input=raw, capture_output=True, timeout=timeout, check=False)
    replies, out = [], done.stdout
    while out:
        header, _, rest = out.partition(b"\r\n\r\n")
        length = _length(header)
        replies.append(json.loads(rest[:length]))
        out = rest[length:]
    return replies, done.returncode, done.stderr.decode()


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "initialized", "params": {}}
SHUTDOWN = {"jsonrpc": "2.0", "id": 90, "method": "shutdown"}
EXIT = {"jsonrpc": "2.0", "method": "exit"}


def _hover(uri: str, request: int) -> dict[str, Any]:
    where = {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}
    return {"jsonrpc": "2.0", "id": request, "method": "textDocument/hover", "params": where}


def _open(uri: str, text: str) -> dict[str, Any]:
    item = {"uri": uri, "languageId": "plaintext", "version": 1, "text": text}
    return {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": item}}


def _published(text: str, encodings: list[str] | None = None) -> dict[str, Any]:
    """The diagnostics the server publishes for `text` (an interactive session)."""
    initialize = json.loads(json.dumps(INITIALIZE))
    if encodings:
        initialize["params"]["capabilities"] = {"general": {"positionEncodings": encodings}}
    with subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as process:
        assert process.stdin is not None
        assert process.stdout is not None
        for message in (initialize, INITIALIZED, _open("file:///e.txt", text)):
            process.stdin.write(_frame(message))
        process.stdin.flush()
        while True:
            header = b""
            while not header.endswith(b"\r\n\r\n"):
                header += process.stdout.read(1)
            reply: dict[str, Any] = json.loads(process.stdout.read(_length(header)))
            if reply.get("method") == "textDocument/publishDiagnostics":
                process.stdin.write(_frame(SHUTDOWN) + _frame(EXIT))
                process.stdin.close()
                return reply


def test_requests_before_initialize_and_after_shutdown_get_errors() -> None:
    replies, code, _ = _session(
        _hover("file:///a.txt", 7), INITIALIZE, INITIALIZED, SHUTDOWN, _hover("x", 8), EXIT
    )
    by_id = {r.get("id"): r for r in replies}
    assert by_id[7]["error"]["code"] == -32002  # ServerNotInitialized
    assert "capabilities" in by_id[1]["result"]
    assert by_id[90]["result"] is None
    assert by_id[8]["error"]["code"] == -32600  # InvalidRequest
    assert code == 0


def test_diagnostics_are_in_utf16_units_on_the_clients_lines() -> None:
    # line 3 has an emoji (two UTF-16 units) before the bad token; line 4 holds a lone CR, which
    # the reader keeps in the line (P103) and the client counts as a line break.
    text = "DATA\n2\n\U0001f600x -1 1 NONE 0 1 NONE 0 1 NONE 0 BAD\nl2 -1 1 NONE 0 1\rNONE 0 1 NONE 0 1\n"
    published = _published(text)
    ranges = {d["code"]: d["range"] for d in published["params"]["diagnostics"]}
    client_lines = re.split(r"\r\n|\r|\n", text)
    bad = ranges["V202"]["start"]
    assert (
        client_lines[bad["line"]]
        .encode("utf-16-le")[2 * bad["character"] :]
        .decode("utf-16-le")
        .startswith("BAD")
    )
    cr = ranges["P103"]["start"]
    assert (cr["line"], cr["character"]) == (3, len("l2 -1 1 NONE 0 1"))  # the end of the client's line 4


def test_a_negotiated_utf8_encoding_counts_bytes() -> None:
    text = "DATA\n1\n\u00e9\U0001f600 -1 1 NONE 0 1 NONE 0 1 NONE 0 BAD\n"
    published = _published(text, ["utf-8"])
    (bad,) = [d for d in published["params"]["diagnostics"] if d["code"] == "V202"]
    line = text.split("\n")[2]
    assert bad["range"]["start"]["character"] == len(line[: line.index("BAD")].encode("utf-8"))


_TEXT = st.lists(st.sampled_from(["a", " ", "\n", "\r", "\r\n", "\f", "\x0b", "é", "\U0001f600"])).map(
    "".join
)


@given(_TEXT, st.sampled_from(["utf-16", "utf-8", "utf-32"]))
def test_positions_agree_with_the_clients_count(text: str, encoding: str) -> None:
    positions = Positions(text, encoding)
    client = re.split(r"\r\n|\r|\n", text)
    offset = 0  # walk the text: every code point's reader position maps to the client's
    reader_line, reader_column = 0, 0
    client_line, client_column = 0, 0
    index = 0
    while index <= len(text):
        assert positions.position(reader_line, reader_column) == (client_line, client_column)
        assert positions.reader(client_line, client_column) == (reader_line, reader_column)
        if index == len(text):
            break
        char = text[index]
        if char == "\n":
            reader_line, reader_column = reader_line + 1, 0
            client_line, client_column = client_line + 1, 0
        elif char == "\r" and text[index + 1 : index + 2] == "\n":
            index += 1  # CRLF: one break for both
            reader_line, reader_column = reader_line + 1, 0
            client_line, client_column = client_line + 1, 0
        elif char == "\r":
            reader_column += 1
            client_line, client_column = client_line + 1, 0
        else:
            reader_column += 1
            client_column += units(char, encoding)
        index += 1
        offset += 1
    assert client_line == len(client) - 1
    assert positions.end() == (len(client) - 1, units(client[-1], encoding))


@given(_TEXT, st.data())
def test_an_incremental_change_lands_where_the_client_put_it(text: str, data: st.DataObject) -> None:
    lines = re.split(r"\r\n|\r|\n", text)
    line = data.draw(st.integers(0, len(lines) - 1))
    column = data.draw(st.integers(0, len(lines[line])))
    units16 = units(lines[line][:column], "utf-16")
    changed = apply_change(text, (line, units16, line, units16), "<>", "utf-16")
    new_lines = re.split(r"\r\n|\r|\n", changed)
    assert new_lines[line] == lines[line][:column] + "<>" + lines[line][column:]
    assert apply_change(text, None, "whole") == "whole"


def test_over_tcp_a_session_ends_cleanly_on_exit() -> None:
    with tcp_server(SERVER) as (process, client):
        client.sendall(_frame(INITIALIZE) + _frame(SHUTDOWN) + _frame(EXIT))
        assert process.wait(timeout=30) == 0
        assert process.stderr is not None
        assert b"Traceback" not in process.stderr.read()


@given(_TEXT, st.integers(0, 12))
def test_the_line_starts_up_to_an_edit_are_those_of_the_whole_text(text: str, upto: int) -> None:
    from modtrans.lsp.positions import line_starts

    every = [0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", text))]
    assert line_starts(text, upto) == every[: upto + 1]


@given(_TEXT, st.data())
def test_a_range_change_replaces_exactly_that_range(text: str, data: st.DataObject) -> None:
    """Against the offsets counted over the whole text's line starts (how it was done before
    the starts were found only up to the edit), for ranges anywhere, past the end included."""
    every = [0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", text))]

    def offset(line: int, character: int) -> int:  # utf-32: one unit per code point
        if line >= len(every):
            return len(text)
        finish = every[line + 1] if line + 1 < len(every) else len(text)
        body = text[every[line] : finish].rstrip("\r\n") if line + 1 < len(every) else text[every[line] :]
        return every[line] + min(character, len(body))

    first = data.draw(st.integers(0, len(every) + 1))
    last = data.draw(st.integers(first, len(every) + 2))
    a, b = data.draw(st.integers(0, 6)), data.draw(st.integers(0, 6))
    start, end = offset(first, a), offset(last, b)
    expected = text[:start] + "<>" + text[max(start, end) :]
    assert apply_change(text, (first, a, last, b), "<>", "utf-32") == expected


def test_the_server_keeps_one_copy_of_each_document() -> None:
    """Open, change and close reach the server's features without pygls's workspace copying or
    patching the text (a second 100,000-line copy, 50 ms a keystroke). Before `initialize` there is
    no workspace: pygls's own handlers would raise on touching it."""
    from lsprotocol import types as lsp

    from modtrans.lsp.server import server

    protocol = server.protocol
    uri = "file:///w.txt"
    item = lsp.TextDocumentItem(uri=uri, language_id="plaintext", version=1, text="DATA\n0\n")
    steps = [
        protocol.lsp_text_document__did_open(lsp.DidOpenTextDocumentParams(item)),
        protocol.lsp_text_document__did_change(
            lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
                [lsp.TextDocumentContentChangeWholeDocument(text="MODEL\n0\n")],
            )
        ),
        protocol.lsp_text_document__did_close(
            lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri=uri))
        ),
    ]
    for step in steps:
        handler, _, _ = next(step)  # each hands its notification on to the feature
        assert callable(handler)


def test_completion_over_the_wire_follows_the_dialect_setting() -> None:
    """Completion items replace the token under the cursor, in UTF-16 units (an emoji before it
    counts two), and offer SimAI's _EP types once the setting says simai."""
    text = "DATA\n1\n\U0001f600conv -1 5 NONE 0 5 NONE 0 5 ALLR 64 5\n"
    column = len(text.split("\n")[2][: text.split("\n")[2].index("ALLR")]) + 1  # UTF-16: +1 for the emoji

    def completion(request: int, line: int, character: int) -> dict[str, Any]:
        where = {"textDocument": {"uri": "file:///c.txt"}, "position": {"line": line, "character": character}}
        return {"jsonrpc": "2.0", "id": request, "method": "textDocument/completion", "params": where}

    simai = {"settings": {"modtrans": {"dialect": "simai"}}}
    replies, code, stderr = _session(
        INITIALIZE,
        INITIALIZED,
        _open("file:///c.txt", text),
        completion(10, 2, column + 2),
        {"jsonrpc": "2.0", "method": "workspace/didChangeConfiguration", "params": simai},
        completion(11, 2, column),
        completion(12, 0, 0),
        completion(13, 2, 0),
        SHUTDOWN,
        EXIT,
    )
    by_id = {r.get("id"): r for r in replies}
    assert by_id[1]["result"]["capabilities"]["completionProvider"] is not None
    astra = by_id[10]["result"]
    assert [i["label"] for i in astra] == ["NONE", "ALLREDUCE", "ALLGATHER", "REDUCESCATTER", "ALLTOALL"]
    assert astra[1]["textEdit"]["range"] == {
        "start": {"line": 2, "character": column},
        "end": {"line": 2, "character": column + 4},
    }
    assert astra[1]["textEdit"]["newText"] == "ALLREDUCE"
    assert "ALLREDUCE_EP" in [i["label"] for i in by_id[11]["result"]]
    assert by_id[12]["result"][0]["label"] == "DATA"
    assert by_id[13]["result"] == []  # a layer name
    assert code == 0
    assert stderr == ""
