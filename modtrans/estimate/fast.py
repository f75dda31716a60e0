"""The fast tier: one layout's iteration without building its plan for every rank.

The per-unit costs come from the reduced model's one-stage plan (units.py), made once per
(T, C, E, SP, M ...) and timed on the layout's groups. Per layout then:

  - the blocks are cut into P x V chunks as build.py cuts them (stages.partition, Megatron's
    equal cut of a transformer's blocks);
  - a chunk's forward (backward) is its units' chains run one after another on two lanes, compute
    and communication, as walk.py runs one rank's chain: a blocking collective waits for both, one
    left to overlap (after a weight gradient) only for the communication lane; chunks of blocks
    with nothing to overlap are sums of their blocks'; what a step leaves on the lane past its
    compute (FSDP's reduce-scatters of a micro-batch's backward) holds the next step's collectives
    (chains.timed_and_spill);
  - the pipeline is walked over stages, not ranks (pipeline.py): the schedule's steps, the
    boundary transfers, and each chunk's data-parallel reduction (Megatron's one bucket per
    buffer, reductions.bucket_times; with --overlap-grad-reduce the first chunk's buckets of
    max(40M, 1M x D) parameters, each after its closing unit's weight gradient: _sized; the
    other frameworks' per-unit collectives) after its last backward, which lastback.py walks
    with the units' tail collectives and a tied weight's swap, on the trace's whole-microsecond
    computes where the lane's order is a close call (the compute its stage ran before it:
    pipeline.phases); under the interleaved schedule a chunk's reduction after a later backward
    (frameworks.py, chunk_reductions), a tied copy's swap after the last (_later);
  - with --overlap-param-gather each stage's parameter gathers run one after another from the
    iteration's start, each chunk's first forward walked beside them, each bucket's first unit
    waiting for its gather (gathers.py), none after the step;
  - each stage ends with its optimizer step, one compute of its units' update times after its
    last reduction and swap (program.py's StageProgram._optimizer; Megatron steps once the
    gradients are reduced: megatron/core/optimizer/optimizer.py, MixedPrecisionOptimizer.step),
    under Megatron after its unscaling and gradient-norm kernels and their all-reduces of one
    number (_finish: strategy/llm/clipping.py), then the distributed optimizer's parameter
    all-gathers (Place.AFTER_STEP), exposed.

What it leaves out, each small beside a chunk's time: DualPipe's F&B pairs (run one after the
other); when a tied weight's swap arrives (by its sending stage's end: _swapped). Refused
(EstimateError, the exact tier times them): NeMo's buckets of one layer each under
--overlap-grad-reduce, --overlap-param-gather outside the 1F1B and interleaved schedules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from modtrans.comm import CommType
from modtrans.estimate import chains, pipeline
from modtrans.estimate.collectives import Fabric, sized
from modtrans.estimate.context import context
from modtrans.estimate.gathers import Stream, Waits, streams
from modtrans.estimate.lastback import last_backward
from modtrans.estimate.memory import per_stage as memory_of
from modtrans.estimate.reductions import bucket_times, fill, tied_fill, tied_ns
from modtrans.estimate.result import Estimate, StageTime, combine
from modtrans.estimate.units import (
    CHAIN,
    OVERLAPPED,
    Link,
    Skeleton,
    UnitCost,
    micro_flops,
    rerun_links,
)
from modtrans.estimate.units import skeleton as skeleton_of
from modtrans.estimate.units import timed as timed_units
from modtrans.estimate.walk import EstimateError
from modtrans.plan.model import Purpose, Recompute, Schedule
from modtrans.plan.sizes import Consumer, written
from modtrans.simulate.network import Network
from modtrans.strategy.frameworks import Launch
from modtrans.strategy.llm.buckets import stage as reduction_stage
from modtrans.strategy.llm.clipping import Finish, finishing
from modtrans.strategy.llm.options import Layout, LayoutError
from modtrans.strategy.llm.stages import partition
from modtrans.strategy.schedule import WGRAD, holders, stage_of, virtual_stage

_TWO = (Schedule.DUALPIPE, Schedule.DUALPIPE_V)  # two chunks a stage
_TENSOR = frozenset({Purpose.TENSOR})
# forward, backward, input gradient, weight gradient, compute ns; the reduction's first collective, the
# rest; what the tails add to the chunk's last backward (or weight gradient), as walked at no phase;
# the four chains' lane paths (chains.timed's K); the parameter gathers after the optimizer step;
# the four steps' compute alone (pipeline.phases); the buckets' kernels before their collectives; and
# those over one data rank, with no collective, run after the schedule (program.py's _alone_kernels)
Chunk = tuple[int, ...]
# a phase -> the last backward's reduction (3); None where no phase changes it
Last = Callable[[int | None], tuple[int, int, int]] | None
# a chunk's forward links and its parameter gathers (gathers.Waits)
Opening = tuple[list[Link], Waits]
# (stage, virtual stage, start, lane) -> a chunk's first forward's end and its lane (pipeline.run)
Opened = Callable[[int, int, int, int], tuple[int, int]]


def modelled(layout: Layout) -> None:
    """EstimateError for what the fast tier does not model, whatever the layout's degrees: options
    a sweep's layouts share (the framework's --overlap-grad-reduce), said once before a sweep
    starts."""
    if layout.overlap_grad_reduce and layout.framework.layer_buckets:
        raise EstimateError(
            f"--overlap-grad-reduce under --framework {layout.framework.value}: the fast tier takes "
            "Megatron's sized buckets, not one a layer; use the exact tier"
        )
    if layout.overlap_param_gather and layout.schedule not in (Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED):
        raise EstimateError(
            f"--overlap-param-gather under --schedule {layout.schedule.value}: the fast tier walks the "
            "gathers beside Megatron's schedules alone; use the exact tier"
        )
    if not layout.placement.every_block:  # its blocks alike: one block of each shape timed
        raise EstimateError(
            f"{layout.placement.option}: the fast tier times every block alike; use the exact tier"
        )
    if layout.recompute_modules is not None:  # it times the attention core's rerun alone
        raise EstimateError(
            "--recompute-modules: the fast tier reruns the attention core alone; use the exact tier"
        )


def estimate(
    model: str | Path,
    layout: Layout,
    *,
    device: str | None,
    network: str | Network,
    training: dict[str, Any],
) -> Estimate:
    modelled(layout)
    # the framework's conventions reach the cost model too (request.py: its RMSNorm kernels)
    ctx = context(model, device, {**training, "framework": layout.framework.value})
    fabric = Fabric.of(sized(network, layout.npus))
    sk = skeleton_of(ctx, layout)
    launch = layout.framework.chunk_reductions(layout.schedule, layout.overlap_grad_reduce)
    plan = pipeline.steps(layout.schedule, layout.pp, layout.micro_batches, layout.vpp, layout.chunks, launch)
    split = any(step[1] == pipeline.KINDS[WGRAD] for step in plan[2])  # zero bubble's W last
    chunks, cuts, lasts, opens = _chunks(sk, layout, fabric, split)
    reductions = [(c[5], c[6], c[7]) for c in chunks]
    if any(lasts):  # a close call at some chunk's last backward: walked from its stage's phase
        at = pipeline.phases(plan, [c[21:25] for c in chunks])
        reductions = [
            r if f is None else f(at.get(v)) for v, (r, f) in enumerate(zip(reductions, lasts, strict=True))
        ]
    ties = _ties(sk, layout, len(chunks))
    if ties and _later(layout):  # the copy's swap, launched with its stage's first chunk's reduction
        copy = ties[0][1]
        sent = sum(_swap_sends(sk, layout, fabric, (False, True)).values())
        first, rest, tails = reductions[copy]
        reductions[copy] = (first, rest + sent, tails)
    held = memory_of(ctx, sk, layout, cuts)
    per_stage = layout.npus // layout.pp
    from modtrans.strategy.llm.build import update_shards

    finish = finishing(sk.units, layout, ctx.cost, lambda u: update_shards(u, layout))

    def transfer_ns(src: int, dst: int, size: int) -> int:
        return fabric.send_ns(src * per_stage, dst * per_stage, size)

    def send_ns(src: int, dst: int) -> int:
        return transfer_ns(src, dst, sk.boundary)

    opening, spoke = _gathered(layout, opens)
    ran = pipeline.run(
        plan, chunks, reductions, send_ns, [c[8:12] for c in chunks], [c[12:20] for c in chunks], opening
    )
    ran = _swapped(ran, _ties(sk, layout, len(chunks)))
    stages = _stages(
        ran, chunks, sk, cuts, layout, held, (finish, fabric), spoke if opening is not None else None
    )
    per_micro = micro_flops(sk)
    flops = per_micro * layout.micro_batches * per_stage
    tokens = layout.batch * ctx.sequence
    return combine(tuple(stages), npus=layout.npus, flops=flops, tokens=tokens, peak_flops=ctx.peak_flops)


def _gathered(layout: Layout, opens: Sequence[Opening]) -> tuple[Opened | None, list[Stream]]:
    """With --overlap-param-gather, each chunk's first forward on its stage walked beside its
    stage's parameter gathers (gathers.py; pipeline.run's `opening`), and the stages' Streams."""
    if not layout.overlap_param_gather:
        return None, []
    held = [sorted(_held(layout, s)) for s in range(layout.pp)]
    stages = streams(layout.pp, held, [w for _, w in opens])

    def opening(s: int, v: int, start: int, lane: int) -> tuple[int, int]:
        return stages[s].forward(v, opens[v][0], start, lane)

    return opening, stages


