"""Memory per stage of many layouts of one model without building their plans: what a sweep
(modtrans/sweep/) filters thousands of layouts by. The same formulas as a plan's memory
(memory.per_stage), fed the same inputs the plan's builder feeds it (build.py): the units a rank
runs (build.rank_units), Megatron-LM's cut into chunks (stages.partition), the weights tied across
stages (build.tied_pairs) and the activation dimensions (activations.dims). What does not change
from one layout to the next is made once and kept: the units of each tensor, context and expert
split (what memory reads of them, memory.held, summed per block and class), its IR per vocabulary
padding.

    footprint = Footprint(ir_of)
    footprint.memory(layout)    # tuple[StageMemory, ...], as plan(...).memory has it; LayoutError
                                # where the model refuses the layout (heads, blocks, experts)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from modtrans.ir.document import ModelIR
from modtrans.plan.model import StageMemory
from modtrans.strategy.groups import Params
from modtrans.strategy.llm import activations, build, memory, zero_redundancy
from modtrans.strategy.llm.activations import Dims
from modtrans.strategy.llm.options import Layout, LayoutError
from modtrans.strategy.llm.stages import blocks, partition
from modtrans.strategy.llm.unit import Unit
from modtrans.strategy.schedule import holders

IrOf = Callable[[Layout], ModelIR]
"""The model's IR with its vocabulary padded as the layout pads it (Layout.vocabulary_multiple), as
the translation extracts it (pipeline.translate_checked), at any batch: the layers' parameters do
not depend on it, and activations.dims takes the micro-batch itself."""


@dataclass(frozen=True)
class Split:
    """The units of one split as memory.per_stage reads them: per block, the sum of its units'
    Held in each class the formulas treat alike (expert or dense, 16-bit, 32-bit or no counted
    elements, in a block or outside them: memory.unit_state is linear within one), and the units
    a tie names (a copy of a weight on another stage, or its owner) each an entry of its own."""

    units: list[Unit]  # those a tie names
    entries: list[memory.Held]
    grouped: list[list[int]]  # entry indices per block (stages.blocks)
    entry_of: dict[int, int]  # a tied unit's index -> its entry
    parameters: list[tuple[int, bool]]  # every unit's, as ZeroRedundancyOptimizer partitions them


def split_of(
    units: Sequence[Unit],
    grouped: Sequence[Sequence[int]] | None = None,
    order: Sequence[int] | None = None,
    kept: Mapping[str, float] | None = None,
) -> Split:
    """The Split of a rank's units: `grouped`, the unit indices of each block of the model in
    order (default: the units' own blocks, stages.blocks), and `order`, each such block's index
    in the model (default: its units' own). A reduced model (the fast tier: estimate/memory.py)
    gives its units, each kept block's units once per block it stands for, and the full model's
    block indices: the same entries as the full model's units."""
    names = {p.shared_with for u in units for p in u.x.owner.params if p.shared_with}
    tied = [u for u in units if u.name in names or any(p.shared_with for p in u.x.owner.params)]
    held = memory.held(units, kept)  # kept: memory.saved_per_sample's
    entries: list[memory.Held] = []
    out: list[list[int]] = []
    entry_of: dict[int, int] = {}
    parameters: list[tuple[int, bool]] = []
    for g, block in enumerate(blocks([u.block for u in units]) if grouped is None else grouped):
        sums: dict[tuple[bool, int, bool, bool], list[float]] = {}
        mine: list[int] = []
        for i in block:
            parameters += zero_redundancy.parameters(units[i])
            h = held[i]
            if units[i] in tied:
                entry_of[i] = len(entries) + len(mine)
                mine.append(len(entries) + len(mine))
                entries.append(h)
                continue
            width = 0 if not h.elements else 1 if h.weights < 4 * h.elements else 2
            # the layers outside the blocks (memory.gathered: FSDP keeps them gathered) apart
            total = sums.setdefault((h.expert, width, h.block is None, h.bf16), [0, 0, 0, 0, 0.0])
            total[0] += h.elements
            total[1] += h.weights
            total[2] += h.grads
            total[3] += h.linear
            total[4] += h.saved
        block_of = held[block[0]].block if held[block[0]].block is not None else held[block[-1]].block
        block_of = order[g] if order is not None else block_of
        for (expert, _, outside, bf16), (elements, weights, grads, linear, kept_bytes) in sums.items():
            mine.append(len(entries))
            block_or_none = None if outside else block_of
            entries.append(
                memory.Held(
                    int(elements),
                    int(weights),
                    int(grads),
                    expert,
                    block_or_none,
                    bf16,
                    int(linear),
                    kept_bytes,
                )
            )
        out.append(mine)
    return Split(tied, entries, out, entry_of, parameters)


def stage_memory(
    split: Split, cuts: Sequence[range], layout: Layout, d: Dims | None
) -> tuple[StageMemory, ...]:
    """Each stage's first rank's memory, as plan(ir, cost, layout).memory has it: the split's
    blocks cut into `cuts` (P x V, stages.partition), the weights tied across stages
    (build.tied_pairs) counted once, `d` the activations' dimensions (activations.dims)."""
    chunks = [[i for b in cut for i in split.grouped[b]] for cut in cuts]
    tied: dict[int, int] = {}
    if layout.pp > 1 and split.units:
        chunk_of = {i: v for v, chunk in enumerate(chunks) for i in chunk}
        entry_of, schedule = split.entry_of, layout.schedule
        stage = {u.index: holders(schedule, chunk_of[entry_of[u.index]], layout.pp) for u in split.units}
        tied = {entry_of[i]: entry_of[j] for i, j in build.tied_pairs(split.units, stage)}
    first = zero_redundancy.first_share(split.parameters, layout)
    return memory.per_stage(split.entries, chunks, layout, d, tied, layout.expert_gradient_ranks, first)


class Footprint:
    """Memory per stage of the layouts of one model (the module's docstring)."""

    def __init__(self, ir_of: IrOf, *, params: Params = Params.TRAINABLE, dtype_bytes: int | None = None):
        self._ir_of = ir_of
        self._params = params
        self._dtype_bytes = dtype_bytes
        self._irs: dict[int, ModelIR] = {}
        self._splits: dict[tuple[object, ...], Split | LayoutError] = {}
        self._dims: dict[tuple[int, int, float | None], Dims | None] = {}

    def ir(self, layout: Layout) -> ModelIR:
        """The IR of the layout's vocabulary padding."""
        key = layout.vocabulary_multiple
        if key not in self._irs:
            self._irs[key] = self._ir_of(layout)
        return self._irs[key]

    def _split(self, layout: Layout) -> Split:
        """The units a rank runs (build.rank_units; its LayoutError kept and raised again), made once
        per split of the layers: padding, every degree that shards them (T, C, E), SP, ETP, the
        framework, ZeRO, the capacity."""
        key: tuple[object, ...] = (layout.vocabulary_multiple, layout.sp, *layout.sharding())
        key += (layout.etp, layout.framework, layout.zero, layout.capacity_factor, layout.pad_to_capacity)
        found = self._splits.get(key)
        if found is None:
            try:
                ir = self.ir(layout)
                kept = memory.saved_per_sample(ir, self._dims_of(layout))
                found = split_of(build.rank_units(ir, layout, self._params, self._dtype_bytes), kept=kept)
            except LayoutError as error:
                found = error
            self._splits[key] = found
        if isinstance(found, LayoutError):
            raise found
        return found

    def blocks(self, layout: Layout) -> int:
        """The blocks Megatron-LM's cut shares among the P x V chunks (stages.blocks)."""
        return len(self._split(layout).grouped)

    def check(self, layout: Layout) -> None:
        """LayoutError where the model refuses the layout: its heads, experts or sequence
        (build.rank_units), its blocks' cut into P x V chunks (stages.partition)."""
        split = self._split(layout)
        if all(e.block is None for e in split.entries):
            raise LayoutError("the model has no transformer blocks to lay out")
        partition([1] * len(split.grouped), layout.chunks, layout.stages, even=True)

    def memory(self, layout: Layout) -> tuple[StageMemory, ...]:
        """Each stage's first rank's memory, as plan(ir, cost, layout).memory has it."""
        self.check(layout)
        split = self._split(layout)
        cuts = partition([1] * len(split.grouped), layout.chunks, layout.stages, even=True)
        return stage_memory(split, cuts, layout, self._dims_of(layout))

    def _dims_of(self, layout: Layout) -> Dims | None:
        """The activations' dimensions at the layout's micro-batch (activations.dims), made once."""
        key = (layout.micro_batch, layout.vocabulary_multiple, layout.capacity_factor)
        if key not in self._dims:
            self._dims[key] = activations.dims(self.ir(layout), layout.micro_batch, layout.capacity_factor)
        return self._dims[key]
