"""Commands on workload files: validate, fmt, convert."""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Literal

import typer

from modtrans import report
from modtrans.cli.common import (
    Command,
    DialectOpt,
    NoColor,
    Paths,
    Quiet,
    _refuse_inputs,
    _save,
    _usage,
    commands,
)
from modtrans.diagnostics import Diagnostic, DiagnosticError, diagnostic, has_errors
from modtrans.report import Format
from modtrans.workload import jsonform
from modtrans.workload.load import Loaded, load, validate_file
from modtrans.workload.model import Dialect, Workload
from modtrans.workload.validate import check_parsed
from modtrans.workload.validate import validate as validate_text
from modtrans.workload.write import write


@commands.command(cls=Command)
def validate(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Workload files, or Chakra traces (*.et, or a set's PREFIX).", show_default=False
        ),
    ] = None,
    dialect: DialectOpt = None,
    comm_groups: Annotated[
        Path | None,
        typer.Option(
            "--comm-groups",
            help="Traces: the communicator-group file (default: PREFIX.comm_groups.json beside them).",
        ),
    ] = None,
    fmt: Annotated[
        Format, typer.Option("--format", "-f", help="Output format; auto picks github under GitHub Actions.")
    ] = Format.AUTO,
    strict: Annotated[bool, typer.Option(help="Warnings fail too.")] = False,
    ignore: Annotated[list[str] | None, typer.Option(help="Skip a code (repeatable).")] = None,
    explain: Annotated[str | None, typer.Option(help="Explain a diagnostic code and exit.")] = None,
    show_all: Annotated[
        bool,
        typer.Option(
            "--all", help="Every finding (the text report shows 3 per code and file, then a count)."
        ),
    ] = False,
    no_color: NoColor = False,
) -> None:
    """Check workload files, or sets of Chakra traces across their ranks.

    Exit 0 clean (warnings allowed unless --strict), 1 findings, 2 unreadable file or usage error.

    \b
    Examples:
      modtrans translate resnet50 | modtrans validate -
      modtrans translate resnet50 -o workload.txt && modtrans validate workload.txt
      modtrans validate --dialect chakra --format github *.txt
      modtrans translate gpt2 --format chakra-et --npus 4 -o traces/ && modtrans validate traces/gpt2.*.et
      modtrans validate --explain V201
    """
    if explain is not None:
        text = report.explain(explain)
        if text is None:
            _usage(f"--explain {explain!r}: unknown code; codes look like V201, P130, D303")
        if paths:
            typer.echo(f"modtrans: --explain: the {len(paths)} file(s) given are not checked", err=True)
        typer.echo(text, nl=False)
        raise typer.Exit(0)
    for code in ignore or ():
        if report.explain(code) is None:
            _usage(
                f"--ignore {code!r}: unknown code; `modtrans validate --explain CODE` lists what one means"
            )
    if not paths:
        _usage("give at least one file (or --explain CODE)")
    found: list[Diagnostic] = []
    sources = {}
    from modtrans.chakra.read import is_trace_spec  # reads no trace: a name test

    traces = [path for path in paths if is_trace_spec(path)]
    checked = len(paths) - len(traces)
    for path in paths:
        if path in traces:
            continue
        loaded, diagnostics = validate_file(path, dialect=dialect, ignore=ignore or ())
        sources[loaded.path] = loaded.line
        found += diagnostics
    if traces:
        from modtrans.chakra.validate import validate_paths

        with report.status("validating"):
            in_traces, count = validate_paths(traces, comm_groups)
        found += [d for d in in_traces if d.code not in (ignore or ())]
        checked += count
    elif comm_groups is not None:
        typer.echo("modtrans: warning: --comm-groups is ignored: no trace files given", err=True)
    report.emit(
        found,
        fmt,
        stream=sys.stdout,
        sources=sources,
        color=False if no_color else None,
        checked=checked,
        everything=show_all,
        strict=strict,
    )
    raise typer.Exit(report.exit_code(found, strict=strict))


@commands.command(cls=Command)
def fmt(
    paths: Paths,
    check: Annotated[
        bool, typer.Option("--check", help="Change nothing; exit 1 if a file would change.")
    ] = False,
    dialect: DialectOpt = None,
    no_color: NoColor = False,
) -> None:
    """Rewrite workload files in canonical form.

    Text in the canonical form of its dialect, workload JSON as canonical JSON, atomically; a file
    with errors is left alone, and so is one whose canonical form would have findings it does not.

    \b
    Examples:
      modtrans translate resnet50 -o workload.txt && modtrans fmt workload.txt
      modtrans fmt --check *.txt
      modtrans fmt - < workload.txt > tidy.txt
    """
    problems: list[Diagnostic] = []
    sources = {}
    changed = []
    for path in paths:
        loaded = load(path)
        sources[loaded.path] = loaded.line
        new = _formatted(loaded, dialect, problems)
        old = "".join(c + e for c, e in loaded.lines)
        if str(path) == "-":  # a filter: the canonical text (or the input, if none) to stdout
            if not check:
                sys.stdout.write(old if new is None else new)
            if new is not None and new != old:
                changed.append(loaded.path)
            continue
        if new is None or new == old:
            continue
        changed.append(loaded.path)
        if not check:
            _save(path, new, problems)
    report.emit(problems, Format.TEXT, stream=sys.stderr, sources=sources, color=False if no_color else None)
    for name in changed:
        if check or name != "<stdin>":
            typer.echo(f"{'would reformat' if check else 'reformatted'} {name}", err=True)
    code = report.exit_code(problems)
    raise typer.Exit(code or (1 if check and changed else 0))