def _chunks(
    sk: Skeleton, layout: Layout, fabric: Fabric, split: bool
) -> tuple[list[Chunk], list[range], list[Last], list[Opening]]:
    """Per chunk (P x V, in pipeline order): one micro-batch's forward, backward, input-gradient and
    weight-gradient ns, its compute alone, and its data-parallel reduction's first collective and
    the rest, and what the tails add to its last backward (ns), each step's compute alone; and
    its last backward's reduction for a phase, and its forward's links with its buckets'
    parameter gathers (_chunk); `split`: the schedule ends a chunk with its weight gradient alone."""
    mesh = layout.mesh()
    key = ("timed", mesh, fabric, layout.recompute, layout.zero, split)
    found = sk.made.get(key)
    if found is None:
        groups: dict[frozenset[Purpose], tuple[int, ...]] = {}

        def members(over: frozenset[Purpose]) -> tuple[int, ...]:
            if over not in groups:
                present = frozenset(a.purpose for a in mesh.axes) & over
                groups[over] = mesh.members(0, present) if mesh.span(present) > 1 else (0,)
            return groups[over]

        costs = timed_units(sk, layout, fabric, members)
        blocks = {b: _block(sk, costs, b, layout.recompute) for b in set(sk.blocks)}
        fills = {b: fill(sk, b, reduction_stage(layout.framework, layout.zero)[0]) for b in set(sk.blocks)}
        made: dict[tuple[int, int, bool, bool, bool, bool, int, Launch], tuple[Chunk, Last, Opening]] = {}
        found = sk.made[key] = (costs, blocks, fills, members, made)
    costs, blocks, fills, members, made = found
    weights = [sum(sk.step[i] for i in block) for block in sk.blocks]
    try:
        cuts = partition(weights, layout.chunks, layout.stages, even=any(sk.in_block))
    except LayoutError as error:
        raise EstimateError(str(error)) from None
    tied = bool(_ties(sk, layout, len(cuts)))
    partials = _partials(sk, layout, cuts)
    out, lasts, opens = [], [], []
    last = layout.micro_batches - 1
    launch = layout.framework.chunk_reductions(layout.schedule, layout.overlap_grad_reduce)
    for v, cut in enumerate(cuts):
        ends = (tied and v == 0, tied and v == len(cuts) - 1)  # the tied owner's chunk, the copy's
        # program.py's Pipeline.reduce_after_send: the tail section waits for the chunk's send;
        # its chunk_reduction (but READY): for a later backward, after the chunk's send as well
        after = (
            layout.framework.reduces_after_sends(layout.schedule)
            and stage_of(layout.schedule, v, layout.pp, last, last + 1) > 0
        ) or launch is not Launch.READY
        sized = layout.overlap_grad_reduce and v == 0  # buckets.apply: pp rank 0's first chunk alone
        key_of = (cut.start, cut.stop, *ends, after, sized, partials[v], launch)
        found_chunk = made.get(key_of)
        if found_chunk is None:
            found_chunk = made[key_of] = _chunk(
                sk,
                costs,
                blocks,
                fills,
                members,
                cut,
                (*ends, after, sized, partials[v]),
                layout,
                fabric,
                split,
            )
        out.append(found_chunk[0])
        lasts.append(found_chunk[1])
        opens.append(found_chunk[2])
    return out, cuts, lasts, opens


