"""Per-stage memory for the fast tier: strategy/llm/memory.py's model (weights, gradients, optimizer
state and activations of one rank of each stage), as build.py gives it the plan, without the plan:
each reduced unit's state taken once (memory.unit_state) and counted as often as its block repeats in
the stage, the activations of the stage's blocks by their indices in the full model
(memory.activation_bytes, the transformer's dimensions read off the full model's IR)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from modtrans.estimate.context import Context
from modtrans.estimate.units import Skeleton
from modtrans.plan.model import StageMemory
from modtrans.strategy.llm.options import Layout
from modtrans.strategy.roles import LayerRole
from modtrans.strategy.schedule import holders


def per_stage(ctx: Context, sk: Skeleton, layout: Layout, cuts: Sequence[range]) -> tuple[StageMemory, ...]:
    """One rank's memory per pipeline stage of `layout`, the full model's blocks cut into `cuts`."""
    from modtrans.strategy.llm.memory import activation_bytes, unit_state

    d = _dims(ctx, layout)
    held = [holders(layout.schedule, v, layout.pp) for v in range(len(cuts))]
    states: dict[int, tuple[float, float, float, float]] = {}
    out = []
    for p, (counts, blocks) in enumerate(_held(sk, layout, cuts, held)):
        total = [0.0, 0.0, 0.0, 0.0]
        for i, n in counts.items():
            if i not in states:
                u = sk.units[i]
                ranks = layout.expert_gradient_ranks if u.role is LayerRole.EXPERT else layout.gradient_ranks
                states[i] = unit_state(u, layout, ranks)
            for k in range(4):
                total[k] += n * states[i][k]
        ends = (p in held[0], p in held[-1])
        activations = activation_bytes(layout, d, p, blocks, ends) if d is not None else 0
        elements, weights, grads, optimizer = (int(x) for x in total)
        out.append(StageMemory(elements, weights, grads, optimizer, int(activations)))
    return tuple(out)


def _held(
    sk: Skeleton, layout: Layout, cuts: Sequence[range], held: Sequence[tuple[int, ...]]
) -> list[tuple[dict[int, int], list[int]]]:
    """Per stage, how many times it holds each reduced unit and its blocks' indices in the model
    (made once per cut and schedule)."""
    key = ("held", tuple((c.start, c.stop) for c in cuts), tuple(held), layout.pp)
    found = sk.made.get(key)
    if found is not None:
        return found  # type: ignore[no-any-return]
    tied = _tied(sk, cuts, held)
    found = []
    for p in range(layout.pp):
        counts: dict[int, int] = {}
        blocks = []
        for v, cut in enumerate(cuts):
            if p not in held[v]:
                continue
            for b in cut:
                group = sk.blocks[b]
                if any(sk.in_block[i] for i in group):
                    blocks.append(sk.order[b])
                for i in group:
                    j = tied.get(i, i) if v == len(cuts) - 1 else i
                    counts[j] = counts.get(j, 0) + 1
        found.append((counts, sorted(blocks)))
    sk.made[key] = found
    return found


def _dims(ctx: Context, layout: Layout) -> Any:
    """The transformer's dimensions for one micro-batch (activations.dims on the full model's IR)."""
    from modtrans.strategy.llm import activations

    key = ("dims", layout.vocabulary_multiple, layout.micro_batch, layout.capacity_factor)
    if key not in ctx.made:
        ctx.made[key] = activations.dims(ctx.ir(layout), layout.micro_batch, layout.capacity_factor)
    return ctx.made[key]


def _tied(sk: Skeleton, cuts: Sequence[range], held: Sequence[tuple[int, ...]]) -> dict[int, int]:
    """A weight's copy in the last chunk -> its owner in the first, where their stages differ
    (build.py's _tied rule; the memory model counts the owner's weight for the copy)."""
    if len(cuts) < 2 or held[0] == held[-1]:
        return {}
    return {t.copy: t.owner for t in sk.ties}
