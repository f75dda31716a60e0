"""The shared pieces of the command line: the typer apps, option types and output helpers."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from modtrans import report
from modtrans.cli.program import App, Command, Program
from modtrans.diagnostics import Diagnostic, has_errors
from modtrans.report import COLLAPSED, Format
from modtrans.workload.model import Dialect

if TYPE_CHECKING:
    from modtrans.fileio import Content
    from modtrans.request import UsageError

commands = App(cls=Program, add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)
"""What the command modules register on: the program (modtrans.cli.app) takes each command from
here when it is asked for (modtrans.cli.Lazy)."""

zoo_app = App(cls=Program, no_args_is_help=True, help="Built-in architectures (no download needed).")
cost_app = App(cls=Program, no_args_is_help=True, help="Compute-time models.")
commands.add_typer(zoo_app, name="zoo")
commands.add_typer(cost_app, name="cost")


Paths = Annotated[
    list[Path],
    typer.Argument(help="Workload files (text in any dialect, or workload JSON).", show_default=False),
]


DialectOpt = Annotated[
    Dialect | None,
    typer.Option(
        "--dialect",
        "-d",
        help="Consumer to check or write for (default: the one the file was written for).",
        case_sensitive=False,
    ),
]


NoColor = Annotated[bool, typer.Option("--no-color", help="No colours (also: NO_COLOR=1).")]


Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Do not say what was written.")]


Model = Annotated[
    str,
    typer.Argument(
        help="An .onnx file, a Hugging Face config.json (an LLM's), a built-in architecture "
        "(`modtrans zoo list`) or a fetched model (`modtrans fetch`).",
        show_default=False,
    ),
]


__all__ = ["Command"]


def _refused(error: UsageError) -> typer.Exit:
    """What the library refused, said as the command line says it (the F001 of an unreadable file
    an option names, or one line), and the exit (status 2) for the caller to raise."""
    if error.diagnostic is not None:
        report.emit([error.diagnostic], Format.TEXT, stream=sys.stderr, color=False)
    else:
        typer.echo(f"modtrans: {error}", err=True)
    return typer.Exit(2)


def _finish(
    found: list[Diagnostic],
    text: str | None,
    output: str | None,
    inputs: list[str],
    force: bool,
    no_color: bool,
    quiet: bool = False,
) -> None:
    """Write `text` (unless None) to `output` or standard output; say what was written (unless
    `quiet`); report; exit."""
    if output == "":
        _usage("--output is empty: give a file, or - for standard output")
    if text is not None:
        files: list[tuple[Path, Content]] = []
        if output not in (None, "-"):
            files.append((Path(str(output)), text))
        _refuse_inputs([target for target, _ in files], inputs, force)
        if output in (None, "-"):
            sys.stdout.write(text)
        _save_all(files, found)
        if files and not has_errors(found) and not quiet:
            typer.echo("wrote " + " and ".join(str(target) for target, _ in files), err=True)
    report.emit(found, Format.TEXT, stream=sys.stderr, color=False if no_color else None, **COLLAPSED)
    code = report.exit_code(found)
    raise typer.Exit(code or (1 if text is None else 0))


def _refuse_inputs(targets: list[Path], inputs: list[str], force: bool) -> None:
    """A usage error when an output is one of the inputs (a built-in model's packaged file too)."""
    from modtrans import outputs  # with the request's rules: 37 modules `validate` does not use
    from modtrans.request import UsageError

    try:
        outputs.refuse_inputs(targets, inputs, force)
    except UsageError as error:
        raise _refused(error) from None


def _save(path: Path, text: Content, problems: list[Diagnostic]) -> None:
    _save_all([(path, text)], problems)


def _save_all(files: Sequence[tuple[Path, Content]], problems: list[Diagnostic]) -> None:
    """Write every output or none; a failure is F003 naming the file."""
    from modtrans import outputs

    problems += outputs.save(files)


def _usage(message: str) -> NoReturn:
    typer.echo(f"modtrans: {message}", err=True)
    raise typer.Exit(2)