def _chunk(
    sk: Skeleton,
    costs: Sequence[UnitCost],
    blocks: Any,
    fills: Any,
    members: Any,
    cut: range,
    ends: tuple[bool, bool, bool, bool, int],
    layout: Layout,
    fabric: Fabric,
    split: bool,
) -> tuple[Chunk, Last, Opening]:
    """One chunk's times (made once per cut of the same units on the same groups), and its last
    backward's reduction (first, rest, what the tails add) for the compute its stage ran before
    it (pipeline.phases), each phase's walked once; `ends`: whether it holds the owner of a weight
    tied across stages, and its copy, whether its tail section waits for its send (lastback's
    after_send), whether its buffers are Megatron's sized buckets (--overlap-grad-reduce on the
    first chunk: _sized), and the SP partial gradients' bytes it all-reduces (_partials)."""
    parts = [sk.blocks[b] for b in cut]
    pure = all(blocks[p][6] for p in parts)
    computes = [sum(blocks[p][11][k] for p in parts) for k in range(4)]
    # what each step leaves on the lane past its compute (none where nothing overlaps)
    if pure:
        both, lane = _summed(blocks, parts), [(0, chains.NEVER)] * 4
    else:
        timings = [chains.timed_and_spill(x) for x in _links(sk, costs, parts, layout.recompute)]
        both, lane = [t for t, _ in timings], [c for _, c in timings]
    sums = [*(t for t, _ in both), sum(blocks[p][4] for p in parts)]
    chunk_fills = [fills[p] for p in reversed(parts)]
    tied, last = 0, ends[1]
    if last:  # the copy of a tied weight: reduced with this stage's
        tied = sum(tied_ns(sk, t, layout, fabric, members) for t in sk.ties)
        chunk_fills += [tied_fill(sk, t, reduction_stage(layout.framework, layout.zero)[0]) for t in sk.ties]
    if ends[3]:
        buckets, gathered, alone = _sized(sk, parts, layout, fabric, members, ends[4])
    else:
        buckets, gathered, alone = _buckets(sk, parts, chunk_fills, layout, fabric, members, ends[4])
    gathers = sum(gathered.values())
    swaps = _swap_sends(sk, layout, fabric, ends[:2], _later(layout))
    walked: dict[int | None, tuple[int, int, int]] = {}

    def reduction(phase: int | None) -> tuple[int, int, int]:
        found = walked.get(phase)
        if found is None:
            done, before, after, _ = last_backward(
                sk, costs, parts, layout.recompute, split, buckets, phase, swaps, ends[2]
            )
            found = walked[phase] = (before, after + tied, done - sums[3 if split else 1])
        return found

    done, before, after, close = last_backward(
        sk, costs, parts, layout.recompute, split, buckets, None, swaps, ends[2]
    )
    walked[None] = (before, after + tied, done - sums[3 if split else 1])
    waits = tuple(k for _, k in both)
    spills = tuple(n for pair in lane for n in pair)
    kernels = sum(k for k, _ in buckets.values())  # once an iteration, in the last backward's chain
    chunk = (*sums, *walked[None], *waits, *spills, gathers, *computes, kernels, alone)
    opening = _opening(costs, parts, gathered)
    return chunk, reduction if close else None, opening  # the rounding decides: any phase's


