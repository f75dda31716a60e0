"""Commands on models: extract, translate, inspect, zoo list, fetch, cost list."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from modtrans import chakra, cost, pipeline, report, zoo
from modtrans import fetch as fetching
from modtrans.cli.common import (
    Array,
    Batch,
    BytesPerCycle,
    ClockGhz,
    Compute,
    ComputeModel,
    Dataflow,
    Device,
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
    _conventions_of,
    _cost,
    _finish,
    _given,
    _indices,
    _per_layer,
    _refuse_inputs,
    _save_all,
    _shapes,
    _unreadable_option,
    _usage,
    app,
    cost_app,
    zoo_app,
)
from modtrans.cost import roofline
from modtrans.diagnostics import Diagnostic, DiagnosticError, diagnostic, has_errors
from modtrans.fileio import is_file_output, read_binary
from modtrans.ir import document
from modtrans.ir.document import ModelIR
from modtrans.plan import Plan
from modtrans.report import COLLAPSED, Format
from modtrans.sidecar import describe as describe_output
from modtrans.strategy import Parallelism, Params
from modtrans.strategy.llm.options import Layout, LayoutError, Recompute, Schedule
from modtrans.workload.model import Dialect, Policy, Workload
from modtrans.workload.validate import validate as validate_text
from modtrans.workload.write import write


@app.command()
def extract(
    model: Model,
    output: Output = None,
    batch: Batch = None,
    input_shape: InputShape = None,
    no_hash: Annotated[
        bool, typer.Option("--no-hash", help="No digest of the file in the provenance.")
    ] = False,
    full_hash: FullHash = False,
    force: Force = False,
    quiet: Quiet = False,
    no_color: NoColor = False,
) -> None:
    """Extract a model's intermediate document (IR).

    The IR (schemas/model-ir.schema.json) of an ONNX file or built-in; weights are never read.

    \b
    Examples:
      modtrans extract resnet50 -o resnet50.ir.json
      modtrans extract model.onnx --input-shape input=1x3x224x224
    """
    shapes = _shapes(input_shape)
    with report.status(f"reading {model}"):
        ir, found = pipeline.extract_checked(
            model, batch=batch, input_shapes=shapes, file_hash=not no_hash, full_hash=full_hash
        )
    text = None if ir is None or has_errors(found) else _ir_json(ir, model, found)
    _finish(found, text, output, _inputs(model), force, no_color, quiet=quiet)


def _inputs(model: str) -> list[str]:
    """The files a model argument reads: the path, or the built-in's / fetched model's file."""
    resolved = pipeline.model_file(model)
    return [model] if resolved is None else [model, str(resolved)]


def _ir_json(ir: ModelIR, model: str, found: list[Diagnostic]) -> str | None:
    try:
        return document.dumps(ir, path=model)
    except DiagnosticError as error:  # a ModTrans bug: report it, write nothing
        found += error.diagnostics
        return None


LLM = "LLM parallelism (tensor x pipeline x data x expert)"


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
    dialect: Annotated[
        Dialect, typer.Option("--dialect", "-d", case_sensitive=False, help="Consumer to write for.")
    ] = Dialect.ASTRA_SIM,
    params: ParamsOpt = Params.TRAINABLE,
    batch: Batch = None,
    input_shape: InputShape = None,
    dtype_bytes: Annotated[
        int | None,
        typer.Option(
            min=1, help="Bytes per parameter element in the all-reduce (default: the model's dtype)."
        ),
    ] = None,
    compute: Compute = ComputeModel.ROOFLINE,
    device: Device = None,
    array: Array = None,
    dataflow: Dataflow = None,
    bytes_per_cycle: BytesPerCycle = None,
    time_unit: TimeUnit = cost.Unit.NS,
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
        typer.Option(help="Write the provenance here (default: OUTPUT.meta.json beside a file output)."),
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
    tp: Annotated[
        int | None, typer.Option("--tp", min=1, help="Tensor-parallel ranks T.", rich_help_panel=LLM)
    ] = None,
    pp: Annotated[
        int | None, typer.Option("--pp", min=1, help="Pipeline stages P.", rich_help_panel=LLM)
    ] = None,
    dp: Annotated[
        int | None,
        typer.Option("--dp", min=1, help="Data-parallel ranks D (default N / (T P)).", rich_help_panel=LLM),
    ] = None,
    ep: Annotated[
        int | None,
        typer.Option(
            "--ep", min=1, help="Expert-parallel ranks E, carved from the D data ranks.", rich_help_panel=LLM
        ),
    ] = None,
    sp: Annotated[
        bool, typer.Option("--sp", help="Sequence parallelism over the T ranks.", rich_help_panel=LLM)
    ] = False,
    zero: Annotated[
        int | None, typer.Option("--zero", min=0, max=3, help="ZeRO stage 0-3.", rich_help_panel=LLM)
    ] = None,
    micro_batch: Annotated[
        int | None,
        typer.Option(
            "--micro-batch", min=1, help="Sequences per micro-batch M (default 1).", rich_help_panel=LLM
        ),
    ] = None,
    global_batch: Annotated[
        int | None,
        typer.Option(
            "--global-batch", min=1, help="Sequences per iteration B (default M D P).", rich_help_panel=LLM
        ),
    ] = None,
    schedule: Annotated[
        Schedule | None, typer.Option("--schedule", help="Pipeline schedule.", rich_help_panel=LLM)
    ] = None,
    vpp: Annotated[
        int | None,
        typer.Option(
            "--vpp", min=1, help="Interleaved: model chunks per pipeline rank V.", rich_help_panel=LLM
        ),
    ] = None,
    recompute: Annotated[
        Recompute | None,
        typer.Option("--recompute", help="Activation recomputation.", rich_help_panel=LLM),
    ] = None,
    stages: Annotated[
        str | None,
        typer.Option(
            "--stages",
            help="Blocks per pipeline chunk, e.g. 9,8,8,7 (default: balanced).",
            rich_help_panel=LLM,
        ),
    ] = None,
) -> None:
    """Translate a model into a workload.

    An ONNX file, a built-in architecture or a fetched model, into a workload file, workload JSON
    or Chakra traces.

    \b
    Examples:
      modtrans translate resnet50 -o resnet50.txt
      modtrans translate resnet50 --like Resnet50_DataParallel.txt -o generated.txt
      modtrans translate gpt2 -p HYBRID_TRANSFORMER --npus 8 --model-parallel-group 4
      modtrans translate model.onnx --batch 32 --compute roofline --device h100
      modtrans translate resnet50 --format chakra-et --npus 8 -o traces/
    """
    policy = Policy(parallel.value)
    if like is not None:
        policy, dialect, params, compute = _like(like, policy, dialect, params, compute, quiet)
    if to == "chakra-et":
        if output in (None, "-"):
            _usage("--format chakra-et writes files: give -o DIR/PREFIX")
        if _given("time_unit") and time_unit is not cost.Unit.US:
            _usage(
                f"--time-unit {time_unit.value}: a Chakra trace holds microseconds (duration_micros, "
                "which ASTRA-sim 2.x reads as such); the traces are computed in ns and written in us "
                "without rounding each node"
            )
        time_unit = cost.Unit.NS  # exact; chakra/write.py writes whole microseconds with the carry
    _not_applicable(
        to,
        policy,
        compute,
        dataflow=dataflow,
        per_layer=per_layer,
        checkpoint_every=checkpoint_every,
        checkpoints=checkpoints,
        checkpoint_initiates=checkpoint_initiates,
        network_dims=network_dims,
        passes=passes,
        model_parallel_group=model_parallel_group,
    )
    settings = _cost(device, array, dataflow, bytes_per_cycle, time_unit, clock_ghz)
    if packages is not None:
        if model_parallel_group is not None or npus % packages:
            _usage("--packages must divide --npus, and replaces --model-parallel-group")
        model_parallel_group = npus // packages
    layout = _layout(
        npus, tp, pp, dp, ep, sp, zero, micro_batch, global_batch, schedule, vpp, recompute, stages, policy
    )
    if layout is not None:
        npus = layout.npus
        if micro_batch is not None:
            batch = micro_batch  # the IR is one micro-batch
    if to == "chakra-et":
        _trace_count(npus, layout, force)
    strategy = Parallelism(
        policy,
        npus,
        model_parallel_group,
        _indices(checkpoints, "--checkpoints"),
        _indices(checkpoint_initiates, "--checkpoint-initiates"),
        checkpoint_every,
        _per_layer(per_layer) if per_layer is not None else None,
        layout,
    )
    options = pipeline.Options(
        strategy,
        params,
        batch,
        _shapes(input_shape),
        dtype_bytes,
        compute,
        settings,
        dialect,
        to == "chakra-et",
        allow_unknown,
        full_hash,
    )
    with report.status(f"translating {model}"):
        result = pipeline.translate_checked(model, options)
    found = list(result.diagnostics)
    if to == "chakra-et":
        dims = _indices(network_dims, "--network-dims", "NPUs per network dimension like 4,2")
        prefix = Path(str(output))
        if prefix.is_dir() or str(output).endswith("/"):  # a folder: <folder>/<model>.<npu>.et
            prefix = prefix / _model_stem(model)
        _chakra_traces(result, prefix, npus, passes, strict, no_color, dims, _inputs(model), force, quiet)
    text = None
    if result.workload is not None:
        text = _render_workload(result.workload, dialect, to, found)
    if strict and any(d.severity <= 2 for d in found):
        text = None
    beside = output not in (None, "-") and is_file_output(str(output))  # no /dev/null.meta.json
    target = meta or (Path(f"{output}.meta.json") if beside else None)
    described = result.metadata
    if text is not None and output not in (None, "-"):  # the pair names each other (sidecar.py)
        described = {**described, "output": describe_output(str(output), text)}
    sidecar = None if target is None else (target, json.dumps(described, indent=1) + "\n")
    _finish(found, text, output, _inputs(model), force, no_color, sidecar, quiet)


def _layout(
    npus: int,
    tp: int | None,
    pp: int | None,
    dp: int | None,
    ep: int | None,
    sp: bool,
    zero: int | None,
    micro_batch: int | None,
    global_batch: int | None,
    schedule: Schedule | None,
    vpp: int | None,
    recompute: Recompute | None,
    stages: str | None,
    policy: Policy,
) -> Layout | None:
    """The LLM layout the options describe (None when none of them is given)."""
    given = (tp, pp, dp, ep, zero, micro_batch, global_batch, schedule, vpp, recompute, stages)
    if not sp and all(v is None for v in given):
        return None
    if _given("parallel") and not policy.is_transformer:
        _usage(f"--tp/--pp/--dp/--ep/... lay out a transformer; --parallel {policy} is not one")
    if _given("model_parallel_group"):
        _usage("--model-parallel-group is --tp for the LLM layout: give one of them")
    t, p = tp or 1, pp or 1
    total = npus if _given("npus") else t * p * (dp or 1)
    layout = Layout(
        npus=total,
        tp=t,
        pp=p,
        dp=dp,
        ep=ep or 1,
        sp=sp,
        zero=zero or 0,
        micro_batch=micro_batch or 1,
        global_batch=global_batch,
        schedule=schedule or (Schedule.INTERLEAVED if vpp and vpp > 1 else Schedule.ONE_F_ONE_B),
        vpp=vpp or 1,
        recompute=recompute or Recompute.NONE,
        stages=None if stages is None else _indices(stages, "--stages", "blocks per chunk like 9,8,8,7"),
    )
    try:
        return layout.check()
    except LayoutError as error:
        _usage(str(error))
        raise


MAX_TRACES = 4096
"""--format chakra-et writes one file per NPU; more than this many need --force."""


def _trace_count(npus: int, layout: Layout | None, force: bool) -> None:
    """Refuse more than MAX_TRACES trace files without --force, however the NPUs were given
    (--npus, or T x P x D of the LLM layout)."""
    if npus > MAX_TRACES and not force:
        given = f"--npus {npus}" if layout is None else f"T x P x D = {npus} NPUs"
        _usage(f"{given} writes {npus} trace files (over {MAX_TRACES}); pass --force")


def _model_stem(model: str) -> str:
    """The model's name for file names: a built-in's name, or the ONNX file's stem."""
    return Path(model).stem if model.lower().endswith(".onnx") else Path(model).name


