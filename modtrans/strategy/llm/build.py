"""The LLM layout applied: units, techniques, stages and one program per pipeline stage -> Plan
(the modules this package's docstring lists, composed; the program is strategy/program.py's)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from modtrans.comm import CommType
from modtrans.cost import CostModel
from modtrans.cost.base import by_shape, memory_ticks
from modtrans.cost.gemm import foreach_update_bytes, update_bytes, zeroing_bytes
from modtrans.ir.document import Layer as IRLayer
from modtrans.ir.document import ModelIR, needs_input_grad
from modtrans.plan.model import (
    Chunk,
    LayerInfo,
    LayoutFacts,
    Op,
    Place,
    Plan,
    Purpose,
    Recompute,
    Schedule,
)
from modtrans.plan.programs import Programs
from modtrans.strategy.draft import Comm, LayerDraft
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.groups import Group, Params, folds, group
from modtrans.strategy.llm import (
    activations,
    buckets,
    clipping,
    data,
    deepspeed,
    expert,
    fp8,
    fsdp,
    gqa,
    maingrad,
    memory,
    modules,
    projections,
    tensor,
    userbuffers,
    zero_redundancy,
)
from modtrans.strategy.llm.degrees import dense_data
from modtrans.strategy.llm.options import Layout, LayoutError, ordered
from modtrans.strategy.llm.selective import op_reruns
from modtrans.strategy.llm.stages import block_of, blocks, partition
from modtrans.strategy.llm.unit import Unit
from modtrans.strategy.program import (
    Costed,
    Exchange,
    Pipeline,
    Rerun,
    StageProgram,
    costed,
    in_attention_core,
    model_share,
)
from modtrans.strategy.roles import LayerRole
from modtrans.strategy.schedule import holders
from modtrans.strategy.share import Folded, rank_share, replicated, row_bias, shape
from modtrans.strategy.tensors import Ios


def _boundaries(
    units: Sequence[Unit],
    chunks: Sequence[Sequence[Costed]],
    unit_chunks: Sequence[Sequence[int]],
    layout: Layout,
    ir: ModelIR,
) -> list[int]:
    """The bytes each chunk hands the next: its last unit's output, and what skips past it."""
    ways = boundary_ways(layout)
    boundary = [boundary_bytes(units[chunk[-1].index], ways) for chunk in chunks]
    return [b + s for b, s in zip(boundary, _skips(units, unit_chunks, ways, ir), strict=True)]


