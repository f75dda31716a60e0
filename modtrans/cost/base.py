"""What every compute-time model shares: the model names, ticks (Clock), per-phase times, the
CostModel protocol, its settings, the registry the models add themselves to (`@register`), and
the elements of a layer's result that elementwise costs count against. cost/__init__.py loads
the models and looks them up by name."""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from modtrans import dtypes
from modtrans.ir.document import Layer


class Model(enum.StrEnum):
    """The compute-time models by name: the registry's keys (each module registers itself under
    one, `register` takes nothing else, and a test holds every name registered), and so the
    choices of the CLI's --compute."""

    GPU = "gpu"
    ROOFLINE = "roofline"
    ASTRA_SIM_REFERENCE = "astra-sim-reference"
    SCALESIM_V3 = "scalesim-v3"
    SCALESIM = "scalesim"


class Unit(enum.StrEnum):
    NS = "ns"  # ASTRA-sim 1.0, SimAI/AICB: 1 tick = 1 ns
    US = "us"  # what ASTRA-sim 2.x assumes of a Chakra trace's duration_micros
    CYCLES = "cycles"  # accelerator cycles at the clock


@dataclass(frozen=True)
class Clock:
    """How a model's cycles or seconds become the integer ticks written to a workload."""

    unit: Unit = Unit.NS
    ghz: float = 1.0

    def from_cycles(self, cycles: float) -> int:
        if self.unit is Unit.CYCLES:
            return _ceil(cycles)
        ns = cycles / self.ghz
        return _ceil(ns if self.unit is Unit.NS else ns / 1000)

    def from_seconds(self, seconds: float) -> int:
        if self.unit is Unit.CYCLES:
            return _ceil(seconds * 1e9 * self.ghz)
        return _ceil(seconds * (1e9 if self.unit is Unit.NS else 1e6))

    @property
    def tick_ns(self) -> float:
        """Nanoseconds per tick (the picture's time axis)."""
        return {Unit.NS: 1.0, Unit.US: 1000.0, Unit.CYCLES: 1 / self.ghz}[self.unit]

    def describe(self) -> dict[str, Any]:
        tick = {"ns": "1 ns", "us": "1 us", "cycles": f"1 cycle at {self.ghz} GHz"}[self.unit.value]
        return {"unit": self.unit.value, "clock_ghz": self.ghz, "tick": tick}


def _ceil(value: float) -> int:
    """Round up, forgiving float noise (3.0000000001 cycles is 3); CostError for a time no
    simulator could read (infinite, NaN, over 2**64 ticks)."""
    if not math.isfinite(value) or value >= 2**64:
        raise CostError(f"a compute time of {value:g} ticks: check the device, array and clock options")
    return max(0, math.ceil(value - 1e-9))


@dataclass(frozen=True, slots=True)
class PhaseTimes:
    """Ticks for one layer's forward, input-gradient and weight-gradient work, and its update."""

    forward: int
    input_grad: int
    weight_grad: int
    update: int = 0

    @property
    def step(self) -> int:
        """One training step's compute: forward and both gradients (not the update)."""
        return self.forward + self.input_grad + self.weight_grad