def _not_applicable(to: str, policy: Policy, compute: ComputeModel, **given: object) -> None:
    """Warn about each option given that this translation does not use, and why."""
    systolic = compute in (ComputeModel.SCALESIM_V3, ComputeModel.SCALESIM)
    checkpointed = policy is Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD
    unused = {
        "dataflow": None if systolic else f"--compute {compute} has no dataflow",
        "per_layer": None
        if policy is Policy.HYBRID_CUSTOMIZED
        else f"only HYBRID_CUSTOMIZED reads it, not {policy}",
        "network_dims": None if to == "chakra-et" else f"only --format chakra-et uses it, not {to}",
        "passes": None if to == "chakra-et" else f"only --format chakra-et uses it, not {to}",
        "model_parallel_group": f"{policy} has no model-parallel group"
        if policy in (Policy.DATA, Policy.MODEL)
        else None,
    }
    for key in ("checkpoint_every", "checkpoints", "checkpoint_initiates"):
        unused[key] = (
            None if checkpointed else f"only HYBRID_TRANSFORMER_FWD_IN_BCKWD checkpoints, not {policy}"
        )
    for name, value in given.items():
        reason = unused.get(name)
        if value is not None and value != (1 if name == "passes" else None) and reason is not None:
            typer.echo(f"modtrans: warning: --{name.replace('_', '-')} is ignored: {reason}", err=True)