def plan(
    ir: ModelIR,
    cost: CostModel,
    layout: Layout,
    *,
    params: Params,
    dtype_bytes: int | None,
    folded: Folded = Folded.MEGATRON,
    pipelined: bool | None = None,
) -> Plan:
    """`pipelined`: whether the layout the plan stands for runs P > 1 (None: the layout's own; the
    fast tier's one-stage stand-in passes its layout's: rank_units)."""
    groups = _grouped(ir, params, layout, dtype_bytes)
    units = rank_units(ir, layout, params, dtype_bytes, groups, pipelined=pipelined)
    runs = _costed(units, ir, cost, layout, folded)
    grouped = blocks([u.block for u in units])
    weights = [sum(runs[i].times.step for i in b) for b in grouped]
    cuts = partition(weights, layout.chunks, layout.stages, even=any(u.block is not None for u in units))
    runs, tied = _tied(units, runs, cuts, grouped, layout)
    unit_chunks = [[i for b in cut for i in grouped[b]] for cut in cuts]
    runs = _buckets(units, runs, unit_chunks, layout, tied, cost)
    if layout.framework.family is Framework.MEGATRON:  # after the buckets, as finalize_model_grads
        tensor.finalized_grads(units, layout.tp, layout.sp, _ranks(unit_chunks, layout))
    runs = _mirrored(units, runs, layout)
    chunks = [[runs[i] for b in cut for i in grouped[b]] for cut in cuts]
    boundary = _boundaries(units, chunks, unit_chunks, layout, ir)
    pipeline = _pipeline(layout)
    rerun = _rerun(units, chunks, layout, ir)
    chunks = fsdp.regathered(chunks, rerun, cost) if layout.framework.fsdp2 else chunks
    mesh = layout.mesh()
    finish = clipping.finishing(units, layout, cost, lambda u: update_shards(u, layout))

    def program(stage: int, outline: bool) -> tuple[Op, ...]:  # ending with the optimizer step
        return StageProgram(
            stage,
            chunks,
            mesh,
            pipeline=pipeline,
            rerun=rerun,
            boundary_bytes=boundary,
            outline=outline,
            finish=finish,
        ).build()

    programs = Programs(layout.pp, program)  # each stage's built when a writer reads it
    pipeline_axis = mesh.index(Purpose.PIPELINE)
    program_of = mesh.along(pipeline_axis)
    infos = _infos(runs, _finishing_kernels(finish, _ranks(unit_chunks, layout)))
    dims = activations.dims(ir, layout.micro_batch, layout.capacity_factor)
    facts = LayoutFacts(
        sequence_parallel=layout.sp,
        zero=layout.zero,
        micro_batch=layout.micro_batch,
        global_batch=layout.batch,
        micro_batches=layout.micro_batches,
        schedule=layout.schedule,
        virtual_stages=layout.vpp,
        **_recomputation(layout),
        boundary_bytes=boundary[0] if len(boundary) > 1 else 0,
        chunks=tuple(Chunk(c[0].name, c[-1].name, len(cut)) for c, cut in zip(chunks, cuts, strict=True)),
        memory=memory.per_stage(
            memory.held(units, memory.saved_per_sample(ir, dims, layout.micro_batch)),
            unit_chunks,
            layout,
            dims,
            tied,
            layout.expert_gradient_ranks,
            zero_redundancy.first_share((p for u in units for p in zero_redundancy.parameters(u)), layout),
        ),
    )
    return Plan(mesh, infos, programs, program_of, layout=facts, folds=folds(groups))


def _infos(runs: Sequence[Costed], finishing: Mapping[int, int]) -> tuple[LayerInfo, ...]:
    """What the text formats write of each unit beside its program: its optimizer step, its bucket
    kernels (draft.Comm.kernel) and the first unit's input gradient, written in the text as the
    keywords write it, run by nobody; `finishing`: per unit the step is charged to (a rank's
    first), the kernels before it (clipping.py), with the bucket kernels."""
    return tuple(
        LayerInfo(
            c.name,
            c.times.update,
            unexecuted_input_grad=c.times.input_grad if c.first else 0,
            kernels=sum(x.kernel for x in c.comms.get(Place.TAIL, ())) + finishing.get(c.index, 0),
        )
        for c in runs
    )


def _finishing_kernels(finish: clipping.Finish | None, ranks: Sequence[Sequence[int]]) -> dict[int, int]:
    """Per pipeline rank's first unit (its step's: StageProgram._optimizer), the ticks of the
    kernels `finish` runs before that rank's step."""
    if finish is None:
        return {}
    return {min(units): sum(c.kernel for c in finish(units)) for units in ranks if units}


def _recomputation(layout: Layout) -> dict[str, Any]:
    """What the plan reports of the layout's recomputation (LayoutFacts' recompute fields)."""
    return {
        "recompute": layout.recompute,
        "recompute_fraction": layout.recompute_fraction,
        "recompute_method": layout.recompute_method,
        "recompute_num_layers": layout.recompute_num_layers,
        "recompute_modules": layout.recompute_modules,
    }


def _pipeline(layout: Layout) -> Pipeline:
    """The schedule and the framework's conventions for its transfers (strategy/frameworks.py):
    Megatron-LM 2022's blocking sends, each tensor rank's 1/T of a boundary without SP, and the
    interleaved schedule's forward send after the next backward."""
    convention = layout.framework
    gather = layout.tp if convention.scatter_gather and not layout.sp else 1
    return Pipeline(
        layout.pp,
        layout.vpp,
        layout.micro_batches,
        layout.schedule,
        convention.blocking_p2p,
        gather,
        exchange_after_backward=convention.blocking_p2p and layout.schedule is Schedule.INTERLEAVED,
        reduce_after_send=convention.reduces_after_sends(layout.schedule),
        chunk_reduction=convention.chunk_reductions(layout.schedule, layout.overlap_grad_reduce),
    )


