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
import logging
import threading
from dataclasses import dataclass
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer

from modtrans._version import __version__
from modtrans.diagnostics import Diagnostic
from modtrans.lsp import features
from modtrans.workload.model import Dialect
from modtrans.workload.parse import LineCache, ParseResult, parse
from modtrans.workload.validate import check_parsed

log = logging.getLogger(__name__)
DEBOUNCE_SECONDS = 0.05


@dataclass(frozen=True)
class Checked:
    version: int | None
    text: str
    result: ParseResult
    diagnostics: list[Diagnostic]


class WorkloadServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "modtrans", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental
        )
        self.dialect: Dialect | None = None
        self.checked: dict[str, Checked] = {}
        self.latest: dict[str, int | None] = {}
        self.lines: dict[str, LineCache] = {}  # per buffer: layer lines parsed last time
        self.lock = threading.Lock()

    def set_dialect(self, value: Any) -> None:
        try:
            self.dialect = Dialect(value) if value else None
        except ValueError:
            self.window_log_message(
                lsp.LogMessageParams(lsp.MessageType.Warning, f"modtrans: unknown dialect {value!r}")
            )

    def check_now(self, uri: str) -> Checked | None:
        """Parse and validate the buffer as it is now (blocking); None for text that is not a workload."""
        document = self.workspace.get_text_document(uri)
        return self.analyse(uri, document.version, document.source)

    def analyse(self, uri: str, version: int | None, text: str) -> Checked | None:
        """Parse and validate `text`: safe off the event loop (touches no workspace state)."""
        if not features.looks_like_workload(text):
            return None
        with self.lock:  # one analysis at a time: they share the line caches
            result = parse(text, path=uri, cache=self.lines.setdefault(uri, {}))
        found = check_parsed(result, dialect=self.dialect, path=uri)  # exactly `modtrans validate`
        checked = Checked(version, text, result, found)
        self.checked[uri] = checked
        return checked

    async def check(self, uri: str, version: int | None) -> None:
        self.latest[uri] = version
        await asyncio.sleep(DEBOUNCE_SECONDS)
        if self.latest.get(uri) != version:
            return  # a newer change is on its way
        text = self.workspace.get_text_document(uri).source  # the snapshot, read on the loop
        checked = await asyncio.get_running_loop().run_in_executor(None, self.analyse, uri, version, text)
        if self.latest.get(uri) != version:
            return
        diagnostics = [] if checked is None else [_diagnostic(d) for d in checked.diagnostics]
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
        )

    def current(self, uri: str) -> Checked | None:
        """The checked state of the buffer as it is now (checking it if a change is pending)."""
        document = self.workspace.get_text_document(uri)
        cached = self.checked.get(uri)
        if cached is not None and cached.version == document.version and cached.text == document.source:
            return cached
        return self.check_now(uri)


def _range(r: features.Range) -> lsp.Range:
    return lsp.Range(
        start=lsp.Position(line=r[0], character=r[1]), end=lsp.Position(line=r[2], character=r[3])
    )


def _diagnostic(d: Diagnostic) -> lsp.Diagnostic:
    return lsp.Diagnostic(
        range=_range(features.to_range(d.span)),
        message=d.message,
        severity=lsp.DiagnosticSeverity(int(d.severity)),
        code=d.code,
        source="modtrans",
        data={"hint": d.hint} if d.hint else None,
    )


server = WorkloadServer()


@server.feature(lsp.INITIALIZE)
def initialize(ls: WorkloadServer, params: lsp.InitializeParams) -> None:
    options = params.initialization_options
    if isinstance(options, dict):
        ls.set_dialect(options.get("dialect"))


@server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def configuration(ls: WorkloadServer, params: lsp.DidChangeConfigurationParams) -> None:
    settings = params.settings
    if isinstance(settings, dict):
        ls.set_dialect((settings.get("modtrans") or {}).get("dialect"))
    for uri, document in list(ls.workspace.text_documents.items()):
        await ls.check(uri, document.version)


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
async def did_open(ls: WorkloadServer, params: lsp.DidOpenTextDocumentParams) -> None:
    await ls.check(params.text_document.uri, params.text_document.version)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
async def did_change(ls: WorkloadServer, params: lsp.DidChangeTextDocumentParams) -> None:
    await ls.check(params.text_document.uri, params.text_document.version)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: WorkloadServer, params: lsp.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.checked.pop(uri, None)
    ls.lines.pop(uri, None)
    ls.latest[uri] = -1  # drops a check still in flight
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
def hover(ls: WorkloadServer, params: lsp.HoverParams) -> lsp.Hover | None:
    checked = ls.current(params.text_document.uri)
    if checked is None:
        return None
    found = features.hover(checked.text, params.position.line, params.position.character, checked.result)
    if found is None:
        return None
    return lsp.Hover(
        contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=found.markdown),
        range=_range(found.range),
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
            range=_range(s.range),
            selection_range=_range(s.range),
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
    lines = checked.text.split("\n")
    whole = (0, 0, len(lines) - 1, len(lines[-1]))
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
    for d in checked.diagnostics:
        start = features.to_range(d.span)
        if (d.code, start[0], start[1]) not in wanted:
            continue
        for fix in features.fixes(checked.text, d):
            edits = [lsp.TextEdit(range=_range(r), new_text=text) for r, text in fix.edits]
            actions.append(
                lsp.CodeAction(
                    title=fix.title,
                    kind=lsp.CodeActionKind.QuickFix,
                    diagnostics=[_diagnostic(d)],
                    is_preferred=fix.preferred,
                    edit=lsp.WorkspaceEdit(changes={uri: edits}),
                )
            )
    return actions


def run(*, tcp: tuple[str, int] | None = None, dialect: str | None = None) -> None:
    logging.basicConfig(level=logging.WARNING)  # stderr: stdout carries the protocol only
    if dialect:
        server.set_dialect(dialect)
    if tcp is not None:
        server.start_tcp(*tcp)
    else:
        server.start_io()
