"""The workload model: the simulator's input as frozen dataclasses (no parser, no I/O).

Values compare by meaning: `span` (where a value was read) and `layout` (how the text spelled
it: separators, line endings, raw tokens) are excluded from equality, so
`parse(write(w)) == w` holds whatever the spacing.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from modtrans.comm import CommType as CommType  # re-exported: chakra/ reads it from here
from modtrans.comm import Policy as Policy
from modtrans.diagnostics import Span
from modtrans.workload import vocabulary


class Dialect(enum.StrEnum):
    """The consumers of the text format, each with its own reading of it."""

    ASTRA_SIM = "astra-sim"  # ASTRA-sim 1.0 (final parser, branch ASTRA-sim-1.0)
    SIMAI = "simai"  # aliyun/SimAI master and AICB-generated files
    CHAKRA = "chakra"  # mlcommons/chakra text converter (the path into ASTRA-sim 2.x)


@dataclass(frozen=True, slots=True)
class Phase:
    """One training phase of a layer: compute time (simulator ticks) and its collective (bytes)."""

    compute_time: int
    comm_type: CommType = CommType.NONE
    comm_size: int = 0


PHASE_WORDS = {"fwd": "forward", "input_grad": "input-gradient", "weight_grad": "weight-gradient"}
"""How messages name each phase (keys are Layer.phases' names)."""


@dataclass(frozen=True, slots=True)
class LineLayout:
    """How one line was spelled: raw tokens, the blanks around them, its line ending.

    `separators` has one more entry than `tokens` (leading blanks, the runs between tokens, the
    trailing blanks). `before` holds the raw blank lines that preceded this line.
    """

    tokens: tuple[str, ...]
    separators: tuple[str, ...]
    eol: str
    before: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Header:
    """Line 1: the parallelism keyword and its parameters (None where the file gives none).

    `extra` keeps, verbatim and in order, header tokens no consumer reads as parameters
    (AICB's `mode: 1`, `expert_parallel_npu_group: 8`).
    """

    policy: Policy
    model_parallel_group: int | None = None
    checkpoints: tuple[int, ...] | None = None
    checkpoint_initiates: tuple[int, ...] | None = None
    dlrm_last_bottom_layer: int | None = None
    ep: int | None = None
    pp: int | None = None
    vpp: int | None = None
    ga: int | None = None
    all_gpus: int | None = None
    pp_comm: int | None = None
    extra: tuple[str, ...] = ()
    span: Span | None = field(default=None, compare=False)
    layout: HeaderLayout | None = field(default=None, compare=False, repr=False)

    @property
    def simai_parameters(self) -> dict[str, int]:
        """The SimAI-only key/value parameters that are set (ep, pp, vpp, ga, all_gpus, pp_comm)."""
        values = {key.field: getattr(self, key.field) for key in vocabulary.SIMAI_ONLY}
        return {k: v for k, v in values.items() if v is not None}


@dataclass(frozen=True, slots=True)
class HeaderLayout:
    """The header's line as read, and the header it meant (to detect later edits)."""

    line: LineLayout
    meant: Header


@dataclass(frozen=True, slots=True)
class Layer:
    """One layer line: name, the three phases, the update delay and (HYBRID_CUSTOMIZED) its policy."""

    name: str
    fwd: Phase
    input_grad: Phase
    weight_grad: Phase
    update_time: int = 0
    reserved: int = -1
    policy: Policy | None = None
    span: Span | None = field(default=None, compare=False)
    layout: LineLayout | None = field(default=None, compare=False, repr=False)
    # Where field i (the text's column order: name, reserved, fwd time, type, size, ...) was read,
    # for a layer that has no text layout (one read from workload JSON).
    field_span: Callable[[int], Span | None] | None = field(default=None, compare=False, repr=False)

    @property
    def phases(self) -> tuple[tuple[str, Phase], ...]:
        return (("fwd", self.fwd), ("input_grad", self.input_grad), ("weight_grad", self.weight_grad))


@dataclass(frozen=True, slots=True)
class FileLayout:
    """Whole-file spelling: BOM, the count line as written, blank lines after the last layer."""

    count: LineLayout
    declared_count: int
    layer_lines: int  # layer lines present in the text, parsed or not
    bom: bool = False
    trailing: tuple[str, ...] = ()
    final_eol: str = "\n"  # the last line's ending ("" when the file has no final newline)


@dataclass(frozen=True, slots=True)
class Workload:
    """A workload file: header and layers. The layer count is always len(layers)."""

    header: Header
    layers: tuple[Layer, ...] = ()
    dialect: Dialect | None = field(default=None, compare=False)
    layout: FileLayout | None = field(default=None, compare=False, repr=False)

    def __iter__(self) -> Iterator[Layer]:
        return iter(self.layers)

    def __len__(self) -> int:
        return len(self.layers)


def layer_tokens(layer: Layer) -> list[str]:
    """The 12 (13) canonical field spellings of a layer line."""
    # layer.phases' order, read directly; a StrEnum's str() is its value (without .value's descriptor)
    f, i, w = layer.fwd, layer.input_grad, layer.weight_grad
    tokens = [
        layer.name,
        str(layer.reserved),
        str(f.compute_time),
        str(f.comm_type),
        str(f.comm_size),
        str(i.compute_time),
        str(i.comm_type),
        str(i.comm_size),
        str(w.compute_time),
        str(w.comm_type),
        str(w.comm_size),
        str(layer.update_time),
    ]
    if layer.policy is not None:
        tokens.append(layer.policy.value)
    return tokens
