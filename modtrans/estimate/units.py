"""Per-unit costs for the fast tier: the reduced model (reduced.py) planned for one stage and one
micro-batch (strategy/llm/build.py, every technique and the cost model), read back as each unit's
chains of compute and collectives, then timed on a layout's network.

The plan is made once per (T, C, E, ETP, SP, M, framework ...) and a stand-in data degree: the
collectives' sizes are whole buffers (plan/model.py), the same for any D; only whether there are
data ranks at all (D / E > 1) changes which are attached, so D stands for 2 E or E. Megatron's
ZeRO 0-2 reduce by chunk (buckets.py: the fast tier's chunks make them), so the plan is made with
ZeRO 0 for them. Recomputation is read off one plan too, made with selective recomputation: its
attention cores are the selective links; full recomputation re-runs a block's forward links
before its backward (build.py's Rerun); none drops them. The groups a collective spans are the
layout's own (its mesh's rank 0: the groups of every stage have the same shape), timed as the
exact tier times them (collectives.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from modtrans.estimate.collectives import Fabric
from modtrans.estimate.context import Context
from modtrans.estimate.reduced import reduce
from modtrans.estimate.walk import EstimateError
from modtrans.plan.model import Collective, Compute, Place, Purpose, Recompute, Schedule, Step
from modtrans.plan.sizes import Consumer, written
from modtrans.strategy.draft import Comm
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm.options import Layout, LayoutError
from modtrans.strategy.program import parameter_gather

_TENSOR = frozenset({Purpose.TENSOR})
CHAIN, BLOCKING, OVERLAPPED = 0, 1, 2  # a link: compute, a blocking collective, one left to overlap
Raw = tuple[int, Any]  # (kind, ns of compute | (comm, whole bytes, axes) of a collective)
Link = tuple[int, int]  # (kind, ns)


@dataclass(frozen=True)
class Tie:
    """A unit holding a copy of another unit's weight (build._tied): when the two sit on different
    stages, Megatron reduces the copy's gradient with its stage's buffer (`shard`: the copy's share
    with the weight counted) and the two stages swap the gradient (`bytes` each way); the other
    frameworks all-reduce the copy's gradient over the data ranks first."""

    copy: int
    owner: int
    bytes: int
    shard: Any


@dataclass(frozen=True)
class Skeleton:
    """The reduced model's units before their collectives are timed."""

    forward: tuple[tuple[Raw, ...], ...]  # per unit
    backward: tuple[
        tuple[Raw, ...], ...
    ]  # per unit: before_bwd, weight gradient, after_wg, input gradient ...
    weight: tuple[tuple[bool, ...], ...]  # per unit, per backward link: part of the weight gradient (W)
    core: tuple[int, ...]  # per unit: its attention core's forward ns (selective recomputation)
    tail: tuple[tuple[Raw, ...], ...]  # per unit: once per iteration, after its last weight gradient
    step: tuple[int, ...]  # per unit: forward + gradients' compute ns (build.py's stage-cut weight)
    flops: tuple[int, ...]  # per unit, per micro-batch: forward + gradients
    in_block: tuple[bool, ...]  # per unit: inside a transformer block (full recomputation reruns it)
    blocks: tuple[tuple[int, ...], ...]  # per block of the full model: its reduced units (edges joined)
    shards: tuple[Any, ...]  # per unit: its Megatron buffer share (buckets.buffer_share), or None
    buffers: tuple[frozenset[Purpose], ...]  # per unit: the axes its gradient is reduced over
    boundary: int  # bytes of one stage-boundary activation (build.boundary_bytes)
    units: tuple[Any, ...]  # the reduced model's Units (strategy/llm/unit.py), for the memory model
    order: tuple[int, ...]  # per block of the full model: its block index in the model
    ties: tuple[Tie, ...] = ()  # weights tied across stages (the output layer's copy of the embedding)
    update: tuple[int, ...] = ()  # per unit: its optimizer step's ns over its whole state, once an iteration
    # per unit: its gradient's bytes SP leaves partial, which Megatron's family all-reduces once a
    # rank (tensor.finalized_grads; fast.py's _partials: on the rank's first chunk); () where none is
    partial: tuple[int, ...] = ()
    # the kernels before a Megatron bucket's collective for a layout's D: its gradients' bytes -> ns
    # (build.sync_kernels)
    prepare: Callable[[int], Callable[[int], int] | None] | None = None
    # per unit: the FSDP2 copy-out its weight gradient carries for its backward's gather
    # (fsdp.regathered), which full recomputation's forward stands for; () where none is
    regathered: tuple[int, ...] = ()
    made: dict[Any, Any] = field(default_factory=dict, compare=False)  # what layouts on it share


