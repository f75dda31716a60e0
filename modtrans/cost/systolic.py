"""Systolic-array compute models: closed forms of cycles per GEMM (no simulator run).

astra-sim-reference (weight stationary, R x C, default 256 x 256):

    cycles(M, K, N) = ceil(K/R) * ceil(N/C) * (min(K, R) + M + C)

per tile of the K x N weights: min(K, R) cycles of weight fill, M of streaming, C of drain. It
reproduces 137 of the 162 compute cells and all 54 update times (update = round(wg / 10), half up)
of ASTRA-sim's Resnet50_DataParallel.txt (../shared/reference/compute-model.md, sections 4-5). Of
the other 25 cells, 7 are where that file gives one GEMM shape (in the phase's permutation) two
values, which no function of the shape can produce: 784x128x512 is 2336 in six cells and 3146 in
layer_128_4_conv3's forward. The other 18 are consistent within the file, only not this closed
form: 196x1024x256 is 3539 in all 11 of its cells, 2832 here. (tests/test_diff.py measures both
from the file and the IR; `modtrans diff MODEL REFERENCE` names the first kind.) As in that file,
layers without a GEMM cost nothing and the first layer's input gradient is computed.

scalesim-v3 (exact "Total Cycles" of SCALE-Sim v3.0.0 in GEMM mode without memory stalls,
verified against real runs on 56 GEMMs; compute-model.md section 6):

    WS  ceil(K/R) * ceil(N/C) * (2R + C + M - 2) - 1
    IS  ceil(K/R) * ceil(M/C) * (2R + C + N - 2) - 1
    OS  ceil(M/R) * ceil(N/C) * (R + C + K - 2) - 1

configured by --array RxC and --dataflow, or a SCALE-Sim .cfg file (--device FILE.cfg: ArrayHeight,
ArrayWidth, Dataflow). Layers without a GEMM cost their memory traffic at --bytes-per-cycle
(default 64), and so does the update (an SGD step: read parameter and gradient, write parameter).
"""

from __future__ import annotations

import configparser
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from modtrans.cost.base import Clock, CostError, Model, PhaseTimes, Settings, register
from modtrans.cost.gemm import Shape, phase_gemms, traffic, update_bytes
from modtrans.ir.document import Layer

DEFAULT_BYTES_PER_CYCLE = 64.0


def reference_ws(m: int, k: int, n: int, rows: int = 256, cols: int = 256) -> int:
    return math.ceil(k / rows) * math.ceil(n / cols) * (min(k, rows) + m + cols)


def scalesim_v3(m: int, k: int, n: int, rows: int, cols: int, dataflow: str) -> int:
    if dataflow == "ws":
        return math.ceil(k / rows) * math.ceil(n / cols) * (2 * rows + cols + m - 2) - 1
    if dataflow == "is":
        return math.ceil(k / rows) * math.ceil(m / cols) * (2 * rows + cols + n - 2) - 1
    if dataflow == "os":
        return math.ceil(m / rows) * math.ceil(n / cols) * (rows + cols + k - 2) - 1
    raise CostError(f"dataflow must be ws, is or os, not {dataflow!r}")


Cycles = Callable[[int, int, int], int]


def _cycles(shapes: tuple[Shape, ...], per_gemm: Cycles) -> int:
    return sum(s.count * per_gemm(s.m, s.k, s.n) for s in shapes)


@dataclass(frozen=True)
class Systolic:
    SHAPE_ONLY: ClassVar[bool] = True  # base.by_shape: times read no name

    name: str
    rows: int
    cols: int
    dataflow: str
    per_gemm: Cycles
    clock: Clock
    bytes_per_cycle: float | None  # None: layers without a GEMM cost nothing (the reference's convention)
    reference_update: bool  # update = round(wg / 10), as ASTRA-sim's reference files
    first_input_grad: bool
    source: str

    def times(self, layer: Layer) -> PhaseTimes:
        gemms = phase_gemms(layer)
        if gemms is not None:
            cycles = (
                _cycles(gemms.forward, self.per_gemm),
                _cycles(gemms.input_grad, self.per_gemm),
                _cycles(gemms.weight_grad, self.per_gemm),
            )
        elif self.bytes_per_cycle:
            cycles = tuple(b / self.bytes_per_cycle for b in traffic(layer))  # type: ignore[assignment]
        else:
            cycles = (0, 0, 0)
        fwd, ig, wg = (self.clock.from_cycles(c) for c in cycles)
        if self.reference_update:
            update = int(wg / 10 + 0.5)
        elif self.bytes_per_cycle:
            update = self.clock.from_cycles(update_bytes(layer) / self.bytes_per_cycle)
        else:
            update = 0
        return PhaseTimes(fwd, ig, wg, update)

    def describe(self) -> dict[str, Any]:
        return {
            "model": self.name,
            "array": f"{self.rows}x{self.cols}",
            "dataflow": self.dataflow,
            "layers_without_gemm": "not costed"
            if not self.bytes_per_cycle
            else f"memory traffic at {self.bytes_per_cycle:g} bytes/cycle",
            "update": "round(weight-gradient / 10)" if self.reference_update else "SGD step memory traffic",
            "first_layer_input_grad": "computed" if self.first_input_grad else "0 (not needed in training)",
            "source": self.source,
            **self.clock.describe(),
        }


