"""The two sides of `modtrans diff`: each read as a workload or translated from a model, the
model's options a Request (modtrans/request.py: the same rules, --like and layout as translate),
and the command line that would compare like with like."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from modtrans import pipeline, report
from modtrans.report import Format
from modtrans.request import Request, UsageError, conventions_of, prepare
from modtrans.workload.parse import LineCache

if TYPE_CHECKING:
    from modtrans.diff import conventions

Gemms = dict[str, dict[str, "conventions.Gemms"]]


def _options(request: Request) -> pipeline.Options:
    """The pipeline options of a model side; a rule the options break: one line, exit 2."""
    try:
        return prepare(request, say=_say).options
    except UsageError as error:
        typer.echo(f"modtrans: {error}", err=True)
        raise typer.Exit(2) from None


def _say(line: str) -> None:
    typer.echo(line, err=True)


def refuse_trace_sets(*specs: str) -> None:
    """Exit 2 naming the commands that read a trace set, when a side is one."""
    for spec in specs:
        if (prefix := _trace_set(spec)) is not None:
            what = "trace" if spec.endswith(".et") else "trace set"
            typer.echo(
                f"modtrans: {spec} is a Chakra {what}, not a workload: diff compares workloads and "
                f"models; `modtrans validate {prefix}` checks a trace set, `modtrans inspect {prefix}` "
                "shows its per-rank totals",
                err=True,
            )
            raise typer.Exit(2)


def sides(
    first: str, reference: str, request: Request, no_color: bool
) -> tuple[list[pipeline.Side], Gemms | None]:
    """Both sides read or translated (a model as `request` says; with --like, the first with the
    reference's conventions and layout: request.prepare), and the first side's GEMM shapes when
    it is a model; exit 2 when either cannot be had."""
    from modtrans.diff import conventions

    lines = LineCache()  # the two sides share the lines they have in common
    as_given = dataclasses.replace(request, like=None)
    follows = request.like is not None and pipeline.reads_as_workload(reference)
    # prepared once: a workload read takes no options (the first side's are the reference's then)
    options = _options(request if follows and reference != "-" else as_given)
    reference_side = pipeline.workload_or_model(reference, options, cache=lines)
    if follows and reference == "-" and reference_side.workload is not None:
        # no file for request.prepare to read: the conventions of what was read (not its layout)
        params, compute, _ = conventions_of(reference_side.workload, request.params, request.compute)
        options = _options(dataclasses.replace(as_given, params=params.value, compute=compute))
    gemms: Gemms | None = None  # the first side's, when a model
    if pipeline.reads_as_workload(first):
        first_side = pipeline.workload_or_model(first, options, cache=lines)
    else:  # translated here: its IR's GEMM shapes find where the reference contradicts itself
        translated = pipeline.translate_checked(first, options)
        first_side = pipeline.Side(translated.workload, translated.diagnostics, lambda _: None)
        gemms = conventions.gemm_shapes(translated.ir) if translated.ir is not None else None
    sides = [first_side, reference_side]
    color = False if no_color else None
    # once each: an option that fits neither model (--device bad) is the same error on both sides
    problems = list(dict.fromkeys(d for side in sides for d in side.diagnostics if d.severity == 1))
    if problems or any(side.workload is None for side in sides):
        sources = {spec: side.line for spec, side in zip((first, reference), sides, strict=True)}
        report.emit(problems, Format.TEXT, stream=sys.stderr, sources=sources, color=color)
        raise typer.Exit(2)
    if stale := [d for side in sides for d in side.diagnostics if d.code == "F006"]:  # sidecar.py
        report.emit(stale, Format.TEXT, stream=sys.stderr, color=color)
    return sides, gemms


def _trace_set(spec: str) -> str | None:
    """The prefix of the Chakra trace set `spec` names: a trace file (`*.et`) or a set's PREFIX
    that names no model or file itself; None when `spec` is something else."""
    from modtrans.chakra.read import prefix_of

    path = Path(spec)
    try:
        if path.suffix == ".et" and path.is_file():
            return _quoted(prefix_of(spec) or spec)
        if pipeline.model_file(spec) is None and Path(f"{spec}.0.et").is_file():
            return _quoted(spec)
    except OSError:  # a name the file system refuses: reading it says so
        return None
    return None


def like_with_like(first: str, reference: str, findings: list[conventions.Finding], like: bool) -> str | None:
    """The command line that compares like with like (None: this one): the model itself (named
    by the first side's .meta.json when the first side is a translated file) with the reference's
    conventions."""
    model = (
        first if pipeline.model_file(first) is not None and not pipeline.reads_as_workload(first) else None
    )
    if model is None:
        model = _translated_from(first)
    if model is not None:
        # already --like: what remains are conventions the translation does not follow (named
        # above); repeating the command would change nothing
        return None if like else f"modtrans diff {_quoted(model)} {_quoted(reference)} --like"
    flags = " ".join(f.option for f in findings if f.option == "--ignore-names")
    others = " ".join(f.option for f in findings if f.option and f.option != "--ignore-names")
    line = f"modtrans diff {_quoted(first)} {_quoted(reference)} {flags}".rstrip()
    if others:
        line += f"   # and translate the model again with {others} (or: modtrans translate MODEL --like REF)"
    return line


def _translated_from(path: str) -> str | None:
    """The model a workload file was translated from, as its .meta.json names it (if it resolves)."""
    try:
        meta = json.loads(Path(f"{path}.meta.json").read_text(encoding="utf-8"))
        name = str(meta["model"]["file"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return name if pipeline.model_file(name) is not None else None


def _quoted(text: str) -> str:
    import shlex

    return shlex.quote(text)
