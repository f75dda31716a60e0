"""The shared pieces of the command line: the typer apps, option types and output helpers."""

from __future__ import annotations

import enum
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from modtrans import cost, report
from modtrans.cli import adapt  # noqa: F401  (typer as this CLI wants it: before any command runs)
from modtrans.diagnostics import Diagnostic, diagnostic, has_errors
from modtrans.fileio import Content, same_file, write_all
from modtrans.report import COLLAPSED, Format
from modtrans.strategy import Params
from modtrans.strategy.parallel import PER_LAYER as PER_LAYER_POLICIES
from modtrans.workload.model import Dialect, Policy, Workload

app = typer.Typer(
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # help text verbatim: `modtrans[lsp]` is not a markup tag
    help="Translate models into ASTRA-sim layer-wise workloads; read, write and check workload files.",
)


def _version(value: bool) -> None:
    if value:
        from modtrans._version import __version__

        typer.echo(f"modtrans {__version__}")
        raise typer.Exit(0)


@app.callback()
def _top(
    version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Translate models into ASTRA-sim layer-wise workloads; read, write and check workload files."""


zoo_app = typer.Typer(no_args_is_help=True, help="Built-in architectures (no download needed).")
cost_app = typer.Typer(no_args_is_help=True, help="Compute-time models.")


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
FullHash = Annotated[
    bool,
    typer.Option(
        "--full-hash",
        help="Provenance: the SHA-256 of the whole file even above 64 MiB (there, by default, a "
        "sampled digest of 64 blocks: a few ms instead of reading it all).",
    ),
]


class ComputeModel(enum.StrEnum):
    """The compute-time models `modtrans cost list` describes (cost/ registers them)."""

    ROOFLINE = "roofline"
    ASTRA_SIM_REFERENCE = "astra-sim-reference"
    SCALESIM_V3 = "scalesim-v3"
    SCALESIM = "scalesim"


class Keyword(enum.StrEnum):
    """The parallelism keywords `translate` writes (strategy.SUPPORTED; a test keeps them equal)."""

    DATA = "DATA"
    MODEL = "MODEL"
    HYBRID_DATA_MODEL = "HYBRID_DATA_MODEL"
    HYBRID_MODEL_DATA = "HYBRID_MODEL_DATA"
    HYBRID_CUSTOMIZED = "HYBRID_CUSTOMIZED"
    HYBRID_TRANSFORMER = "HYBRID_TRANSFORMER"
    HYBRID_TRANSFORMER_FWD_IN_BCKWD = "HYBRID_TRANSFORMER_FWD_IN_BCKWD"


class DataflowKind(enum.StrEnum):
    WS = "ws"
    IS = "is"
    OS = "os"


Compute = Annotated[
    ComputeModel,
    typer.Option(case_sensitive=False, help="Compute-time model (`modtrans cost list` describes them)."),
]


Device = Annotated[
    str | None,
    typer.Option(
        help="roofline: a100, h100, v100, tpu-v4 or a profile FILE.json; scalesim-v3: a SCALE-Sim .cfg."
    ),
]


Array = Annotated[str | None, typer.Option(help="Systolic array ROWSxCOLS (default 256x256).")]


Dataflow = Annotated[
    DataflowKind | None,
    typer.Option(
        case_sensitive=False,
        help="Systolic dataflow (scalesim-v3, scalesim): weight, input or output stationary.",
    ),
]


def finite(value: float | None) -> float | None:
    """Option callback: a float option takes finite values of sane size (no inf, nan, 1e400)."""
    if value is not None and not (math.isfinite(value) and abs(value) <= 1e15):
        raise typer.BadParameter(f"{value} is not a finite number of sane size")
    return value


BytesPerCycle = Annotated[
    float | None,
    typer.Option(
        min=0.001, callback=finite, help="Systolic models: memory bytes per cycle for layers without a GEMM."
    ),
]


TimeUnit = Annotated[
    cost.Unit,
    typer.Option(
        case_sensitive=False,
        help="What one tick is: ns (ASTRA-sim 1.0, SimAI), us (ASTRA-sim 2.x via Chakra), cycles.",
    ),
]


ClockGhz = Annotated[
    float,
    typer.Option(min=0.001, callback=finite, help="Accelerator clock, to turn cycles into ns / us."),
]


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


def _indices(
    spec: str | None, option: str, expected: str = "layer indices like 0,9,18"
) -> tuple[int, ...] | None:
    if spec is None:
        return None
    try:
        values = tuple(int(x) for x in spec.replace(" ", "").split(",") if x and len(x) < 12)
        if len(values) != len([x for x in spec.split(",") if x.strip()]):
            raise ValueError(spec)
        return values
    except ValueError:
        _usage(f"{option} {spec!r}: expected {expected}")
        return None


def _option_text(option: str, path: Path) -> str:
    """The text of a file an option names; else the F001 naming the option and the file, exit 2."""
    from modtrans.fileio import read_binary, utf8

    data, problem = read_binary(path)
    if data is None:
        raise _unreadable_option(option, path, problem.message if problem else "unreadable")
    text, reason = utf8(data)
    if text is None:
        raise _unreadable_option(option, path, reason or "not UTF-8 text")
    return text


def _unreadable_option(option: str, path: Path, reason: str) -> typer.Exit:
    """A file an option names cannot be read: the F001 naming the option and the file is said,
    and the exit (status 2) returned for the caller to raise."""
    reason = reason.removeprefix(f"cannot read {path}: ")
    found = [diagnostic("F001", f"cannot read {option} {path}: {reason}", path=str(path))]
    report.emit(found, Format.TEXT, stream=sys.stderr, color=False)
    return typer.Exit(2)


def _per_layer(path: Path) -> dict[str, Policy]:
    rules: dict[str, Policy] = {}
    text = _option_text("--per-layer", path)
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
    quiet: bool = False,
) -> None:
    """Write `text` (unless None) to `output` or standard output and `sidecar` beside it, as one
    result (both or neither); say what was written (unless `quiet`); report; exit."""
    if output == "":
        _usage("--output is empty: give a file, or - for standard output")
    if text is not None:
        outputs: list[tuple[Path, str | bytes]] = []
        if output not in (None, "-"):
            outputs.append((Path(str(output)), text))
        if sidecar is not None and not has_errors(found):
            outputs.append(sidecar)
        _refuse_inputs([target for target, _ in outputs], inputs, force)
        if output in (None, "-"):
            sys.stdout.write(text)
        _save_all(outputs, found)
        if outputs and not has_errors(found) and not quiet:
            typer.echo("wrote " + " and ".join(str(target) for target, _ in outputs), err=True)
    report.emit(found, Format.TEXT, stream=sys.stderr, color=False if no_color else None, **COLLAPSED)
    code = report.exit_code(found)
    raise typer.Exit(code or (1 if text is None else 0))


def _refuse_inputs(targets: list[Path], inputs: list[str], force: bool) -> None:
    """A usage error when an output is one of the inputs (a built-in model's packaged file too)."""
    if force:
        return
    for target in targets:
        if any(same_file(target, i) for i in inputs):
            _usage(f"refusing to overwrite the input {target}; pass --force")


def _save(path: Path, text: Content, problems: list[Diagnostic]) -> None:
    _save_all([(path, text)], problems)


def _save_all(outputs: Sequence[tuple[Path, Content]], problems: list[Diagnostic]) -> None:
    """Write every output or none; a failure is F003 naming the file."""
    if not outputs:
        return
    try:
        write_all(outputs)
    except OSError as error:
        where = error.filename or outputs[0][0]
        reason = error.strerror or str(error)
        problems.append(diagnostic("F003", f"cannot write {where}: {reason}", path=str(where)))


def _given(name: str) -> bool:
    """Whether the user gave the parameter `name` (its Python name: "time_unit"), not its default."""
    try:
        from typer._click.core import ParameterSource
        from typer._click.globals import get_current_context
    except ImportError:  # another typer: the command line itself
        option = "--" + name.replace("_", "-")
        return any(arg == option or arg.startswith(f"{option}=") for arg in sys.argv[1:])
    context = get_current_context(silent=True)
    source = context.get_parameter_source(name) if context is not None else None
    return source is not None and source is not ParameterSource.DEFAULT


def _conventions_of(
    reference: Workload, params: Params, compute: ComputeModel
) -> tuple[Params, ComputeModel, list[str]]:
    """The --params and --compute a reference workload implies, for those the user did not give,
    and the options taken (for `translate --like` and `diff --like` alike)."""
    from modtrans.diff import conventions

    seen = conventions.detect(reference)
    taken = []
    if not _given("params"):
        params = Params(seen.params)
        taken.append(f"--params {params.value}")
    if not _given("compute") and seen.reference_compute:
        compute = ComputeModel.ASTRA_SIM_REFERENCE
        taken.append(f"--compute {compute}")
    return params, compute, taken


def _usage(message: str) -> None:
    typer.echo(f"modtrans: {message}", err=True)
    raise typer.Exit(2)
