"""Time from an edit to its diagnostics in `modtrans lsp`, on the largest bundled reference file and
on a 100,000-layer buffer.

Run by hand: `python bench/bench_lsp.py` (needs the lsp extra). Starts the real server over stdio,
opens each buffer, then changes one line and waits for the new diagnostics. The baseline, measured
in the same run, is `modtrans.validate()` on the same text in this process. Opening costs about
that; an edit costs less, since the server re-parses only the lines that changed.

Latest figures (2026-12-01, the project's 2-core VM): docs/performance.md (Measured).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from modtrans.workload.validate import validate

ROOT = Path(__file__).resolve().parent.parent
# The server runs as an installed copy does, with its bytecode cached (bench_speed.py says why).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


class Client:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "modtrans", "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.next_id = 0

    def send(self, method: str, params: dict[str, Any], *, request: bool = False) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            message["id"] = self.next_id
        body = json.dumps(message).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        length = 0
        while (line := self.process.stdout.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length"):
                length = int(line.split(b":")[1])
        message: dict[str, Any] = json.loads(self.process.stdout.read(length))
        return message

    def diagnostics(self, uri: str, version: int) -> list[Any]:
        while True:
            message = self.receive()
            params = message.get("params") or {}
            if (
                message.get("method") == "textDocument/publishDiagnostics"
                and params.get("uri") == uri
                and params.get("version") == version
            ):
                return list(params["diagnostics"])

    def close(self) -> None:
        self.send("shutdown", {}, request=True)
        self.receive()
        self.send("exit", {})
        self.process.wait(10)


def measure(client: Client, name: str, text: str) -> None:
    uri = f"file:///{name}"
    start = time.perf_counter()
    validate(text)
    baseline = time.perf_counter() - start
    start = time.perf_counter()
    client.send(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": "plaintext", "version": 1, "text": text}},
    )
    found = client.diagnostics(uri, 1)
    opened = time.perf_counter() - start
    lines = text.split("\n")
    edited = lines[2].replace("-1", "-1 ", 1)  # one character typed on one layer line
    start = time.perf_counter()
    client.send(
        "textDocument/didChange",
        {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [
                {
                    "range": {
                        "start": {"line": 2, "character": 0},
                        "end": {"line": 2, "character": len(lines[2])},
                    },
                    "text": edited,
                }
            ],
        },
    )
    client.diagnostics(uri, 2)
    changed = time.perf_counter() - start
    print(
        f"{name:<34} {len(lines) - 3:>7} layers  open -> diagnostics {opened * 1000:7.0f} ms "
        f"({len(found)} found)  edit -> diagnostics {changed * 1000:7.0f} ms  "
        f"validate() alone {baseline * 1000:7.0f} ms  ratio {changed / baseline:4.2f}"
    )


def main() -> None:
    corpus = sorted(
        (ROOT / "fixtures" / "workloads" / "corpus").rglob("*.txt"), key=lambda p: p.stat().st_size
    )
    largest = corpus[-1]
    rows = "".join(
        f"l{i}\t-1\t{1000 + i % 97}\tNONE\t0\t900\tNONE\t0\t800\tALLREDUCE\t{4096 * (1 + i % 999)}\t80\n"
        for i in range(100_000)
    )
    client = Client()
    client.send("initialize", {"processId": None, "rootUri": None, "capabilities": {}}, request=True)
    client.receive()
    client.send("initialized", {})
    measure(client, largest.name, largest.read_bytes().decode())
    measure(client, "generated-100000.txt", f"DATA\n100000\n{rows}")
    client.close()


if __name__ == "__main__":
    main()
