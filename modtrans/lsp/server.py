"""`modtrans lsp`: the language server (pygls 2.x). The only module that imports pygls / lsprotocol.

Diagnostics are those of `modtrans validate` for the unsaved buffer (same codes, severities,
messages and ranges; LSP's 0-based positions; source "modtrans"), published on open and on every
change, cleared on close. Checking runs off the event loop and only the newest version of a
buffer is published, so a 100,000-line buffer never blocks hover or typing. The dialect comes from
the initialization option `{"dialect": "chakra"}` (or the `modtrans.dialect` setting), else from the
header line, as `modtrans validate` detects it. Text that does not look like a workload gets no
diagnostics (clients often send every .txt file). Completion offers what that dialect reads: the
keywords and header keys of line 1, the comm types and the per-layer parallelism of layer lines.

The stream is read by our own frame reader (Frames), not pygls's: malformed framing or bodies are
one line each on stderr, and the server reads on from the next well-formed header.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import queue
import re
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeGuard

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method

from modtrans import heap
from modtrans._version import __version__
from modtrans.diagnostics import Diagnostic
from modtrans.lsp import features
from modtrans.lsp.positions import Positions, apply_change
from modtrans.workload.model import Dialect
from modtrans.workload.parse import LineCache, ParseResult, parse
from modtrans.workload.validate import check_parsed

log = logging.getLogger(__name__)
DEBOUNCE_SECONDS = 0.05
MAX_MESSAGE_BYTES = 256 << 20  # a 100,000-layer buffer is about 6 MB
MAX_HEADER_LINE = 8 << 10  # bytes: LSP's headers are two short lines
MAX_HEADER_LINES = 32
READ_BYTES = 1 << 16
MAX_READ_BYTES = 4 << 20  # one read of a large body (a read allocates what it asks for)


@dataclass(frozen=True)
class Checked:
    version: int | None
    text: str
    result: ParseResult
    diagnostics: list[Diagnostic]
    positions: Positions


@dataclass
class Buffer:
    """An open document as the client has it (our own copy: pygls's applies edits with Python's
    line breaks, and would read a document that is not open from disk)."""

    version: int | None
    text: str


class _OneLine(logging.Filter):
    """Every record on stderr is one line: pygls logs a full traceback (and the whole message) for
    a malformed message or a failing handler. The first line is kept, cut to 300 characters, with
    the exception's type and text; pygls's "Unable to deserialize message" is dropped, since
    `Protocol.handle_body` reports that problem itself, naming the request."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.name.startswith("pygls") and text.startswith("Unable to deserialize message"):
            return False
        line = text.split("\n", 1)[0][:300]
        if record.exc_info and record.exc_info[1] is not None:
            line += f" ({_brief(record.exc_info[1])})"
        record.msg, record.args = line, ()
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def _brief(error: BaseException) -> str:
    """An exception as a short phrase: its type and the first line of its text."""
    text = str(error).split("\n", 1)[0][:200]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _shown(value: Any) -> str:
    """A value from a client's message, short enough for one log line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_id(value: Any) -> TypeGuard[int | str]:
    return isinstance(value, int | str) and not isinstance(value, bool)


class Protocol(LanguageServerProtocol):
    """pygls's protocol, answering as the LSP specification says where pygls does not: a request
    before `initialize` gets ServerNotInitialized, one after `shutdown` InvalidRequest, one whose
    params do not fit its method the error (pygls would drop it, leaving the client waiting)."""

    def handle_body(self, body: bytes) -> None:
        """One message body from the frame reader: parsed, structured and dispatched. Whatever is
        wrong with it is one line on stderr, and an error answer when it is a request we can
        name; nothing escapes, so the next message is read whatever this one was."""
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as error:  # bad JSON, bad UTF-8, nesting too deep
            log.warning("a %d-byte message body is not JSON (%s); skipped", len(body), _brief(error))
            return
        if not isinstance(data, dict) or not isinstance(data.get("jsonrpc"), str):
            kind = "an object without a jsonrpc string" if isinstance(data, dict) else type(data).__name__
            log.warning("a message body is JSON (%s) but not a JSON-RPC message; skipped", kind)
            if isinstance(data, dict) and "method" in data and _is_id(data.get("id")):
                self._answer(data["id"], -32600, "not a JSON-RPC 2.0 request")
            return
        ident, method = data.get("id"), data.get("method")
        what = f"notification {_shown(method)}"
        if "id" in data:
            what = f"request {_shown(ident)} {_shown(method)}"
        try:
            message = self.structure_message(data)
        except JsonRpcException as error:
            problem = f"{what}: {error.message} (its params or fields do not fit)"
            if "method" in data and _is_id(ident):
                log.warning("%s; answered with the error", problem)
                self._answer(ident, error.code, error.message)
            else:
                log.warning("%s; skipped", problem)
            return
        try:
            self.handle_message(message)
        except Exception as error:  # a defect of ours: one line, and the server reads on
            log.error("%s could not be handled (%s)", what, _brief(error))

    def _answer(self, ident: int | str, code: int, message: str) -> None:
        self._send_response(ident, error=lsp.ResponseError(code=code, message=message))

    # The server keeps its own copy of each open document (Buffer). pygls's workspace would keep a
    # second one and patch it on every change (50 ms a keystroke on a 100,000-line buffer), read by
    # nothing: these three hand the notifications to the features without touching it.
    @lsp_method(lsp.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: lsp.DidOpenTextDocumentParams) -> Any:
        if (handler := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: lsp.DidChangeTextDocumentParams) -> Any:
        if (handler := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: lsp.DidCloseTextDocumentParams) -> Any:
        if (handler := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None

    def handle_message(self, message: Any) -> None:
        method = getattr(message, "method", None)
        request = method is not None and getattr(message, "id", None) is not None
        if request and method != lsp.INITIALIZE and not getattr(self._server, "initialized", False):
            self._answer(message.id, -32002, "the server is not initialized yet")
            return
        if request and self._shutdown and method != lsp.EXIT:
            self._answer(message.id, -32600, "the server is shutting down")
            return
        early = not getattr(self._server, "initialized", False)
        if method is not None and not request and early and method != lsp.EXIT:
            return  # notifications before initialize are dropped, as the protocol says
        super().handle_message(message)


class WorkloadServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "modtrans",
            __version__,
            text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
            protocol_cls=Protocol,
        )
        self.dialect: Dialect | None = None
        self.initialized = False
        self.buffers: dict[str, Buffer] = {}
        self.checked: dict[str, Checked] = {}
        self.latest: dict[str, int | None] = {}
        self.lines: dict[str, LineCache] = {}  # per buffer: layer lines parsed last time
        self.lock = threading.Lock()

    @property
    def encoding(self) -> str:
        workspace = getattr(self.protocol, "_workspace", None)
        chosen = getattr(workspace, "position_encoding", None) or "utf-16"
        return str(getattr(chosen, "value", chosen))

    def set_dialect(self, value: Any) -> None:
        try:
            self.dialect = Dialect(value) if value else None
        except ValueError:
            self.window_log_message(
                lsp.LogMessageParams(lsp.MessageType.Warning, f"modtrans: unknown dialect {value!r}")
            )

    def analyse(self, uri: str, version: int | None, text: str) -> Checked | None:
        """Parse and validate `text`: safe off the event loop (touches no workspace state)."""
        if not features.looks_like_workload(text):
            return None
        # One analysis at a time: they share the line caches. An analysis builds about seven
        # objects per layer line, which live until the buffer's next analysis and are never in a
        # cycle: left to the cyclic collector, the first edit after opening a 100,000-line buffer
        # paid 0.2-0.3 s for traversing them, so they are built paused and then frozen.
        with self.lock, heap.frozen():
            result = parse(text, path=uri, cache=self.lines.setdefault(uri, LineCache()))
            found = check_parsed(result, dialect=self.dialect, path=uri)  # exactly `modtrans validate`
            checked = Checked(version, text, result, found, Positions(text, self.encoding))
        self.checked[uri] = checked
        return checked

    async def check(self, uri: str, version: int | None) -> None:
        self.latest[uri] = version
        await asyncio.sleep(DEBOUNCE_SECONDS)
        buffer = self.buffers.get(uri)
        if self.latest.get(uri) != version or buffer is None:
            return  # a newer change is on its way, or the buffer was closed
        text = buffer.text  # the snapshot, read on the loop
        checked = await asyncio.get_running_loop().run_in_executor(None, self.analyse, uri, version, text)
        if self.latest.get(uri) != version:
            return
        diagnostics = (
            [] if checked is None else [_diagnostic(d, checked.positions) for d in checked.diagnostics]
        )
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
        )

    def current(self, uri: str) -> Checked | None:
        """The checked state of an open buffer as it is now (checking it if a change is pending);
        None for a document that is not open or is not a workload."""
        buffer = self.buffers.get(uri)
        if buffer is None:
            return None
        cached = self.checked.get(uri)
        if cached is not None and cached.version == buffer.version and cached.text == buffer.text:
            return cached
        return self.analyse(uri, buffer.version, buffer.text)


def _range(r: features.Range) -> lsp.Range:
    return lsp.Range(
        start=lsp.Position(line=r[0], character=r[1]), end=lsp.Position(line=r[2], character=r[3])
    )


def _diagnostic(d: Diagnostic, positions: Positions) -> lsp.Diagnostic:
    return lsp.Diagnostic(
        range=_range(positions.range(features.to_range(d.span))),
        message=d.message,
        severity=lsp.DiagnosticSeverity(int(d.severity)),
        code=d.code,
        source="modtrans",
        data={"hint": d.hint} if d.hint else None,
    )


server = WorkloadServer()


@server.feature(lsp.INITIALIZE)
def initialize(ls: WorkloadServer, params: lsp.InitializeParams) -> None:
    ls.initialized = True
    options = params.initialization_options
    if isinstance(options, dict):
        ls.set_dialect(options.get("dialect"))


@server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def configuration(ls: WorkloadServer, params: lsp.DidChangeConfigurationParams) -> None:
    settings = params.settings
    if isinstance(settings, dict):
        ls.set_dialect((settings.get("modtrans") or {}).get("dialect"))
    for uri, buffer in list(ls.buffers.items()):
        await ls.check(uri, buffer.version)


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
async def did_open(ls: WorkloadServer, params: lsp.DidOpenTextDocumentParams) -> None:
    document = params.text_document
    ls.buffers[document.uri] = Buffer(document.version, document.text)
    await ls.check(document.uri, document.version)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
async def did_change(ls: WorkloadServer, params: lsp.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    buffer = ls.buffers.get(uri)
    if buffer is None:
        return  # a change to a document that is not open: nothing to apply it to
    for change in params.content_changes:
        where = getattr(change, "range", None)
        span = (
            None
            if where is None
            else (where.start.line, where.start.character, where.end.line, where.end.character)
        )
        buffer.text = apply_change(buffer.text, span, change.text, ls.encoding)
    buffer.version = params.text_document.version
    await ls.check(uri, buffer.version)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: WorkloadServer, params: lsp.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.buffers.pop(uri, None)
    ls.checked.pop(uri, None)
    ls.lines.pop(uri, None)
    ls.latest[uri] = -1  # drops a check still in flight
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
def hover(ls: WorkloadServer, params: lsp.HoverParams) -> lsp.Hover | None:
    checked = ls.current(params.text_document.uri)
    if checked is None:
        return None
    line, character = checked.positions.reader(params.position.line, params.position.character)
    found = features.hover(checked.text, line, character, checked.result)
    if found is None:
        return None
    return lsp.Hover(
        contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=found.markdown),
        range=_range(checked.positions.range(found.range)),
    )


@server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
def document_symbols(ls: WorkloadServer, params: lsp.DocumentSymbolParams) -> list[lsp.DocumentSymbol]:
    checked = ls.current(params.text_document.uri)
    if checked is None:
        return []
    kinds = {"header": lsp.SymbolKind.Namespace, "layer": lsp.SymbolKind.Field}
    return [
        lsp.DocumentSymbol(
            name=s.name,
            detail=s.detail,
            kind=kinds[s.kind],
            range=_range(checked.positions.range(s.range)),
            selection_range=_range(checked.positions.range(s.range)),
        )
        for s in features.symbols(checked.text, checked.result)
    ]


@server.feature(lsp.TEXT_DOCUMENT_FORMATTING)
def formatting(ls: WorkloadServer, params: lsp.DocumentFormattingParams) -> list[lsp.TextEdit]:
    checked = ls.current(params.text_document.uri)
    if checked is None:
        return []
    new = features.formatted(checked.text, ls.dialect, checked.result)
    if new is None:
        return []
    whole = (0, 0, *checked.positions.end())
    return [lsp.TextEdit(range=_range(whole), new_text=new)]


_COMPLETION_KINDS = {
    "keyword": lsp.CompletionItemKind.Keyword,
    "key": lsp.CompletionItemKind.Property,
    "comm": lsp.CompletionItemKind.EnumMember,
    "policy": lsp.CompletionItemKind.Keyword,
}


@server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions())
def completion(ls: WorkloadServer, params: lsp.CompletionParams) -> list[lsp.CompletionItem]:
    """features.completions at the cursor. A workload buffer is read as checked; an empty one
    (a new file) gets the keywords of line 1; other text gets nothing, as for diagnostics."""
    uri = params.text_document.uri
    buffer = ls.buffers.get(uri)
    if buffer is None:
        return []
    checked = ls.current(uri)
    if checked is None and buffer.text.strip():
        return []
    text = buffer.text if checked is None else checked.text
    positions = Positions(text, ls.encoding) if checked is None else checked.positions
    result = None if checked is None else checked.result
    line, character = positions.reader(params.position.line, params.position.character)
    return [
        lsp.CompletionItem(
            label=item.label,
            kind=_COMPLETION_KINDS[item.kind],
            detail=item.detail,
            text_edit=lsp.TextEdit(range=_range(positions.range(item.range)), new_text=item.label),
        )
        for item in features.completions(text, line, character, ls.dialect, result)
    ]


@server.feature(
    lsp.TEXT_DOCUMENT_CODE_ACTION,
    lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix]),
)
def code_actions(ls: WorkloadServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    uri = params.text_document.uri
    checked = ls.current(uri)
    if checked is None:
        return []
    wanted = {(d.code, d.range.start.line, d.range.start.character) for d in params.context.diagnostics}
    actions = []
    positions = checked.positions
    for d in checked.diagnostics:
        start = positions.range(features.to_range(d.span))
        if (d.code, start[0], start[1]) not in wanted:
            continue
        for fix in features.fixes(checked.text, d):
            edits = [lsp.TextEdit(range=_range(positions.range(r)), new_text=text) for r, text in fix.edits]
            actions.append(
                lsp.CodeAction(
                    title=fix.title,
                    kind=lsp.CodeActionKind.QuickFix,
                    diagnostics=[_diagnostic(d, positions)],
                    is_preferred=fix.preferred,
                    edit=lsp.WorkspaceEdit(changes={uri: edits}),
                )
            )
    return actions


# ------------------------------------------------------------------------------------ framing

_HEADER_LINE = re.compile(rb"([!#-'*+.0-9A-Z^-z|~-]+):[ \t]*(.*?)[ \t]*")  # an HTTP field: name: value
_CONTENT_LENGTH = re.compile(rb"content-length:", re.IGNORECASE)
_PATTERN_BYTES = len(b"content-length:")


class Frames:
    """The LSP base protocol (`Content-Length: n`, blank line, n bytes of body) read from a byte
    stream, surviving whatever the stream holds. pygls's own reader matches the header with one
    exact regex and dies, or waits forever, on anything else; this one hands on only complete
    bodies and reports each problem as one line (through `report`):

    - header names are case-insensitive and lines may end in LF alone (HTTP's conventions); other
      fields (Content-Type) are ignored, blank lines between messages are skipped silently;
    - a header block that cannot be used (a Content-Length that is not a plain decimal, over
      MAX_MESSAGE_BYTES or missing; a line that is not `name: value`, or over MAX_HEADER_LINE
      bytes; over MAX_HEADER_LINES lines) and junk between messages are skipped up to the next
      `Content-Length:` wherever it is (a body without a usable length is usually followed by the
      next header on the same line). A body over the limit is not allocated: its bytes are scanned
      for the next header in READ_BYTES chunks like any other junk, so a client that lied about
      the length gets its next message answered and one that did not costs a scan, not 256 MiB;
    - the end of the stream inside a header or body is one line, then the end (None).

    Memory stays bounded by the largest accepted body plus one read. Every rejection drops at
    least one byte, so the scan always moves on."""

    def __init__(self, read: Callable[[int], Awaitable[bytes]], report: Callable[[str], None]) -> None:
        self._read = read  # up to n bytes; b"" at the end of the stream
        self._report = report
        self._buffer = bytearray()
        self._ended = False

    async def _fill(self, wanted: int = READ_BYTES) -> bool:
        """Read more into the buffer; False at the end of the stream."""
        if self._ended:
            return False
        chunk = await self._read(min(max(wanted, READ_BYTES), MAX_READ_BYTES))
        if not chunk:
            self._ended = True
            return False
        self._buffer += chunk
        return True

    async def next(self) -> bytes | None:
        """The next message body, or None when the stream has ended."""
        while True:
            outcome = await self._header()
            if outcome is None:
                return None
            if isinstance(outcome, tuple):
                if not await self._skip(*outcome):
                    return None
                continue
            while len(self._buffer) < outcome:
                if not await self._fill(outcome - len(self._buffer)):
                    self._report(
                        f"the stream ended {len(self._buffer)} bytes into a {outcome}-byte message body"
                    )
                    return None
            body = bytes(self._buffer[:outcome])
            del self._buffer[:outcome]
            return body

    async def _header(self) -> int | tuple[str, int] | None:
        """The header block at the start of the buffer: its Content-Length (the block consumed),
        or why it cannot be used and how many of its bytes are certainly not the next header
        (nothing consumed), or None at the end of the stream. A first line that is not a header
        may end in one (junk glued to a frame): only its first byte is given up; otherwise the
        block up to the offending line is."""
        while True:  # blank lines between messages: some clients end a body with CRLF
            blank = 0
            while blank < len(self._buffer) and self._buffer[blank] in b"\r\n":
                blank += 1
            del self._buffer[:blank]
            if self._buffer:
                break
            if not await self._fill():
                return None
        at, length, count = 0, None, 0
        while True:
            end = self._buffer.find(b"\n", at, at + MAX_HEADER_LINE + 1)
            if end < 0:
                if len(self._buffer) - at > MAX_HEADER_LINE:
                    return f"a header line over {MAX_HEADER_LINE} bytes", at + 1
                if not await self._fill():
                    self._report("the stream ended inside a message header")
                    return None
                continue
            line = bytes(self._buffer[at:end]).removesuffix(b"\r")
            at = end + 1
            if not line:
                if length is None:
                    return "a header block without Content-Length", at
                del self._buffer[:at]
                return length
            count += 1
            if count > MAX_HEADER_LINES:
                return f"a header block of over {MAX_HEADER_LINES} lines", at
            field = _HEADER_LINE.fullmatch(line)
            if field is None:
                if count == 1:
                    return "junk between messages", 1
                return "a header line that is not `name: value`", at
            if field.group(1).lower() != b"content-length":
                continue
            value = field.group(2)
            if not value.isdigit():
                return f"Content-Length {_shown(value.decode('latin-1'))} is not a byte count", at
            if len(value) > 12 or int(value) > MAX_MESSAGE_BYTES:
                shown = value.decode() if len(value) <= 20 else f"of {len(value)} digits"
                return f"Content-Length {shown} is over the {MAX_MESSAGE_BYTES >> 20} MiB limit", at
            if length is not None and length != int(value):
                return "two different Content-Length headers", at
            length = int(value)

    async def _skip(self, problem: str, refused: int) -> bool:
        """Drop the `refused` bytes, then every byte up to the next `Content-Length:`, and report
        the problem with how much was skipped; False when the stream ended first. The bytes are
        dropped as they are scanned: nothing grows."""
        del self._buffer[:refused]
        skipped = refused
        while True:
            found = _CONTENT_LENGTH.search(self._buffer)
            if found is not None:
                skipped += found.start()
                del self._buffer[: found.start()]
                self._report(f"{problem}: skipped {skipped} bytes, up to the next Content-Length header")
                return True
            drop = max(len(self._buffer) - (_PATTERN_BYTES - 1), 0)  # keep a header cut by the read
            skipped += drop
            del self._buffer[:drop]
            if not await self._fill():
                skipped += len(self._buffer)
                self._buffer.clear()
                self._report(f"{problem}: skipped {skipped} bytes, up to the end of the stream")
                return False


class _Stdin:
    """Reads of standard input on a daemon thread, one at a time, as the loop asks for them. A
    thread pool's worker blocked in a read would keep the process from ending after `exit` while
    the client still holds the pipe open (the pool is joined at shutdown); os.read returns what a
    pipe has, so a message is handled as soon as it arrives."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.requests: queue.SimpleQueue[tuple[int, asyncio.Future[bytes]]] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None

    def _serve(self, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            size, future = self.requests.get()
            try:
                data = os.read(self.fd, size)
            except OSError as error:  # a closed or unreadable stdin: the end of the stream
                log.warning("standard input could not be read (%s)", _brief(error))
                data = b""
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting
                loop.call_soon_threadsafe(_settle, future, data)

    async def read(self, size: int) -> bytes:
        loop = asyncio.get_running_loop()
        if self.thread is None:
            self.thread = threading.Thread(target=self._serve, args=(loop,), daemon=True)
            self.thread.start()
        future: asyncio.Future[bytes] = loop.create_future()
        self.requests.put((size, future))
        return await future


def _settle(future: asyncio.Future[bytes], data: bytes) -> None:
    if not future.done():
        future.set_result(data)


async def _serve(read: Callable[[int], Awaitable[bytes]], stop: threading.Event) -> None:
    """Hand each message body to the protocol until the stream ends (or `exit` raises SystemExit).
    After each, the loop runs once: an async handler (didOpen, didChange) starts as a task, and
    its first step (storing or editing the buffer) must run before the next message, which the
    reader may already hold, is handled: a hover right after didOpen would find no document."""
    asyncio.get_running_loop().set_exception_handler(_loop_error)
    frames = Frames(read, lambda problem: log.warning("%s", problem))
    protocol = server.protocol
    assert isinstance(protocol, Protocol)
    while not stop.is_set():
        body = await frames.next()
        if body is None:
            return
        protocol.handle_body(body)
        await asyncio.sleep(0)


def _loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """An error the event loop caught, as one line; none for a cancellation: at the end of the
    stream the checks still waiting are cancelled, and pygls's callbacks re-raise that."""
    error = context.get("exception")
    if isinstance(error, asyncio.CancelledError):
        return
    log.error("%s%s", context.get("message", "event loop error"), f" ({_brief(error)})" if error else "")


def run(*, tcp: tuple[str, int] | None = None, dialect: str | None = None) -> None:
    """Serve over stdio (or TCP) until the client exits or the stream ends. Malformed framing and
    bodies are survived (see Frames and Protocol.handle_body), each reported on one stderr line."""
    logging.basicConfig(level=logging.WARNING, format="modtrans lsp: %(message)s")  # stdout: protocol
    for handler in logging.getLogger().handlers:
        handler.addFilter(_OneLine())
    if dialect:
        server.set_dialect(dialect)
    status: list[Any] = []  # the exit status a TCP client's `exit` asked for
    stop = threading.Event()
    server._stop_event = stop

    async def tcp_server(host: str, port: int) -> None:
        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            server.protocol.set_writer(writer)
            try:
                await _serve(reader.read, stop)
            except SystemExit as exit_:  # the client's `exit`: end the server, not just this task
                status.append(exit_.code)
            except ConnectionError as error:
                log.warning("the connection failed (%s)", _brief(error))
            listener.close()

        asyncio.get_running_loop().set_exception_handler(_loop_error)
        listener = await asyncio.start_server(connection, host, port)
        async with listener:
            with contextlib.suppress(asyncio.CancelledError):
                await listener.serve_forever()

    try:
        if tcp is not None:
            asyncio.run(tcp_server(*tcp))
        elif sys.stdin is None or sys.stdout is None:  # started with `<&-` or `>&-`
            log.error("standard input or output is closed: no client to serve")
            raise SystemExit(1)
        else:
            server.protocol.set_writer(StdoutWriter(sys.stdout.buffer))
            asyncio.run(_serve(_Stdin(sys.stdin.fileno()).read, stop))
    except (BrokenPipeError, KeyboardInterrupt):
        pass
    finally:
        server.shutdown()  # type: ignore[no-untyped-call]
    if status:
        raise SystemExit(status[0])
