"""The language server: workload diagnostics, hover, outline, formatting and quick fixes in editors.

features.py holds the answers as plain data; positions.py converts between the reader's lines
and code points and the client's; server.py speaks LSP through pygls (extra `modtrans[lsp]`).
"""
