"""The public translation: every option of `modtrans translate`, typed, and every format written.

    result = modtrans.translate("llama-3-8b", tp=2, pp=2, dp=2, format="chakra-et", output="out/llama")
    result.plan, result.metadata, result.written     # the traces, the group file, the .meta.json

`translate` = `prepare` (request.py: the options' rules) + `run` (pipeline + the format's writer
and self-check, outputs.py) + `write` (all files or none). The command line calls the same three.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from modtrans import outputs, pipeline
from modtrans.diagnostics import DiagnosticError, has_errors
from modtrans.pipeline import Translation
from modtrans.request import Format, Prepared, Request, UsageError, prepare


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
        )
        files += _timeline(result, prepared)
        return replace(
            result, diagnostics=(*found, *checked), metadata=metadata, files=tuple(files), folder=folder
        )
    text = None
    if result.workload is not None and output.render is not None:
        dialect = prepared.options.dialect
        text = output.render(result.workload, dialect, found, str(request.model))
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


def translate(
    model: str | Path,
    *,
    output: str | Path | None = None,
    format: Format = "text",
    parallel: str | None = None,
    npus: int | None = None,
    tp: int | None = None,
    pp: int | None = None,
    dp: int | None = None,
    ep: int | None = None,
    etp: int | None = None,
    framework: str | None = None,
    sp: bool | None = None,
    zero: int | None = None,
    micro_batch: int | None = None,
    global_batch: int | None = None,
    schedule: str | None = None,
    vpp: int | None = None,
    recompute: str | None = None,
    stages: Sequence[int] | None = None,
    seq_len: int | None = None,
    model_parallel_group: int | None = None,
    packages: int | None = None,
    checkpoints: Sequence[int] | None = None,
    checkpoint_initiates: Sequence[int] | None = None,
    checkpoint_every: int | None = None,
    per_layer: Mapping[str, str] | str | Path | None = None,
    dialect: str | None = None,
    params: str | None = None,
    batch: int | None = None,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
    input_values: Mapping[str, float] | None = None,
    dtype_bytes: int | None = None,
    compute: str | None = None,
    device: str | None = None,
    array: tuple[int, int] | None = None,
    dataflow: str | None = None,
    bytes_per_cycle: float | None = None,
    time_unit: str | None = None,
    clock_ghz: float = 1.0,
    passes: int = 1,
    network_dims: Sequence[int] | None = None,
    meta: str | Path | None = None,
    like: str | Path | None = None,
    force: bool = False,
    strict: bool = False,
    allow_unknown: bool = False,
    full_hash: bool = False,
) -> Translation:
    """Translate an ONNX file, a built-in or a fetched model as `modtrans translate` does (each
    keyword is the option of that name, --micro-batch for micro_batch; `modtrans translate
    --help` describes them); None: not given. Returns the Translation: workload (None where the
    text cannot hold the plan), plan, ir, diagnostics (warnings), metadata (the .meta.json), text
    (format text / json), notes and, when `output` is given, the files written.

    output: a file (text, json; its .meta.json beside it, or at `meta`), or for "chakra-et" a
        DIR/PREFIX (PREFIX.<npu>.et, PREFIX.comm_groups.json, PREFIX.meta.json) or DIR/ (the
        model's name as PREFIX). Written all or none, never over an input unless `force`.
    format: "text" (the workload file for `dialect`: astra-sim, simai or chakra), "json" or
        "chakra-et" (one Chakra trace per NPU).
    parallel: DATA (default), MODEL, HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, HYBRID_CUSTOMIZED,
        HYBRID_TRANSFORMER or HYBRID_TRANSFORMER_FWD_IN_BCKWD; with `npus`,
        `model_parallel_group` (or `packages`), the checkpoints and `per_layer` (pattern ->
        keyword, or a file of `PATTERN KEYWORD` lines).
    tp, pp, dp, ep, etp, sp, zero, micro_batch, global_batch, schedule ("gpipe", "1f1b",
        "interleaved"), vpp, recompute ("none", "selective", "full"), stages: the LLM layout
        (sp: True, False, or None when not given: none, or `like`'s).
    seq_len: the sequence length (input_ids=1xS; Megatron's --seq-length).
    input_values: an ONNX model's scalar inputs as constants ({"sr": 16000}), so that an If on
        their value takes one branch instead of costing both (X513).
    framework: "megatron" (default), "deepspeed" or "fsdp": whose data parallelism and ZeRO.
    params: "trainable" (default) or "weights"; compute: "gpu" (default: kernels as measured), "roofline",
        "astra-sim-reference", "scalesim-v3" or "scalesim", with device, array (rows, cols),
        dataflow ("ws", "is", "os"), bytes_per_cycle, time_unit ("ns", "us", "cycles"), clock_ghz.
    like: a reference workload whose layout (each field: tp, pp, dp, ...), keyword, dialect,
        params and compute fill those not given.
    strict: warnings fail too.

    Raises UsageError (a ValueError) for options the rules refuse, ValueError for a string not
    listed here, and DiagnosticError when the translation or a write fails.
    """
    given = {name: value for name, value in locals().items() if name not in ("model", "output")}
    request = Request(
        model=str(model),
        output=None if output is None else str(output),
        **{**given, "input_shapes": dict(input_shapes or {}), "input_values": dict(input_values or {})},
    )
    result = write(run(prepare(request)), request.model, force=force)
    if has_errors(result.diagnostics) or (result.text is None and not result.files):
        raise DiagnosticError(result.diagnostics)  # strict: a warning left nothing to write
    return result