def _buckets(
    sk: Skeleton,
    parts: Sequence[tuple[int, ...]],
    fills: Sequence[Any],
    layout: Layout,
    fabric: Fabric,
    members: Any,
    partial: int = 0,
) -> tuple[dict[tuple[int, int], tuple[int, list[int]]], dict[tuple[int, int], int], int]:
    """Per buffer, the (block, unit) whose last weight gradient readies its bucket (the chunk's
    first unit in it) and the bucket's kernels and reduction (ns); there the ns of its parameter
    gathers (after the step, or with --overlap-param-gather waited for by that unit's first
    forward: buckets.py's _buffer); and the ns of the kernels of buckets over one data rank,
    which run after the schedule (program.py, _alone_kernels). Under SP Megatron's family then
    all-reduces `partial` bytes of partial gradients over the tensor group after the chunk's
    first unit: a rank's first chunk all of its chunks' (_partials), its others none
    (_finalized)."""
    stage = reduction_stage(layout.framework, layout.zero)
    prepare = sk.prepare(layout.data_ranks) if sk.prepare is not None else None
    times, gathers = {}, {}
    for buffer in {b for f in fills for b in f}:  # each buffer's gathers waited for by its own unit
        mine = [{buffer: f[buffer]} for f in fills if buffer in f]
        made, gathers[buffer] = bucket_times(mine, stage, fabric, members, prepare)
        times.update(made)
    out: dict[tuple[int, int], tuple[int, list[int]]] = {}
    gathered: dict[tuple[int, int], int] = {}
    alone = 0
    for k, u in ((k, u) for k, p in enumerate(parts) for u in p):
        if not times:
            break
        buffer = sk.buffers[u]
        if sk.shards[u] is not None and buffer in times:
            kernels, issued = times.pop(buffer)
            gathered[k, u] = gathers[buffer]
            if issued:
                out[k, u] = (kernels, issued)
            else:
                alone += kernels
    _finalized(parts, fabric, members, out, partial)
    return out, gathered, alone


