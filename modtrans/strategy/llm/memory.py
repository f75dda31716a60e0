"""Memory per rank of each pipeline stage: weights, gradients, optimizer state and the activations
of the micro-batches in flight. Megatron-LM's own estimate is
megatron/training/theoretical_memory_usage.py (NVIDIA/Megatron-LM d98e8a6); this follows it where
it applies and says where it differs.

    weights      this rank's share of the stage's parameters (tensor-parallel shards, a tied
                 copy on the last stage), in their dtype; 1/D of them under ZeRO-3
    gradients    the same elements: under Megatron an fp32 main gradient for a 16-bit parameter
                 (MAIN_GRAD), under DeepSpeed the model's dtype (the ZeRO paper's 2 B:
                 Rajbhandari et al. 2020, section 3.1); ZeRO-2 and 3 keep 1/D of them
                 (Megatron's distributed optimizer the whole buffer)
    optimizer    Adam: an fp32 master copy unless the weights are fp32 (4 B), and two fp32 moments
                 (8 B) per parameter; 1/D of it with the distributed optimizer or ZeRO-1/2/3
                 (Megatron's num_bytes_per_parameter: 18 B, or 6 + 12 / D; ZeRO's 2 + 2 + 12);
                 flash-attn's ZeroRedundancyOptimizer (--zero 1) partitions Adam's moments only:
                 its fp32 parameters are the model's, whole on every rank (buckets.py), 6 + 4 + 8 x
                 the share of the parameters it gives the first rank, whole parameters by its
                 greedy rule (zero_redundancy.py: more than 1/D where the word embedding lands);
                 NeMo's distributed_fused_adam (--framework nemo: _nemo) its grad buffer whole in
                 the dtype it reduces in and, 1/D each, the reduced shard of it, 16-bit remainders
                 of the fp32 parameters instead of a master copy and Adam's moments: 2 + 2 +
                 (2 + 2 + 8) / D at its bf16 reduction, against Megatron's 2 + 4 + 12 / D
    FSDP         in mixed precision (a 16-bit model: torchtitan, llm-foundry, fsdp) the fp32
                 parameter is the optimizer's own: 4 B of it, 4 of fp32 gradient and Adam's 8, each
                 / D sharded (_fsdp_mixed), / (D / R) under HSDP (a shard group's: hsdp.py); the
                 16-bit copies computed with are held beside them: every parameter's from the
                 forward to the backward under SHARD_GRAD_OP and NO_SHARD, the root's and one
                 block's under FULL_SHARD (gathered)
    activations  per transformer block and micro-batch, what it stores by the attention kernel
                 that runs (--attention: flash keeps no s x s tensor, eager Korthikanti et al.
                 2022's 5 a s^2 b), the model's MLP (GeLU, gated, experts) and dropout
                 (activations.py), each tensor at w bytes an element, the activations' dtype's
                 (Korthikanti's 16-bit 2); full recomputation keeps each block's input, w sbh (/ t
                 under SP); torchtitan's selective, its op policy's (selective.py). The stage's
                 blocks x the micro-batches in flight: 1F1B min(P - p, GA) on stage p, GPipe GA,
                 interleaved P (1 + (P - 1) / (P V)) (Megatron's penalty) on stage 0, scaled by
                 (P - p) / P after it. Stage 0 adds a vision tower's blocks (as its blocks), the
                 embedding's input ids (int64) and dropout mask (8 sb + sbh per micro-batch in
                 flight, / t under SP), the last stage
                 the final norm's and output layer's inputs and the loss's fp32 logits, 2 w sbh +
                 4 sbV, / t: Megatron's 4 sbh (1 + V / h) at 16 bits (for P = 1 Megatron counts
                 them; on the last of P stages they are there too), and 2 B a logit more for the
                 16-bit logits Megatron's loss holds beside its fp32 copy; torchtitan's loss holds
                 12 bytes a logit at its peak (frameworks.py, logit_bytes)

A keyword preset (DATA, MODEL, the hybrids, HYBRID_TRANSFORMER) is one stage and one micro-batch
of the IR's batch: its one rank's memory is this model's at T = its widest layer shard (the
transformer keywords are Megatron-LM's tensor parallelism without SP: tensor.py), with Megatron's
gradient and optimizer convention, no ZeRO, the flash kernel; FWD_IN_BCKWD's recomputed segments
count as full recomputation (each block keeps its input). No layout option at all is DATA on one
rank: the one-rank layout's memory. A model whose blocks the activation model does not know (an
ONNX CNN, an exported transformer: activations.dims is None) holds what PyTorch's autograd saves
for its backward (strategy/saved.py), a split layer's output side 1/T, its input whole (a
row-parallel layer's 1/T); FWD_IN_BCKWD's segments each keep their input, one segment's saved
tensors held at a time. Null (the metadata's `memory`) only where a saved tensor's size is unknown.
Under a layout option such a model holds the same count (Held.saved, saved_per_sample), each
stage its units' share times the micro-batches in flight, recomputation not applied to it (an
upper bound under --recompute).

Beside the peak (StageMemory.cached, its `reserved` the sum): the blocks PyTorch's caching
allocator is known to keep reserved there, freed before it and too small for its requests
(loss_cached: torchtitan's bf16 logits), and the pool of FSDP2's all-gather stream (gather_pool:
torchtitan's). Not counted: framework buffers, the CUDA context, other fragmentation, FSDP1's
unshard stream and the reduce-scatter stream's pools.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from modtrans.cost.fp8 import te_linear
from modtrans.ir.document import ModelIR
from modtrans.plan.model import Recompute, Schedule, StageMemory
from modtrans.strategy import saved
from modtrans.strategy.draft import LayerDraft
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm import activations, fp8
from modtrans.strategy.llm.activations import Dims
from modtrans.strategy.llm.options import Layout
from modtrans.strategy.llm.stages import block_of
from modtrans.strategy.llm.unit import Unit
from modtrans.strategy.roles import LayerRole, Split
from modtrans.strategy.schedule import holders

ADAM = 8  # two fp32 moments per parameter
MASTER = 4  # the fp32 copy of a lower-precision parameter
# Megatron's main gradient of a 16-bit parameter is fp32, bf16 and fp16 alike: the gradient buffer
# in fp32 (bf16: frameworks.py), or for fp16 the optimizer's fp32 copy of each main parameter's
# gradient (megatron/core/optimizer/optimizer.py, Float16OptimizerWithFloat16Params.
# _copy_model_grads_to_main_grads: main_param.grad = model_param.main_grad.float()). With it a
# parameter costs 2 + 4 + 4 + 8 = 18 B, theoretical_memory_usage.py's num_bytes_per_parameter, and
# Korthikanti et al. 2022 figure 1 measures that for fp16: 45.5625 GiB = 18 B x 2.718e9, the 48
# 22B layers' 12 h^2 / 8 parameters (Calculon's llm-validation transcribes the figure's values).
MAIN_GRAD = 4
# NeMo's distributed_fused_adam (Apex DistributedFusedAdam at 810ffae, distributed_fused_adam.py)
# over bf16 parameters and fp32 state keeps the low 16 bits of each fp32 parameter beside the bf16
# one instead of an fp32 master copy: StateBucket.param_remainders_shard, torch.int16, set by NeMo's
# setup_optimization (store_param_remainders True: frameworks.py, nemo)
NEMO_REMAINDER = 2


@dataclass(frozen=True, slots=True)
class Held:
    """What a rank holds of one unit, as the memory model reads it: its elements, the bytes of
    its weights and gradients (this rank's shares), whether it is an expert's (its gradients
    reduced over the expert-data ranks), its block, and whether its parameters are bf16 (DeepSpeed
    trains those at ZeRO 0 with BF16_Optimizer: bf16_optimizer)."""

    elements: int
    weights: int
    grads: int
    expert: bool
    block: int | None
    bf16: bool = False  # its trainable parameters bf16 (bf16_optimizer: DeepSpeed's BF16_Optimizer)
    linear: int = 0  # elements of its Transformer Engine linears' parameters (--precision fp8: fp8.py)
    saved: float = 0.0  # its share of what autograd saves, a sample, where the block formulas do not apply


def held(units: Sequence[Unit], kept: Mapping[str, float] | None = None) -> list[Held]:
    """Each unit's Held, in order (a sweep keeps them for every layout of the same split);
    `kept`: saved_per_sample's, for a model the block formulas do not know."""
    return [_held(u, _elements(u), kept) for u in units]


def _held(u: Unit, elements: int, kept: Mapping[str, float] | None) -> Held:
    linear = elements if te_linear(u.x.owner) else 0
    expert = u.role is LayerRole.EXPERT
    part = saved.Part(u.x.owner, u.x.group.folded, u.x.ways, u.x.split is Split.K)
    mine = part.bytes(kept) if kept else 0.0
    return Held(elements, u.param_bytes(), u.grad_bytes(), expert, u.block, bf16_params(u), linear, mine)


def saved_per_sample(ir: ModelIR, d: Dims | None, micro_batch: int | None = None) -> dict[str, float] | None:
    """What autograd saves for each layer in one forward of `ir` (saved.by_layer), over the
    `micro_batch` per_stage multiplies it by again: the layout's, so that a stage holds the IR's
    own batch (the plan's IR is one micro-batch, `-b 32` without --micro-batch included); None,
    the IR's batch (the fast tier reads the IR at the layout's micro-batch). For a model the block
    formulas do not know (`d` None: an ONNX graph of a transformer, a CNN: no heads in its IR);
    None where they do, or where a saved tensor's size is unknown. Counted op by op, every tensor
    kept until its backward (recomputation not applied: an upper bound under one)."""
    if d is not None:
        return None
    kept = saved.by_layer(ir)
    if kept is None:
        return None
    batch = micro_batch or ir.provenance.batch or 1
    return {name: size / batch for name, size in kept.items()}


def bf16_params(u: Unit) -> bool:
    """The unit's trainable parameters are bf16."""
    return any(p.dtype == "bfloat16" for p in u.x.owner.params if p.counted and p.trainable)


def bf16_optimizer(layout: Layout, bf16: bool) -> bool:
    """DeepSpeed trains bf16 parameters at ZeRO 0 with BF16_Optimizer (engine.py: bf16 without
    ZeRO), "its own zero stage 1 equivalent" (bigscience-workshop/bigscience, train/tr11-176B-ml/
    tr11-176B-ml.slurm, ZERO_STAGE=0's comment): its fp32 master copy and Adam's moments in
    partitions of 1/D (bf16_optimizer.py, BF16_Optimizer.__init__: fp32_groups_flat_partition over
    real_dp_process_group; update_lp_params copies this rank's partition back), and an fp32
    gradient buffer of every parameter, not sharded (fp32_groups_gradients_flat; the tr11 README:
    "It doesn't shard the static fp32 buffer it reuses, which consumes `4 bytes * params` of
    additional memory"), beside the bf16 gradients autograd writes before it accumulates them
    (update_hp_grads)."""
    return bf16 and layout.zero == 0 and layout.framework.family is Framework.DEEPSPEED


def per_stage(
    units: Sequence[Held],
    chunks: Sequence[Sequence[int]],
    layout: Layout,
    d: Dims | None,
    tied: dict[int, int],
    expert_data: int,
    first: float | None = None,
) -> tuple[StageMemory, ...]:
    """Each stage's first rank's memory (of the chunks it holds: schedule.holders); `expert_data`:
    the ranks an expert's gradients and optimizer state are spread over (Megatron's expert data
    parallelism); `first`: the fraction of the parameters whose optimizer state that rank keeps
    where the optimizer gives out whole parameters (zero_redundancy.first_share; None: 1/D).
    `units`: held() of the units (a sweep makes it once for many layouts)."""
    stages = layout.pp
    held_by = [holders(layout.schedule, v, stages) for v in range(len(chunks))]
    out = []
    for p in range(stages):
        mine = [units[tied.get(i, i)] for v, chunk in enumerate(chunks) if p in held_by[v] for i in chunk]
        ranks = [expert_data if u.expert else layout.shard_ranks for u in mine]
        parts = [unit_state(u, layout, r, first) for u, r in zip(mine, ranks, strict=True)]
        elements, weights, grads, optimizer = (sum(x[k] for x in parts) for k in range(4))
        weights += gathered(mine, layout)
        if layout.fp8:  # the FP8 weight copies (fp8.py)
            weights += fp8.weight_copies(sum(u.linear for u in mine))
        blocks = sorted(
            {
                b
                for v, chunk in enumerate(chunks)
                if p in held_by[v]
                for i in chunk
                if (b := units[i].block) is not None
            }
        )
        ends = (p in held_by[0], p in held_by[-1])  # holds the embedding; the output layer (DualPipe: both)
        by_chunk = [
            list(dict.fromkeys(b for i in chunk if (b := units[i].block) is not None))
            for v, chunk in enumerate(chunks)
            if p in held_by[v]
        ]
        if d is not None:
            activations = activation_bytes(layout, d, p, blocks, ends, by_chunk)
        else:  # op by op (Held.saved): the stage's own units, tied ones included, in flight
            own = sum(units[i].saved for v, chunk in enumerate(chunks) if p in held_by[v] for i in chunk)
            activations = own * layout.micro_batch * _in_flight(layout, p) / layout.sequence_shards
        cached = loss_cached(layout, d) if d is not None and ends[1] else 0
        cached += gather_pool(mine, layout)
        sizes = (elements, weights, grads, optimizer, activations, cached)
        out.append(StageMemory(*(int(x) for x in sizes)))
    return tuple(out)


def of_preset(
    ir: ModelIR, layers: Sequence[LayerDraft], recompute: Mapping[int, Sequence[int]]
) -> tuple[StageMemory, ...]:
    """A keyword preset's rank (the module's docstring), or () where a saved tensor's size is
    unknown. `recompute`: FWD_IN_BCKWD's segments (recompute.py: a segment's last unit -> the units
    whose forward reruns first), empty without recomputation."""
    batch = ir.provenance.batch or 1
    d = activations.dims(ir, batch)
    t = max((x.ways for x in layers), default=1)
    layout = Layout(
        npus=t, tp=t, micro_batch=batch, recompute=Recompute.FULL if recompute else Recompute.NONE
    )
    units = [Unit(x, block_of(x.group.owner)) for x in layers]
    memory = per_stage(held(units), [list(range(len(units)))], layout, d, {}, 1)
    if d is not None:
        return memory
    kept = saved.by_layer(ir)  # a model the block formulas do not know: what autograd saves
    if kept is None:
        return ()
    parts = [saved.Part(x.owner, x.group.folded, x.ways, x.split is Split.K) for x in layers]
    return tuple(replace(m, activations=int(saved.peak(parts, kept, recompute))) for m in memory)


def unit_state(
    u: Held | Unit, layout: Layout, ranks: int, first: float | None = None
) -> tuple[float, float, float, float]:
    """A unit's elements, and the bytes of its weights, gradients and optimizer state on a rank
    whose data-parallel group (for its gradients) has `ranks` ranks (a Unit read through held());
    `first`: per_stage's. Linear in the unit's elements and bytes: the fast tier counts a repeated
    block's once."""
    if isinstance(u, Unit):
        u = held([u])[0]
    elements = u.elements
    weights, grads = float(u.weights), float(u.grads)
    width = weights / elements if elements else 2
    family = layout.framework.family
    if family is Framework.FSDP and width < 4:
        return (elements, *_fsdp_mixed(elements, weights, layout, ranks))
    if layout.framework is Framework.NEMO:
        return (elements, weights, *_nemo(u, width, optimizer_shards(layout, ranks)))
    if family is Framework.MEGATRON and width < 4:
        # the gradient buffer in the dtype it is reduced in (distributed_data_parallel.py at
        # core_r0.14.0: `grad_dtype = torch.float if grad_reduce_in_fp32 else param.dtype`): fp32
        # for bf16 parameters, their own under --grad-reduce-in-bf16 (--dtype-bytes 2: the bytes
        # the unit reduces, u.grads); fp16 parameters' fp32 main gradients (MAIN_GRAD)
        grads = float(u.grads) if u.bf16 else float(elements * MAIN_GRAD)
    elif bf16_optimizer(layout, u.bf16):
        grads = weights + float(elements * MAIN_GRAD)  # the bf16 gradients and the fp32 buffer
    elif family is Framework.DEEPSPEED:
        grads = weights  # its gradient partitions in the model's dtype, as it sends them
    master = float(elements * MASTER) if width < 4 else 0.0
    if layout.framework.zero_broadcast:  # ZeroRedundancyOptimizer: the fp32 parameters whole
        shards = optimizer_shards(layout, ranks, u.bf16)
        share = first if first is not None else 1 / shards  # first: --zero 1's
        optimizer = master + float(elements * ADAM) * share
    else:
        optimizer = (master + elements * ADAM) / optimizer_shards(layout, ranks, u.bf16)
    if layout.zero == 3 or (layout.zero == 2 and family is not Framework.MEGATRON):
        grads /= ranks  # Megatron's distributed optimizer keeps the whole gradient buffer
    if layout.zero == 3:
        weights /= ranks
    return elements, weights, grads, optimizer


def _nemo(u: Held, width: float, shards: int) -> tuple[float, float]:
    """The gradient and optimizer bytes of a unit under NeMo's distributed_fused_adam (Apex
    DistributedFusedAdam 810ffae, as NeMo r2.0.0rc1's megatron_base_model.setup_optimization builds
    it: frameworks.py, nemo). Gradients: the whole grad buffer in grad_sync_dtype (_init_grad_buffer:
    torch.zeros([buffer_size], dtype=grad_sync_dtype), the unit's gradient bytes as it sends them)
    and the reduce-scattered shard of it each bucket keeps until the step (_start_bucket_grad_sync:
    sync_grads_shard, torch.empty([bucket_size // distributed_size], dtype=grads_bucket.dtype);
    _finish_bucket_grad_sync keeps it as grads_shard; zero_grad frees it), which the caching
    allocator keeps reserved. Optimizer, 1/D each (StateBucket.__init__): the parameter's
    remainder bits (int16) for bf16 parameters, an fp32 copy for fp16 ones (store_params, "else"),
    none for fp32 ones (the state's dtype is the model's: store_params False), and Adam's
    exp_avg_shard and exp_avg_sq_shard in the state dtype, fp32."""
    grads = float(u.grads) * (1 + 1 / shards if shards > 1 else 1)  # one rank: the bucket itself
    kept = NEMO_REMAINDER if u.bf16 else MASTER if width < 4 else 0
    return grads, float(u.elements * (kept + ADAM)) / shards


def _fsdp_mixed(elements: int, low: float, layout: Layout, ranks: int) -> tuple[float, float, float]:
    """The weights, gradients and optimizer bytes of a unit FSDP trains in mixed precision (`low`:
    its parameters' bytes in the dtype it computes in). The sharded parameter is the fp32 original,
    the optimizer's own (no master copy beside it); its sharded gradient is cast back to that dtype
    (FSDP1 torch/distributed/fsdp/_runtime_utils.py, _cast_grad_to_param_dtype; FSDP2
    _fully_shard/_fsdp_collectives.py, foreach_reduce's orig_dtype); SHARD_GRAD_OP and NO_SHARD
    keep the low-precision copy of every parameter from the forward to the backward (FULL_SHARD's
    gathered units: gathered())."""
    shards = ranks if layout.zero >= 2 else 1
    fp32 = float(elements * MASTER) / shards
    return fp32 + (low if layout.zero in (0, 2) else 0.0), fp32, float(elements * ADAM) / shards


def gathered(units: Sequence[Held], layout: Layout) -> float:
    """FSDP's FULL_SHARD working set at the loss's backward, the peak, beside the shards: the
    root's parameters (those outside the blocks), which neither FSDP reshards after the forward
    (FSDP1 torch/distributed/fsdp/_runtime_utils.py, _post_forward_reshard: "Do not free the root's
    parameters in the post-forward"; FSDP2 _fully_shard/_fsdp_state.py, FSDPState._lazy_init: "For
    the root, do not reshard after forward"), and one block's, gathered for the backward
    (torchtitan's last block, never resharded: parallelize.py, apply_fsdp, reshard_after_forward
    for layer_id < n - 1; both FSDPs' backward prefetch), each in the dtype it computes in. Under
    torchtitan with P > 1 every unit of the stage: apply_fsdp reshards none after its forward
    (`if pp_enabled: reshard_after_forward = False`: fsdp.unresharded), and a stage's first
    backward waits for every block's forward of the micro-batches in flight."""
    if layout.framework.family is not Framework.FSDP or layout.zero != 3:
        return 0.0
    if layout.framework.titan_wrapping and layout.pp > 1:
        return float(sum(u.weights for u in units))
    return _root_and_block(units)


def gather_pool(units: Sequence[Held], layout: Layout) -> float:
    """What the caching allocator keeps reserved for FSDP2's all-gathers beside the peak
    (StageMemory.cached): their flat outputs, allocated on the all-gather copy-in stream
    (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py, foreach_all_gather: `with
    device_handle.stream(all_gather_copy_in_stream): ... all_gather_comm.allocate(...)`), whose
    pool no default-stream request can use, while the parameters they are copied out into
    (gathered()) are the default stream's. Under implicit forward prefetching a unit's output is
    kept until the next unit's copy-out (_fsdp_param_group.py, wait_for_unshard: `Defer free to
    allow for overlap of this copy-out with next all-gather`), so the pool holds two at once: the
    root's and the first block's, the largest pair; torchtitan's FSDP2 (apply_fsdp: fully_shard of
    each block, then of the model). Held to the allocator's policy replaying that order
    (tests/test_memory_fsdp_pool.py). FSDP1's flat parameters live in its unshard stream's pool
    themselves (llm-foundry's, a bare --framework fsdp): not counted."""
    if layout.framework is not Framework.TORCHTITAN or layout.zero != 3:
        return 0.0
    return _root_and_block(units)


def _root_and_block(units: Sequence[Held]) -> float:
    """The parameters outside the blocks and the largest block's, in the dtype they compute in."""
    blocks: dict[int, int] = {}
    for u in units:
        if u.block is not None:
            blocks[u.block] = blocks.get(u.block, 0) + u.weights
    return float(sum(u.weights for u in units if u.block is None) + max(blocks.values(), default=0))


def optimizer_shards(layout: Layout, ranks: int, bf16: bool = False) -> int:
    """The ranks one unit's optimizer state (and so its optimizer step) is split over: its
    gradients' data-parallel `ranks` with ZeRO-1/2/3, FSDP, Megatron's distributed optimizer or
    DeepSpeed's BF16_Optimizer (`bf16`: the unit's parameters are; each rank keeps and updates 1/D
    of the fp32 state), else 1."""
    return ranks if layout.zero >= 1 or bf16_optimizer(layout, bf16) else 1


def _elements(u: Unit) -> int:
    return sum(u.held(p) for p in u.x.owner.params if p.trainable and p.counted)


def activation_bytes(
    layout: Layout,
    d: Dims,
    stage: int,
    blocks: Sequence[int],
    ends: tuple[bool, bool],
    chunks: Sequence[Sequence[int]] | None = None,
) -> float:
    """The activations one rank of `stage` holds: its `blocks` (indices in the model; `chunks`:
    the same by model chunk, where full recomputation places its segments, one chunk where not
    given) times the micro-batches in flight, and the embedding's and output layer's where `ends`
    says it holds them (first, last); the module's docstring gives the formulas. The fast tier
    calls it too."""
    t, sp = layout.tp, layout.sp
    sbh = d.s * d.b * d.h
    stored, working = _blocks_stored(layout, d, blocks, chunks)
    total = stored * _in_flight(layout, stage)
    if ends[0]:  # the embedding's input ids and dropout output; sequence-sharded under SP
        total += (8 * d.s * d.b + sbh) * min(layout.pp, layout.micro_batches) / (t if sp else 1)
        tower = activations.tower(d, t, sp, layout.recompute, layout.attention, layout.expert_tp)
        total += tower * _in_flight(layout, stage)  # a vision tower's blocks
    # the final norm's and output layer's inputs (Korthikanti's 4 sbh: two 16-bit tensors) and the
    # loss's logits, freed before the last block's backward reruns its segment
    head = (2 * d.width * sbh + layout.framework.logit_bytes(d.width) * d.s * d.b * d.v) / t if ends[1] else 0
    total += max(head, working)
    return total / layout.sequence_shards  # context parallelism: each rank holds s / C of each tensor


def _blocks_stored(
    layout: Layout, d: Dims, blocks: Sequence[int], chunks: Sequence[Sequence[int]] | None
) -> tuple[float, float]:
    """Per micro-batch, what the blocks keep for their backward: each checkpointed segment its
    first block's input (activations.layer under full recomputation), the other blocks their terms
    (strategy/llm/checkpoints.py places the segments); and beside it, once, the largest segment's
    working set while its backward runs: its blocks' terms without recomputation, less the input
    already kept (Korthikanti et al. 2022, section 5: a checkpointed layer's activations are
    recomputed, and held, one layer at a time)."""
    megatron = layout.framework.family is Framework.MEGATRON  # its Mamba mixer's norm, out_proj (mixers.py)
    ops, etp = layout.framework.op_recompute, layout.expert_tp

    t, sp = layout.tp, layout.sp
    made: dict[tuple[object, Recompute], float] = {}

    def one(mode: Recompute, block: int) -> float:  # blocks of one kind store alike: one layer() each
        key = (d.kind(block), mode)
        if key not in made:
            made[key] = activations.layer(
                d, block, t, sp, mode, layout.attention, etp, ops, megatron, layout.compiled, layout.modules
            )
            if layout.fp8:  # Transformer Engine's FP8 saved inputs (fp8.py)
                made[key] += fp8.saved(d, block, t, sp, mode, layout.attention)
        return made[key]

    segments = [s for chunk in (chunks or [blocks]) for s in layout.recompute_segments(chunk)]
    checkpointed = {b for segment in segments for b in segment}
    plain = Recompute.NONE if layout.recompute is Recompute.FULL else layout.recompute
    stored = sum(one(plain, b) for b in blocks if b not in checkpointed)
    stored += sum(one(Recompute.FULL, s[0]) for s in segments)
    rerun = (sum(one(Recompute.NONE, b) for b in s) - one(Recompute.FULL, s[0]) for s in segments)
    return stored, max(rerun, default=0.0)


def loss_cached(layout: Layout, d: Dims) -> float:
    """The blocks the caching allocator keeps reserved at the loss's peak, on the rank that holds
    the output layer (frameworks.logit_cached), its share of the logits."""
    return layout.framework.logit_cached(d.width) * d.s * d.b * d.v / layout.tp / layout.sequence_shards


def _in_flight(layout: Layout, stage: int) -> float:
    """Micro-batches whose activations a rank of `stage` holds at once (Narayanan et al. 2021)."""
    p, ga = layout.pp, layout.micro_batches
    if layout.schedule is Schedule.GPIPE:
        return ga
    if layout.schedule is Schedule.ZB_H1:  # 1F1B's P - s, and the s deferred weight gradients' inputs
        return min(p, ga)
    if layout.schedule is Schedule.INTERLEAVED:
        return p * (1 + (p - 1) / (p * layout.vpp)) * (p - stage) / p
    if layout.schedule in (Schedule.DUALPIPE, Schedule.DUALPIPE_V):
        # P + 1 micro-batches of one of its stages (deepseek-ai/DualPipe README's table, with P its
        # stages: DualPipe's P, DualPipeV's 2P); the rank's blocks are its two stages'
        return (layout.chunks + 1) / 2
    return min(p - stage, ga)


def fits(memory: Sequence[StageMemory], capacity: int) -> list[str]:
    """A line per stage whose rank needs more than the device holds (its profile's memory_bytes:
    what CUDA gives the allocator, cost/devices.json)."""
    return [
        f"pipeline stage {p}: {m.total / 2**30:,.1f} GiB per rank (weights {m.weights / 2**30:.1f}, "
        f"gradients {m.gradients / 2**30:.1f}, optimizer {m.optimizer / 2**30:.1f}, activations "
        f"{m.activations / 2**30:.1f}) is more than the device's {capacity / 2**30:,.1f} GiB"
        for p, m in enumerate(memory)
        if m.total > capacity
    ]