def _grouped(ir: ModelIR, params: Params, layout: Layout, dtype_bytes: int | None) -> list[Group]:
    """The IR's groups, their gradients in the framework's reduction dtypes (frameworks.py:
    gradient_width, embedding_grad_width)."""
    framework = layout.framework
    return group(ir, params, framework.gradient_width(dtype_bytes), framework.embedding_grad_width)


def rank_units(
    ir: ModelIR,
    layout: Layout,
    params: Params,
    dtype_bytes: int | None,
    groups: Sequence[Group] | None = None,
    *,
    pipelined: bool | None = None,
) -> list[Unit]:
    """The workload layers one rank runs, with every technique's collectives attached (LayoutError
    where the model refuses the layout: its heads, experts, sequence); `groups`: the IR's, grouped
    already (strategy/groups.py); `pipelined`: P > 1 for FSDP2's units under torchtitan
    (fsdp.unresharded; None: layout.pp > 1)."""
    t = layout.tp
    grouped = _grouped(ir, params, layout, dtype_bytes) if groups is None else groups
    units = [Unit(LayerDraft(g), block_of(g.owner)) for g in grouped]
    if not units:
        raise LayoutError("the model has no layer with parameters to distribute")
    for d in ordered():  # each degree's refusals of the model (context.py's: its sequence)
        if d.refuses is not None:
            d.refuses(ir, layout)
    lacking = modules.lacks(ir, layout.recompute_modules or ())  # Megatron's --recompute-modules
    if lacking is not None:
        raise LayoutError(lacking)
    tensor.apply(
        units, ir, t, layout.sp, tokens=layout.sequence_shards, overlap=layout.tp_comm_overlap, fp8=layout.fp8
    )
    for d in ordered():  # each degree's collectives on the tensor shards (context.py's)
        if d.attach is not None:
            d.attach(units, layout)
    units = expert.apply(units, ir, layout)
    if layout.framework.family is Framework.FSDP:
        fsdp.apply(
            units,
            layout.zero,
            layout.gradient_ranks,
            layout.expert_gradient_ranks,
            layout.framework,
            layout.dp_replicate,
            layout.pp > 1 if pipelined is None else pipelined,
        )
    else:
        apply_data = deepspeed.apply if layout.framework is Framework.DEEPSPEED else data.apply
        apply_data(units, layout.zero, layout.gradient_ranks, layout.expert_gradient_ranks)
    if layout.framework.family is not Framework.MEGATRON:  # Megatron's: one a rank (plan, _ranks)
        tensor.replicated_grads(units, t, layout.sp)
    for index, u in enumerate(units):
        u.index = index
    return units


def _ranks(chunks: Sequence[Sequence[int]], layout: Layout) -> list[list[int]]:
    """Per pipeline rank, the units of the chunks it holds (schedule.holders: DualPipe's two) in
    forward order; ranks holding the same chunks (DualPipe's mirrored pair) listed once."""
    held: dict[int, list[int]] = {}
    for v, chunk in enumerate(chunks):
        for stage in holders(layout.schedule, v, layout.pp):
            held.setdefault(stage, []).extend(chunk)
    return list({tuple(units): list(units) for units in held.values() if units}.values())


