"""The public translation: every option of `modtrans translate`, typed, and every format written.

    result = modtrans.translate("llama-3-8b", tp=2, pp=2, dp=2, format="chakra-et", output="out/llama")
    result.plan, result.metadata, result.written     # the traces, the group file, the .meta.json

`translate` = `prepare` (request.py: the options' rules) + `run` (pipeline + the format's writer
and self-check, outputs.py) + `write` (all files or none). The command line calls the same three.
"""

from __future__ import annotations

from dataclasses import replace
from inspect import Parameter
from pathlib import Path
from typing import Any

from modtrans import outputs, pipeline, table
from modtrans.diagnostics import DiagnosticError, has_errors
from modtrans.pipeline import Translation
from modtrans.request import Prepared, UsageError, prepare, request_of
from modtrans.workload.model import Workload


def run(prepared: Prepared) -> Translation:
    """The translation, and the files its format makes (checked as `modtrans validate` checks
    them), not yet written: the text or JSON with its .meta.json, or the traces with their group
    file and .meta.json. No files when it failed (or, for text, when the output is standard output)."""
    request = prepared.request
    result = pipeline.translate_checked(request.model, prepared.options)
    result = replace(result, notes=prepared.notes)
    found = list(result.diagnostics)
    warned = request.strict and any(d.severity <= 2 for d in found)
    output = prepared.output
    if output.traces:
        if result.plan is None or has_errors(found) or warned:
            return result
        prefix = outputs.trace_prefix(str(request.output), request.model)
        folder = outputs.new_folder(str(request.output))
        files, metadata, checked = outputs.trace_files(
            result.plan,
            prefix,
            result.metadata,
            passes=request.passes,
            dims=request.network_dims,
            made=folder is not None,
            full=request.check == "full",
        )
        files += _timeline(result, prepared)
        return replace(
            result, diagnostics=(*found, *checked), metadata=metadata, files=tuple(files), folder=folder
        )
    text = None
    if result.workload is not None and output.render is not None:
        dialect = prepared.options.dialect
        text = output.render(result.workload, dialect, found, str(request.model))
        if text is not None and output.check is not None:
            checked = output.check(text, result.workload, dialect, request.check == "full")
            found += checked
            text = None if has_errors(checked) else text
    if text is None or (request.strict and any(d.severity <= 2 for d in found)):
        return replace(result, diagnostics=tuple(found))
    files, metadata = outputs.text_files(text, request.output, result.metadata, request.meta, found)
    files += _timeline(result, prepared)
    return replace(result, diagnostics=tuple(found), metadata=metadata, text=text, files=tuple(files))


def _timeline(result: Translation, prepared: Prepared) -> outputs.Files:
    """The plan's schedule as a picture (SVG or PNG), where --timeline asks for one (plan/timeline.py),
    titled as `inspect --timeline` titles its traces (the layout's own DP: sidecar.layout)."""
    request, plan = prepared.request, result.plan
    if request.timeline is None or plan is None:
        return []
    from modtrans.picture import PictureError, draw, title_of
    from modtrans.plan.timeline import timeline
    from modtrans.sidecar import layout

    target = Path(request.timeline)
    llm = layout(plan.mesh, plan.layout) if plan.layout is not None else {}
    title = title_of(request.model, llm, plan.npus)
    try:
        return [(target, draw(timeline(plan), title, target, tick_ns=prepared.options.cost.clock.tick_ns))]
    except PictureError as error:
        raise UsageError(f"--timeline {target}: {error}") from None


def write(result: Translation, model: str, *, force: bool = False) -> Translation:
    """Write every file of `result`, or none (when it has errors, or a write fails: F003 added).
    Raises UsageError when a file is one of the model's inputs, unless `force`."""
    if not result.files:
        return result
    outputs.refuse_inputs([path for path, _ in result.files], pipeline.inputs_of(model), force)
    if has_errors(result.diagnostics):
        return result
    problems = outputs.save(result.files, folder=result.folder)
    if problems:
        return replace(result, diagnostics=(*result.diagnostics, *problems))
    return replace(result, written=tuple(path for path, _ in result.files))


def translate(model: str | Path, **options: Any) -> Translation:
    """Translate an ONNX file, a built-in or a fetched model as `modtrans translate` does: every
    option of that command is a keyword here, with the same name (--micro-batch is micro_batch,
    --format format), type, default and rule (table.py; the options below); None: not given.
    A list the command line types as text (stages="9,8,8,7", array="256x256",
    input_shape=["input_ids=1x128"]) may be given as that text or as its value ((9, 8, 8, 7),
    {"input_ids": (1, 128)}); per_layer also as a mapping of pattern to keyword. Returns the
    Translation: workload (None where the text cannot hold the plan), plan, ir, diagnostics
    (warnings), metadata (the .meta.json), text (format text / json), notes and, when `output`
    is given, the files written (all or none, never over an input unless `force`).

    Raises UsageError (a ValueError) for a value or combination the options' rules refuse,
    TypeError for a keyword that is no option, and DiagnosticError when the translation or a
    write fails.
    """
    request = request_of(model, options)
    result = write(run(prepare(request)), request.model, force=request.force)
    if has_errors(result.diagnostics) or (result.text is None and not result.files):
        raise DiagnosticError(result.diagnostics)  # strict: a warning left nothing to write
    return result


translate.__doc__ = f"{translate.__doc__}\n{table.described()}"
translate.__signature__ = table.signature(  # type: ignore[attr-defined]
    [Parameter("model", Parameter.POSITIONAL_OR_KEYWORD, annotation="str | Path")], "Translation"
)


def workload(model: str | Path, **options: Any) -> Workload:
    """The workload alone of `translate(model, **options)`, for callers that want only the text
    format's model; raises DiagnosticError when the text cannot hold the plan."""
    result = translate(model, **options)
    if result.workload is None:
        raise DiagnosticError(result.diagnostics)
    return result.workload
