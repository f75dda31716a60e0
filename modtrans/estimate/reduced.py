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


_MADE: dict[int, tuple[ModelIR, Reduced]] = {}


def reduce(ir: ModelIR) -> Reduced:
    """The model with one block of each shape (a model without blocks: itself); made once per IR."""
    made = _MADE.get(id(ir))
    if made is None or made[0] is not ir:
        made = _MADE[id(ir)] = (ir, _reduce(ir))
    return made[1]


def _reduce(ir: ModelIR) -> Reduced:
    shapes: dict[int, list[Hashable]] = {}
    order: list[int] = []
    for layer in ir.layers:
        b = layer.block.index if layer.block is not None else None
        if b is None:
            continue
        if b not in shapes:
            shapes[b] = []
            order.append(b)
        shapes[b].append(shape(layer))
    first: dict[tuple[Hashable, ...], int] = {}
    stands_for = []
    for b in order:
        stands_for.append(first.setdefault(tuple(shapes[b]), b))
    kept = set(stands_for)
    layers = tuple(x for x in ir.layers if x.block is None or x.block.index is None or x.block.index in kept)
    return Reduced(ModelIR(ir.provenance, layers), tuple(stands_for))