def _finalized(
    parts: Sequence[tuple[int, ...]],
    fabric: Fabric,
    members: Any,
    out: dict[tuple[int, int], tuple[int, list[int]]],
    partial: int,
) -> None:
    """Under SP, Megatron's all-reduce of `partial` bytes of partial gradients over the tensor
    group (_buckets, _partials), after the chunk's first unit's buckets."""
    ranks = members(_TENSOR)
    if partial and len(ranks) > 1:
        size = written(CommType.ALLREDUCE, partial, len(ranks), Consumer.ASTRA_SIM)
        reduced = fabric.collective_ns(CommType.ALLREDUCE, size, ranks)
        out.setdefault((0, parts[0][0]), (0, []))[1].append(reduced)


def _sized(
    sk: Skeleton,
    parts: Sequence[tuple[int, ...]],
    layout: Layout,
    fabric: Fabric,
    members: Any,
    partial: int = 0,
) -> tuple[dict[tuple[int, int], tuple[int, list[int]]], dict[tuple[int, int], int], int]:
    """--overlap-grad-reduce on the first pipeline stage's first chunk: each buffer's buckets of
    max(40,000,000, 1,000,000 x D) parameters filled in backward order, each closed by the
    parameter that brings it to the limit and reduced after its unit's weight gradient, the rest
    after the chunk's first unit in the buffer (buckets.py's _by_size, the one fill: Bucket.add;
    Megatron-Core core_r0.8.0, distributed_data_parallel.py, DistributedDataParallel.__init__ and
    param_and_grad_buffer.py, ParamAndGradBuffer). Per (block, unit) closing buckets: their
    kernels and collectives, as `_buckets` gives them, each bucket timed by
    reductions.bucket_times; there the ns of their parameter gathers; and no kernels alone
    (over one data rank they run in the backward, where each bucket readies)."""
    from modtrans.strategy.llm.buckets import BUCKET_PARAMS, BUCKET_PARAMS_PER_RANK, Bucket

    stage = reduction_stage(layout.framework, layout.zero)
    prepare = sk.prepare(layout.data_ranks) if sk.prepare is not None else None
    padded = stage[0] in (1, 2)
    filling: dict[frozenset[Purpose], Bucket] = {}
    first: dict[frozenset[Purpose], tuple[int, int]] = {}  # the chunk's first unit in each buffer
    closed: list[tuple[tuple[int, int], Bucket, frozenset[Purpose]]] = []
    for k, u in ((b, u) for b in reversed(range(len(parts))) for u in reversed(parts[b])):
        shard = sk.shards[u]
        if shard is None:
            continue
        buffer = sk.buffers[u]
        first[buffer] = (k, u)
        limit = max(BUCKET_PARAMS, BUCKET_PARAMS_PER_RANK * len(members(buffer)))
        for n in reversed(shard.elements):
            bucket = filling.setdefault(buffer, Bucket())
            bucket.add(n, shard, padded)
            if bucket.filled >= limit:
                closed.append(((k, u), filling.pop(buffer), buffer))
    closed += [(first[b], bucket, b) for b, bucket in filling.items() if bucket.filled]
    out: dict[tuple[int, int], tuple[int, list[int]]] = {}
    gathered: dict[tuple[int, int], int] = {}
    for key, bucket, buffer in closed:  # a unit closing two: both's kernels before either collective
        fill = {buffer: (bucket.filled, bucket.grad_bytes, bucket.param_bytes)}
        times, after_step = bucket_times([fill], stage, fabric, members, prepare)
        gathered[key] = gathered.get(key, 0) + after_step
        for kernels, collectives in times.values():
            was = out.get(key, (0, []))
            out[key] = (was[0] + kernels, was[1] + collectives)
    _finalized(parts, fabric, members, out, partial)
    return out, gathered, 0


