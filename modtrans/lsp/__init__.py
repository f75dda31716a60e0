"""The language server: workload diagnostics, hover, outline, formatting and quick fixes in editors.

features.py holds the answers as plain data; server.py speaks LSP through pygls (extra
`modtrans[lsp]`).
"""
