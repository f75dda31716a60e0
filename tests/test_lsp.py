"""`modtrans lsp` end to end: the real server as a subprocess, a real LSP client (pytest-lsp)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from modtrans.lsp.features import to_range
from modtrans.workload.validate import validate
from tests.conftest import CORPUS, INVALID, lsp_fixture

RESNET = CORPUS / "astra-sim" / "Resnet50_DataParallel.txt"
BROKEN = "DATA\n2\nconv1 -1 1 NONE 0 1 NONE 0 1 AllReduce 64 1\n"


@lsp_fixture(ClientServerConfig(server_command=[sys.executable, "-m", "modtrans", "lsp"]))
async def client(lsp_client: LanguageClient) -> AsyncIterator[None]:
    params = lsp.InitializeParams(capabilities=client_capabilities("visual-studio-code"))
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


async def _open(client: LanguageClient, uri: str, text: str, version: int = 1) -> list[lsp.Diagnostic]:
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="plaintext", version=version, text=text)
        )
    )
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return list(client.diagnostics[uri])


def _apply(text: str, edits: Sequence[lsp.TextEdit]) -> str:
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        start = offsets[edit.range.start.line] + edit.range.start.character
        end = offsets[edit.range.end.line] + edit.range.end.character
        text = text[:start] + edit.new_text + text[end:]
    return text


async def test_diagnostics_are_those_of_validate(client: LanguageClient) -> None:
    assert await _open(client, "file:///resnet.txt", RESNET.read_bytes().decode()) == []
    got = await _open(client, "file:///broken.txt", BROKEN)
    want = validate(BROKEN, path="file:///broken.txt")
    assert [(d.code, d.severity, d.message, d.source) for d in got] == [
        (w.code, lsp.DiagnosticSeverity(int(w.severity)), w.message, "modtrans") for w in want
    ]
    assert [
        (d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character) for d in got
    ] == [to_range(w.span) for w in want]
    assert [d.code for d in got] == ["V201", "V210"]


async def test_every_invalid_fixture_matches_the_cli(client: LanguageClient) -> None:
    for path in sorted(INVALID.glob("*.txt"))[:6]:
        text = path.read_bytes().decode("utf-8", "replace")
        got = await _open(client, f"file:///{path.name}", text)
        assert [d.code for d in got] == [w.code for w in validate(text)], path.name


async def test_quick_fix_then_revalidated(client: LanguageClient) -> None:
    uri = "file:///fix.txt"
    diagnostics = await _open(client, uri, BROKEN)
    text = BROKEN
    for code, title in (("V210", "Replace with ALLREDUCE"), ("V201", "Set the layer count to 1")):
        target = next(d for d in diagnostics if d.code == code)
        actions = await client.text_document_code_action_async(
            lsp.CodeActionParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri),
                range=target.range,
                context=lsp.CodeActionContext(diagnostics=[target]),
            )
        )
        assert actions is not None
        (action,) = [a for a in actions if isinstance(a, lsp.CodeAction)]
        assert action.title == title
        assert action.edit is not None
        assert action.edit.changes is not None
        text = _apply(text, list(action.edit.changes[uri]))
        version = 2 if code == "V210" else 3
        client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        diagnostics = list(client.diagnostics[uri])
    assert text == "DATA\n1\nconv1 -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 64 1\n"
    assert diagnostics == []


async def test_hover_symbols_and_formatting(client: LanguageClient) -> None:
    uri = "file:///resnet.txt"
    text = RESNET.read_bytes().decode()
    await _open(client, uri, text)
    doc = lsp.TextDocumentIdentifier(uri=uri)
    # line 3 is conv1; its 11th token (index 10) is the weight-gradient comm size
    line = text.split("\n")[2]
    column = line.index("37632")
    hover = await client.text_document_hover_async(lsp.HoverParams(doc, lsp.Position(2, column)))
    assert hover is not None
    assert isinstance(hover.contents, lsp.MarkupContent)
    assert "weight-gradient comm size" in hover.contents.value
    assert "ASTRA-sim 1.0 issues" in hover.contents.value
    name = await client.text_document_hover_async(lsp.HoverParams(doc, lsp.Position(2, 1)))
    assert name is not None
    assert isinstance(name.contents, lsp.MarkupContent)
    assert name.contents.value.startswith("**conv1**: 58158 compute ticks in all, 37632 bytes")
    header = await client.text_document_hover_async(lsp.HoverParams(doc, lsp.Position(0, 1)))
    assert header is not None
    assert isinstance(header.contents, lsp.MarkupContent)
    assert "weight-gradient collectives" in header.contents.value
    symbols = await client.text_document_document_symbol_async(lsp.DocumentSymbolParams(doc))
    assert symbols is not None
    assert [s.name for s in symbols][:3] == ["DATA", "conv1", "layer_64_1_conv4"]
    assert len(symbols) == 1 + 54
    edits = await client.text_document_formatting_async(
        lsp.DocumentFormattingParams(doc, lsp.FormattingOptions(tab_size=4, insert_spaces=False))
    )
    assert edits
    formatted = _apply(text, edits)
    assert "\r" not in formatted
    assert validate(formatted) == []


async def test_close_clears_and_other_text_is_ignored(client: LanguageClient) -> None:
    uri = "file:///broken.txt"
    assert await _open(client, uri, BROKEN)
    client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri=uri)))
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert list(client.diagnostics[uri]) == []
    assert await _open(client, "file:///notes.txt", "Shopping list\n- eggs\n- milk\n") == []


async def test_a_document_that_is_not_open_is_never_read_from_disk(
    client: LanguageClient, tmp_path: Path
) -> None:
    on_disk = tmp_path / "on-disk.txt"
    on_disk.write_text("DATA\n1\nl1 -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n")
    for uri in (on_disk.as_uri(), "file:///never-opened.txt", "untitled:Untitled-1", "", tmp_path.as_uri()):
        where = lsp.TextDocumentIdentifier(uri=uri)
        assert await client.text_document_hover_async(lsp.HoverParams(where, lsp.Position(0, 0))) is None
        assert not await client.text_document_document_symbol_async(lsp.DocumentSymbolParams(where))
        options = lsp.FormattingOptions(tab_size=4, insert_spaces=True)
        assert not await client.text_document_formatting_async(lsp.DocumentFormattingParams(where, options))
    assert await _open(client, "file:///after.txt", BROKEN)  # still answering


async def test_a_100000_layer_buffer(client: LanguageClient) -> None:
    rows = "".join(f"l{i} -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 64 1\n" for i in range(100_000))
    assert await _open(client, "file:///big.txt", f"DATA\n100000\n{rows}") == []


@lsp_fixture(ClientServerConfig(server_command=[sys.executable, "-m", "modtrans", "lsp"]))
async def chakra_client(lsp_client: LanguageClient) -> AsyncIterator[None]:
    params = lsp.InitializeParams(
        capabilities=client_capabilities("neovim"), initialization_options={"dialect": "chakra"}
    )
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


async def test_dialect_from_initialization_options(chakra_client: LanguageClient) -> None:
    transformer = (CORPUS / "astra-sim" / "Transformer_HybridParallel.txt").read_bytes().decode()
    got = await _open(chakra_client, "file:///transformer.txt", transformer)
    assert "D301" in {d.code for d in got}  # Chakra's converter rejects HYBRID_TRANSFORMER
    assert [d.code for d in got] == [w.code for w in validate(transformer, dialect="chakra")]