def _buckets(
    units: Sequence[Unit],
    runs: list[Costed],
    chunks: Sequence[Sequence[int]],
    layout: Layout,
    tied: dict[int, int],
    cost: CostModel,
) -> list[Costed]:
    """Megatron-LM's data-parallel reduction by buffer and bucket, per model chunk (buckets.py),
    each bucket's collective after the framework's kernels over its gradients (sync_kernels)."""
    if layout.framework.family is not Framework.MEGATRON or layout.zero == 3:
        return runs
    separate = layout.ep > 1 or layout.expert_tp != layout.tp  # experts in a buffer of their own

    def buffer_of(u: Unit) -> frozenset[Purpose]:
        return u.grads_over if u.role is LayerRole.EXPERT and separate else dense_data()

    ranks = {
        buffer_of(u): layout.gradient_ranks if buffer_of(u) == dense_data() else layout.expert_gradient_ranks
        for u in units
    }
    zero, broadcast = buckets.stage(layout.framework, layout.zero)
    buckets.apply(
        units,
        chunks,
        zero=zero,
        ranks=ranks,
        overlap=layout.overlap_grad_reduce,
        buffer_of=buffer_of,
        tied=tied,
        param_gather=layout.overlap_param_gather,
        broadcast=broadcast,
        by_layer=layout.framework.layer_buckets,
        prepare=sync_kernels(units, layout.framework, cost, layout.data_ranks),
    )
    # each run holds its unit's comms dict already (_costed), which apply() extends in place
    return [
        run if run.comms is (c := units[run.index].x.comms) else dataclasses.replace(run, comms=c)
        for run in runs
    ]


def sync_kernels(
    units: Sequence[Unit], framework: Framework, cost: CostModel, data_ranks: int
) -> buckets.Prepare | None:
    """The kernels the framework runs over a bucket's gradients before its collective
    (frameworks.py, grad_sync_passes: Megatron's NaN check is off for fp16 parameters, its scale
    at D = `data_ranks` 1), each a memory-bound kernel on `cost` (cost/base.py, memory_ticks);
    both tiers' (estimate/fast.py)."""
    fp16 = any(p.dtype == "float16" for u in units for p in u.x.owner.params if p.trainable)
    passes = framework.grad_sync_passes(fp16, data_ranks)
    return buckets.preparing(passes, lambda nbytes: memory_ticks(cost, nbytes))


def _costed(
    units: Sequence[Unit], ir: ModelIR, cost: CostModel, layout: Layout, folded: Folded
) -> list[Costed]:
    """Each unit's share costed; under a shape-only cost model (cost/base.py by_shape) once per
    distinct shape, so the units of identical blocks (80 of Llama-3-70B's) share one costing."""
    inputs = frozenset(ir.provenance.input_shapes)
    sequence, shards = layout.tp if layout.sp else 1, layout.sequence_shards
    shaped = by_shape(cost)
    selective = layout.recompute is Recompute.SELECTIVE
    reruns = None
    if selective and layout.framework.op_recompute:
        reruns = op_reruns(ir, fused_attention=layout.attention != "eager")
    elif selective and layout.recompute_modules is not None:  # else the attention core alone
        reruns = modules.reruns(ir, layout.recompute_modules, in_attention_core)
    made: dict[tuple[object, ...], Costed] = {}
    runs = []
    tensors = Ios([u.x for u in units], inputs)  # made when a program reads them; no outline does

    def share_of(u: Unit) -> IRLayer:  # the layer a rank computes of the unit, as costed below
        return rank_share(u.x, folded, tokens=u.scale / shards, sequence=sequence, experts=u.holds).owner

    finish = _finisher(units, cost, layout, folded, share_of)

    for u in units:
        g = u.x.group
        key = _shape(u, inputs, reruns) if shaped else None
        known = None if key is None else made.get(key)
        if known is not None:
            name, comms = g.owner.name, u.x.comms
            run = Costed(
                u.index, name, known.times, known.flops, tensors, comms, known.core, model=known.model
            )
            runs.append(finish(run, u))
            continue
        share = rank_share(u.x, folded, tokens=u.scale / shards, sequence=sequence, experts=u.holds)
        run = costed(u.index, share, u.x.comms, tensors, cost, inputs, core=selective, reruns=reruns)
        whole, bias = replicated(u.x, folded, layout.sp), row_bias(u.x, u.scale / shards, layout.sp)
        run = model_share(run, share, whole, layout.tp, inputs, bias)
        run = _foreach_update(run, share.owner, cost) if layout.framework.foreach_adamw else run
        run = _clipped_apart(run, share.members, cost) if layout.framework.clips_apart else run
        run = _sharded_update(run, u, layout)  # its shards follow from its role, part of the key
        if key is not None:
            made[key] = run
        runs.append(finish(run, u))
    return runs