@dataclass(frozen=True)
class UnitCost:
    """One reduced unit on the layout's network, per micro-batch: chains of (kind, ns)."""

    forward: tuple[Link, ...]
    backward: tuple[Link, ...]  # recomputation, collectives, both gradients
    input_grad: tuple[Link, ...]  # without the weight gradient (zero bubble's I)
    weight_grad: tuple[Link, ...]  # the weight gradient alone (W)
    tail: int
    after_weight: int  # the backward's time after its weight gradient (input gradient, its collectives)
    weight_end: int = -1  # the backward's links up to its last weight-gradient compute (its tail's place)
    tails: tuple[int, ...] = ()  # `tail`'s collectives one by one, as the lane takes them
    rerun: tuple[Link, ...] | None = None  # its forward under full recomputation (None: `forward`)


def stand_in(layout: Layout) -> Layout:
    """The one-stage, one-micro-batch layout whose plan gives `layout`'s units."""
    bucketed = layout.framework.family is Framework.MEGATRON and layout.zero != 3
    experts = layout.ep
    dp = experts if bucketed else experts * min(layout.data_ranks // experts, 2)
    replicas = min(layout.dp_replicate, 2)  # HSDP: a whole shard group (its all-reduce's shard) twice
    if replicas > 1:
        dp = layout.data_ranks // layout.dp_replicate * replicas
    return replace(
        layout,
        npus=layout.beside_data // layout.pp * dp,
        pp=1,
        vpp=1,
        dp=dp,
        dp_replicate=replicas,
        global_batch=layout.micro_batch * dp,
        schedule=Schedule.ONE_F_ONE_B,
        stages=None,
        recompute=Recompute.SELECTIVE,  # the attention core timed apart: its placement is the caller's
        recompute_fraction=1.0,
        recompute_method=None,
        recompute_num_layers=None,
        zero=0 if bucketed else layout.zero,
        overlap_grad_reduce=False,
        overlap_param_gather=False,
    )


def skeleton(ctx: Context, layout: Layout) -> Skeleton:
    """The reduced model's units under `layout` (made once per stand-in layout)."""
    small = stand_in(layout)
    pipelined = layout.pp > 1  # torchtitan's FSDP2 units: fsdp.unresharded
    key = ("skeleton", small, pipelined and small.framework.titan_wrapping)
    found = ctx.made.get(key)
    if not isinstance(found, Skeleton):
        bucketed = small.framework.family is Framework.MEGATRON and small.zero == 0
        found = ctx.made[key] = _make(ctx, small, bucketed=bucketed, pipelined=pipelined)
    return found


def _make(ctx: Context, small: Layout, *, bucketed: bool, pipelined: bool = False) -> Skeleton:
    from modtrans.strategy.llm import build, fsdp, tensor
    from modtrans.strategy.llm.buckets import buffer_share  # the one definition of a unit's buffer share
    from modtrans.strategy.llm.degrees import dense_data
    from modtrans.strategy.roles import LayerRole

    options = ctx.options
    # torchtitan's last block, gathered once (fsdp.unresharded), a block of its own
    reduced = reduce(ctx.ir(small), last_apart=small.framework.titan_wrapping and not pipelined)
    try:
        plan = build.plan(
            reduced.ir,
            ctx.cost,
            small,
            params=options.params,
            dtype_bytes=options.dtype_bytes,
            folded=options.parallel.folded,
            pipelined=pipelined,
        )
        units = build.rank_units(reduced.ir, small, options.params, options.dtype_bytes, pipelined=pipelined)
    except LayoutError as error:
        raise EstimateError(str(error)) from None
    count = len(units)
    finalized = small.sp and small.framework.family is Framework.MEGATRON  # tensor.finalized_grads
    read = _read(plan.programs[0], count, bucketed, finalized)
    separate = small.ep > 1 or small.expert_tp != small.tp
    buffers = tuple(u.grads_over if u.role is LayerRole.EXPERT and separate else dense_data() for u in units)
    shards = tuple(buffer_share(u, None) if bucketed else None for u in units)
    full = _blocks([u.block for u in units], reduced.stands_for)
    boundary = build.boundary_bytes(units[full[0][-1]], build.boundary_ways(small))
    in_block = tuple(u.block is not None for u in units)
    by_name = {u.name: u for u in units}
    ties = tuple(
        Tie(u.index, owner.index, owner.grad_bytes(), buffer_share(u, owner) if bucketed else None)
        for u in units
        for p in u.x.owner.params
        if (owner := by_name.get(p.shared_with or "")) is not None
    )
    forward, backward, weight, core, tail, step, flops = read
    return Skeleton(
        forward,
        backward,
        weight,
        core,
        tail,
        step,
        flops,
        in_block,
        full,
        shards,
        buffers,
        boundary,
        tuple(units),
        reduced.order,
        ties,
        tuple(x.update * build.update_shards(u, small) for x, u in zip(plan.layers, units, strict=True)),
        tuple(tensor.partial_grad_bytes(u) for u in units) if finalized else (),
        functools.partial(build.sync_kernels, units, small.framework, ctx.cost) if bucketed else None,
        tuple(fsdp.backward_copy_out(u.x.comms, ctx.cost) for u in units) if small.framework.fsdp2 else (),
    )


def _read(
    program: Sequence[Any], count: int, bucketed: bool, finalized: bool = False
) -> tuple[Any, Any, Any, Any, Any, Any, Any]:
    """Each unit's links, read off the one-micro-batch program (in ns: context.py's time unit);
    `finalized`: the tails over the tensor group are Megatron's one all-reduce of the reduced
    model's partial gradients (tensor.finalized_grads), left to the chunks (Skeleton.partial)."""
    fwd: list[list[Raw]] = [[] for _ in range(count)]
    bwd: list[list[Raw]] = [[] for _ in range(count)]
    weight: list[list[bool]] = [[] for _ in range(count)]
    tail: list[list[Raw]] = [[] for _ in range(count)]
    core, step, flops = [0] * count, [0] * count, [0] * count
    started: set[int] = set()
    for op in program:
        u = op.layer
        if isinstance(op, Compute):
            if op.step in (Step.UPDATE, Step.GRAD_SYNC):
                continue  # once an iteration, every unit's at once: Skeleton.update, per stage
            if op.step is Step.RECOMPUTE:
                core[u] += op.time
                continue
            step[u] += op.time
            flops[u] += op.model_flops
            if op.step is Step.FWD:
                fwd[u].append((CHAIN, op.time))
            else:
                started.add(u)
                bwd[u].append((CHAIN, op.time))
                weight[u].append(op.step is Step.WEIGHT_GRAD)
        elif isinstance(op, Collective):
            if op.step is Step.UPDATE:
                continue  # before the step, once an iteration: fast.py's _update (llm/clipping.py)
            raw = (op.comm, op.bytes, op.over)
            if op.place is Place.TAIL:
                if finalized and op.over == _TENSOR:
                    continue
                if not (bucketed and Purpose.DATA in op.over):  # Megatron's buckets: per chunk
                    tail[u].append((BLOCKING, raw))
            elif op.step is Step.RECOMPUTE:
                continue  # a selective rerun moves nothing; full reruns are the forward's links
            elif op.place in (Place.BEFORE_FWD, Place.AFTER_FWD) and u not in started:
                fwd[u].append((BLOCKING, raw))
            else:
                overlapped = op.place is Place.AFTER_WG
                bwd[u].append((OVERLAPPED if overlapped else BLOCKING, raw))
                weight[u].append(overlapped)
    return (
        tuple(map(tuple, fwd)),
        tuple(map(tuple, bwd)),
        tuple(map(tuple, weight)),
        tuple(core),
        tuple(map(tuple, tail)),
        tuple(step),
        tuple(flops),
    )


def _blocks(keys: Sequence[int | None], stands_for: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """The full model's blocks as reduced units: each block the units of the block standing for
    it, the units before the first block and after the last joined to them (stages.blocks)."""
    of: dict[int | None, list[int]] = {}
    for i, b in enumerate(keys):
        of.setdefault(b, []).append(i)
    if not stands_for:
        return tuple((i,) for i in range(len(keys)))
    full = [list(of[b]) for b in stands_for]
    first = min(i for b in set(stands_for) for i in of[b])
    last = max(i for b in set(stands_for) for i in of[b])
    full[0] = [i for i, b in enumerate(keys) if b is None and i < first] + full[0]
    full[-1] += [i for i, b in enumerate(keys) if b is None and i > last]
    return tuple(tuple(b) for b in full)


def timed(
    sk: Skeleton, layout: Layout, fabric: Fabric, members: Callable[[frozenset[Purpose]], tuple[int, ...]]
) -> list[UnitCost]:
    """Each unit's chains on the network: `members(axes)` the layout's group of rank 0."""
    cache: dict[tuple[Any, ...], int] = {}

    def ns(raw: Any) -> int:
        found = cache.get(raw)
        if found is None:
            comm, size, over = raw
            ranks = members(over)
            n = len(ranks)
            found = cache[raw] = (
                fabric.collective_ns(comm, written(comm, size, n, Consumer.ASTRA_SIM), ranks) if n > 1 else 0
            )
        return found

    def links(raws: Sequence[Raw]) -> list[Link]:
        return [(kind, value if kind == CHAIN else ns(value)) for kind, value in raws]

    rerun = layout.recompute
    regathers = layout.framework.family is not Framework.FSDP  # build._rerun's Rerun.regathers
    out = []
    for u in range(len(sk.forward)):
        forward = links(sk.forward[u])
        again = None if regathers else tuple(links([r for r in sk.forward[u] if not _gathers(r)]))
        backward = links(sk.backward[u])
        weight = sk.weight[u]
        if not regathers and rerun is Recompute.FULL and sk.regathered and sk.in_block[u]:
            backward = _unregathered(backward, weight, sk.regathered[u])
        extra: list[Link] = [(CHAIN, sk.core[u])] if rerun is Recompute.SELECTIVE and sk.core[u] else []
        last = max(
            (k for k, (x, w) in enumerate(zip(backward, weight, strict=True)) if w and x[0] == CHAIN),
            default=-1,
        )
        after = sum(ns for kind, ns in backward[last + 1 :] if kind != OVERLAPPED) if last >= 0 else 0
        out.append(
            UnitCost(
                tuple(forward),
                tuple(extra + backward),
                tuple(extra + [x for x, w in zip(backward, weight, strict=True) if not w]),
                tuple(x for x, w in zip(backward, weight, strict=True) if w),
                sum(tails := [ns(raw) for _, raw in sk.tail[u]]),
                after,
                len(extra) + last + 1 if last >= 0 else -1,
                tuple(tails),
                again if again != tuple(forward) else None,
            )
        )
    return out


def _unregathered(backward: list[Link], weight: Sequence[bool], ticks: int) -> list[Link]:
    """The backward without the copy-out its weight gradient carries (fsdp.regathered): under full
    recomputation the rerun forward's copy-out stands for it, as the exact tier charges it."""
    if not ticks:
        return backward
    k = next(k for k, (x, w) in enumerate(zip(backward, weight, strict=True)) if w and x[0] == CHAIN)
    out = list(backward)
    out[k] = (CHAIN, out[k][1] - ticks)
    return out


def _gathers(raw: Raw) -> bool:
    """A forward link that is a parameter gather (program.parameter_gather), which a rerun forward
    under FSDP does not issue again (Rerun.regathers)."""
    kind, value = raw
    return kind != CHAIN and parameter_gather(Comm(*value))


def micro_flops(sk: Skeleton) -> int:
    """One micro-batch's model FLOPs through the whole model: what is computed again left out
    (Step.modelled, as the exact tier and a trace set count them); made once per skeleton."""
    if "flops" not in sk.made:
        sk.made["flops"] = sum(sk.flops[u] for block in sk.blocks for u in block)
    return int(sk.made["flops"])


def rerun_links(sk: Skeleton, costs: Sequence[UnitCost], block: Sequence[int]) -> list[Link]:
    """Full recomputation before a block's backward: its units' forward links again (build.py's
    _rerun: the layers outside the blocks are not rerun)."""
    return [link for i in block if sk.in_block[i] for link in _rerun(costs[i])]


def _rerun(cost: UnitCost) -> tuple[Link, ...]:
    return cost.forward if cost.rerun is None else cost.rerun