class CostModel(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def clock(self) -> Clock:
        """How the model's cycles or seconds become ticks (a measured time becomes ticks by it too)."""
        ...

    @property
    def first_input_grad(self) -> bool:
        """Whether the first layer's input gradient is computed (the ASTRA-sim reference does;
        training does not need it, so the other models leave it at 0)."""
        ...

    def times(self, layer: Layer) -> PhaseTimes: ...

    def describe(self) -> dict[str, Any]: ...


def by_shape(cost: CostModel) -> bool:
    """Whether a model's times depend on a layer's shape alone (kind, operator, GEMM, FLOPs,
    repeats, parameter and tensor sizes and dtypes, block part and heads), never on names or block
    numbers, so identically shaped layers are costed once (strategy/share.py `shape`). A model
    says so with the class attribute SHAPE_ONLY = True; one that looks layers up by name
    (cost/measured.py) or says nothing is asked about every layer."""
    return getattr(cost, "SHAPE_ONLY", False) is True


def memory_ticks(cost: CostModel, nbytes: int) -> int:
    """Ticks of one memory-bound kernel outside the layers moving `nbytes` (a data-parallel
    bucket's scale before its collective: strategy/llm/buckets.py): the model's memory_seconds
    where it has one (gpu: the streaming bandwidth, no kernel under its launch floor; roofline: the
    device's bandwidth), else 0: the systolic and SCALE-Sim models time the layers alone."""
    seconds = getattr(cost, "memory_seconds", None)
    return cost.clock.from_seconds(seconds(nbytes)) if seconds is not None and nbytes > 0 else 0


def result_elements(layer: Layer) -> int:
    """Elements of a layer's result, its first output, over all its runs (0 where its size is not
    known): what an elementwise op's bytes an element are counted against (cost/eager.py,
    cost/norms.py, the attention dropout's mask in cost/gpu.py). An op's other outputs are not
    that tensor: onnxruntime's SimplifiedLayerNormalization (core/graph/contrib_ops/
    contrib_defs.cc) writes Y and an optional inv_std_var, fp32 and 1 along the normalised axis,
    which the measured op-by-op bytes already move (the reciprocal root is one of the seven
    kernels). ONNX's RMSNormalization and RotaryEmbedding, com.microsoft's RotaryEmbedding, and the
    built models' SiluMul and rotary have the one output (llm/build.py's rotary holds q's and k's
    heads in one tensor, as torchtitan's apply_rotary_emb rotates both)."""
    if not layer.outputs:
        return 0
    out = layer.outputs[0]
    return (out.bytes or 0) // max(1, dtypes.width(out.dtype)) * layer.repeats


OWN_ATTENTION = "own"
"""Settings.attention under a framework that runs the model's own module (frameworks.py,
wraps_module) where nothing chose a kernel: PyTorch's SDPA, FlashAttention-2 (flash2), or eager
where the model's implementation has no fused kernel (Heads.eager). A request's, never a cost
model's: the pipeline settles it once the model is read (pipeline.own_attention)."""


@dataclass(frozen=True)
class Settings:
    """Everything the CLI can say about a cost model; each model reads what applies to it."""

    device: str | None = None  # roofline profile name or JSON file; SCALE-Sim .cfg for scalesim-v3
    array: tuple[int, int] | None = None  # rows x cols
    dataflow: str | None = None  # ws | is | os
    bytes_per_cycle: float | None = None  # memory traffic of layers without a GEMM
    clock: Clock = Clock()
    efficiency: tuple[tuple[str, float], ...] = ()  # the gpu model's calibration scaled, by kernel class
    attention: str = "flash"  # the gpu model's attention: one fused kernel, or eager (its GEMMs and softmax)
    norms: str = "fused"  # the gpu model's RMSNorm, rotary and SwiGLU: fused kernels, or eager (op by op)
    compiled: bool = False  # the gpu model: the transformer blocks under torch.compile (norms.py)
    loss: str = "torch"  # the gpu model's loss: PyTorch's on fp32 logits, on their own dtype, fused (loss.py)
    fp8: bool = False  # the gpu model: --precision fp8, Transformer Engine's FP8 linears (fp8.py)


@dataclass(frozen=True)
class Entry:
    name: str
    summary: str
    make: Callable[[Settings], CostModel]


REGISTRY: dict[Model, Entry] = {}


class CostError(ValueError):
    """A model or setting that cannot be used, in one line."""


def register(
    name: Model, summary: str
) -> Callable[[Callable[[Settings], CostModel]], Callable[[Settings], CostModel]]:
    key = Model(name)  # ValueError for a name --compute would not offer

    def add(factory: Callable[[Settings], CostModel]) -> Callable[[Settings], CostModel]:
        REGISTRY[key] = Entry(key.value, summary, factory)
        return factory

    return add
