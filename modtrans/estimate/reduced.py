"""A model reduced to what its costs depend on: the layers outside the transformer blocks and one
block of each distinct shape, with the full model's block order kept as a list of which block
stands for each. Blocks of one shape have the same units, times and collectives under any layout
(every technique sizes them by their layers' shapes), so the fast tier builds the reduced model
once and repeats its blocks."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from modtrans.ir.document import Layer, ModelIR


@dataclass(frozen=True)
class Reduced:
    ir: ModelIR  # the kept layers, in the model's order
    stands_for: tuple[int, ...]  # per block of the full model, in order: the kept block's index
    order: tuple[int, ...] = ()  # the full model's block indices, in order


def shape(layer: Layer) -> Hashable:
    """What a layer's units, times and collectives depend on: all but its names."""
    part = layer.block.part if layer.block is not None else None
    heads = layer.block.heads if layer.block is not None else None
    return (
        layer.op_type,
        layer.kind,
        layer.flops,
        layer.gemm,
        tuple(
            (p.role, p.shape, p.dtype, p.elements, p.bytes, p.trainable, p.shared_with is None)
            for p in layer.params
        ),
        tuple((a.shape, a.dtype, a.bytes) for a in layer.inputs),
        tuple((a.shape, a.dtype, a.bytes) for a in layer.outputs),
        layer.moe,
        layer.repeats,
        part,
        heads,
        len(layer.fused),
    )


_MADE: dict[tuple[int, bool], tuple[ModelIR, Reduced]] = {}


def reduce(ir: ModelIR, last_apart: bool = False) -> Reduced:
    """The model with one block of each shape (a model without blocks: itself); made once per IR.
    `last_apart`: the last block kept as a shape of its own, where its collectives differ from
    its shape's (torchtitan's last block, not resharded after its forward: fsdp.unresharded)."""
    made = _MADE.get((id(ir), last_apart))
    if made is None or made[0] is not ir:
        made = _MADE[id(ir), last_apart] = (ir, _reduce(ir, last_apart))
    return made[1]


def _reduce(ir: ModelIR, last_apart: bool) -> Reduced:
    """Each layer belongs to the block it names or, naming none, to the block before it (a
    residual add between blocks); those before the first block and after the last are kept."""
    owner: list[int | None] = []
    current: int | None = None
    for layer in ir.layers:
        b = layer.block.index if layer.block is not None else None
        if b is not None:
            current = b
        owner.append(current)
    last = max(
        (i for i, x in enumerate(ir.layers) if x.block is not None and x.block.index is not None), default=-1
    )
    shapes: dict[int, list[Hashable]] = {}
    for i, (layer, b) in enumerate(zip(ir.layers, owner, strict=True)):
        if b is not None and i <= last:
            shapes.setdefault(b, []).append(shape(layer))
    first: dict[tuple[Hashable, ...], int] = {}
    final = list(shapes)[-1] if last_apart and shapes else None
    stands_for = tuple(first.setdefault((*v, b == final), b) for b, v in shapes.items())
    kept = set(stands_for)
    layers = tuple(
        x for i, (x, b) in enumerate(zip(ir.layers, owner, strict=True)) if b is None or i > last or b in kept
    )
    return Reduced(ModelIR(ir.provenance, layers), stands_for, tuple(shapes))
