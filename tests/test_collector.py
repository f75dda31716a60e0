"""The program runs a command with the cyclic garbage collector off (cli.run: what a command makes
lives until it ends) and the language server and a sweep with it on (they run for hours). Each
probe is the real program in a fresh process; Python callers of main() keep their collector."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_PROGRAM = """
import atexit, gc, sys
atexit.register(lambda: print("collector on" if gc.isenabled() else "collector off"))
sys.argv = ["modtrans", *sys.argv[1:]]
from modtrans.cli import run
run()
"""

_SERVER = """
import gc, sys
from modtrans.lsp import server
def probe(*_, **__):
    print("collector on" if gc.isenabled() else "collector off")
    raise SystemExit(0)
server.run = probe
sys.argv = ["modtrans", "lsp"]
from modtrans.cli import run
run()
"""

_CALLER = """
import gc, sys
sys.argv = ["modtrans", "--version"]
from modtrans.cli import main
try:
    main()
except SystemExit:
    pass
print("collector on" if gc.isenabled() else "collector off")
"""


def _said(probe: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_a_command_runs_without_the_collector(tmp_path: Path) -> None:
    out = tmp_path / "s.txt"
    assert _said(_PROGRAM, "translate", "llama-3-8b", "--tp", "2", "--dialect", "simai", "-o", str(out)) == (
        "collector off"
    )
    assert out.read_text().startswith("HYBRID_TRANSFORMER_FWD_IN_BCKWD")


def test_the_language_server_runs_with_the_collector() -> None:
    assert _said(_SERVER) == "collector on"


def test_a_sweep_runs_with_the_collector(tmp_path: Path) -> None:
    probe = _SERVER.replace("from modtrans.lsp import server", "import modtrans.sweep.request as server")
    probe = probe.replace("server.run = probe", "server.run_request = probe").replace(
        '"lsp"', '"sweep", "llama-3-8b"'
    )
    assert _said(probe) == "collector on"


def test_a_python_caller_of_main_keeps_its_collector() -> None:
    assert _said(_CALLER) == "collector on"


_MODULE = """
import gc, runpy, sys
def probe(phase, info):  # a pass once the command line's import began (typer is its first)
    if phase == "start" and "typer" in sys.modules:
        print("collected", file=sys.stderr)
gc.callbacks.append(probe)
sys.argv = ["modtrans", *sys.argv[1:]]
runpy.run_module("modtrans", run_name="__main__")
"""


def test_python_m_modtrans_imports_the_program_without_the_collector(tmp_path: Path) -> None:
    """`python -m modtrans` turns the collector off before typer and the library are imported: no
    pass runs from typer's import to the end (before, its young passes ran while typer and the
    command's modules were imported)."""
    out = tmp_path / "s.txt"
    args = ["translate", "llama-3-8b", "--tp", "2", "--dialect", "simai", "-o", str(out)]
    done = subprocess.run([sys.executable, "-c", _MODULE, *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "collected" not in done.stderr
    assert out.read_text().startswith("HYBRID_TRANSFORMER_FWD_IN_BCKWD")