def _finisher(
    units: Sequence[Unit],
    cost: CostModel,
    layout: Layout,
    folded: Folded,
    share_of: Callable[[Unit], IRLayer],
) -> Callable[[Costed, Unit], Costed]:
    """What a unit's run adds beyond its shape's costing, by the layout's techniques and the
    framework's conventions: --tp-comm-overlap's collectives in its GEMMs, --precision fp8's casts,
    autograd's sum of separate projections' input gradients (projections.py), torchtitan's
    repeat_kv (gqa.py; neither under --compile: Inductor's kernels), FSDP2's copies (fsdp.py),
    Megatron's add of an embedding's gradient into its main_grad (maingrad.py)."""
    fusing = _fusing(units, cost, layout, folded) if layout.tp_comm_overlap else None
    casting = fp8.casting(units, cost, layout, share_of) if layout.fp8 else None
    copying = fsdp.copies(cost) if layout.framework.fsdp2 else None
    eager, framework = not layout.compiled, layout.framework
    summing = projections.summing(units, cost, share_of) if framework.separate_projections and eager else None
    rerun = layout.recompute is Recompute.SELECTIVE and framework.op_recompute
    kv = gqa.copying(cost, share_of, rerun) if framework.repeats_kv and eager else None
    hooked = maingrad.adding(cost, share_of) if framework.main_grad_hook else None

    def finish(run: Costed, u: Unit) -> Costed:
        run = run if fusing is None or not u.fused else fusing(run, u)
        run = run if casting is None else casting(run, u)
        run = run if summing is None else summing(run, u)
        run = run if kv is None else kv(run, u)
        run = run if hooked is None else hooked(run, u)
        return run if copying is None else copying(run, u)

    return finish


def _fusing(
    units: Sequence[Unit], cost: CostModel, layout: Layout, folded: Folded
) -> Callable[[Costed, Unit], Costed]:
    """--tp-comm-overlap: a unit's run with its userbuffers collectives in its GEMMs' time
    (userbuffers.py), each unit's GEMM shard by name for the peers that share one."""
    net = userbuffers.fabric(cost, layout.tp)

    def gemm(u: Unit) -> IRLayer:  # the unit's GEMM as _costed shares it (its context-parallel tokens)
        return rank_share(u.x, folded, tokens=u.scale / layout.sequence_shards, experts=u.holds).owner

    shards = {u.name: gemm(u) for u in units if u.role is LayerRole.COLUMN}

    def fusing(run: Costed, u: Unit) -> Costed:
        owner = shards.get(u.name) or gemm(u)
        times = userbuffers.fuse(run.times, u.fused, shards, owner, cost, net, layout.tp)
        return dataclasses.replace(run, times=times)

    return fusing


def update_shards(u: Unit, layout: Layout) -> int:
    """The ranks a unit's optimizer state is split over, each updating its share (memory.
    optimizer_shards: D with ZeRO, FSDP, the distributed optimizer or DeepSpeed's BF16_Optimizer,
    the expert-data ranks for an expert's), as the memory counts that state."""
    ranks = layout.expert_gradient_ranks if u.role is LayerRole.EXPERT else layout.shard_ranks
    return memory.optimizer_shards(layout, ranks, memory.bf16_params(u))


def _foreach_update(run: Costed, layer: IRLayer, cost: CostModel) -> Costed:
    """The unit's optimizer step as torch's foreach AdamW and gradient clipping run it over this
    rank's share `layer` (frameworks.py, foreach_adamw; cost/gemm.py, foreach_update_bytes), at the
    device's streaming rate where the cost model has one (the gpu model's memory_seconds)."""
    seconds = getattr(cost, "memory_seconds", None)
    if seconds is None or not run.times.update:
        return run
    update = cost.clock.from_seconds(seconds(foreach_update_bytes(layer)))
    return dataclasses.replace(run, times=dataclasses.replace(run.times, update=update))