def _opening(
    costs: Sequence[UnitCost], parts: Sequence[tuple[int, ...]], gathered: dict[tuple[int, int], int]
) -> Opening:
    """The chunk's forward links, and its gathers in forward order, each with the index of the
    link waiting for it: its unit's first compute (program.py's forward: the compute waits, the
    unit's collectives before it do not)."""
    links: list[Link] = []
    waits = []
    for k, p in enumerate(parts):
        for u in p:
            own = costs[u].forward
            if gathered.get((k, u)):
                at = next((i for i, (kind, _) in enumerate(own) if kind == CHAIN), len(own))
                waits.append((len(links) + at, gathered[k, u]))
            links += own
    return links, tuple(waits)


def _partials(sk: Skeleton, layout: Layout, cuts: Sequence[range]) -> list[int]:
    """Per chunk, the bytes of Megatron's one SP all-reduce it issues (tensor.finalized_grads:
    finalize_model_grads flattens the partial gradients of every chunk a rank holds into one
    all-reduce, on the rank's first chunk's first unit): a rank's first chunk the partial
    gradients (Skeleton.partial) of all its chunks, its other chunks none."""
    if not sk.partial:
        return [0] * len(cuts)
    own = [sum(sk.partial[u] for b in cut for u in sk.blocks[b]) for cut in cuts]
    out = [0] * len(cuts)
    for v in range(len(cuts)):
        stage = holders(layout.schedule, v, layout.pp)[0]
        held = sorted(_held(layout, stage))
        if held[0] == v:
            out[v] = sum(own[c] for c in held if c < len(cuts))
    return out


def _block(
    sk: Skeleton, costs: Sequence[UnitCost], block: tuple[int, ...], rerun: Recompute
) -> tuple[Any, ...]:
    """A block's forward, backward, input and weight gradients, compute, tails, whether its
    chains have nothing to overlap (then a chunk's are sums of its blocks'), the four chains'
    lane paths (chains.timed's K), and their compute alone."""
    four = _links(sk, costs, [block], rerun)
    (f, kf), (b, kb), (i, ki), (w, kw) = [chains.timed(chain) for chain in four]
    alone = tuple(sum(ns for kind, ns in chain if kind == CHAIN) for chain in four)
    links = [link for u in block for chain in (costs[u].forward, costs[u].backward) for link in chain]
    computed = sum(ns for kind, ns in links if kind == CHAIN)
    if rerun is Recompute.FULL:
        computed += sum(ns for kind, ns in rerun_links(sk, costs, block) if kind == CHAIN)
    pure = all(kind != OVERLAPPED for kind, _ in links)
    return f, b, i, w, computed, sum(costs[u].tail for u in block), pure, kf, kb, ki, kw, alone


def _links(
    sk: Skeleton, costs: Sequence[UnitCost], parts: Sequence[tuple[int, ...]], rerun: Recompute
) -> list[list[Link]]:
    """The four chains' links: forward, backward, input and weight gradients."""
    units = [u for p in parts for u in p]
    rerun_of = {p: rerun_links(sk, costs, p) if rerun is Recompute.FULL else [] for p in parts}

    def backward(attr: str) -> list[Link]:
        return [
            link
            for p in reversed(parts)
            for link in (*(rerun_of[p] if attr != "weight_grad" else ()), *_reversed(costs, p, attr))
        ]

    forward = [link for u in units for link in costs[u].forward]
    return [forward, backward("backward"), backward("input_grad"), backward("weight_grad")]


def _summed(blocks: Any, parts: Sequence[tuple[int, ...]]) -> list[tuple[int, int]]:
    """The four chains of blocks with nothing to overlap, from their blocks' (chains.then): the
    forward in order, the backward ones in reverse."""
    out = []
    for k in range(4):
        order = parts if k == 0 else list(reversed(parts))
        made = (0, chains.NEVER)
        for p in order:
            made = chains.then(made, (blocks[p][k], blocks[p][7 + k]))
        out.append(made)
    return out