def _like(
    reference: Path, parallel: Policy, dialect: Dialect, params: Params, compute: ComputeModel, quiet: bool
) -> tuple[Policy, Dialect, Params, ComputeModel]:
    """The options a reference workload implies, for those the user did not give (said unless
    `quiet`)."""
    from modtrans.strategy.parallel import SUPPORTED
    from modtrans.workload.load import load

    loaded = load(reference)
    unreadable = next((d for d in loaded.result.diagnostics if d.code == "F001"), None)
    if unreadable is not None:
        raise _unreadable_option("--like", reference, unreadable.message)
    if loaded.result.workload is None:
        _usage(f"--like {reference}: not a workload file ({loaded.result.diagnostics[0].message})")
    workload = loaded.result.workload
    assert workload is not None
    taken = []
    if not _given("parallel") and workload.header.policy in SUPPORTED:
        parallel = workload.header.policy
        taken.append(f"--parallel {parallel.value}")
    if not _given("dialect") and workload.dialect is not None:
        dialect = workload.dialect
        taken.append(f"--dialect {dialect.value}")
    params, compute, implied = _conventions_of(workload, params, compute)
    taken += implied
    if not quiet:
        typer.echo(f"--like {reference}: {' '.join(taken) or 'nothing to take'}", err=True)
    return parallel, dialect, params, compute