def _clipped_apart(run: Costed, members: Sequence[IRLayer], cost: CostModel) -> Costed:
    """The unit's optimizer step without the unscaling and the gradient norm, which Megatron's
    frameworks run as kernels of their own before it (clipping.py; cost/gemm.py, update_bytes with
    clipping False), its layers' summed as group_times sums them, at the device's streaming rate
    where the cost model has one (the gpu and roofline models' memory_seconds, by which they time
    update_bytes)."""
    seconds = getattr(cost, "memory_seconds", None)
    if seconds is None or not run.times.update:
        return run
    ticks = sum(cost.clock.from_seconds(seconds(update_bytes(m, clipping=False))) for m in members)
    return dataclasses.replace(run, times=dataclasses.replace(run.times, update=ticks))


def _sharded_update(run: Costed, u: Unit, layout: Layout) -> Costed:
    """The unit's optimizer step over the share of its state this rank keeps (sharded_update)."""
    update = sharded_update(run.times.update, u, layout)
    if update == run.times.update:
        return run
    return dataclasses.replace(run, times=dataclasses.replace(run.times, update=update))


def sharded_update(update: int, u: Unit, layout: Layout) -> int:
    """A rank's part of the unit's optimizer step of `update` ticks over its whole state: the share
    of the state it keeps (update_shards), but under Megatron's distributed optimizer the zeroing
    of the gradients (cost/gemm.py, zeroing_bytes: its part of the step's bytes) whole, which
    zero_grad_buffer runs over the whole buffer on every rank each iteration (megatron/core/
    distributed/param_and_grad_buffer.py at core_r0.8.0, ParamAndGradBuffer.reset:
    `self.grad_data.zero_()`; Megatron-LM fc7f4f0, megatron/model/distributed.py, MemoryBuffer.zero).
    Both tiers' (estimate/fast.py)."""
    shards = update_shards(u, layout)
    if shards == 1 or not update:
        return update
    whole = 0
    if layout.framework.distributed_optimizer and layout.zero in (1, 2):
        members = u.x.group.members
        moved = sum(update_bytes(m, clipping=not layout.framework.clips_apart) for m in members)
        whole = update * sum(zeroing_bytes(m) for m in members) // moved if moved else 0
    return -(-(update - whole) // shards) + whole


def _shape(u: Unit, inputs: frozenset[str], reruns: frozenset[str] | None = None) -> tuple[object, ...]:
    """What a unit's costing reads (rank_share's division, its layers' shapes, whether its owner
    needs an input gradient, which of them recomputation reruns), without names."""
    x, g = u.x, u.x.group
    return (
        x.ways,
        x.split,
        x.role,
        u.scale,
        u.holds,
        needs_input_grad(g.owner, inputs),
        tuple(shape(m) for m in g.members),
        tuple(m.name in reruns for m in g.members) if reruns is not None else (),
    )


def _rerun(units: Sequence[Unit], chunks: Sequence[Sequence[Costed]], layout: Layout, ir: ModelIR) -> Rerun:
    """Full recomputation: each checkpointed segment's forwards again when the backward reaches
    its last unit (Layout.recompute_segments, per model chunk: every block alone, Megatron's
    uniform or block placement, fms-fsdp's spread); layers outside the blocks, the embedding and
    the head, are not recomputed. Selective: each unit's rerun layers (_costed), and the modules
    Megatron-Core checkpoints whole (modules.reforwarded)."""
    mode = layout.recompute
    if mode is Recompute.SELECTIVE:
        return Rerun(_reforwards(units, chunks, modules.reforwarded(ir, layout.modules)), selective=True)
    if mode is not Recompute.FULL:
        return Rerun()
    forwards: dict[int, tuple[int, ...]] = {}
    for chunk in chunks:
        members: dict[int, list[int]] = {}
        for c in chunk:
            block = units[c.index].block
            if block is not None:
                members.setdefault(block, []).append(c.index)
        for segment in layout.recompute_segments(list(members)):
            indices = tuple(i for b in segment for i in members[b])
            forwards[indices[-1]] = indices
    # FSDP's hooks wrap the checkpointed block (torchtitan: apply_ac before apply_fsdp; FSDP1's
    # apply_activation_checkpointing inside its units): the rerun forward uses the parameters the
    # backward's pre-hook gathered, FSDP2's _pre_forward skipping its unshard in PRE_BACKWARD
    return Rerun(forwards, regathers=layout.framework.family is not Framework.FSDP)


def _reforwards(
    units: Sequence[Unit], chunks: Sequence[Sequence[Costed]], owners: Mapping[int, frozenset[str]]
) -> dict[int, tuple[int, ...]]:
    """Per block, the units owned by `owners`' layers (a module Megatron-Core checkpoints whole:
    modules.reforwarded), run forward again, in order, when the backward reaches the last of them."""
    forwards: dict[int, tuple[int, ...]] = {}
    for chunk in chunks:
        found: dict[int, list[int]] = {}
        for c in chunk:
            u = units[c.index]
            if u.block is not None and u.x.group.owner.name in owners.get(u.block, ()):
                found.setdefault(u.block, []).append(c.index)
        for indices in found.values():
            forwards[indices[-1]] = tuple(indices)
    return forwards


def _tied(
    units: Sequence[Unit],
    runs: list[Costed],
    cuts: Sequence[range],
    grouped: Sequence[Sequence[int]],
    layout: Layout,
) -> tuple[list[Costed], dict[int, int]]:
    """A weight tied across pipeline stages (the word embedding on the first, its copy in the
    output layer on the last): Megatron-LM reduces the copy's gradient over the data ranks with
    its stage's buffer, then all-reduces the two over the embedding group, once per iteration
    after the data-parallel reduction (megatron/core/distributed/finalize_model_grads.py,
    _allreduce_word_embedding_grads: the main grad, vocabulary / T x hidden in the gradient
    dtype). The two-rank all-reduce is a swap of the gradient between the stages (a send and a
    receive each way: the bytes a ring of two moves), as ranks in between take no part. T5's table
    has two copies, the decoder's embedding at the split and a tied head on the last stage
    (Megatron's embedding group is then the first, split and last ranks: parallel_state.py,
    initialize_model_parallel, embedding_ranks): each copy is swapped with the table, the owner
    taking part in both. Under DualPipe a copy's mirror swaps with the table's mirror. Returns
    the copies (unit -> the unit it copies): Megatron's buffers hold them (buckets.py)."""
    tied: dict[int, int] = {}
    if layout.pp == 1:
        return runs, tied
    stage = {
        i: holders(layout.schedule, v, layout.pp)
        for v, cut in enumerate(cuts)
        for b in cut
        for i in grouped[b]
    }
    pairs = tied_pairs(units, stage)
    tag = 2 * (layout.micro_batches * layout.chunks + 1)  # after every micro-batch's tags (program.py)
    for u, owner in ((units[i], units[j]) for i, j in pairs):
        size = owner.grad_bytes()
        tied[u.index] = owner.index
        if layout.gradient_ranks > 1 and layout.framework.family is not Framework.MEGATRON:  # its own
            u.attach(Place.TAIL, Comm(CommType.ALLREDUCE, size, dense_data()))
            runs[u.index] = dataclasses.replace(runs[u.index], comms=u.x.comms)
        offset = stage[u.index][0] - stage[owner.index][0]
        for index, x in (
            (u.index, Exchange(-offset, size, tag)),
            (owner.index, Exchange(offset, size, tag)),
        ):
            runs[index] = dataclasses.replace(runs[index], exchanges=(*runs[index].exchanges, x))
        tag += 2
    return runs, tied


def tied_pairs(units: Sequence[Unit], stage: Mapping[int, tuple[int, ...]]) -> list[tuple[int, int]]:
    """(unit, the unit whose weight it copies) for each parameter tied to one on another stage, in
    order, by the stages holding each unit (schedule.holders): a pipeline's tied output layer.
    dict() of it is the copies memory.per_stage counts once (`tied`)."""
    by_name = {u.name: u for u in units}
    return [
        (u.index, owner.index)
        for u in units
        for p in u.x.owner.params
        if (owner := by_name.get(p.shared_with or "")) is not None and stage[owner.index] != stage[u.index]
    ]


def _mirrored(units: Sequence[Unit], runs: list[Costed], layout: Layout) -> list[Costed]:
    """DualPipe: every stage's weights live on stage s and on its mirror P - 1 - s, each copy
    computing the gradients of its half of the micro-batches; the two are summed once per
    iteration, after the data-parallel reduction: an all-reduce of two ranks, a swap (Exchange).
    deepseek-ai/DualPipe, examples/example_dualpipe.py sums them (all-gather, then each rank adds
    its mirror's: `p0.grad += p1all[pp_size - 1 - rank]`); DeepSeek-V3 Technical Report, section
    3.2.1: "DualPipe requires keeping two copies of the model parameters"."""
    if layout.schedule is not Schedule.DUALPIPE:
        return runs
    base = 2 * (layout.micro_batches * layout.chunks + 1) + 2 * len(units)  # after the tied weights' tags
    out = []
    for run in runs:
        size = units[run.index].grad_bytes()
        swap = (Exchange(None, size, base + 2 * run.index),) if size else ()
        out.append(dataclasses.replace(run, exchanges=(*run.exchanges, *swap)))
    return out


def _skips(units: Sequence[Unit], chunks: Sequence[Sequence[int]], ways: int, ir: ModelIR) -> list[int]:
    """Per chunk, the bytes of an encoder-decoder's skip connection crossing its end beside the
    chunk's own output: T5's encoder output (encoder.final_layer_norm's), which every decoder
    block's cross-attention reads. Megatron-LM sends it as a second tensor from every stage past
    the split, and its gradient back (megatron/core/pipeline_parallel/schedules.py,
    get_tensor_shapes: "Send two tensors if model is T5 and rank is in decoder stage";
    backward_step adds the skip connection's gradient), sequence-sharded with the decoder's under
    SP. The relative position biases are computed again on each stage, not sent. Decoder-only
    models have none."""
    skips = [0] * len(chunks)
    if "decoder_input_ids" not in ir.provenance.input_shapes:
        return skips
    chunk_of = {m.name: v for v, chunk in enumerate(chunks) for i in chunk for m in units[i].x.group.members}
    encoder = next((x for x in ir.layers if x.name == "encoder.final_layer_norm"), None)
    if encoder is None or encoder.name not in chunk_of:
        return skips
    output = encoder.outputs[0]
    readers = [chunk_of[x.name] for x in ir.layers if x.name in chunk_of and output in x.inputs]
    last_read = max(readers, default=-1)
    for v in range(chunk_of[encoder.name], last_read):
        if chunks[v] and units[chunks[v][-1]].x.group.members[-1].outputs[:1] != (output,):
            skips[v] = -(-(output.bytes or 0) // ways)
    return skips


def boundary_ways(layout: Layout) -> int:
    """The shards a pipeline boundary's activation is split into, each rank sending one: the
    tensor ranks under SP times the degrees that split the sequence (C: degrees.py's `sequence`)."""
    return (layout.tp if layout.sp else 1) * layout.sequence_shards


def boundary_bytes(u: Unit, ways: int) -> int:
    """Bytes of the activation a chunk ending with `u` hands on (its last layer's output), one of
    `ways` sequence shards (T under SP, times C): what a pipeline boundary sends."""
    last = u.x.group.members[-1]
    size = last.outputs[0].bytes or 0 if last.outputs else 0
    return -(-size // ways)
