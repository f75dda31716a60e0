"""The tensors each unit's operations read and write (ASTRA-sim 2.x's memory tracker reads them).

A unit's forward reads its inputs from outside the unit and its parameters, and writes the outputs
used outside it; its input gradient reads the gradients its consumers wrote and writes one per
floating-point input that is not a model input; its weight gradient writes one per trainable
parameter. A gradient is named after the activation and the layer that wrote it
(`grad:{activation}@{writer}`), so every write has its own name. A shard holds 1/ways of the
parameters and of the split activation (outputs for a column split, inputs for a reduction split).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

from modtrans.dtypes import NO_GRADIENT as _INTEGER  # integer and quantized: no gradient
from modtrans.ir.document import Activation
from modtrans.plan.model import Tensor
from modtrans.strategy.roles import Split

if TYPE_CHECKING:
    from modtrans.strategy.draft import LayerDraft


@dataclass(frozen=True)
class Io:
    inputs: tuple[Tensor, ...]  # read from outside the group
    params: tuple[Tensor, ...]
    trainable: tuple[Tensor, ...]  # the parameters that get a gradient
    outputs: tuple[Tensor, ...]  # used outside the group (or model outputs)
    grads_in: tuple[Tensor, ...]  # the gradients of the outputs, as the consumers wrote them
    grads_out: tuple[Tensor, ...]  # the input gradients this layer writes


def _flow(layers: Sequence[LayerDraft]) -> tuple[dict[str, int], dict[str, list[int]]]:
    """Which unit writes each activation, and which other units read it (in order)."""
    produced: dict[str, int] = {}
    for i, x in enumerate(layers):
        for member in x.group.members:
            for a in member.outputs:
                produced[a.name] = i
    consumers: dict[str, list[int]] = {}
    for i, x in enumerate(layers):
        for member in x.group.members:
            for a in member.inputs:
                if produced.get(a.name, -1) != i and i not in consumers.setdefault(a.name, []):
                    consumers[a.name].append(i)
    return produced, consumers


def ios(layers: Sequence[LayerDraft], model_inputs: frozenset[str]) -> list[Io]:
    """Each unit's tensors (the module's docstring says which)."""
    produced, consumers = _flow(layers)
    out = []
    for i, x in enumerate(layers):
        owner = x.owner
        scale_in = x.ways if x.ways > 1 and x.shardable and x.split == Split.K else 1
        scale_out = x.ways if x.ways > 1 and x.shardable and x.split == Split.N else 1
        seen: set[str] = set()
        external: list[Activation] = []
        for member in x.group.members:
            for a in member.inputs:
                if produced.get(a.name, -1) != i and a.name not in seen:
                    seen.add(a.name)
                    external.append(a)
        inputs = tuple(Tensor(a.name, _size(a, scale_in)) for a in external)
        params = tuple(
            Tensor(p.name, math.ceil(p.bytes / x.ways) if x.shardable else p.bytes)
            for m in x.group.members
            for p in m.params
        )
        trainable = tuple(
            Tensor(p.name, math.ceil(p.bytes / x.ways) if x.shardable else p.bytes)
            for m in x.group.members
            for p in m.params
            if p.trainable
        )
        outs = [
            a
            for m in x.group.members
            for a in m.outputs
            if any(c != i for c in consumers.get(a.name, [])) or a.name not in consumers
        ]
        outputs = tuple(Tensor(a.name, _size(a, scale_out)) for a in outs)
        grads_in = tuple(
            Tensor(
                f"grad:{a.name}@{layers[c].owner.name}" if c >= 0 else f"grad:{a.name}", _size(a, scale_out)
            )
            for a in outs
            for c in (consumers.get(a.name) or [-1])
            if c != i
        )
        grads_out = tuple(
            Tensor(f"grad:{a.name}@{owner.name}", _size(a, scale_in))
            for a in external
            if a.dtype not in _INTEGER and a.name not in model_inputs
        )
        out.append(Io(inputs, params, trainable, outputs, grads_in, grads_out))
    return out


class Ios(Sequence[Io]):
    """Each unit's tensors as `ios` makes them, made when the first is read: the programs' tensors
    read them, the outlines the text projections read do not (a SimAI translation makes none)."""

    def __init__(self, layers: Sequence[LayerDraft], model_inputs: frozenset[str]) -> None:
        self.layers, self.model_inputs = layers, model_inputs
        self.made: list[Io] | None = None

    def __len__(self) -> int:
        return len(self.layers)

    @overload
    def __getitem__(self, index: int) -> Io: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Io]: ...

    def __getitem__(self, index: int | slice) -> Io | Sequence[Io]:
        if self.made is None:
            self.made = ios(self.layers, self.model_inputs)
        return self.made[index]


def _size(a: Activation, ways: int) -> int:
    return math.ceil((a.bytes or 0) / ways)