@register(
    Model.ASTRA_SIM_REFERENCE, "WS systolic array that reproduces ASTRA-sim's reference ResNet-50 (256x256)"
)
def make_reference(settings: Settings) -> Systolic:
    rows, cols = settings.array or (256, 256)
    if settings.dataflow not in (None, "ws"):
        raise CostError("astra-sim-reference is weight stationary; use scalesim-v3 for other dataflows")
    return Systolic(
        name="astra-sim-reference",
        rows=rows,
        cols=cols,
        dataflow="ws",
        per_gemm=lambda m, k, n: reference_ws(m, k, n, rows, cols),
        clock=settings.clock,
        bytes_per_cycle=settings.bytes_per_cycle,
        reference_update=True,
        first_input_grad=True,
        source="fitted to astra-sim Resnet50_DataParallel.txt (137/162 cells exact); compute-model.md",
    )


@register(Model.SCALESIM_V3, "exact closed forms of SCALE-Sim v3.0.0 compute cycles (WS/IS/OS, any array)")
def make_scalesim_v3(settings: Settings) -> Systolic:
    source = "closed forms of SCALE-Sim v3.0.0 Total Cycles, verified against real runs"
    if settings.device:
        source += f"; array from {settings.device}"
    return scalesim_like(settings, "scalesim-v3", scalesim_v3, source)


ArrayCycles = Callable[[int, int, int, int, int, str], int]
"""A GEMM's cycles (M, K, N) on an array (rows, columns, dataflow): scalesim_v3, scalesim.run_gemm."""


def scalesim_like(settings: Settings, name: str, cycles: ArrayCycles, source: str) -> Systolic:
    """A SCALE-Sim array (scalesim_array) whose GEMMs take `cycles`; a layer without a GEMM and the
    update are their bytes at --bytes-per-cycle (DEFAULT_BYTES_PER_CYCLE where unset), which
    SCALE-Sim does not model."""
    rows, cols, dataflow = scalesim_array(settings)
    return Systolic(
        name=name,
        rows=rows,
        cols=cols,
        dataflow=dataflow,
        per_gemm=lambda m, k, n: cycles(m, k, n, rows, cols, dataflow),
        clock=settings.clock,
        bytes_per_cycle=settings.bytes_per_cycle or DEFAULT_BYTES_PER_CYCLE,
        reference_update=False,
        first_input_grad=False,
        source=source,
    )


def scalesim_array(settings: Settings) -> tuple[int, int, str]:
    """Rows, columns and dataflow of a SCALE-Sim style array: 256x256 WS, or a .cfg file
    (--device), then --array and --dataflow on top. Raises CostError for an unknown dataflow."""
    rows, cols, dataflow = read_cfg(Path(settings.device)) if settings.device else (256, 256, "ws")
    rows, cols = settings.array or (rows, cols)
    dataflow = (settings.dataflow or dataflow).lower()
    scalesim_v3(1, 1, 1, rows, cols, dataflow)  # validates the dataflow
    return rows, cols, dataflow


def read_cfg(path: Path) -> tuple[int, int, str]:
    """ArrayHeight, ArrayWidth and Dataflow of a SCALE-Sim .cfg ([architecture_presets])."""
    parser = configparser.ConfigParser()
    try:
        with path.open(encoding="utf-8") as handle:
            parser.read_file(handle)
        section = parser["architecture_presets"]
        rows, cols = int(section["ArrayHeight"]), int(section["ArrayWidth"])
        dataflow = section["Dataflow"].strip().lower()
    except OSError as error:
        raise CostError(f"cannot read {path}: {error.strerror or error}") from None
    except (configparser.Error, KeyError, ValueError) as error:
        raise CostError(
            f"{path} is not a SCALE-Sim config (needs [architecture_presets] ArrayHeight, "
            f"ArrayWidth, Dataflow): {' '.join(str(error).split())[:120]}"
        ) from None
    if rows < 1 or cols < 1:
        raise CostError(f"{path}: the array must be at least 1x1, not {rows}x{cols}")
    return rows, cols, dataflow
