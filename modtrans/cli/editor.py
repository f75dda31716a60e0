"""`modtrans lsp`: the language server's entry point."""

from __future__ import annotations

from typing import Annotated

import typer

from modtrans.cli.common import (
    DialectOpt,
    _usage,
    app,
)


@app.command()
def lsp(
    tcp: Annotated[
        str | None, typer.Option(help="Listen on HOST:PORT instead of speaking over stdin/stdout.")
    ] = None,
    dialect: DialectOpt = None,
) -> None:
    """Run the language server (LSP over stdio): the diagnostics of `validate` as you type, hover,
    outline, formatting and quick fixes. Needs `pip install 'modtrans[lsp]'`."""
    address = None
    if tcp is not None:
        host, _, port = tcp.rpartition(":")
        if not host or not port.isdigit():
            _usage(f"--tcp {tcp!r}: expected HOST:PORT, e.g. 127.0.0.1:2087")
        address = (host, int(port))
    try:
        from modtrans.lsp import server
    except ImportError:
        typer.echo("modtrans: the language server needs pygls: pip install 'modtrans[lsp]'", err=True)
        raise typer.Exit(2) from None
    server.run(tcp=address, dialect=dialect.value if dialect else None)
