"""The program's and its commands' click classes, given to typer through its public `cls=`, and
the App whose commands name their values (metavar):
usage errors said on one line, `modtrans: --option: what is wrong (see ... --help)`, an unknown
option answered by meaning (vocabulary.py), exit 2; options listed in help groups
(vocabulary.PANELS) where typer without rich lists one flat Options."""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import typer
from typer.core import TyperCommand, TyperGroup

from modtrans.cli.convert import flag, plain
from modtrans.cli.options import label, labelled

F = TypeVar("F", bound=Callable[..., Any])


class App(typer.Typer):
    """typer.Typer whose commands name their options' values as the option table's do
    (options.labelled: `metavar=` N, TEXT, PATH...)."""

    def command(self, *args: Any, **kwargs: Any) -> Callable[[F], F]:
        register = super().command(*args, **kwargs)
        return lambda function: register(labelled(function))


class _Plain:
    """What a command and a group share: values convert.py converts (plain()), and the help
    option flag() makes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        plain(self)

    def get_help_option(self, ctx: Any) -> Any:
        return flag(super().get_help_option(ctx))  # type: ignore[misc]


class Command(_Plain, TyperCommand):
    """A command whose options --help lists in groups and whose values convert.py converts."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        _grouped(self, ctx, formatter)


class Program(_Plain, TyperGroup):
    """A group (the program, zoo, cost) that says a usage error on one line."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        _grouped(self, ctx, formatter, panels=False)  # a group's options are its own: no help groups
        self.format_commands(ctx, formatter)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """click's main, run without its standalone handling, which would print the usage block
        and `Error: ...`: that handling here, a usage error (click's exit status 2) one line."""
        run = {"complete_var": complete_var, "windows_expand_args": windows_expand_args, **extra}
        if not standalone_mode:
            return super().main(args, prog_name, standalone_mode=False, **run)
        try:
            code = super().main(args, prog_name, standalone_mode=False, **run)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        except Exception as raised:
            error: Any = raised
            if not callable(getattr(error, "show", None)) or not hasattr(error, "exit_code"):
                raise  # not one of click's: a bug, with its traceback
            if error.exit_code == 2 and getattr(error, "ctx", None) is not None and _bare(error):
                typer.echo(error.format_message(), err=True)  # `modtrans` alone: its help, as written
            elif error.exit_code == 2 and hasattr(error, "ctx"):
                typer.echo(_line(error), err=True)
            else:
                error.show()
            sys.exit(error.exit_code)
        sys.exit(code if isinstance(code, int) else 0)


def _bare(error: Any) -> bool:
    """Whether the usage error is a group run with nothing to do, whose message is its help."""
    return bool(error.ctx.command.no_args_is_help) and error.format_message() == error.ctx.get_help()


def _line(error: Any) -> str:
    """A usage error as one line: the option, what is wrong, where help is."""
    message, helps = error.format_message(), True
    if getattr(error, "option_name", None) and error.ctx is not None:  # no such option
        message, helps = _meant(error.option_name, error.ctx)
        message = message or error.message
    found = re.match(r"Invalid value for '([^']+)'(?: / '[^']+')?: (?:Value error, )?(.*)", message, re.S)
    if found:
        message = f"{found.group(1)}: {found.group(2)}"
    where = f" (see `{error.ctx.command_path} --help`)" if error.ctx is not None and helps else ""
    return f"modtrans: {' '.join(message.split())}{where}"


def _meant(option: str, ctx: Any) -> tuple[str, bool]:
    """What an unknown `option` of ctx's command means (vocabulary.suggestion), from the options
    of this command and of every other command of the program."""

    def names(command: Any) -> list[str]:
        return [name for p in command.params for name in (*p.opts, *p.secondary_opts)]

    def leaves(command: Any, path: str) -> dict[str, list[str]]:
        subs = getattr(command, "commands", None)
        if not subs:
            return {path: names(command)}
        return {k: v for n, s in subs.items() for k, v in leaves(s, f"{path} {n}".strip()).items()}

    everyone = leaves(ctx.find_root().command, "")
    words: list[str] = []
    at = ctx
    while at.parent is not None:  # the command's names below the program's, however it was run
        words.insert(0, at.info_name)
        at = at.parent
    here = " ".join(words)
    others = {f"modtrans {path}": found for path, found in everyone.items() if path != here}
    from modtrans.cli.vocabulary import suggestion  # the option table's words: 70 ms, an error's

    return suggestion(option, f"modtrans {here}".strip(), names(ctx.command), others)


def _grouped(command: Any, ctx: Any, formatter: Any, panels: bool = True) -> None:
    """The command's arguments, then its options under the help groups of vocabulary.PANELS (its
    own first), in their order, then the rest under Options."""
    own: Mapping[str, tuple[str, ...]] = {}
    panel_of: dict[str, str] = {}
    if panels:  # the option table's groups (70 ms to import: `modtrans --help` has none of them)
        from modtrans.cli.vocabulary import OWN_PANELS, PANEL_OF, PANELS

        own = OWN_PANELS.get(command.name, {})
        panel_of = {**PANEL_OF, **{name: panel for panel, names in own.items() for name in names}}
    groups: dict[str, list[tuple[str, str]]] = {
        "Arguments": [],
        **{p: [] for p in (*own, *(PANELS if panels else ()))},
    }
    groups["Options"] = []
    values = _argument_labels(command.callback)
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is not None:
            kind = "Arguments" if param.param_type_name == "argument" else "Options"
            if kind == "Arguments" and values.get(param.name) is not None:  # typer's <type>, ours
                record = (f"{record[0].rpartition(' <')[0]} {values[param.name]}", record[1])
            groups[panel_of.get(param.name, kind) if kind == "Options" else kind].append(record)
    for title, records in groups.items():
        if records:
            with formatter.section(title):
                formatter.write_dl(records)


def _argument_labels(callback: Any) -> dict[str, str | None]:
    """Each argument's value named as options.label() names an option's: an argument takes no
    metavar that would not also rename it (its usage, its errors), so --help's line is ours."""
    if callback is None:
        return {}
    parameters = inspect.signature(callback, eval_str=True).parameters.values()
    return {p.name: label(getattr(p.annotation, "__origin__", p.annotation)) for p in parameters}
