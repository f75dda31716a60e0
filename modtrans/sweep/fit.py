"""The memory filter: each layout's memory per stage (strategy/llm/footprint.py, the formulas of
a plan's memory) against the device's memory, and why the layouts dropped were dropped (the part
that is largest on the stage that overflows most: weights, gradients, optimizer state or
activations)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from modtrans.plan.model import StageMemory
from modtrans.strategy.llm.footprint import Footprint
from modtrans.strategy.llm.options import Layout, LayoutError

PARTS = ("weights", "gradients", "optimizer", "activations")


@dataclass
class Fitted:
    layouts: list[tuple[Layout, tuple[StageMemory, ...]]] = field(default_factory=list)
    over: Counter[str] = field(default_factory=Counter)  # why -> layouts dropped for it
    refused: Counter[str] = field(default_factory=Counter)  # the model's rule -> layouts


def fitting(layouts: Iterable[Layout], footprint: Footprint, capacity: int | None) -> Fitted:
    """The layouts whose every stage fits `capacity` bytes per rank (None: all, not checked)."""
    out = Fitted()
    for layout in layouts:
        try:
            memory = footprint.memory(layout)
        except LayoutError as error:
            out.refused[str(error)] += 1
            continue
        worst = max(memory, key=lambda m: m.total)
        if capacity is not None and worst.total > capacity:
            part = max(PARTS, key=lambda name: getattr(worst, name))
            out.over[f"more than the device's memory, {part} the largest part"] += 1
            continue
        out.layouts.append((layout, memory))
    return out