def _reversed(costs: Sequence[UnitCost], block: tuple[int, ...], attr: str) -> list[Link]:
    return [link for u in reversed(block) for link in getattr(costs[u], attr)]


def _ties(sk: Skeleton, layout: Layout, chunks: int) -> list[tuple[int, int, int]]:
    """The stage pairs that swap a tied weight's gradient, and its bytes (build.py's _tied: the owner in
    the first chunk, the copy in the last, on different stages; DualPipe's stages hold both)."""
    if layout.pp == 1 or layout.schedule in _TWO:
        return []
    first, last = 0, (chunks - 1) % layout.pp
    return [(first, last, t.bytes) for t in sk.ties if first != last]


def _later(layout: Layout) -> bool:
    """The copy's swap leaves with finalize_model_grads' embedding reduction, after the rank's
    last backward, not with its chunk's delayed buckets (program.py's _launch(-1); Megatron-Core
    core_r0.8.0, finalize_model_grads.py, _allreduce_embedding_grads after the schedule)."""
    return layout.framework.chunk_reductions(layout.schedule, layout.overlap_grad_reduce) is Launch.DELAYED


def _swap_sends(
    sk: Skeleton, layout: Layout, fabric: Fabric, ends: tuple[bool, bool], later: bool = False
) -> dict[int, int]:
    """Per unit of a chunk holding a tied weight's owner or copy (`ends`), the ns of the send of
    its gradient to the other stage: program.py's _exchange, in the tail section after the unit's
    tail collectives, waiting for its last weight gradient only (on Megatron's 1F1B stages but
    the first, for the send too: lastback's after_send), so it takes the lane there
    (lastback.py): the copy's (the output layer, the last stage's first weight gradient) inside
    the last backward, where the backward's blocking collectives wait for it (gpt3-13b at T 2,
    P 4, D 4 on dgx-a100: the fast tier, sending it after the stage's end, 0.37 % under).
    `later`: the copy's send waits for the rank's last backward instead (_later: estimate adds
    it to what the stage launches there)."""
    if not any(ends) or (later and not ends[0]):
        return {}
    per_stage = layout.npus // layout.pp
    first, last = _ties(sk, layout, layout.chunks)[0][:2]
    out = {}
    for t in sk.ties:
        here, peer, unit = (first, last, t.owner) if ends[0] else (last, first, t.copy)
        out[unit] = fabric.send_ns(here * per_stage, peer * per_stage, t.bytes)
    return out


def _swapped(ran: list[pipeline.Stage], swaps: Sequence[tuple[int, int, int]]) -> list[pipeline.Stage]:
    """Each pair's stages finish when the other's send of its gradient has arrived (a send and a
    receive each, as program.py's _exchange posts them; the sends on the stages' lanes, after the
    units' last weight gradients: _swap_sends); the optimizer step waits for that receive. A send
    is taken to arrive by its stage's end: its last communication at most (the owner's, on the
    first stage, after its buckets: its last)."""
    out = list(ran)
    for a, b, _ in swaps:
        for s, peer in ((a, b), (b, a)):
            stage = out[s]
            finish = max(stage.finish, ran[peer].finish)
            after = stage.after + finish - stage.finish
            out[s] = pipeline.Stage(finish, stage.compute, stage.comm, after, finish)  # the step waits for it
    return out


def _update(sk: Skeleton, cuts: Sequence[range], held: Iterable[int], layout: Layout) -> int:
    """A stage's optimizer step: its chunks' units' update times (StageProgram._optimizer's sum),
    each over the share of its state a rank of `layout` keeps (build.sharded_update)."""
    if not sk.update:
        return 0
    from modtrans.strategy.llm.build import sharded_update

    ticks = [sharded_update(t, unit, layout) for t, unit in zip(sk.update, sk.units, strict=True)]
    return sum(ticks[u] for v in held for b in cuts[v] for u in sk.blocks[b])


