"""Megatron-LM's gradient buffers and buckets: the data-parallel reduction per iteration of each
model chunk (`--framework megatron`; ZeRO 0, and 1/2 as the distributed optimizer).

Read from NVIDIA/Megatron-LM d98e8a6 (Megatron-Core):

    buffers     one contiguous gradient buffer per (parameter dtype, gradient dtype, expert-parallel
                or not) per model chunk (megatron/core/optimizer/param_layout.py, BufferKey): here
                the dense parameters' buffer over the data ranks and the experts' over the
                expert-data ranks. Experts are expert-parallel parameters only with EP > 1 or an
                expert tensor-parallel size other than T (extensions/transformer_engine.py:
                use_expert_pgs, then `param.allreduce = not use_expert_pgs`); otherwise they are in
                the dense buffer
    buckets     without --overlap-grad-reduce (DistributedDataParallelConfig.overlap_grad_reduce
                = False, the default) a buffer is one bucket (distributed_data_parallel.py,
                DistributedDataParallel.__init__: "Set bucket_size to infinity if overlap_grad_reduce
                is False"), reduced once every gradient of the chunk is complete, after the last
                micro-batch's backward (finalize_model_grads -> finish_grad_sync). With it, buckets
                of at least max(40,000,000, 1,000,000 x D) parameters, filled in backward order
                (the parameters reversed), each reduced as soon as its last gradient is complete;
                only the first pipeline stage's first model chunk is bucketed ("if
                disable_bucketing or pp_rank > 0: self.bucket_size = None")
    collective  ALLREDUCE of the bucket's gradients (ZeRO 0), or with the distributed optimizer a
                REDUCESCATTER of them and, after the optimizer step, an ALLGATHER of the bucket's
                updated parameters in their own dtype (distributed/param_and_grad_buffer.py,
                start_grad_sync and start_param_sync); the all-gathers after the optimizer
                step, synchronously, in forward order
                (megatron/core/optimizer/distrib_optimizer.py at core_r0.8.0,
                step_with_ready_grads -> _reset_metadata_and_sync_gather_all_model_params: "If not
                overlapping all-gather for parameters, launch synchronous all-gather"; Place.
                AFTER_STEP); overlap_param_gather is off by default
    param gather  with --overlap-param-gather, each bucket's all-gather in the next forward instead
                (megatron/core/optimizer/distrib_optimizer.py at core_r0.8.0): zero_grad dispatches
                the first bucket's ("launch all-gather for first accessed bucket here before forward
                compute is initiated"), the forward pre-hook of the first module holding one of a
                bucket's parameters waits for it and dispatches the next (_make_forward_pre_hook,
                _finish_param_sync_helper: "We can't pre-launch all-gathers for all buckets at
                once"), in forward order (_get_model_param_buffer_dp_views: the buckets reversed).
                So the first bucket's gather is exposed and each next one runs beside the forward
                of the bucket before it. Here each bucket's gather is waited for by the first unit
                (forward order) holding one of its parameters (Place.NEXT_FWD; program.py chains
                them); a separate experts' buffer is chained in forward order with the dense one
                (Megatron gathers buffer after buffer)
    padding     with the distributed optimizer each parameter starts on a multiple of 64 elements
                and each bucket ends on a multiple of lcm(D, 128) (param_layout.py,
                pad_param_start, pad_bucket_end), so every rank's shard is whole; without it none
    kernels     before it issues a bucket's collective the rank runs the framework's kernels over
                the bucket's gradients on its compute stream (frameworks.py, grad_sync_passes:
                Megatron-Core's Bucket.start_grad_sync at core_r0.8.0, the NaN check's norm and
                the 1/D scale, 12 B an fp32 element; Megatron-LM 2022's 1/D scale, 8 B), each a
                memory-bound kernel (cost/base.py, memory_ticks): Comm.kernel, which program.py
                runs after the unit's last weight gradient, before the unit's input gradient, the
                collective waiting for it (the fast tier: estimate/lastback.py): where
                Megatron's gradient hook calls start_grad_sync with --overlap-grad-reduce, inside
                the last micro-batch's backward of the chunk (the other stages' and chunks' one
                bucket too: bucket_size None, the hook once its last gradient is in). Without it
                Megatron runs them in finalize_model_grads after the whole schedule; here they
                stay where the bucket's collective is issued, after the chunk's last backward,
                at PP > 1 holding the stage's later steps. A unit closing
                two buckets runs both's kernels before either collective. At D = 1 the
                kernels still run, with no collective (frameworks.py, grad_sync_passes: Megatron-
                Core's NaN check, no scale by 1.0; Megatron-LM 2022's division by 1): the bucket's
                Comm is CommType.NONE, its kernels alone (Bucket.reduce). Not charged: the NaN
                check's `assert not norm.isnan()`, a one-element kernel and a host sync (the CPU
                waits for the norm, so the backward's next kernels are launched only once the
                GPU is done with the bucket's: the GPU's queue drains at each bucket, a launch's
                latency idle, not modelled)

NeMo's distributed_fused_adam (`--framework nemo`, frameworks.py; NVIDIA/NeMo r2.0.0rc1 over
NVIDIA/apex 810ffae): the same reduce-scatter and parameter all-gather (Apex's
_start_bucket_grad_sync, _start_bucket_param_sync), padded as the distributed optimizer's here
(Apex aligns its shards to 128 bytes), but with --overlap-grad-reduce its buckets are one
transformer layer each, on every pipeline stage and model chunk (_by_layer): megatron_gpt_model.py,
configure_optimizers builds distributed_adam_buckets one per layer of each chunk, the parameters
outside the layers (and, not modelled, the sequence-parallel norms' and a tied embedding's, whose
overlap it turns off) in the first layer's; Apex reduces a bucket once every gradient in it is
ready (its post-backward hook, outside no_sync: the last micro-batch's backward; the schedule's
grad_sync_func, try_grad_sync, after each chunk's last backward) and with overlap_param_sync
gathers a bucket when its first parameter is touched in the forward, launching the next
(_make_pre_forward_hook: _param_copy, then _try_start_bucket_param_sync), as Place.NEXT_FWD
chains them here.

PyTorch's ZeroRedundancyOptimizer (`--framework flash-attn --zero 1`: flash-attention 4a6eaa9f,
training/configs/optimizer/adamw-zero.yaml, its gpt3l/xl/2.7B runs; flash-attention's Dockerfile
builds on NGC 22.11, PyTorch 1.13), read from pytorch/pytorch
torch/distributed/optim/zero_redundancy_optimizer.py (013a31b7; unchanged in torch 2.13):
    gradients   DDP's all-reduce of every gradient, as at --zero 0 (the buffers unpadded)
    partition   _partition_parameters: whole parameters, greedily (zero_redundancy.py): rank 0's
                share of Adam's moments in its memory (memory.py); each rank's step counted as
                1/D of the state (memory.optimizer_shards). Not modelled: that the broadcasts wait
                for the busiest rank's step, rank 0's with the word embedding (1.34 x the mean for
                GPT3-2.7B at D = 8, 1.71 for 760M): some 2-3 ms longer
    broadcast   step -> _local_step (this rank's partition), then _sync_params: for each rank in
                turn, _broadcast_params_from_rank issues one dist.broadcast of each of its
                parameters (parameters_as_bucket_view False, the default the yaml keeps) from it,
                async, and waits for them all before step returns: after the step, before the
                next forward (overlap_with_ddp False); in the parameters' dtype, fp32 under
                Lightning's bf16 autocast (PARAM_FP32). ASTRA-sim 2.x runs no broadcast (Workload.
                cc issues a BROADCAST node as a replayed duration) and CommType.BROADCAST reads as
                no collective elsewhere (comm.py), so the broadcasts are written as the all-gather
                that brings every rank the same bytes: each receives every parameter but its own
                partition's, (D - 1) / D of them on the mean: one ALLGATHER of the buffer's fp32 parameters
                after the step (Place.AFTER_STEP). Left out: the ring broadcast's D / (D - 1)
                longer time on each link, and the latency of one broadcast per parameter tensor.
Sizes are this rank's tensor-parallel shard, gradients in the framework's reduction dtype
(frameworks.py). A weight tied across pipeline stages (the output layer's copy of the word
embedding) is in its own stage's buffer. Megatron also puts such a shared embedding (PP > 1 only:
language_module.py sets `shared_embedding` on neither copy at one stage) in a bucket of its own
under the distributed optimizer, bucketed or not (param_and_grad_buffer.py at core_v0.8.0,
_does_param_require_new_bucket); that split is not modelled: the same bytes, one more collective a
stage.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from modtrans.comm import CommType
from modtrans.plan.model import Place, Purpose
from modtrans.strategy.draft import Comm
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm.unit import Unit

Prepare = Callable[[int], int]
"""Ticks of the kernels a rank runs over a bucket's gradients (their bytes) before its collective
(the module's kernels; `preparing`)."""

BUCKET_PARAMS = 40_000_000  # distributed_data_parallel.py: max(40000000, 1000000 * dp_size)
BUCKET_PARAMS_PER_RANK = 1_000_000
PARAM_ALIGN = 64  # param_layout.pad_param_start
BUCKET_ALIGN = 128  # param_layout.bucket_end_divisor: lcm(D, 128)
# ZeroRedundancyOptimizer broadcasts param.data: fp32 parameters under Lightning's bf16 autocast
# (flash-attention's base.yaml, trainer.precision bf16: torch.autocast over the fp32 module)
PARAM_FP32 = 4


def stage(framework: Framework, zero: int) -> tuple[int, bool]:
    """The ZeRO stage the buffers are filled for, and whether each rank's updated parameters are
    broadcast after the step: ZeroRedundancyOptimizer's --zero 1 fills DDP's buffers (0)."""
    broadcast = framework.zero_broadcast and zero == 1
    return (0 if broadcast else zero), broadcast


def preparing(passes: Sequence[int], ticks: Callable[[int], int]) -> Prepare | None:
    """The framework's kernels before a bucket's collective (`passes`: frameworks.py,
    grad_sync_passes) timed by `ticks`, one memory-bound kernel of bytes -> ticks (cost/base.py,
    memory_ticks); None where it runs none. The one definition both tiers time them by."""
    if not passes:
        return None
    return lambda nbytes: sum(ticks(p * nbytes) for p in passes)


@dataclass(frozen=True, slots=True)
class Shard:
    """A unit's part of a buffer on this rank: its parameters' element counts (this rank's
    tensor-parallel shard) and the bytes of one gradient and of one parameter element (the unit's
    bytes over its elements, so the --params convention and --dtype-bytes carry over).
    The padding of a bucket's end is charged at the bucket's mean widths."""

    elements: tuple[int, ...]
    grad_width: float
    param_width: float


def apply(
    units: Sequence[Unit],
    chunks: Sequence[Sequence[int]],
    *,
    zero: int,
    ranks: Mapping[frozenset[Purpose], int],
    overlap: bool,
    buffer_of: Callable[[Unit], frozenset[Purpose]],
    tied: Mapping[int, int] | None = None,
    param_gather: bool = False,
    broadcast: bool = False,
    by_layer: bool = False,
    prepare: Prepare | None = None,
) -> None:
    """Attach each chunk's bucket collectives (chunks: unit indices per model chunk in forward
    order: chunk 0 is pipeline rank 0's first); `buffer_of`: the group a unit's gradients are
    reduced over, one buffer each; `ranks`: the data ranks each such group spans; `tied`: unit
    index -> the unit whose weight it holds a copy of on another stage; `param_gather`: the
    distributed optimizer's gathers in the next forward (--overlap-param-gather); `broadcast`:
    ZeroRedundancyOptimizer's parameters after the step (stage()), with `zero` 0; `by_layer`:
    NeMo's buckets with the overlap, one transformer layer each on every chunk (_by_layer);
    `prepare`: the kernels each bucket's gradients go through before its collective (preparing)."""
    assert zero in (0, 1, 2), "ZeRO-3 is per unit (data.py)"
    assert not broadcast or zero == 0, "ZeroRedundancyOptimizer fills DDP's buffers (stage())"
    tied = tied or {}
    for v, chunk in enumerate(chunks):
        bucketed = overlap and (v == 0 or by_layer)  # Megatron: pp rank 0's first model chunk
        for over, d in ranks.items():
            members = [i for i in chunk if buffer_of(units[i]) == over]
            if members and (d > 1 or prepare is not None):  # at D = 1 the kernels alone
                how = (zero, broadcast, by_layer and bucketed)
                _buffer(units, members, over, d, how, bucketed, tied, param_gather, prepare)


def _buffer(
    units: Sequence[Unit],
    members: Sequence[int],
    over: frozenset[Purpose],
    d: int,
    how: tuple[int, bool, bool],
    bucketed: bool,
    tied: Mapping[int, int],
    param_gather: bool,
    prepare: Prepare | None = None,
) -> None:
    """One buffer's buckets, filled in backward order (each unit's parameters reversed too); a
    bucket is closed by the parameter that brings it to the limit, and reduced after the weight
    gradient of that parameter's unit (`how`'s third: by layer instead, _by_layer). Its
    parameters' all-gather (the distributed optimizer's) follows the optimizer step, or with
    `param_gather` is waited for by the bucket's first unit in forward order, the last one filled
    into it. ZeroRedundancyOptimizer's broadcast (`how`'s second) follows the step as the
    distributed optimizer's all-gathers do."""
    zero, broadcast, by_layer = how
    limit = max(BUCKET_PARAMS, BUCKET_PARAMS_PER_RANK * d) if bucketed else math.inf
    padded = zero in (1, 2)
    divisor = math.lcm(d, BUCKET_ALIGN) if padded else None  # the distributed optimizer's bucket end
    reduce = (padded, divisor, broadcast, prepare, d == 1)
    if by_layer:
        gathers = _by_layer(units, members, over, reduce, tied)
    else:
        gathers = _by_size(units, members, over, reduce, tied, limit)
    last = members[0]  # the forward's first: the backward's last
    for first, comm in reversed(gathers):  # forward order: the backward's last bucket first
        if param_gather:
            units[first].attach(Place.NEXT_FWD, comm)
        else:
            units[last].attach(Place.AFTER_STEP, comm)


Reduce = tuple[bool, int | None, bool, Prepare | None, bool]
"""How a bucket is reduced: its parameters padded, its end's divisor, the broadcast, the kernels
before its collective, over one data rank (Bucket.reduce)."""


def _by_size(
    units: Sequence[Unit],
    members: Sequence[int],
    over: frozenset[Purpose],
    how: Reduce,
    tied: Mapping[int, int],
    limit: float,
) -> list[tuple[int, Comm]]:
    """Megatron's buckets of `limit` parameters, each reduced where the parameter that fills it
    is: (the bucket's first unit in forward order, its gather) in backward order."""
    padded = how[0]
    gathers: list[tuple[int, Comm]] = []
    bucket = Bucket()
    for i in reversed(members):
        shard = buffer_share(units[i], units[tied[i]] if i in tied else None)
        for n in reversed(shard.elements):
            bucket.add(n, shard, padded)
            if bucket.filled >= limit:
                gathers += [(i, c) for c in bucket.reduce(units[i], over, *how[1:])]
                bucket = Bucket()
    if bucket.filled:
        gathers += [(members[0], c) for c in bucket.reduce(units[members[0]], over, *how[1:])]
    return gathers


def _by_layer(
    units: Sequence[Unit],
    members: Sequence[int],
    over: frozenset[Purpose],
    how: Reduce,
    tied: Mapping[int, int],
) -> list[tuple[int, Comm]]:
    """NeMo's buckets (frameworks.py, layer_buckets): one per transformer layer, the units outside
    the layers in the chunk's first layer's (NeMo puts them in the rank's first chunk's first
    layer's: the same at one chunk a rank); each reduced after the weight gradient of its first
    unit in forward order, the last of it the backward reaches: (that unit, its gather) in
    backward order. Apex's bucket_cap_mb splits a layer's bucket into parts it syncs together:
    one collective here."""
    padded = how[0]
    first = next((b for i in members if (b := units[i].block) is not None), None)
    key = {i: first if units[i].block is None else units[i].block for i in members}
    closer: dict[int | None, int] = {}
    for i in members:
        closer.setdefault(key[i], i)
    filling: dict[int | None, Bucket] = {}
    gathers: list[tuple[int, Comm]] = []
    for i in reversed(members):
        bucket = filling.setdefault(key[i], Bucket())
        shard = buffer_share(units[i], units[tied[i]] if i in tied else None)
        for n in reversed(shard.elements):
            bucket.add(n, shard, padded)
        if closer[key[i]] == i and bucket.filled:
            gathers += [(i, c) for c in bucket.reduce(units[i], over, *how[1:])]
    return gathers


@dataclass
class Bucket:
    """A bucket being filled: its elements (alignment gaps included) and their bytes. The fast
    tier fills its buffers with it too (estimate/reductions.py), the one definition of the fill."""

    filled: int = 0
    grad_bytes: float = 0.0
    param_bytes: float = 0.0

    def add(self, elements: int, shard: Shard, padded: bool) -> None:
        """One parameter of `elements`, started on a multiple of PARAM_ALIGN where `padded`."""
        start = _pad(self.filled, PARAM_ALIGN) if padded else self.filled
        self.grad_bytes += (start - self.filled + elements) * shard.grad_width
        self.param_bytes += (start - self.filled + elements) * shard.param_width
        self.filled = start + elements

    def reduce(
        self,
        unit: Unit,
        over: frozenset[Purpose],
        divisor: int | None,
        broadcast: bool = False,
        prepare: Prepare | None = None,
        alone: bool = False,
    ) -> list[Comm]:
        """Attach the bucket's reduction to `unit`, after `prepare`'s kernels over its gradients
        (the whole bucket, padding included: Bucket.grad_data); the distributed optimizer's
        (`divisor`: its bucket-end padding) parameter all-gather, to issue after every reduction,
        is returned, or with `broadcast` ZeroRedundancyOptimizer's fp32 parameters as one (the
        module's docstring). `alone`: over one data rank, the kernels alone (a Comm of
        CommType.NONE carries them: program.py issues no collective for it), nothing gathered."""
        if divisor is None:  # no distributed optimizer: an all-reduce, nothing padded
            grads = round(self.grad_bytes)
            kernel = prepare(grads) if prepare is not None else 0
            unit.attach(Place.TAIL, Comm(CommType.NONE if alone else CommType.ALLREDUCE, grads, over, kernel))
            gathered = broadcast and not alone
            return [Comm(CommType.ALLGATHER, self.filled * PARAM_FP32, over)] if gathered else []
        end = _pad(self.filled, divisor)
        grads = round(self.grad_bytes * end / self.filled)
        kernel = prepare(grads) if prepare is not None else 0
        unit.attach(Place.TAIL, Comm(CommType.NONE if alone else CommType.REDUCESCATTER, grads, over, kernel))
        if alone:
            return []
        return [Comm(CommType.ALLGATHER, round(self.param_bytes * end / self.filled), over)]


def buffer_share(u: Unit, copy_of: Unit | None) -> Shard:
    """The unit's parameters as this rank holds them (a tied copy: the owner's, counted here)."""
    source = copy_of or u
    params = [p for p in source.x.owner.params if p.trainable and (p.counted or copy_of)]
    shares = tuple(source.held(p) for p in params if p.elements > 0)
    total = sum(shares)
    if not total:
        return Shard((), 0.0, 0.0)
    return Shard(shares, source.grad_bytes() / total, source.param_bytes() / total)


def _pad(value: int, divisor: int) -> int:
    """Round `value` up to a multiple of `divisor` (param_layout.pad_to_divisor)."""
    return -(-value // divisor) * divisor