def _chakra_traces(
    result: pipeline.Translation,
    prefix: Path,
    npus: int,
    passes: int,
    strict: bool,
    no_color: bool,
    dims: tuple[int, ...] | None,
    inputs: list[str],
    force: bool,
    quiet: bool = False,
) -> None:
    found = list(result.diagnostics)
    failed = result.plan is None or has_errors(found) or (strict and any(d.severity <= 2 for d in found))
    if not failed and result.plan is not None:
        plan = result.plan
        metadata = {
            **result.metadata,
            "duration_micros": "compute time in whole microseconds, the rounding carried from node to node "
            "(durations sum to the compute time within 1 us); ASTRA-sim 2.x multiplies by 1000",
            "passes": passes,
            "comm_groups": {str(g.id): g.purpose for g in plan.groups()},
        }
        try:
            outputs: list[tuple[Path, str | bytes]] = list(
                chakra.files(
                    plan,
                    prefix,
                    passes=passes,
                    metadata={**metadata, "network_dims": dims},
                    dims=dims,
                    tick_ns=1.0,  # translated in ns
                    lazy=True,
                )
            )
        except chakra.ChakraError as error:
            typer.echo(f"modtrans: {error}", err=True)
            raise typer.Exit(2) from None
        traces, groups = outputs[:-1], outputs[-1]
        found += _checked(plan, outputs)  # what we write passes the checks users run
        sidecar = (Path(f"{prefix}.meta.json"), json.dumps(metadata, indent=1) + "\n")
        outputs.append(sidecar)
        _refuse_inputs([target for target, _ in outputs], inputs, force)
        if not has_errors(found):
            _save_all(outputs, found)
        if not has_errors(found) and not quiet:
            first, last = traces[0][0], traces[-1][0]
            names = f"{first}" if len(traces) == 1 else f"{first} .. {last}"
            plural = "trace" if len(traces) == 1 else "traces"
            typer.echo(
                f"wrote {len(traces)} Chakra {plural}: {names}, {groups[0]} (--comm-group-configuration) "
                f"and {sidecar[0]}",
                err=True,
            )
    report.emit(found, Format.TEXT, stream=sys.stderr, color=False if no_color else None, **COLLAPSED)
    raise typer.Exit(report.exit_code(found, strict=strict) or (1 if failed else 0))


