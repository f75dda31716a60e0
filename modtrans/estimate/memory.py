"""Per-stage memory for the fast tier: the sweep's footprint (strategy/llm/footprint.py,
stage_memory: strategy/llm/memory.py's formulas on the units build.py gives a plan, without the
plan), fed the reduced model's units, each kept block's once per block of the full model it stands
for, with the full model's block indices (its activations' dimensions read off the full model's
IR): the same entries as the full model's units, without making them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from modtrans.estimate.context import Context
from modtrans.estimate.units import Skeleton
from modtrans.plan.model import StageMemory
from modtrans.strategy.llm import activations, memory
from modtrans.strategy.llm.footprint import Split, split_of, stage_memory
from modtrans.strategy.llm.options import Layout


def per_stage(ctx: Context, sk: Skeleton, layout: Layout, cuts: Sequence[range]) -> tuple[StageMemory, ...]:
    """One rank's memory per pipeline stage of `layout`, the full model's blocks cut into `cuts`."""
    split = sk.made.get("split")
    if not isinstance(split, Split):
        kept = memory.saved_per_sample(ctx.ir(layout), _dims(ctx, layout))  # a model without heads
        split = sk.made["split"] = split_of(list(sk.units), sk.blocks, sk.order, kept)
    return stage_memory(split, cuts, layout, _dims(ctx, layout))


def _dims(ctx: Context, layout: Layout) -> Any:
    """The transformer's dimensions for one micro-batch (activations.dims on the full model's IR)."""
    key = ("dims", layout.vocabulary_multiple, layout.micro_batch, layout.capacity_factor)
    if key not in ctx.made:
        ctx.made[key] = activations.dims(ctx.ir(layout), layout.micro_batch, layout.capacity_factor)
    return ctx.made[key]
