"""Command line: builds objects, calls the library, picks the exit code. typer is imported only here.

common.py holds the apps, option types and output helpers; options.py makes typer options from the
option table (modtrans.table); values.py parses option values with the table's rules; program.py the
click classes (one-line usage errors, help groups); vocabulary.py the help groups and other tools'
option spellings; adapt.py what typer's public API cannot say (help labels, conversion without
pydantic). Each other module registers its commands: workload.py (validate, fmt, convert),
extract.py, translate.py, models.py (inspect, zoo list, fetch, cost list), compare.py and sides.py
(diff), editor.py (lsp), simulate.py (simulate), estimate.py (estimate), sweep.py (sweep). The
rules and writers are the library's (modtrans.table, modtrans.rules, modtrans.request, modtrans.api,
modtrans.outputs): a command parses its options, calls the library and prints.
"""

import sys

# Importing a module registers its commands, in the order `modtrans --help` lists them.
from modtrans.cli import workload  # noqa: F401

# isort: split
from modtrans.cli import extract  # noqa: F401

# isort: split
from modtrans.cli import translate  # noqa: F401

# isort: split
from modtrans.cli import models  # noqa: F401

# isort: split
from modtrans.cli import compare, editor, estimate, simulate, sweep  # noqa: F401
from modtrans.cli.common import app, cost_app, zoo_app

app.add_typer(zoo_app, name="zoo")
app.add_typer(cost_app, name="cost")


def main() -> None:
    app()  # typer exits with the command's status


def run() -> None:
    """The `modtrans` program: main(), then the process ends without the interpreter's teardown
    (freeing every module and object one by one: 25-30 ms of each command, onnx and numpy loaded)
    once exit handlers have run and the output is flushed. Every file a command writes is closed
    (and renamed into place) before it returns. SIGTERM and SIGHUP stop a command as Ctrl-C does,
    and the process then dies of the signal (stopping.py). main() is what Python callers use."""
    import atexit
    import os

    from modtrans import stopping

    stopping.catch()
    try:
        main()
        code: object = 0
    except SystemExit as done:
        code = done.code
    except KeyboardInterrupt:  # one outside the command (typer makes the command's exit 130)
        code = 130
    stopping.ending()
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
