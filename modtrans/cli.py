"""Command line: builds objects, calls the library, picks the exit code. The only module importing typer."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from modtrans import chakra, cost, pipeline, report, zoo
from modtrans import diff as comparison
from modtrans import fetch as fetching
from modtrans.cost import roofline
from modtrans.diagnostics import Diagnostic, DiagnosticError, diagnostic, has_errors
from modtrans.diff import render as diff_render
from modtrans.fileio import write_atomic
from modtrans.ir import document, render
from modtrans.ir.document import ModelIR
from modtrans.report import Format
from modtrans.strategy import Parallelism, Params
from modtrans.strategy.parallel import PER_LAYER as PER_LAYER_POLICIES
from modtrans.workload import jsonform
from modtrans.workload.load import Loaded, load, validate_file
from modtrans.workload.model import Dialect, Policy, Workload
from modtrans.workload.validate import validate as validate_text
from modtrans.workload.write import write

app = typer.Typer(
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    help="Translate models into ASTRA-sim layer-wise workloads; read, write and check workload files.",
)
zoo_app = typer.Typer(no_args_is_help=True, help="Built-in architectures (no download needed).")
app.add_typer(zoo_app, name="zoo")
cost_app = typer.Typer(no_args_is_help=True, help="Compute-time models.")
app.add_typer(cost_app, name="cost")

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
Model = Annotated[
    str,
    typer.Argument(
        help="An .onnx file, a built-in architecture (`modtrans zoo list`) or a fetched model.",
        show_default=False,
    ),
]
Batch = Annotated[
    int | None,
    typer.Option("--batch", "-b", min=1, help="Batch size: fixes dim 0 of every input where it is symbolic."),
]
InputShape = Annotated[
    list[str] | None,
    typer.Option("--input-shape", help="NAME=1x3x224x224: the whole shape of one input (repeatable)."),
]
ParamsOpt = Annotated[
    Params,
    typer.Option(
        "--params",
        case_sensitive=False,
        help="trainable: weights, biases, norm scales (what a framework all-reduces); "
        "weights: the conv/linear weight tensor only (ASTRA-sim's reference ResNet-50 convention).",
    ),
]
Output = Annotated[
    str | None,
    typer.Option("--output", "-o", help="Write here (atomically); - or nothing for standard output."),
]
Force = Annotated[bool, typer.Option(help="Allow --output to overwrite an input file.")]
Compute = Annotated[
    str,
    typer.Option(
        help="Compute-time model: roofline, astra-sim-reference, scalesim-v3, scalesim (`cost list`)."
    ),
]
Device = Annotated[
    str | None,
    typer.Option(
        help="roofline: a100, h100, v100, tpu-v4 or a profile FILE.json; scalesim-v3: a SCALE-Sim .cfg."
    ),
]
Array = Annotated[str | None, typer.Option(help="Systolic array ROWSxCOLS (default 256x256).")]
Dataflow = Annotated[str | None, typer.Option(help="Systolic dataflow: ws, is or os.")]
BytesPerCycle = Annotated[
    float | None,
    typer.Option(min=0.001, help="Systolic models: memory bytes per cycle for layers without a GEMM."),
]
TimeUnit = Annotated[
    cost.Unit,
    typer.Option(
        case_sensitive=False,
        help="What one tick is: ns (ASTRA-sim 1.0, SimAI), us (ASTRA-sim 2.x via Chakra), cycles.",
    ),
]
ClockGhz = Annotated[float, typer.Option(min=0.001, help="Accelerator clock, to turn cycles into ns / us.")]


@app.command()
def validate(
    paths: Annotated[list[Path] | None, typer.Argument(help="Workload files.", show_default=False)] = None,
    dialect: DialectOpt = None,
    fmt: Annotated[
        Format, typer.Option("--format", "-f", help="Output format; auto picks github under GitHub Actions.")
    ] = Format.AUTO,
    strict: Annotated[bool, typer.Option(help="Warnings fail too.")] = False,
    ignore: Annotated[list[str] | None, typer.Option(help="Skip a code (repeatable).")] = None,
    explain: Annotated[str | None, typer.Option(help="Explain a diagnostic code and exit.")] = None,
    no_color: NoColor = False,
) -> None:
    """Check workload files; exit 0 clean, 1 findings, 2 unreadable file or usage error."""
    if explain is not None:
        text = report.explain(explain)
        if text is None:
            _usage(f"unknown code {explain!r}; codes look like V201, P130, D303")
        typer.echo(text, nl=False)
        raise typer.Exit(0)
    if not paths:
        _usage("give at least one file (or --explain CODE)")
        return
    found: list[Diagnostic] = []
    sources = {}
    for path in paths:
        loaded, diagnostics = validate_file(path, dialect=dialect, ignore=ignore or ())
        sources[loaded.path] = loaded.line
        found += diagnostics
    report.emit(
        found, fmt, stream=sys.stdout, sources=sources, color=False if no_color else None, checked=len(paths)
    )
    raise typer.Exit(report.exit_code(found, strict=strict))


@app.command()
def fmt(
    paths: Paths,
    check: Annotated[
        bool, typer.Option("--check", help="Change nothing; exit 1 if a file would change.")
    ] = False,
    dialect: DialectOpt = None,
    no_color: NoColor = False,
) -> None:
    """Rewrite files in the canonical form of their dialect (atomically; files with errors are left alone)."""
    problems: list[Diagnostic] = []
    sources = {}
    changed = []
    for path in paths:
        loaded = load(path)
        sources[loaded.path] = loaded.line
        new = _canonical(loaded, dialect, problems)
        if new is None or new == "".join(c + e for c, e in loaded.lines):
            continue
        changed.append(loaded.path)
        if not check:
            _save(path, new, problems)
    report.emit(problems, Format.TEXT, stream=sys.stderr, sources=sources, color=False if no_color else None)
    for name in changed:
        typer.echo(f"{'would reformat' if check else 'reformatted'} {name}", err=True)
    code = report.exit_code(problems)
    raise typer.Exit(code or (1 if check and changed else 0))


@app.command()
def convert(
    path: Annotated[Path, typer.Argument(help="Workload text or workload JSON.", show_default=False)],
    to: Annotated[str, typer.Option("--to", help="json or text.")] = "json",
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write here (atomically) instead of standard output."),
    ] = None,
    dialect: DialectOpt = None,
    force: Annotated[bool, typer.Option(help="Allow --output to overwrite the input file.")] = False,
    no_color: NoColor = False,
) -> None:
    """Convert between workload text and workload JSON (schemas/workload.schema.json), and between the
    ASTRA-sim 1.0 and SimAI dialects of the text (--to text --dialect D).

    A conversion the target cannot express is refused and says exactly what is in the way (D310:
    SimAI header keys or _EP comm types for ASTRA-sim 1.0); one the target would read differently
    is written and the target's readings are reported as warnings (D3xx: SimAI keeping only the
    first checkpoint index, header keys SimAI expects but 1.0 files do not carry).
    """
    if to not in ("json", "text"):
        _usage(f"--to must be json or text, not {to!r}")
    if output is not None and not force and output.exists() and output.resolve() == path.resolve():
        _usage(f"refusing to overwrite the input {path}; pass --force")
    loaded = load(path)
    problems = list(loaded.result.diagnostics)
    workload = loaded.result.workload
    new = None
    if workload is not None and not has_errors(problems):
        new = jsonform.dumps(workload) if to == "json" else _canonical(loaded, dialect, problems)
    lost: list[Diagnostic] = []
    crossing = workload is not None and dialect is not None and dialect != workload.dialect
    if new is not None and to == "text" and crossing:  # what the target will read differently
        where = str(output or "<output>")
        lost = [
            dataclasses.replace(d, path=where)
            for d in validate_text(new, dialect=dialect)
            if d.code.startswith("D")
        ]
    if new is not None:
        if output is None:
            sys.stdout.write(new)
        else:
            _save(output, new, problems)
    report.emit(lost, Format.TEXT, stream=sys.stderr, color=False if no_color else None)
    report.emit(
        [d for d in problems if d.severity == 1],
        Format.TEXT,
        stream=sys.stderr,
        sources={loaded.path: loaded.line},
        color=False if no_color else None,
    )
    raise typer.Exit(report.exit_code(problems) if new is None or problems else 0)


@app.command()
def extract(
    model: Model,
    output: Output = None,
    batch: Batch = None,
    input_shape: InputShape = None,
    no_hash: Annotated[
        bool, typer.Option("--no-hash", help="Skip the SHA-256 of the file (reads all of it).")
    ] = False,
    force: Force = False,
    no_color: NoColor = False,
) -> None:
    """Extract the intermediate document of an ONNX model (schemas/model-ir.schema.json); no weights read."""
    shapes = _shapes(input_shape)
    with report.status(f"reading {model}"):
        ir, found = pipeline.extract_checked(model, batch=batch, input_shapes=shapes, file_hash=not no_hash)
    text = None if ir is None or has_errors(found) else _ir_json(ir, model, found)
    _finish(found, text, output, [model], force, no_color)


def _ir_json(ir: ModelIR, model: str, found: list[Diagnostic]) -> str | None:
    try:
        return document.dumps(ir, path=model)
    except DiagnosticError as error:  # a ModTrans bug: report it, write nothing
        found += error.diagnostics
        return None


@app.command()
def translate(
    model: Model,
    output: Output = None,
    parallel: Annotated[
        Policy,
        typer.Option(
            "--parallel",
            "-p",
            case_sensitive=False,
            help="DATA, MODEL, HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, HYBRID_CUSTOMIZED, HYBRID_TRANSFORMER, "
            "HYBRID_TRANSFORMER_FWD_IN_BCKWD (formulas: modtrans/strategy/parallel.py).",
        ),
    ] = Policy.DATA,
    npus: Annotated[int, typer.Option(min=1, help="NPUs in the simulated system.")] = 1,
    model_parallel_group: Annotated[
        int | None,
        typer.Option(min=1, help="NPUs per model-parallel group (hybrids, transformers); divides --npus."),
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
    compute: Compute = "roofline",
    device: Device = None,
    array: Array = None,
    dataflow: Dataflow = None,
    bytes_per_cycle: BytesPerCycle = None,
    time_unit: TimeUnit = cost.Unit.NS,
    clock_ghz: ClockGhz = 1.0,
    to: Annotated[
        str,
        typer.Option(
            "--format",
            help="text (the workload file), json (workload JSON) or chakra-et (one Chakra trace per NPU, "
            "-o DIR/PREFIX -> PREFIX.<npu>.et; needs modtrans[chakra]).",
        ),
    ] = "text",
    passes: Annotated[int, typer.Option(min=1, help="chakra-et: training iterations in each trace.")] = 1,
    meta: Annotated[
        Path | None,
        typer.Option(help="Write the provenance here (default: OUTPUT.meta.json beside a file output)."),
    ] = None,
    force: Force = False,
    strict: Annotated[
        bool, typer.Option(help="Warnings (e.g. what the consumer misreads) fail: no output.")
    ] = False,
    no_color: NoColor = False,
) -> None:
    """Translate an ONNX model or a built-in architecture into a workload file."""
    if to not in ("text", "json", "chakra-et"):
        _usage(f"--format must be text, json or chakra-et, not {to!r}")
    if to == "chakra-et":
        if output in (None, "-"):
            _usage("--format chakra-et writes files: give -o DIR/PREFIX")
        time_unit = cost.Unit.US  # duration_micros: ASTRA-sim 2.x multiplies it by 1000
    settings = _cost(device, array, dataflow, bytes_per_cycle, time_unit, clock_ghz)
    strategy = Parallelism(
        parallel,
        npus,
        model_parallel_group,
        _indices(checkpoints, "--checkpoints"),
        _indices(checkpoint_initiates, "--checkpoint-initiates"),
        checkpoint_every,
        _per_layer(per_layer) if per_layer is not None else None,
    )
    options = pipeline.Options(
        strategy, params, batch, _shapes(input_shape), dtype_bytes, compute, settings, dialect
    )
    with report.status(f"translating {model}"):
        result = pipeline.translate_checked(model, options)
    found = list(result.diagnostics)
    if to == "chakra-et":
        _chakra_traces(result, Path(str(output)), npus, passes, strict, no_color)
    text = None
    if result.workload is not None:
        text = _render_workload(result.workload, dialect, to, found)
    if strict and any(d.severity <= 2 for d in found):
        text = None
    target = meta or (Path(f"{output}.meta.json") if output not in (None, "-") else None)
    sidecar = None if target is None else (target, json.dumps(result.metadata, indent=1) + "\n")
    _finish(found, text, output, [model], force, no_color, sidecar)


def _chakra_traces(
    result: pipeline.Translation, prefix: Path, npus: int, passes: int, strict: bool, no_color: bool
) -> None:
    found = list(result.diagnostics)
    failed = result.workload is None or (strict and any(d.severity <= 2 for d in found))
    if not failed and result.workload is not None:
        metadata = {
            **result.metadata,
            "duration_micros": "compute time in microseconds (rounded up); ASTRA-sim 2.x multiplies by 1000",
            "passes": passes,
        }
        try:
            written = chakra.write(result.workload, prefix, npus=npus, passes=passes, metadata=metadata)
            _save(Path(f"{prefix}.meta.json"), json.dumps(metadata, indent=1) + "\n", found)
        except chakra.ChakraError as error:
            typer.echo(f"modtrans: {error}", err=True)
            raise typer.Exit(2) from None
        typer.echo(f"wrote {len(written)} Chakra traces: {written[0]} .. {written[-1]}", err=True)
    report.emit(found, Format.TEXT, stream=sys.stderr, color=False if no_color else None)
    raise typer.Exit(report.exit_code(found, strict=strict) or (1 if failed else 0))


def _render_workload(workload: Workload, dialect: Dialect, to: str, found: list[Diagnostic]) -> str | None:
    if to == "json":
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
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, json (the IR) or csv.")] = "table",
    params: ParamsOpt = Params.TRAINABLE,
    all_layers: Annotated[bool, typer.Option("--all", help="Also list layers without parameters.")] = False,
    batch: Batch = None,
    input_shape: InputShape = None,
    no_color: NoColor = False,
) -> None:
    """Per-layer table of a model: parameters, dtype, bytes, output shape, FLOPs, totals."""
    if fmt not in ("table", "json", "csv"):
        _usage(f"--format must be table, json or csv, not {fmt!r}")
    with report.status(f"reading {model}"):
        ir, found = pipeline.extract_checked(
            model, batch=batch, input_shapes=_shapes(input_shape), file_hash=False
        )
    report.emit(found, Format.TEXT, stream=sys.stderr, color=False if no_color else None)
    if ir is None or has_errors(found):
        raise typer.Exit(report.exit_code(found) or 1)
    selected = render.rows(ir, weights_only=params is Params.WEIGHTS, all_layers=all_layers)
    if fmt == "json":
        text = _ir_json(ir, model, found)
        if text is None:
            report.emit(found, Format.TEXT, stream=sys.stderr, color=False if no_color else None)
            raise typer.Exit(1)
        sys.stdout.write(text)
    elif fmt == "csv":
        sys.stdout.write(render.to_csv(selected))
    else:
        title = f"{ir.provenance.file} ({params.value})"
        render.print_table(ir, selected, title, color=False if no_color else None, width=None)


@app.command()
def diff(
    first: Annotated[
        str, typer.Argument(help="Workload file, ONNX file or built-in model.", show_default=False)
    ],
    reference: Annotated[str, typer.Argument(help="The reference (same kinds).", show_default=False)],
    fields: Annotated[
        str, typer.Option(help="comm, compute, update, all, or field names: wg_size,fwd_compute,...")
    ] = "all",
    rtol: Annotated[float, typer.Option(min=0, help="Relative tolerance against the reference.")] = 0.0,
    atol: Annotated[float, typer.Option(min=0, help="Absolute tolerance.")] = 0.0,
    ignore_order: Annotated[bool, typer.Option(help="Moved layers are not a difference.")] = False,
    ignore_names: Annotated[bool, typer.Option(help="Pair layers by content and position only.")] = False,
    fmt: Annotated[str, typer.Option("--format", "-f", help="text, json or github.")] = "text",
    max_rows: Annotated[int, typer.Option(min=0, help="Differing layers shown in text (0: all).")] = 100,
    params: ParamsOpt = Params.TRAINABLE,
    batch: Batch = None,
    input_shape: InputShape = None,
    compute: Compute = "roofline",
    device: Device = None,
    array: Array = None,
    dataflow: Dataflow = None,
    bytes_per_cycle: BytesPerCycle = None,
    time_unit: TimeUnit = cost.Unit.NS,
    clock_ghz: ClockGhz = 1.0,
    no_color: NoColor = False,
) -> None:
    """Compare two workloads layer by layer; exit 0 equivalent, 1 different, 2 unreadable input.

    Layers pair by name, then by identical compared fields, then by position; moved blocks are
    reported as moves. Models (ONNX files, built-ins) are translated first with --params etc.
    """
    if fmt not in ("text", "json", "github"):
        _usage(f"--format must be text, json or github, not {fmt!r}")
    try:
        chosen = comparison.parse_fields(fields)
    except ValueError as error:
        _usage(str(error))
    settings = _cost(device, array, dataflow, bytes_per_cycle, time_unit, clock_ghz)
    options = pipeline.Options(Parallelism(), params, batch, _shapes(input_shape), None, compute, settings)
    sides = [pipeline.workload_or_model(spec, options) for spec in (first, reference)]
    problems = [d for side in sides for d in side.diagnostics if d.severity == 1]
    if problems or any(side.workload is None for side in sides):
        sources = {spec: side.line for spec, side in zip((first, reference), sides, strict=True)}
        report.emit(
            problems, Format.TEXT, stream=sys.stderr, sources=sources, color=False if no_color else None
        )
        raise typer.Exit(2)
    a, b = (side.workload for side in sides)
    assert a is not None
    assert b is not None
    result = comparison.compare(a, b, comparison.Options(chosen, rtol, atol, ignore_order, ignore_names))
    if fmt == "json":
        sys.stdout.write(
            json.dumps(diff_render.to_json(result, first=first, reference=reference), indent=1) + "\n"
        )
    elif fmt == "github":
        report.emit(diff_render.to_diagnostics(result, first=first), Format.GITHUB, stream=sys.stdout)
    else:
        console = report.console(sys.stdout, color=False if no_color else None)
        diff_render.render(result, console, first=first, reference=reference, max_rows=max_rows)
    raise typer.Exit(0 if result.equivalent else 1)


@app.command()
def lsp(
    tcp: Annotated[
        str | None, typer.Option(help="Listen on HOST:PORT instead of speaking over stdin/stdout.")
    ] = None,
    dialect: DialectOpt = None,
) -> None:
    """Run the language server (LSP over stdio): the diagnostics of `validate` as you type, hover,
    outline, formatting and quick fixes. Needs `pip install 'modtrans[lsp]'`."""
    address = None
    if tcp is not None:
        host, _, port = tcp.rpartition(":")
        if not host or not port.isdigit():
            _usage(f"--tcp {tcp!r}: expected HOST:PORT, e.g. 127.0.0.1:2087")
        address = (host, int(port))
    try:
        from modtrans.lsp import server
    except ImportError:
        typer.echo("modtrans: the language server needs pygls: pip install 'modtrans[lsp]'", err=True)
        raise typer.Exit(2) from None
    server.run(tcp=address, dialect=dialect.value if dialect else None)


@zoo_app.command("list")
def zoo_list() -> None:
    """The built-in architectures and the models `modtrans fetch` can download."""
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
    """Download a real model from the ONNX Model Zoo into the cache, verified by SHA-256."""
    try:
        with report.status(f"fetching {name}"):
            path = fetching.fetch(name, cache=cache, mirror=mirror)
    except fetching.FetchError as error:
        typer.echo(f"modtrans: {error}", err=True)
        raise typer.Exit(2) from None
    typer.echo(str(path))


def _cost(
    device: str | None,
    array: str | None,
    dataflow: str | None,
    bytes_per_cycle: float | None,
    unit: cost.Unit,
    ghz: float,
) -> cost.Settings:
    rows_cols = None
    if array is not None:
        try:
            rows, cols = (int(v) for v in array.lower().split("x"))
        except ValueError:
            rows = cols = 0
        if rows < 1 or cols < 1:
            _usage(f"--array {array!r}: expected ROWSxCOLS, e.g. 256x256")
        rows_cols = (rows, cols)
    return cost.Settings(device, rows_cols, dataflow, bytes_per_cycle, cost.Clock(unit, ghz))


@cost_app.command("list")
def cost_list() -> None:
    """The compute-time models and the roofline device profiles."""
    for entry in cost.models():
        typer.echo(f"{entry.name:<20} {entry.summary}")
    typer.echo("\nroofline device profiles (--device NAME, or a FILE.json per schemas/device.schema.json):")
    for key, dev in roofline.builtin_devices().items():
        peaks = ", ".join(f"{k} {v / 1e12:g} TFLOP/s" for k, v in dev.peak_flops.items())
        typer.echo(f"{key:<8} {dev.name}: {peaks}; {dev.bandwidth / 1e9:g} GB/s")


def _indices(spec: str | None, option: str) -> tuple[int, ...] | None:
    if spec is None:
        return None
    try:
        return tuple(int(x) for x in spec.replace(" ", "").split(",") if x)
    except ValueError:
        _usage(f"{option} {spec!r}: expected layer indices like 0,9,18")
        return None


def _per_layer(path: Path) -> dict[str, Policy]:
    rules: dict[str, Policy] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        _usage(f"cannot read --per-layer {path}: {error}")
        return rules
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) != 2 or fields[1] not in {p.value for p in PER_LAYER_POLICIES}:
            allowed = ", ".join(p.value for p in PER_LAYER_POLICIES)
            _usage(f"{path}:{number}: expected `PATTERN KEYWORD` with KEYWORD one of {allowed}")
        rules[fields[0]] = Policy(fields[1])
    return rules


def _shapes(specs: list[str] | None) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs or ():
        name, _, dims = spec.rpartition("=")
        try:
            values = tuple(int(d) for d in dims.lower().split("x"))
        except ValueError:
            values = ()
        if not name or not values or any(v < 1 for v in values):
            _usage(f"--input-shape {spec!r}: expected NAME=1x3x224x224 with positive sizes")
        shapes[name] = values
    return shapes


def _finish(
    found: list[Diagnostic],
    text: str | None,
    output: str | None,
    inputs: list[str],
    force: bool,
    no_color: bool,
    sidecar: tuple[Path, str] | None = None,
) -> None:
    """Write `text` (unless None) to `output` or standard output, then `sidecar`; report; exit."""
    if text is not None:
        targets = [Path(output)] if output not in (None, "-") else []
        targets += [sidecar[0]] if sidecar else []
        for target in targets:
            if not force and any(target.resolve() == Path(i).resolve() for i in inputs if Path(i).exists()):
                _usage(f"refusing to overwrite the input {target}; pass --force")
        if output in (None, "-"):
            sys.stdout.write(text)
        else:
            _save(Path(output), text, found)
        if sidecar is not None and not has_errors(found):
            _save(sidecar[0], sidecar[1], found)
    report.emit(found, Format.TEXT, stream=sys.stderr, color=False if no_color else None)
    code = report.exit_code(found)
    raise typer.Exit(code or (1 if text is None else 0))


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


def _save(path: Path, text: str, problems: list[Diagnostic]) -> None:
    try:
        write_atomic(path, text)
    except OSError as error:
        problems.append(diagnostic("F003", f"cannot write {path}: {error.strerror or error}", path=str(path)))


def _usage(message: str) -> None:
    typer.echo(f"modtrans: {message}", err=True)
    raise typer.Exit(2)


def main() -> None:
    app()
