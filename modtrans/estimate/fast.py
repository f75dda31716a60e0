"""The fast tier: one layout's iteration without building its plan for every rank.

A transformer's blocks repeat, so the model is reduced to its layers outside the blocks and one
block of each distinct shape (reduced.py), and that reduced model's plan is built for one
pipeline stage and one micro-batch (strategy/llm/build.py: every technique's collectives, the
cost model's times) once per (T, C, E, D, SP, M, recompute, ZeRO, framework ...). Each unit's
forward and backward become a chain of compute and collectives, each collective timed on the
layout's network as the exact tier times it (collectives.py). Per layout then:

  - the blocks are cut into P x V chunks as build.py cuts them (stages.partition);
  - a chunk's forward (backward) is its units' chains run one after another on two lanes, compute
    and communication, as walk.py runs one rank: a blocking collective waits for both, one left to
    overlap (after a weight gradient) only for the communication lane;
  - the pipeline is walked over stages, not ranks (walk.py): per stage the schedule's steps
    (strategy/schedule.py), each a receive, the chunk's forward or backward, a send of the
    boundary activation; then the data-parallel reduction (Megatron's one bucket per chunk and
    buffer, buckets.py; the other frameworks' per-unit collectives) after the chunk's last backward.

What it leaves out, each small beside a chunk's time: an overlapped collective spilling into the
next step, DualPipe's F&B pairs (run one after the other), tied weights' swaps between stages,
--overlap-grad-reduce's buckets (one bucket per buffer is taken).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from modtrans.estimate.collectives import Fabric
from modtrans.estimate.context import Context, context
from modtrans.estimate.reduced import reduce
from modtrans.estimate.result import Estimate, StageTime, combine
from modtrans.estimate.walk import COLLECTIVE, COMPUTE, RECV, SEND, EstimateError, Node, walk
from modtrans.plan.model import Collective, Compute, Place, Purpose, Schedule, Step
from modtrans.plan.sizes import Consumer, written
from modtrans.simulate.network import Network
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm.options import Layout, LayoutError
from modtrans.strategy.llm.stages import partition
from modtrans.strategy.schedule import BWD, FWD, WGRAD, paired, stage_of, virtual_stage

_TWO = (Schedule.DUALPIPE, Schedule.DUALPIPE_V)  # two chunks a stage
CHAIN, BLOCKING, OVERLAPPED = 0, 1, 2  # a chain link: compute, a blocking collective, one left to overlap
Link = tuple[int, int]  # (kind, ns)


@dataclass(frozen=True)
class UnitCost:
    """One reduced unit as a rank of the layout runs it, per micro-batch, in ns."""

    forward: tuple[Link, ...]
    backward: tuple[Link, ...]  # recomputation, collectives, weight and input gradients
    input_grad: tuple[Link, ...]  # the backward without its weight gradient (zero bubble's I)
    weight_grad: tuple[Link, ...]  # the weight gradient alone (W)
    tail: tuple[int, ...]  # once per iteration after its last weight gradient (not Megatron's buckets)
    step: int  # forward + both gradients' compute: the stage cut's weight (build.py)
    flops: int  # per micro-batch, every step's


@dataclass(frozen=True)
class Costs:
    """A reduced model's units under one (T, C, E, D, SP, M ...) on one network."""

    units: tuple[UnitCost, ...]
    blocks: tuple[
        tuple[int, ...], ...
    ]  # per block of the full model: its reduced units (build.py's grouping)
    buffers: tuple[
        tuple[Any, frozenset[Purpose], tuple[int, ...]], ...
    ]  # per unit: Megatron shard, buffer, group
    boundary: int  # bytes of one stage-boundary activation
    padded: bool  # the distributed optimizer's padding (ZeRO 1, 2)
    fabric: Fabric


_COSTS: dict[tuple[Any, ...], Costs] = {}
_CHUNKS: dict[tuple[Any, ...], tuple[int, int, int, int, int, int]] = {}


