"""The draft a technique edits (strategy, step 2 of 3).

groups.py makes one draft layer per workload layer (a unit); each technique (techniques/*.py for
the keyword presets, llm/*.py for the layout) sets the mesh, and per unit how it is divided
(ways, split, role: share.py turns that into what a rank computes) and the collectives it issues
at each place of the program (Place). recompute.py adds FWD_IN_BCKWD's recomputed segments.
program.py orders it all into the operations of one iteration, for the presets and the layout
alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from modtrans.comm import CommType, Policy
from modtrans.cost import CostModel
from modtrans.dtypes import NO_GRADIENT as _INTEGER  # integer and quantized: no gradient
from modtrans.ir.document import Layer as IRLayer
from modtrans.ir.document import ModelIR, needs_input_grad
from modtrans.plan.model import Checkpoints, Mesh, Place, Purpose, Step
from modtrans.strategy.groups import Group
from modtrans.strategy.llm.options import Layout
from modtrans.strategy.roles import LayerRole, Split
from modtrans.strategy.share import SHARDABLE, Folded

# the text format's columns: where a keyword's collective of each step is issued
_AFTER = {Step.FWD: Place.AFTER_FWD, Step.INPUT_GRAD: Place.AFTER_IG, Step.WEIGHT_GRAD: Place.AFTER_WG}


class StrategyError(ValueError):
    """Options that do not fit together (one line, for the user)."""


@dataclass(frozen=True)
class Parallelism:
    policy: Policy = Policy.DATA
    npus: int = 1
    group: int | None = None  # model_parallel_NPU_group
    checkpoints: tuple[int, ...] | None = None
    checkpoint_initiates: tuple[int, ...] | None = None
    checkpoint_every: int | None = None
    per_layer: dict[str, Policy] | None = None  # HYBRID_CUSTOMIZED: name pattern -> keyword
    layout: Layout | None = None  # tensor x pipeline x data x expert parallelism
    folded: Folded = Folded.MEGATRON  # what a rank computes of a column-parallel unit's folded layers


@dataclass(frozen=True)
class Comm:
    comm: CommType
    bytes: int
    over: frozenset[Purpose]
    # ticks of the kernels the rank runs on the compute stream right before it issues this one,
    # once an iteration: a data-parallel bucket's (frameworks.py, grad_sync_passes; program.py
    # runs them after the unit's last weight gradient, strategy/llm/buckets.py sets them), or
    # before the optimizer step its unscaling's and gradient norm's (strategy/llm/clipping.py);
    # with CommType.NONE, the kernels alone
    kernel: int = 0


@dataclass
class LayerDraft:
    group: Group
    ways: int = 1  # the rank computes 1/ways of the layer
    split: Split = Split.N  # which GEMM dimension is divided
    # column / row / embedding (Megatron), split (ASTRA-sim's layer-wise MODEL), router / expert
    # (MoE), replicated: what rank_share divides
    role: LayerRole = LayerRole.REPLICATED
    comms: dict[Place, list[Comm]] = field(default_factory=dict)
    policy: Policy | None = None  # HYBRID_CUSTOMIZED

    @property
    def owner(self) -> IRLayer:
        return self.group.owner

    @property
    def shardable(self) -> bool:
        return self.owner.kind in SHARDABLE

    def attach(self, place: Place, comm: Comm) -> None:
        """A collective at `place` (nothing when it would move no bytes), or where it names no
        collective the kernels it carries alone (a Megatron bucket over one data rank: program.py
        runs its kernels and issues nothing)."""
        if (comm.bytes > 0 and comm.comm.moves_data) or comm.kernel > 0:
            self.comms.setdefault(place, []).append(comm)

    def add(self, step: Step, comm: CommType, size: int, over: frozenset[Purpose]) -> None:
        """A collective right after the compute of `step` (the text's column for it)."""
        self.attach(_AFTER[step], Comm(comm, size, over))


@dataclass
class Draft:
    ir: ModelIR
    cost: CostModel
    parallelism: Parallelism
    layers: list[LayerDraft]
    group_size: int  # model_parallel_NPU_group (1 when the keyword has none)
    mesh: Mesh | None = None
    checkpoints: Checkpoints | None = None  # FWD_IN_BCKWD's segments
    recompute: dict[int, tuple[int, ...]] = field(default_factory=dict)  # unit -> forwards rerun first

    @property
    def npus(self) -> int:
        return self.parallelism.npus

    @property
    def inputs(self) -> frozenset[str]:
        return frozenset(self.ir.provenance.input_shapes)

    def every(self) -> frozenset[Purpose]:
        assert self.mesh is not None
        return frozenset(a.purpose for a in self.mesh.axes)

    def a_in(self, layer: IRLayer) -> int:
        return a_in(layer, self.inputs)

    @staticmethod
    def a_out(layer: IRLayer) -> int:
        return a_out(layer)


def a_in(layer: IRLayer, model_inputs: frozenset[str]) -> int:
    """Bytes of the floating-point inputs whose gradient back-propagation computes."""
    if not needs_input_grad(layer, model_inputs):
        return 0
    return sum(a.bytes or 0 for a in layer.inputs if a.dtype not in _INTEGER)


def a_out(layer: IRLayer) -> int:
    """Bytes of the layer's (first) output activation."""
    return layer.outputs[0].bytes or 0 if layer.outputs else 0