def _stages(
    ran: Sequence[pipeline.Stage],
    chunks: Sequence[Chunk],
    sk: Skeleton,
    cuts: Sequence[range],
    layout: Layout,
    held: Any,
    finishing: tuple[Finish | None, Fabric],
    spoke: Sequence[Stream] | None = None,
) -> list[StageTime]:
    """Each stage's time: its pipeline walk (`ran`), then its optimizer step after its kernels
    and all-reduces before it (`finishing`: _finish, _finished), then its parameter gathers,
    exposed, or with --overlap-param-gather in the next forward beside it (`spoke`: _gathered,
    gathers.py)."""
    rows, starts, pieces = [], [], []
    for s, stage in enumerate(ran):
        pure = sum(chunks[v][4] * layout.micro_batches + chunks[v][25] for v in _held(layout, s))
        inside = stage.compute - pure  # the blocking collectives inside the steps
        step = _update(sk, cuts, _held(layout, s), layout)  # after everything else: wall and compute grow
        alone = sum(chunks[v][26] for v in _held(layout, s))  # buckets over one rank: program.py's tail
        gathers = sum(chunks[v][20] for v in _held(layout, s))  # then the parameters' gathers, exposed
        before = _finish(sk, cuts, _held(layout, s), layout, *finishing)  # the kernels and all-reduces
        reduces = sum(ns for _, ns, _ in before)  # exposed, as the gathers are
        spoken = 0
        if spoke is not None:  # in the next forward, beside it: communication, not exposed
            spoken, gathers = spoke[s].spoke, 0
        comm = stage.comm + inside + gathers + reduces + spoken
        exposed = stage.after + inside + gathers + reduces
        # the step waits for the last step's compute and the reductions, not for a send after them
        late = step or gathers or before or alone
        # (the kernels over one data rank first, after its last compute, beside the reductions it waits for)
        starts.append(max(stage.finish - stage.after + alone, stage.reduced) if late else stage.finish)
        pieces.append(before)
        computed = pure + alone + step + sum(k for k, _, _ in before)
        rows.append((stage.finish, computed, comm, exposed, step + gathers))
    ends = _finished(starts, pieces)
    stages = []
    for s, (finish, computed, comm, exposed, after) in enumerate(rows):
        total, reserved = (held[s].total, held[s].reserved) if s < len(held) else (None, None)
        wall = max(finish, ends[s] + after)
        stages.append(StageTime(s, wall / 1e9, computed / 1e9, comm / 1e9, exposed / 1e9, total, reserved))
    return stages


def _finish(
    sk: Skeleton,
    cuts: Sequence[range],
    held: Iterable[int],
    layout: Layout,
    finish: Finish | None,
    fabric: Fabric,
) -> list[tuple[int, int, bool]]:
    """A stage's kernels before its optimizer step, each with its all-reduce of one number after
    it (ns) and whether that spans other pipeline stages, as program.py's StageProgram._finish runs
    them (strategy/llm/clipping.py: Megatron's unscaling and gradient norm), over the stage's
    units, each reduced unit once a block it stands for."""
    if finish is None:
        return []
    mesh, out = layout.mesh(), []
    for c in finish(u for v in held for b in cuts[v] for u in sk.blocks[b]):
        ns, synced = 0, False
        if mesh.span(c.over) > 1:
            ranks = mesh.members(0, c.over)
            size = written(c.comm, c.bytes, len(ranks), Consumer.ASTRA_SIM)
            ns, synced = (
                fabric.collective_ns(c.comm, size, ranks),
                layout.pp > 1 and Purpose.PIPELINE in c.over,
            )
        out.append((c.kernel, ns, synced))
    return out


def _finished(starts: Sequence[int], pieces: Sequence[Sequence[tuple[int, int, bool]]]) -> list[int]:
    """When each stage's kernels and all-reduces before its step end, from `starts`: an all-reduce
    over the pipeline ranks (the model-parallel group, or every rank under the distributed
    optimizer) ends for every stage once the last of them reaches it (Mixtral at P 2 under the
    distributed optimizer: the first stage's step 66 ms after the second's, which waits for it)."""
    t = list(starts)
    for k in range(max((len(p) for p in pieces), default=0)):
        for s, p in enumerate(pieces):
            if k < len(p):
                t[s] += p[k][0]
        reached = max((t[s] for s, p in enumerate(pieces) if k < len(p) and p[k][2]), default=0)
        for s, p in enumerate(pieces):
            if k < len(p):
                t[s] = (max(t[s], reached) if p[k][2] else t[s]) + p[k][1]
    return t


def _held(layout: Layout, stage: int) -> set[int]:
    """The virtual stages a stage runs."""
    chunks = 2 if layout.schedule in _TWO else layout.vpp
    return {virtual_stage(layout.schedule, stage, layout.pp, c) for c in range(chunks)}