def estimate(
    model: str | Path,
    layout: Layout,
    *,
    device: str | None,
    network: str | Network,
    training: dict[str, Any],
) -> Estimate:
    from modtrans.estimate import network as sized

    ctx = context(model, device, training)
    net = sized(network, layout.npus)
    if layout.overlap_grad_reduce:
        raise EstimateError(
            "--overlap-grad-reduce: the fast tier takes one bucket per buffer; use the exact tier"
        )
    fabric = Fabric.of(net)
    costs = _costs(ctx, layout, fabric)
    chunks = _cut(costs, layout)
    actors, computed = _stages(layout, chunks, costs, fabric)
    lanes = walk(actors)
    stages = tuple(
        StageTime(
            s,
            lane.finish / 1e9,
            pure / 1e9,
            (lane.comm + lane.compute - pure) / 1e9,
            (lane.exposed + lane.compute - pure) / 1e9,
        )
        for s, (lane, pure) in enumerate(zip(lanes, computed, strict=True))
    )
    per_micro = sum(costs.units[i].flops for block in costs.blocks for i in block)
    flops = per_micro * layout.micro_batches * (layout.npus // layout.pp)
    return combine(
        stages, npus=layout.npus, flops=flops, tokens=layout.batch * ctx.sequence, peak_flops=ctx.peak_flops
    )


def _costs(ctx: Context, layout: Layout, fabric: Fabric) -> Costs:
    """The reduced model's units as this layout's ranks run them (made once per key)."""
    small = replace(
        layout,
        npus=layout.npus // layout.pp,
        pp=1,
        vpp=1,
        dp=layout.data_ranks,
        global_batch=layout.micro_batch * layout.data_ranks,
        schedule=Schedule.ONE_F_ONE_B,
        stages=None,
    )
    key = (id(ctx), fabric, small)
    found = _COSTS.get(key)
    if found is None:
        found = _COSTS[key] = _make_costs(ctx, small, fabric)
    return found


def _make_costs(ctx: Context, small: Layout, fabric: Fabric) -> Costs:
    from modtrans.strategy.llm import build
    from modtrans.strategy.llm.buckets import _shard  # the one definition of a unit's buffer share
    from modtrans.strategy.llm.unit import DENSE_DATA
    from modtrans.strategy.roles import LayerRole

    options = ctx.options
    reduced = reduce(ctx.ir(small))
    try:
        plan = build.plan(
            reduced.ir,
            ctx.cost,
            small,
            params=options.params,
            dtype_bytes=options.dtype_bytes,
            folded=options.parallel.folded,
        )
        units = build._units(reduced.ir, small, options.params, options.dtype_bytes)
    except LayoutError as error:
        raise EstimateError(str(error)) from None
    megatron = small.framework is Framework.MEGATRON and small.zero != 3
    groups: dict[frozenset[Purpose], tuple[int, ...]] = {}

    def members(over: frozenset[Purpose]) -> tuple[int, ...]:
        if over not in groups:
            groups[over] = plan.mesh.members(0, over) if plan.mesh.span(over) > 1 else (0,)
        return groups[over]

    def collective_ns(op: Collective) -> int:
        ranks = members(op.over)
        size = written(op.comm, op.bytes, len(ranks), Consumer.ASTRA_SIM)
        return fabric.collective_ns(op.comm, size, ranks) if len(ranks) > 1 else 0

    out = _unit_costs(plan.programs[0], len(units), collective_ns, megatron)
    separate = small.ep > 1 or small.expert_tp != small.tp
    buffers = []
    for unit in units:
        buffer = unit.grads_over if unit.role is LayerRole.EXPERT and separate else DENSE_DATA
        buffers.append((_shard(unit, None) if megatron else None, buffer, members(buffer)))
    # the full model's blocks, each the reduced units of the block standing for it; the layers
    # before the first and after the last joined to them (stages.blocks)
    of_block: dict[int | None, list[int]] = {}
    for u in units:
        of_block.setdefault(u.block, []).append(u.index)
    full = [list(of_block[b]) for b in reduced.stands_for]
    if full:
        first, last = (
            of_block[reduced.stands_for[0]][0],
            max(i for b in set(reduced.stands_for) for i in of_block[b]),
        )
        full[0] = [u.index for u in units if u.block is None and u.index < first] + full[0]
        full[-1] += [u.index for u in units if u.block is None and u.index > last]
    else:
        full = [[i] for i in range(len(units))]
    ways = (small.tp if small.sp else 1) * small.cp
    boundary = build._boundary(units[full[0][-1]], ways)
    return Costs(
        tuple(out), tuple(tuple(b) for b in full), tuple(buffers), boundary, small.zero in (1, 2), fabric
    )


def _unit_costs(program: Sequence[Any], count: int, collective_ns: Any, megatron: bool) -> list[UnitCost]:
    """Each unit's chains, read off the reduced plan's one micro-batch (the plan is in ns)."""
    fwd: dict[int, list[Link]] = {}
    bwd: dict[int, list[Link]] = {}
    wgrad: dict[int, list[Link]] = {}
    igrad: dict[int, list[Link]] = {}
    tails: dict[int, list[int]] = {}
    step: dict[int, int] = {}
    flops: dict[int, int] = {}
    backward_started: set[int] = set()
    for op in program:
        u = op.layer
        if isinstance(op, Compute):
            link = (CHAIN, op.time)
            flops[u] = flops.get(u, 0) + op.flops
            if op.step is not Step.RECOMPUTE:
                step[u] = step.get(u, 0) + op.time
            if op.step is Step.FWD:
                fwd.setdefault(u, []).append(link)
            else:
                backward_started.add(u)
                bwd.setdefault(u, []).append(link)
                weight = op.step is Step.WEIGHT_GRAD
                (wgrad if weight else igrad).setdefault(u, []).append(link)
        elif isinstance(op, Collective):
            ns = collective_ns(op)
            if op.place is Place.TAIL:
                if not (megatron and Purpose.DATA in op.over):  # Megatron's buckets: per chunk (_buckets)
                    tails.setdefault(u, []).append(ns)
                continue
            overlapped = op.place is Place.AFTER_WG
            link = (OVERLAPPED if overlapped else BLOCKING, ns)
            if op.place in (Place.BEFORE_FWD, Place.AFTER_FWD) and u not in backward_started:
                fwd.setdefault(u, []).append(link)
            else:
                bwd.setdefault(u, []).append(link)
                (wgrad if overlapped else igrad).setdefault(u, []).append(link)
    out = []
    for u in range(count):
        out.append(
            UnitCost(
                tuple(fwd.get(u, ())),
                tuple(bwd.get(u, ())),
                tuple(igrad.get(u, ())),
                tuple(wgrad.get(u, ())),
                tuple(tails.get(u, ())),
                step.get(u, 0),
                flops.get(u, 0),
            )
        )
    return out


def _cut(costs: Costs, layout: Layout) -> list[tuple[int, int, int, int, int, int]]:
    """Per chunk (P x V, in pipeline order): one micro-batch's forward, backward, input-gradient and
    weight-gradient ns, its compute alone, and the ns of its data-parallel reduction."""
    weights = [sum(costs.units[i].step for i in block) for block in costs.blocks]
    try:
        cuts = partition(weights, layout.chunks, layout.stages, even=True)
    except LayoutError as error:
        raise EstimateError(str(error)) from None
    return [_chunk(costs, tuple(i for b in cut for i in costs.blocks[b])) for cut in cuts]


def _chunk(costs: Costs, members: tuple[int, ...]) -> tuple[int, int, int, int, int, int]:
    key = (id(costs), members)
    found = _CHUNKS.get(key)
    if found is None:
        units = costs.units
        forward = _run(link for i in members for link in units[i].forward)
        backward = _run(link for i in reversed(members) for link in units[i].backward)
        input_grad = _run(link for i in reversed(members) for link in units[i].input_grad)
        weight_grad = _run(link for i in reversed(members) for link in units[i].weight_grad)
        computed = sum(
            ns
            for i in members
            for chain in (units[i].forward, units[i].backward)
            for kind, ns in chain
            if kind == CHAIN
        )
        tail = sum(ns for i in members for ns in units[i].tail) + _buckets(costs, members)
        found = _CHUNKS[key] = (forward, backward, input_grad, weight_grad, computed, tail)
    return found


def _run(links: Iterable[Link]) -> int:
    """A chain on two lanes (compute, communication), as walk.py runs one rank's chain: when its
    last compute or blocking collective ends."""
    t = c = 0
    for kind, ns in links:
        if kind == CHAIN:
            t += ns
        elif kind == BLOCKING:
            t = c = max(t, c) + ns
        else:
            c = max(t, c) + ns
    return t


class _Attached:
    """Where buckets.py's _Bucket.reduce attaches a bucket's collective: kept here instead."""

    def __init__(self) -> None:
        self.comms: list[Any] = []

    def attach(self, place: Place, comm: Any) -> None:
        self.comms.append(comm)


def _buckets(costs: Costs, members: Sequence[int]) -> int:
    """Megatron's reduction of one chunk: one bucket per buffer, as buckets.py fills it (backward
    order, the distributed optimizer's padding), timed; 0 for the other frameworks."""
    import math

    from modtrans.strategy.llm.buckets import BUCKET_ALIGN, _Bucket

    by_buffer: dict[frozenset[Purpose], list[int]] = {}
    for i in members:
        shard, buffer, _ = costs.buffers[i]
        if shard is not None:
            by_buffer.setdefault(buffer, []).append(i)
    total = 0
    for buffer, indices in by_buffer.items():
        ranks = costs.buffers[indices[0]][2]
        if len(ranks) < 2:
            continue
        bucket = _Bucket()
        for i in reversed(indices):
            shard = costs.buffers[i][0]
            for n in reversed(shard.elements):
                bucket.add(n, shard, costs.padded)
        if not bucket.filled:
            continue
        attached = _Attached()
        divisor = math.lcm(len(ranks), BUCKET_ALIGN) if costs.padded else None
        gathers = bucket.reduce(attached, buffer, divisor)  # type: ignore[arg-type]
        for comm in (*attached.comms, *gathers):
            size = written(comm.comm, comm.bytes, len(ranks), Consumer.ASTRA_SIM)
            total += costs.fabric.collective_ns(comm.comm, size, ranks)
    return total


def _stages(
    layout: Layout, chunks: Sequence[tuple[int, int, int, int, int, int]], costs: Costs, fabric: Fabric
) -> tuple[list[list[Node]], list[int]]:
    """One actor per pipeline stage, and its compute alone: the schedule's steps, each a receive,
    the chunk's work and a send; then each chunk's data-parallel reduction after its last backward."""
    p, micro_batches, schedule = layout.pp, layout.micro_batches, layout.schedule
    last_virtual = len(chunks) - 1
    per_stage = layout.npus // p
    actors, computed = [], []
    for s in range(p):
        nodes: list[Node] = []
        chain: tuple[int, ...] = ()
        pure = 0
        steps, _ = paired(schedule, s, p, micro_batches, layout.vpp)
        last_backward = {
            virtual_stage(schedule, s, p, c): i for i, (d, _, c) in enumerate(steps) if d in (BWD, WGRAD)
        }
        tails = {i: v for v, i in last_backward.items()}
        for i, (direction, micro, chunk) in enumerate(steps):
            v = virtual_stage(schedule, s, p, chunk)
            forward_ns, backward_ns, input_ns, weight_ns, _, _ = chunks[v]
            forward = direction == FWD
            peer = v - 1 if forward else v + 1
            if (
                direction != WGRAD
                and 0 <= peer <= last_virtual
                and stage_of(schedule, peer, p, micro, micro_batches) != s
            ):
                nodes.append(Node(RECV, 0, chain, (peer, v, micro, forward)))
                chain = (len(nodes) - 1,)
            time = {FWD: forward_ns, BWD: backward_ns, WGRAD: weight_ns}.get(direction, input_ns)
            nodes.append(Node(COMPUTE, time, chain))
            chain = (len(nodes) - 1,)
            if i in tails and chunks[v][5]:
                # the chunk's reduction waits for its first unit's last weight gradient, before
                # the gradient is sent back: issued first, it holds the link the send needs
                nodes.append(Node(COLLECTIVE, chunks[v][5], chain, ("tail", s, v), 1))
            to = v + 1 if forward else v - 1
            if direction != WGRAD and 0 <= to <= last_virtual:
                dst = stage_of(schedule, to, p, micro, micro_batches)
                if dst != s:
                    ns = fabric.send_ns(s * per_stage, dst * per_stage, costs.boundary)
                    nodes.append(Node(SEND, ns, chain, (v, to, micro, forward)))
        for v in {virtual_stage(schedule, s, p, c) for c in range(2 if schedule in _TWO else layout.vpp)}:
            pure += chunks[v][4] * micro_batches
        actors.append(nodes)
        computed.append(pure)
    return actors, computed
