"""`modtrans lsp`: the language server's entry point."""

from __future__ import annotations

import gc
from typing import Annotated

import typer

from modtrans.cli.common import (
    Command,
    DialectOpt,
    _usage,
    commands,
)
from modtrans.integers import shown


@commands.command(cls=Command)
def lsp(
    tcp: Annotated[
        str | None,
        typer.Option(metavar="HOST:PORT", help="Listen on HOST:PORT instead of speaking over stdin/stdout."),
    ] = None,
    dialect: DialectOpt = None,
) -> None:
    """Run the language server.

    \b
    Examples:
      modtrans lsp
      modtrans lsp --tcp 127.0.0.1:2087

    LSP over stdio: the diagnostics of `validate` as you type, hover,
    outline, formatting and quick fixes. Needs `pip install 'modtrans[lsp]'`."""
    address = None
    if tcp is not None:
        host, _, port = tcp.rpartition(":")
        if not host or not port.isdigit() or len(port) > 5 or not 1 <= int(port) <= 65535:
            _usage(f"--tcp {shown(tcp)!r}: expected HOST:PORT with a port 1-65535, e.g. 127.0.0.1:2087")
        address = (host.strip("[]"), int(port))
        problem = _unbindable(address)
        if problem:
            _usage(f"--tcp {tcp}: {problem}")
    try:
        from modtrans.lsp import server
    except ImportError:
        from modtrans.resources import install_hint

        typer.echo(f"modtrans: the language server needs pygls: {install_hint('lsp')}", err=True)
        raise typer.Exit(2) from None
    gc.enable()  # the program turns the collector off for a command's run (cli.run); a server runs for hours
    try:
        server.run(tcp=address, dialect=dialect.value if dialect else None)
    except OSError as error:  # the address went away between the check and the bind
        _usage(f"--tcp {tcp}: {error.strerror or error}")


def _unbindable(address: tuple[str, int]) -> str | None:
    """Why the server could not listen on `address` (unknown host, port in use, not ours)."""
    import socket

    try:
        family, kind, proto, _, where = socket.getaddrinfo(*address, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.bind(where)
    except (OSError, UnicodeError) as error:
        return getattr(error, "strerror", None) or str(error)
    return None
