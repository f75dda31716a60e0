"""`modtrans lsp`: the language server (pygls 2.x). The only module that imports pygls / lsprotocol.

Diagnostics are those of `modtrans validate` for the unsaved buffer (same codes, severities,
messages and ranges; LSP's 0-based positions; source "modtrans"), published on open and on every
change, cleared on close. Checking runs off the event loop and only the newest version of a
buffer is published, so a 100,000-line buffer never blocks hover or typing. The dialect comes from
the initialization option `{"dialect": "chakra"}` (or the `modtrans.dialect` setting), else from the
header line, as `modtrans validate` detects it. Text that does not look like a workload gets no
diagnostics (clients often send every .txt file).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.io_ import StdinAsyncReader, StdoutWriter, run_async
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method

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


_ANSWERED = object()  # a message already answered with an error while it was being read


class _Quiet(logging.Filter):
    """pygls logs a full traceback for every malformed message; one line says as much."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("pygls") and record.levelno >= logging.ERROR:
            record.msg = str(record.msg).split("\n", 1)[0]
            record.args, record.exc_info, record.exc_text = (), None, None
        return True


class Protocol(LanguageServerProtocol):
    """pygls's protocol, answering as the LSP specification says where pygls does not: a request
    before `initialize` gets ServerNotInitialized, one after `shutdown` InvalidRequest."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        """A request whose params do not fit its method is answered with the error (pygls would
        drop it, leaving the client waiting forever)."""
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            ident = data.get("id")
            if "method" in data and isinstance(ident, int | str) and not isinstance(ident, bool):
                self._send_response(ident, error=lsp.ResponseError(code=error.code, message=error.message))
            return _ANSWERED

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
        if message is _ANSWERED:
            return
        method = getattr(message, "method", None)
        request = method is not None and getattr(message, "id", None) is not None
        if request and method != lsp.INITIALIZE and not getattr(self._server, "initialized", False):
            error = lsp.ResponseError(code=-32002, message="the server is not initialized yet")
            self._send_response(message.id, error=error)
            return
        if request and self._shutdown and method != lsp.EXIT:
            error = lsp.ResponseError(code=-32600, message="the server is shutting down")
            self._send_response(message.id, error=error)
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
        with self.lock, _long_lived():  # one analysis at a time: they share the line caches
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


@contextlib.contextmanager
def _long_lived() -> Iterator[None]:
    """An analysis builds about seven objects per layer line, which live until the buffer's next
    analysis and are never in a reference cycle. Left to the cyclic collector, the first edit after
    opening a 100,000-line buffer pays 0.2-0.3 s for traversing them. The collector is paused
    while they are built and they are then frozen (gc.freeze: collections skip them; reference
    counting still frees them when the next analysis replaces them). The young garbage is collected
    first, which is cheap, so no earlier cycle is frozen with them."""
    gc.collect(1)
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


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


class _Bounded:
    """A message reader that refuses a Content-Length over MAX_MESSAGE_BYTES (or one too long to be
    a number) by ending the stream: pygls would try to allocate it and die."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.refused: bytes | None = None

    async def readline(self) -> bytes:
        line: bytes = await self.reader.readline()
        if line[:15].lower() == b"content-length:":
            value = line[15:].strip()
            if not value.isdigit() or len(value) > 12 or int(value) > MAX_MESSAGE_BYTES:
                self.refused = value[:40]
                return b""
        return line

    async def readexactly(self, n: int) -> bytes:
        data: bytes = await self.reader.readexactly(n)
        return data


def run(*, tcp: tuple[str, int] | None = None, dialect: str | None = None) -> None:
    """Serve over stdio (or TCP) until the client exits; a message over the size limit ends the
    server with a one-line error and exit status 1."""
    logging.basicConfig(level=logging.WARNING)  # stderr: stdout carries the protocol only
    for handler in logging.getLogger().handlers:
        handler.addFilter(_Quiet())
    if dialect:
        server.set_dialect(dialect)
    readers: list[_Bounded] = []
    status: list[Any] = []  # the exit status a TCP client's `exit` asked for
    stop = threading.Event()
    server._stop_event = stop

    async def serve(reader: Any) -> None:
        bounded = _Bounded(reader)
        readers.append(bounded)
        await run_async(stop_event=stop, reader=bounded, protocol=server.protocol, logger=log)

    async def tcp_server(host: str, port: int) -> None:
        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            server.protocol.set_writer(writer)
            try:
                await serve(reader)
            except SystemExit as exit_:  # the client's `exit`: end the server, not just this task
                status.append(exit_.code)
            listener.close()

        listener = await asyncio.start_server(connection, host, port)
        async with listener:
            with contextlib.suppress(asyncio.CancelledError):
                await listener.serve_forever()

    try:
        if tcp is not None:
            asyncio.run(tcp_server(*tcp))
        else:
            server.protocol.set_writer(StdoutWriter(sys.stdout.buffer))
            asyncio.run(serve(StdinAsyncReader(sys.stdin.buffer, server.thread_pool)))
    except (BrokenPipeError, KeyboardInterrupt):
        pass
    finally:
        server.shutdown()  # type: ignore[no-untyped-call]
    refused = next((r.refused for r in readers if r.refused is not None), None)
    if refused is not None:
        size, limit = refused.decode(errors="replace"), MAX_MESSAGE_BYTES >> 20
        sys.stderr.write(f"modtrans lsp: a message of {size} bytes is over the {limit} MiB limit; stopping\n")
        raise SystemExit(1)
    if status:
        raise SystemExit(status[0])