def _formatted(loaded: Loaded, dialect: Dialect | None, problems: list[Diagnostic]) -> str | None:
    """The canonical form of a clean file (text stays text, JSON stays JSON), or None."""
    before = check_parsed(loaded.result, path=loaded.path)  # in the dialect it was written for
    errors = [d for d in before if d.severity == 1]
    if loaded.result.workload is None or errors:
        problems += errors
        return None
    if loaded.is_json:
        return jsonform.dumps(loaded.result.workload)
    new = _canonical(loaded, dialect, problems)
    if new is None:
        return None
    target = dialect or loaded.result.workload.dialect
    if dialect is not None:
        before = check_parsed(loaded.result, dialect=target, path=loaded.path)
    after = validate_text(new, dialect=target)
    added = Counter(d.code for d in after) - Counter(d.code for d in before)
    if added:  # a writer bug: never trade a clean file for one with new findings
        codes = ", ".join(sorted(added))
        problems.append(
            diagnostic("F005", f"not reformatted: the canonical form would add {codes}", path=loaded.path)
        )
        return None
    return new


@commands.command(cls=Command)
def convert(
    path: Annotated[Path, typer.Argument(help="Workload text or workload JSON.", show_default=False)],
    to: Annotated[
        Literal["json", "text"], typer.Option("--to", help="Workload JSON or workload text.")
    ] = "json",
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write here (atomically) instead of standard output."),
    ] = None,
    dialect: DialectOpt = None,
    force: Annotated[bool, typer.Option(help="Allow --output to overwrite the input file.")] = False,
    quiet: Quiet = False,
    no_color: NoColor = False,
) -> None:
    """Convert workload text to JSON and back, or between dialects.

    Between workload text and workload JSON (schemas/workload.schema.json), and between the
    ASTRA-sim 1.0 and SimAI dialects of the text (--to text --dialect D).

    \b
    Examples:
      modtrans translate resnet50 -o workload.txt && modtrans convert workload.txt -o workload.json
      modtrans convert workload.json --to text -o again.txt
      modtrans translate resnet50 --dialect simai -o simai.txt
      modtrans convert simai.txt --to json -o simai.json

    A conversion the target cannot express is refused and says exactly what is in the way (D310:
    SimAI header keys or _EP comm types for ASTRA-sim 1.0); one the target would read differently
    is written and the target's readings are reported as warnings (D3xx: SimAI keeping only the
    first checkpoint index, header keys SimAI expects but 1.0 files do not carry).
    """
    if output is not None and str(output) == "":
        _usage("--output is empty: give a file, or - for standard output")
    if output is not None and str(output) != "-":
        _refuse_inputs([output], [str(path)], force)
    loaded = load(path)
    problems = check_parsed(loaded.result, dialect=None, path=loaded.path)
    workload = loaded.result.workload
    new: str | Callable[[], Iterator[bytes]] | None = None
    if workload is not None and not has_errors(problems):
        if to == "json":  # written layer by layer: the whole document never sits in memory
            new = functools.partial(_json_pieces, workload)
        else:
            new = _canonical(loaded, dialect, problems)
    if isinstance(new, str):  # text: what we write must pass our own checks
        written = validate_text(new, dialect=dialect or workload.dialect if workload else None)
        if has_errors(written):
            problems += [dataclasses.replace(d, path=str(output or "<output>")) for d in written]
            new = None
    lost: list[Diagnostic] = []
    crossing = workload is not None and dialect is not None and dialect != workload.dialect
    if isinstance(new, str) and crossing:  # what the target will read differently
        where = str(output or "<output>")
        lost = [
            dataclasses.replace(d, path=where)
            for d in validate_text(new, dialect=dialect)
            if d.code.startswith("D")
        ]
    if new is not None:
        if output is None or str(output) == "-":
            if isinstance(new, str):
                sys.stdout.write(new)
            else:
                for piece in new():
                    sys.stdout.buffer.write(piece)
                sys.stdout.flush()
        else:
            _save(output, new, problems)
            if not has_errors(problems) and not quiet:
                typer.echo(f"wrote {output}", err=True)
    report.emit(lost, Format.TEXT, stream=sys.stderr, color=False if no_color else None)
    report.emit(
        [d for d in problems if d.severity == 1],
        Format.TEXT,
        stream=sys.stderr,
        sources={loaded.path: loaded.line},
        color=False if no_color else None,
    )
    raise typer.Exit(report.exit_code(problems) if new is None or problems else 0)


def _json_pieces(workload: Workload) -> Iterator[bytes]:
    return (piece.encode() for piece in jsonform.chunks(workload))


def _canonical(loaded: Loaded, dialect: Dialect | None, problems: list[Diagnostic]) -> str | None:
    workload = loaded.result.workload
    errors = [d for d in loaded.result.diagnostics if d.severity == 1]
    if workload is None or errors:
        problems += errors
        return None
    try:
        return write(workload, dialect or workload.dialect or Dialect.ASTRA_SIM)
    except DiagnosticError as error:
        problems += [diagnostic(d.code, d.message, path=loaded.path, hint=d.hint) for d in error.diagnostics]
        return None