SELF_CHECK = 64
"""Up to this many ranks, every trace written is decoded and checked across ranks before it is
saved; above, each pipeline stage's first rank is checked node by node and the matching across
ranks on the plan itself (plan/check.py), which decides the same for traces made from it."""


def _checked(plan: Plan, outputs: list[tuple[Path, Any]]) -> list[Diagnostic]:
    """The trace-set checks of `modtrans validate`, on the traces before they are written (the
    traces checked are made here and kept, so they are not encoded twice)."""
    from modtrans.chakra.validate import check_set
    from modtrans.plan.check import consistency

    group_path, groups = outputs[-1]
    traces = outputs[:-1]
    complete = len(traces) <= SELF_CHECK
    ranks = (
        range(len(traces)) if complete else sorted({plan.program_of.index(p) for p in set(plan.program_of)})
    )
    for rank in ranks:
        path, data = traces[rank]
        if callable(data):
            outputs[rank] = (path, data())
    sample = {str(outputs[r][0]): outputs[r][1] for r in ranks}
    found = check_set(sample, groups, str(group_path), complete=complete)
    if not complete:
        found += [diagnostic(code, message, path=str(group_path)) for code, message in consistency(plan)]
    return [d for d in found if d.severity <= 2]


def _render_workload(workload: Workload, dialect: Dialect, to: str, found: list[Diagnostic]) -> str | None:
    if to == "json":
        from modtrans.workload import jsonform

        return jsonform.dumps(workload)
    try:
        text = write(workload, dialect)
    except DiagnosticError as error:
        found += error.diagnostics
        return None
    checked = validate_text(text, dialect=dialect)  # what we write must pass our own checks
    found += checked
    return None if has_errors(checked) else text


@app.command()
def inspect(
    model: Model,
    fmt: Annotated[
        Literal["table", "json", "csv"],
        typer.Option("--format", "-f", help="A table, the IR as JSON, or CSV."),
    ] = "table",
    params: ParamsOpt = Params.TRAINABLE,
    all_layers: Annotated[bool, typer.Option("--all", help="Also list layers without parameters.")] = False,
    batch: Batch = None,
    input_shape: InputShape = None,
    no_color: NoColor = False,
) -> None:
    """Show a model's layers, or a Chakra trace set's per-rank totals.

    Per layer: parameters, dtype, bytes, output shape, FLOPs; then totals. For traces (a set's
    PREFIX or one of its .et files): per rank, compute time, FLOPs, bytes per collective and
    group, sends and receives.

    \b
    Examples:
      modtrans inspect resnet50
      modtrans inspect model.onnx --format csv --all
      modtrans inspect traces/gpt2
    """
    from modtrans.chakra.read import is_trace_spec  # inspect's: not every command's

    if is_trace_spec(Path(model)):
        _inspect_traces(Path(model), fmt)
        return
    with report.status(f"reading {model}"):
        ir, found = pipeline.extract_checked(
            model, batch=batch, input_shapes=_shapes(input_shape), file_hash=False
        )
    report.emit(found, Format.TEXT, stream=sys.stderr, color=False if no_color else None, **COLLAPSED)
    if ir is None or has_errors(found):
        raise typer.Exit(report.exit_code(found) or 1)
    from modtrans.ir import render  # rich: only the command that prints with it

    selected = render.rows(ir, weights_only=params is Params.WEIGHTS, all_layers=all_layers)
    if fmt == "json":
        text = _ir_json(ir, model, found)
        if text is None:
            report.emit(found, Format.TEXT, stream=sys.stderr, color=False if no_color else None, **COLLAPSED)
            raise typer.Exit(1)
        sys.stdout.write(text)
    elif fmt == "csv":
        sys.stdout.write(render.to_csv(selected))
    else:
        title = f"{ir.provenance.file} ({params.value})"
        render.print_table(ir, selected, title, color=False if no_color else None, width=None)


