"""`modtrans translate`: the options parsed into a Request (modtrans/request.py), the library's
translation and writers (modtrans/api.py) run, what was written said and the findings reported."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from modtrans import api, report
from modtrans.cli.common import (
    Array,
    AttentionKind,
    Batch,
    BytesPerCycle,
    ClockGhz,
    Compute,
    ComputeModel,
    Dataflow,
    Device,
    Efficiency,
    Force,
    FullHash,
    InputShape,
    Keyword,
    Model,
    NoColor,
    Output,
    ParamsOpt,
    Quiet,
    TimeUnit,
    _refused,
    app,
)
from modtrans.cli.layout import (
    CapacityOpt,
    CpOpt,
    DpOpt,
    EpOpt,
    EtpOpt,
    FrameworkOpt,
    GlobalBatchOpt,
    MicroBatchOpt,
    OverlapOpt,
    PadOpt,
    PpOpt,
    RecomputeOpt,
    ScheduleOpt,
    SeqLenOpt,
    SpOpt,
    StagesOpt,
    TpOpt,
    VocabOpt,
    VppOpt,
    ZeroOpt,
)
from modtrans.cli.values import InputValue, _array, _given, _indices, _shapes, _values
from modtrans.outputs import said
from modtrans.report import COLLAPSED, Format
from modtrans.request import Request, UsageError, prepare
from modtrans.strategy import Params
from modtrans.workload.model import Dialect


@app.command()
def translate(
    model: Model,
    output: Output = None,
    parallel: Annotated[
        Keyword,
        typer.Option(
            "--parallel",
            "-p",
            case_sensitive=False,
            help="The parallelism keyword (formulas: modtrans/strategy/techniques/, a module each).",
        ),
    ] = Keyword.DATA,
    npus: Annotated[int, typer.Option(min=1, help="NPUs in the simulated system.")] = 1,
    model_parallel_group: Annotated[
        int | None,
        typer.Option(min=1, help="NPUs per model-parallel group (hybrids, transformers); divides --npus."),
    ] = None,
    packages: Annotated[
        int | None,
        typer.Option(min=1, help="Or: the number of packages (groups); the group is --npus / --packages."),
    ] = None,
    checkpoint_every: Annotated[
        int | None,
        typer.Option(
            min=1, help="FWD_IN_BCKWD: an activation checkpoint every K layers (default: one, at 0)."
        ),
    ] = None,
    checkpoints: Annotated[
        str | None, typer.Option(help="FWD_IN_BCKWD: explicit checkpoint layers, e.g. 0,9,18.")
    ] = None,
    checkpoint_initiates: Annotated[
        str | None,
        typer.Option(
            help="FWD_IN_BCKWD: layers that start recomputation (default: each segment's last layer)."
        ),
    ] = None,
    per_layer: Annotated[
        Path | None,
        typer.Option(
            help="HYBRID_CUSTOMIZED: a file of `PATTERN KEYWORD` lines (fnmatch patterns on layer "
            "names; first match wins; unmatched layers are DATA). Without it each layer takes the "
            "cheaper of DATA (all-reduce of its parameters, 2P) and MODEL (all-gather of its output "
            "plus all-reduce of its input gradient, A_out + 2 A_in)."
        ),
    ] = None,
    timeline: Annotated[
        Path | None,
        typer.Option(
            help="Also draw the plan's schedule (FILE.svg or FILE.png): a lane per pipeline stage, a "
            "block per forward / backward of each micro-batch and chunk, the bubble the white between."
        ),
    ] = None,
    per_layer_times: Annotated[
        Path | None,
        typer.Option(
            help="Measured compute times: a CSV of `layer,phase,time_ns` (phase fwd, ig, wg, update), "
            "an AICB/AIOB computation profile or a PyTorch profiler trace (.json[.gz], with_modules), "
            "projected onto each rank's share by the cost model."
        ),
    ] = None,
    per_expert: Annotated[
        bool,
        typer.Option(
            "--per-expert",
            help="A configuration's routed experts a layer and trace node each, as transformers' "
            "modules are (default: one grouped GEMM of an EP rank's experts per projection).",
        ),
    ] = False,
    dialect: Annotated[
        Dialect, typer.Option("--dialect", "-d", case_sensitive=False, help="Consumer to write for.")
    ] = Dialect.ASTRA_SIM,
    params: ParamsOpt = Params.TRAINABLE,
    batch: Batch = None,
    input_shape: InputShape = None,
    input_value: InputValue = None,
    dtype_bytes: Annotated[
        int | None,
        typer.Option(
            min=1, help="Bytes per parameter element in the all-reduce (default: the model's dtype)."
        ),
    ] = None,
    compute: Compute = ComputeModel.GPU,
    device: Device = None,
    array: Array = None,
    dataflow: Dataflow = None,
    bytes_per_cycle: BytesPerCycle = None,
    efficiency: Efficiency = None,
    attention: AttentionKind = None,
    time_unit: TimeUnit = None,
    clock_ghz: ClockGhz = 1.0,
    to: Annotated[
        Literal["text", "json", "chakra-et"],
        typer.Option(
            "--format",
            help="text (the workload file), json (workload JSON) or chakra-et (one Chakra trace per NPU, "
            "-o DIR/PREFIX -> PREFIX.<npu>.et, with PREFIX.comm_groups.json).",
        ),
    ] = "text",
    passes: Annotated[int, typer.Option(min=1, help="chakra-et: training iterations in each trace.")] = 1,
    network_dims: Annotated[
        str | None,
        typer.Option(
            help="chakra-et: NPUs per network dimension, e.g. 4,2: each collective gets the involved_dim "
            "mask ASTRA-sim 1.0 would give it (default: no mask, i.e. every dimension)."
        ),
    ] = None,
    meta: Annotated[
        Path | None,
        typer.Option(
            help="Write a text or JSON output's provenance here (default: OUTPUT.meta.json beside "
            "it); a trace set's is always PREFIX.et-meta.json."
        ),
    ] = None,
    like: Annotated[
        Path | None,
        typer.Option(
            help="A reference workload whose conventions to follow where not given: its keyword, "
            "dialect, layer convention (--params) and compute model (ASTRA-sim's reference model "
            "when its update times are a tenth of its weight-gradient times)."
        ),
    ] = None,
    force: Force = False,
    strict: Annotated[
        bool, typer.Option(help="Warnings (e.g. what the consumer misreads) fail: no output.")
    ] = False,
    quiet: Quiet = False,
    no_color: NoColor = False,
    allow_unknown: Annotated[
        bool,
        typer.Option(
            "--allow-unknown",
            help="Keep layers whose FLOPs are unknown (X510: 0; X514: one loop iteration); "
            "the metadata lists them.",
        ),
    ] = False,
    full_hash: FullHash = False,
    tp: TpOpt = None,
    pp: PpOpt = None,
    dp: DpOpt = None,
    ep: EpOpt = None,
    etp: EtpOpt = None,
    cp: CpOpt = None,
    sp: SpOpt = None,
    zero: ZeroOpt = None,
    micro_batch: MicroBatchOpt = None,
    global_batch: GlobalBatchOpt = None,
    schedule: ScheduleOpt = None,
    vpp: VppOpt = None,
    recompute: RecomputeOpt = None,
    seq_len: SeqLenOpt = None,
    framework: FrameworkOpt = None,
    overlap_grad_reduce: OverlapOpt = False,
    make_vocab_size_divisible_by: VocabOpt = None,
    moe_expert_capacity_factor: CapacityOpt = None,
    moe_pad_expert_input_to_capacity: PadOpt = False,
    stages: StagesOpt = None,
) -> None:
    """Translate a model into a workload.

    An ONNX file, a built-in architecture or a fetched model, into a workload file, workload JSON
    or Chakra traces.

    \b
    Examples:
      modtrans translate resnet50 -o resnet50.txt
      modtrans translate resnet50 --like resnet50.txt -o generated.txt
      modtrans translate gpt2 -p HYBRID_TRANSFORMER --npus 8 --model-parallel-group 4
      modtrans translate resnet50 --batch 32 --compute roofline --device h100
      modtrans translate llama-3-8b --tp 4 --pp 2 --dp 2 --dialect simai -o llama.txt
      modtrans translate resnet50 --format chakra-et --npus 8 -o traces/
    """
    request = _request(dict(locals()))
    try:
        prepared = prepare(request, say=lambda line: _say(line, quiet))
        with report.status(f"translating {model}", quiet=quiet):
            result = api.run(prepared)
            result = api.write(result, model, force=force)
    except UsageError as error:
        raise _refused(error) from None
    if result.written and not quiet:
        typer.echo(said(result.written), err=True)
    if to == "chakra-et":
        code = report.exit_code(result.diagnostics, strict=strict) or (0 if result.files else 1)
    else:
        if result.text is not None and output in (None, "-"):
            sys.stdout.write(result.text)
        code = report.exit_code(result.diagnostics) or (0 if result.text is not None else 1)
    color = False if no_color else None
    report.emit(result.diagnostics, Format.TEXT, stream=sys.stderr, color=color, **COLLAPSED)
    raise typer.Exit(code)


NOT_GIVEN = ("parallel", "npus", "dialect", "params", "compute", "time_unit")
"""Options with a default that the request takes as None when not given: --like fills them, and
some rules ask whether they were given (--npus with the LLM layout, --time-unit with traces)."""

INDICES = {
    "checkpoints": "layer indices like 0,9,18",
    "checkpoint_initiates": "layer indices like 0,9,18",
    "network_dims": "NPUs per network dimension like 4,2",
    "stages": "blocks per chunk like 9,8,8,7",
}


def _request(given: dict[str, Any]) -> Request:
    """The command line's values as the library's Request: lists parsed, defaults not given None."""
    fields = {k: v for k, v in given.items() if k not in ("to", "quiet", "no_color")}
    shapes, values = _shapes(fields.pop("input_shape")), _values(fields.pop("input_value"))
    for name in NOT_GIVEN:
        if not _given(name):
            fields[name] = None
    for name, expected in INDICES.items():
        fields[name] = _indices(given[name], f"--{name.replace('_', '-')}", expected)
    fields["array"] = _array(given["array"])
    return Request(**fields, format=given["to"], input_shapes=shapes, input_values=values)


def _say(line: str, quiet: bool) -> None:
    """A note of the request's rules: warnings always, what --like took unless `quiet`."""
    if not quiet or line.startswith("modtrans: warning:"):
        typer.echo(line, err=True)
