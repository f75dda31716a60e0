"""Command line: builds objects, calls the library, picks the exit code. typer is imported only here.

The program (`app`) lists its commands from COMMANDS and imports a command's module only when that
command runs or shows its help: `modtrans --help` costs typer and this package, no library.
common.py holds the apps, option types and output helpers; options.py makes typer options from the
option table (modtrans.table), each value named by its metavar; values.py parses option values with
the table's rules; program.py the click classes (one-line usage errors, help groups); convert.py
converts values by the table's rules, without the pydantic that typer's own conversion imports;
vocabulary.py the help groups and other tools' option spellings; methods.py keeps the compiled code
of the methods typer's and the library's dataclasses generate between runs (compiling them was a
third of a translation's CPU). Each other module registers its commands: workload.py (validate,
fmt, convert), extract.py, translate.py, models.py (inspect, zoo list, fetch, cost list; memory.py
prints a layout's memory per stage, traces.py reads a trace set, simulate's too), compare.py and
sides.py (diff), editor.py (lsp), simulate.py (simulate), estimate.py (estimate), sweep.py (sweep).
The rules and writers are the library's (modtrans.table, modtrans.rules, modtrans.request,
modtrans.api, modtrans.outputs): a command parses its options, calls the library and prints.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

from modtrans.cli import methods

methods.install()  # before typer's and the library's dataclasses are made: their methods compiled once

import typer  # noqa: E402
from typer.core import TyperCommand  # noqa: E402

from modtrans.cli.program import App, Program  # noqa: E402

# Each command, in the order `modtrans --help` lists them: the module that registers it on
# common.commands and its summary (the first paragraph of its help; a test holds them equal).
# `modtrans --help` reads this and imports no command: each module imports the library it runs
# (the option table alone is 70 ms; docs/performance.md, Start-up).
COMMANDS = {
    "validate": ("workload", "Check workload files, or sets of Chakra traces across their ranks."),
    "fmt": ("workload", "Rewrite workload files in canonical form."),
    "convert": ("workload", "Convert workload text to JSON and back, or between dialects."),
    "extract": ("extract", "Extract a model's intermediate document (IR)."),
    "translate": ("translate", "Translate a model into a workload."),
    "inspect": (
        "models",
        "Show a model's layers, or a Chakra trace set's totals per stage (per rank with --ranks).",
    ),
    "fetch": ("models", "Download a model from the ONNX Model Zoo."),
    "diff": ("compare", "Compare two workloads layer by layer."),
    "lsp": ("editor", "Run the language server."),
    "simulate": (
        "simulate",
        "Simulate a trace set on ASTRA-sim 2.x, or a workload file on ASTRA-sim 1.0 or SimAI.",
    ),
    "estimate": ("estimate", "Estimate a trace set's iteration time without the simulator."),
    "sweep": ("sweep", "Find the fastest layouts of a model on a cluster."),
    "zoo": ("models", "Built-in architectures (no download needed)."),
    "cost": ("models", "Compute-time models."),
}


class Lazy(Program):
    """The program: each command imported and built when it is asked for (COMMANDS)."""

    @property  # type: ignore[override]
    def commands(self) -> dict[str, Any]:
        """Every command, built (what a walk over the whole program reads)."""
        return {name: self.get_command(None, name) for name in COMMANDS}

    @commands.setter
    def commands(self, _given: Any) -> None:  # the group's own, empty: COMMANDS holds them
        pass

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, name: str) -> Any:
        if name not in COMMANDS:
            return None
        __import__(f"modtrans.cli.{COMMANDS[name][0]}")  # not importlib's: -X importtime sees this one
        from modtrans.cli.common import commands

        return typer.main.get_group(commands).get_command(ctx, name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The commands and their summaries, as click lists them, without importing one."""
        limit = formatter.width - 6 - max(map(len, COMMANDS))
        rows = [
            (name, TyperCommand(name, help=help).get_short_help_str(limit))
            for name, (_, help) in COMMANDS.items()
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


app = App(
    cls=Lazy,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # help text verbatim: `modtrans[lsp]` is not a markup tag
    context_settings={"help_option_names": ["-h", "--help"]},  # every command's context inherits it
    help="Translate models into ASTRA-sim layer-wise workloads; read, write and check workload files.",
)


def _version(value: bool) -> None:
    if value:
        from modtrans._version import __version__

        typer.echo(f"modtrans {__version__}")
        raise typer.Exit(0)


@app.callback()
def _top(
    version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Translate models into ASTRA-sim layer-wise workloads; read, write and check workload files."""


def main() -> None:
    app()  # typer exits with the command's status


def run() -> None:
    """The `modtrans` program: main(), then the process ends without the interpreter's teardown
    (freeing every module and object one by one: 25-30 ms of each command, onnx and numpy loaded)
    once exit handlers have run and the output is flushed. Every file a command writes is closed
    (and renamed into place) before it returns. SIGTERM and SIGHUP stop a command as Ctrl-C does,
    and the process then dies of the signal (stopping.py). main() is what Python callers use.

    The cyclic garbage collector is off for the command: what a command makes (an IR, a plan, a
    workload) lives until it ends and holds almost no cycle (a C4 translation leaves 1,129
    unreachable objects), yet each of the collector's young passes walks every new container, 4 %
    of a C4 SimAI translation's instructions (callgrind). `modtrans lsp` and `modtrans sweep` turn it
    back on: a server runs for hours, a sweep's plans leave cycles (38,000 objects in a 25 s sweep)."""
    import atexit
    import gc
    import os

    from modtrans import stopping

    gc.disable()
    stopping.catch()
    try:
        main()
        code: object = 0
    except SystemExit as done:
        code = done.code
    except KeyboardInterrupt:  # one outside the command (typer makes the command's exit 130)
        code = 130
    stopping.ending()
    methods.save()
    if not isinstance(code, int):  # None is success; any other object is a message, as Python has it
        if code is not None:
            print(code, file=sys.stderr)
        code = 0 if code is None else 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        if stream is None or stream.closed:  # the language server's client closed it: nothing to say
            continue
        try:
            stream.flush()
        except OSError:  # a reader that went away (| head): what it did not read is lost
            code = code or 1
    if stopping.received() is not None:
        code = stopping.die()
    os._exit(code)


__all__ = ["app", "main", "run"]