def _inspect_traces(spec: Path, fmt: str) -> None:
    from modtrans.chakra.read import read
    from modtrans.chakra.summary import lines, stages, summarize
    from modtrans.chakra.validate import expand

    if fmt != "table":
        _usage(f"--format {fmt}: a trace set is shown as a table only")
    from modtrans.chakra.read import prefix_of

    prefix = prefix_of(str(spec)) or str(spec)
    members = next(iter(expand([Path(prefix)]).values()), [])
    if not members:
        _usage(f"{spec}: no trace files {prefix}.<rank>.et")
    traces = []
    for path in members:
        data, problem = read_binary(path)
        if data is None:
            typer.echo(f"modtrans: {problem.message if problem else path}", err=True)
            raise typer.Exit(2)
        traces.append(read(data, str(path)))
    broken = [t.problem for t in traces if t.problem is not None]
    report.emit(broken, Format.TEXT, stream=sys.stderr, color=False)
    rows = summarize(traces)
    typer.echo("\n".join([*lines(rows), *stages(traces, rows)]))
    raise typer.Exit(1 if broken else 0)


@zoo_app.command("list")
def zoo_list() -> None:
    """List built-in and fetchable models.

    \b
    Example:
      modtrans zoo list
    """
    for name in zoo.names():
        entry = zoo.get(name)
        assert entry is not None
        shapes = " ".join(f"{k}={'x'.join(map(str, v))}" for k, v in entry.input_shapes().items())
        typer.echo(f"{name:<14} {entry.description}  [{shapes}; from {entry.source}]")
    typer.echo("\nfetchable (modtrans fetch NAME):")
    for item in fetching.remotes():
        typer.echo(f"{item.name:<20} {item.bytes / 1e6:8.1f} MB  {item.description}")


@app.command()
def fetch(
    name: Annotated[str, typer.Argument(help="A model listed by `modtrans zoo list`.", show_default=False)],
    cache: Annotated[
        Path | None, typer.Option(help="Cache folder (default: MODTRANS_CACHE or ~/.cache/modtrans).")
    ] = None,
    mirror: Annotated[
        str | None, typer.Option(help="Download from this origin instead of github.com.")
    ] = None,
) -> None:
    """Download a model from the ONNX Model Zoo.

    Into the cache, verified by SHA-256; then use its name as MODEL.

    \b
    Example:
      modtrans fetch mnist-8 && modtrans translate mnist-8
    """
    try:
        with report.status(f"fetching {name}"):
            path = fetching.fetch(name, cache=cache, mirror=mirror)
    except fetching.FetchError as error:
        typer.echo(f"modtrans: {error}", err=True)
        raise typer.Exit(2) from None
    typer.echo(str(path))


@cost_app.command("list")
def cost_list() -> None:
    """List compute models and device profiles.

    \b
    Example:
      modtrans cost list
    """
    for entry in cost.models():
        typer.echo(f"{entry.name:<20} {entry.summary}")
    typer.echo("\nroofline device profiles (--device NAME, or a FILE.json per schemas/device.schema.json):")
    for key, dev in roofline.builtin_devices().items():
        peaks = ", ".join(f"{k} {v / 1e12:g} TFLOP/s" for k, v in dev.peak_flops.items())
        typer.echo(f"{key:<8} {dev.name}: {peaks}; {dev.bandwidth / 1e9:g} GB/s")
