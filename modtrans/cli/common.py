"""The shared pieces of the command line: the typer apps, option types and output helpers."""

from __future__ import annotations

import enum
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal, NoReturn

import typer

from modtrans import cost, outputs, report
from modtrans.cli import adapt  # noqa: F401  (typer as this CLI wants it: before any command runs)
from modtrans.diagnostics import Diagnostic, has_errors
from modtrans.fileio import Content
from modtrans.report import COLLAPSED, Format
from modtrans.request import UsageError
from modtrans.strategy import Params
from modtrans.workload.model import Dialect

app = typer.Typer(
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # help text verbatim: `modtrans[lsp]` is not a markup tag
    context_settings={"help_option_names": ["-h", "--help"]},  # every command's context inherits it
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
        help="An .onnx file, a Hugging Face config.json (an LLM's), a built-in architecture "
        "(`modtrans zoo list`) or a fetched model (`modtrans fetch`).",
        show_default=False,
    ),
]


Batch = Annotated[
    int | None,
    typer.Option("--batch", "-b", min=1, help="Batch size: fixes dim 0 of every input where it is symbolic."),
]


InputShape = Annotated[
    list[str] | None,
    typer.Option(
        "--input-shape",
        help="NAME=1x3x224x224: the whole shape of one input (repeatable); a T5 configuration's "
        "decoder_input_ids=BxT sets its decoder's tokens (default T = S); a vision-language model's "
        "images pixel_values=NxCxHxW (N / B per sample of input_ids=BxS, whose S counts the image tokens).",
    ),
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


ComputeModel = cost.Model  # the registry's names (cost.register takes only these)


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
        help="gpu, roofline: a100, h100, h200, b200, mi300x (roofline also v100, tpu-v4) or a profile "
        "FILE.json; scalesim-v3: a SCALE-Sim .cfg."
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


AttentionKind = Annotated[
    Literal["flash", "eager"] | None,
    typer.Option(
        "--attention",
        help="gpu: flash (one fused kernel, the default) or eager (its GEMMs and a materialised softmax).",
        show_default=False,
    ),
]
Efficiency = Annotated[
    str | None,
    typer.Option(
        help="gpu: scale its measured rates, all (0.9) or per class (gemm=0.8,attention=0.9,memory=0.95).",
        show_default=False,
    ),
]
BytesPerCycle = Annotated[
    float | None,
    typer.Option(
        min=0.001, callback=finite, help="Systolic models: memory bytes per cycle for layers without a GEMM."
    ),
]


TimeUnit = Annotated[
    cost.Unit | None,
    typer.Option(
        case_sensitive=False,
        help="What one tick of a workload file is: ns (ASTRA-sim 1.0's and SimAI's default), us "
        "(--dialect chakra's default: its converter writes duration_micros, which ASTRA-sim 2.x "
        "reads as us; Chakra traces always hold us), cycles (--clock-ghz).",
        show_default=False,
    ),
]


ClockGhz = Annotated[
    float,
    typer.Option(min=0.001, callback=finite, help="Accelerator clock, to turn cycles into ns / us."),
]


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
    try:
        outputs.refuse_inputs(targets, inputs, force)
    except UsageError as error:
        raise _refused(error) from None


def _save(path: Path, text: Content, problems: list[Diagnostic]) -> None:
    _save_all([(path, text)], problems)


def _save_all(files: Sequence[tuple[Path, Content]], problems: list[Diagnostic]) -> None:
    """Write every output or none; a failure is F003 naming the file."""
    problems += outputs.save(files)


def _usage(message: str) -> NoReturn:
    typer.echo(f"modtrans: {message}", err=True)
    raise typer.Exit(2)
