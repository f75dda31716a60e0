"""Data parallelism as PyTorch FSDP runs it (`--framework fsdp`), per iteration of GA micro-batches
over the data ranks. Read from pytorch/pytorch: torch/distributed/fsdp/_runtime_utils.py (FSDP1,
3ade90a6) and _fully_shard / _fsdp_collectives.py (FSDP2, 0257dd1c / 010ae4a8):

    --zero 3  FULL_SHARD: per micro-batch, ALLGATHER of a unit's parameters before its forward and
              again before its backward (resharded after the forward), REDUCESCATTER of its
              gradients after its weight gradient (_post_backward_hook / foreach_reduce)
    --zero 2  SHARD_GRAD_OP: the parameters gathered once per micro-batch, before the forward, and
              kept for the backward; the gradients reduce-scattered per micro-batch
    --zero 0  NO_SHARD: an ALLREDUCE of the gradients per micro-batch
    HSDP      --dp-replicate R (hsdp.py: HYBRID_SHARD, _HYBRID_SHARD_ZERO2, FSDP2 over a 2-D mesh):
              the gathers and reduce-scatters above over the shard group (the D / R ranks of the
              "dp" axis), each reduce-scatter followed by an ALLREDUCE of the rank's shard of it,
              1 / (D / R) of the gradient, over the R replicas (_reduce_grad's
              dist.all_reduce(new_sharded_grad, group=state._inter_node_pg); foreach_reduce's
              dist.all_reduce(reduce_output, group=all_reduce_group))
Gradients in the parameters' dtype (MixedPrecision.reduce_dtype defaults to param_dtype;
_flat_param.py), as the model holds them here; `--framework torchtitan` and `llm-foundry` reduce
them in fp32 (their mixed-precision policies' reduce_dtype: strategy/frameworks.py), 4 bytes per
element.
Every micro-batch reduces: gradient accumulation
under `no_sync` (FSDP2: set_requires_gradient_sync(False)) reduces at the last one only, which a
training script opts into; it is not modelled. Also left out: the padding of each flat parameter
to a multiple of D (of D / R under HSDP). ZeRO-1 has no FSDP counterpart: Layout.check refuses it.

torchtitan's units (Framework.titan_wrapping; torchtitan/parallelisms/parallelize_llama.py at
9dec370, apply_fsdp, the commit its published runs name): the last block is not resharded after
its forward and the root's group (the parameters outside the blocks, fully_shard(model)) never is,
so neither is gathered before its backward (unresharded; under PP no unit is); the root's group is
one all-gather before the embedding's forward and one reduce-scatter after the whole backward
(rooted). FSDP1's root (--framework fsdp, llm-foundry, fms-fsdp) is not resharded after the
forward either (_runtime_utils.py, _post_forward_reshard: `not state._is_root`): not modelled
there yet (each of its units gathered again before its backward).

FSDP2's copies (copies; Framework.fsdp2: torchtitan), read from pytorch/pytorch
torch/distributed/_composable/fsdp/_fsdp_collectives.py at 01d66d2 (2024) and torch 2.13's
torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py, the same copies in both (torchtitan's H100
runs took torch 1963fc8, between the two):

    copy-out   foreach_all_gather_copy_out after each gather: the compute stream waits for the
               all-gather's event, then torch.ops.fsdp.split_with_sizes_copy reads the all-gather
               output and writes each unsharded parameter (2 x the gathered bytes), before the
               forward and again before the backward of a unit gathered twice; under full
               recomputation the backward's gather precedes the rerun forward, whose copy-out
               stands for it (regathered)
    copy-in    foreach_reduce's foreach_reduce_scatter_copy_in: torch.ops.fsdp.chunk_cat of the
               unsharded gradients (param_dtype, bf16) into the reduce-scatter input in
               reduce_dtype (fp32 under torchtitan's MixedPrecisionPolicy): the gradients read,
               the input written (2 + 4 B an element), on the compute stream ("Only after the
               copy-in finishes can we free the gradients"; earlier FSDP2 ran it on the
               reduce-scatter stream and made the compute stream wait for it: the same time)
    division   none for fp32 or bf16 reductions: _get_gradient_divide_factors returns no pre- or
               post-divide factor and NCCL's ReduceOp.AVG divides
    after      the reduce-scatter output viewed as the sharded gradients (as_strided), added to
               them only when accumulating, on the reduce-scatter stream; the cast of reduce_dtype
               to the sharded parameters' dtype none (both fp32)

Not charged: the all-gather's copy-in (the fp32 shard cast to bf16 and _foreach_copy_ into the
all-gather input, 10 B a shard element: 1 / D of the parameters), which runs on FSDP2's
all-gather copy-in stream beside the compute, as the gather it feeds does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from modtrans.comm import CommType
from modtrans.cost import CostModel
from modtrans.cost.base import memory_ticks
from modtrans.plan.model import Place, Purpose
from modtrans.strategy.draft import Comm
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm.hsdp import REPLICATE
from modtrans.strategy.llm.unit import Unit
from modtrans.strategy.program import Costed, Rerun
from modtrans.strategy.roles import LayerRole


def apply(
    units: Sequence[Unit],
    zero: int,
    data_ranks: int,
    expert_data_ranks: int,
    framework: Framework = Framework.FSDP,
    replicas: int = 1,
    pipelined: bool = False,
) -> None:
    """Each unit's collectives; `replicas`: HSDP's R (1: every data rank one shard group);
    `pipelined`: P > 1 (torchtitan reshards nothing after the forward then: unresharded)."""
    assert zero != 1, "Layout.check refuses it"
    kept = unresharded(units, framework, pipelined)
    root = framework.titan_wrapping and not pipelined and bool(units) and units[0].block is None
    merged: dict[tuple[Place, CommType, frozenset[Purpose]], int] = {}
    for i, u in enumerate(units):
        ranks = expert_data_ranks if u.role is LayerRole.EXPERT else data_ranks
        size = u.param_bytes()  # parameters in their own dtype
        if size == 0 or ranks == 1:
            continue
        # torchtitan, llm-foundry: the gradient in fp32 (u.grad_bytes: 4 bytes for the bf16 and
        # fp32 models they train), or --dtype-bytes
        grads = u.grad_bytes() if framework.reduces_in_fp32 else size
        over = u.grads_over
        if zero == 0:
            u.attach(Place.AFTER_WG, Comm(CommType.ALLREDUCE, grads, over))
            continue
        shard = over - REPLICATE if replicas > 1 else over  # HSDP: the shard group alone
        comms = [(Place.BEFORE_FWD, Comm(CommType.ALLGATHER, size, shard))]
        if zero == 3 and i not in kept:
            comms.append((Place.BEFORE_BWD, Comm(CommType.ALLGATHER, size, shard)))
        comms.append((Place.AFTER_WG, Comm(CommType.REDUCESCATTER, grads, shard)))
        if root and u.block is None:  # the root's one group: rooted
            for place, c in comms:
                merged[place, c.comm, c.over] = merged.get((place, c.comm, c.over), 0) + c.bytes
            continue
        for place, c in comms:
            u.attach(place, c)
        if replicas > 1:  # the reduce-scattered shard, all-reduced over the replicas
            u.attach(Place.AFTER_WG, Comm(CommType.ALLREDUCE, -(-grads // (ranks // replicas)), REPLICATE))
    if merged:
        rooted(units[0], merged, data_ranks // replicas if replicas > 1 else 0)


def unresharded(units: Sequence[Unit], framework: Framework, pipelined: bool) -> set[int]:
    """The units (positions in `units`) whose parameters stay gathered from their forward to their
    backward at --zero 3, gathered once a micro-batch: under torchtitan's apply_fsdp
    (parallelize_llama.py at 9dec370) the last block's (`reshard_after_forward = int(layer_id) <
    len(model.layers) - 1`: "do not reshard after forward for the last transformer block since
    FSDP would prefetch it immediately") and the root's, the parameters outside the blocks
    (fully_shard(model, ...): FSDP2's FSDPState._lazy_init sets the root's post_forward_mesh_info
    to None, "For the root, do not reshard after forward since for training, the parameters would
    be freed and all-gathered immediately"; torch/distributed/_composable/fsdp/_fsdp_state.py);
    under PP every unit's (`if pp_enabled: reshard_after_forward = False`, and
    fully_shard(model, reshard_after_forward=not pp_enabled)). None under the other frameworks."""
    if not framework.titan_wrapping:
        return set()
    if pipelined:
        return set(range(len(units)))
    last = max((u.block for u in units if u.block is not None), default=None)
    return {i for i, u in enumerate(units) if u.block is None or u.block == last}


def rooted(first: Unit, merged: dict[tuple[Place, CommType, frozenset[Purpose]], int], shard: int) -> None:
    """The root's parameters (the embedding, final norm and output layer: fully_shard(model) at
    9dec370) as FSDP2 runs its one parameter group, on the model's first unit: one all-gather of
    them all in the root's pre-forward, before the embedding's forward (FSDPState._pre_forward:
    FSDPParamGroup.pre_forward, unshard then wait_for_unshard), and one reduce-scatter of their
    gradients after the whole backward, the embedding's weight gradient the last (the root's
    inputs, token ids, need no gradient, so no post-backward hook fires for it: the root's
    _root_post_backward_final_callback runs its post_backward, foreach_reduce of the group), then
    under HSDP one all-reduce of the shard over the replicas (`shard`: the shard group's D / R)."""
    for (place, comm, over), size in merged.items():
        first.attach(place, Comm(comm, size, over))
        if shard and comm is CommType.REDUCESCATTER:
            first.attach(Place.AFTER_WG, Comm(CommType.ALLREDUCE, -(-size // shard), REPLICATE))


COPY_OUT = 2  # split_with_sizes_copy: the all-gather output read, the parameters written


def copy_bytes(u: Unit) -> tuple[int, int, int]:
    """Bytes FSDP2's copies move on the compute stream for the collectives attached to the unit
    (the module's FSDP2 copies): before its forward, before its backward, after its weight
    gradient. A gather's bytes are the unsharded parameters' in the dtype gathered, a
    reduce-scatter's the gradients' in reduce_dtype; the gradients it reads are the parameters'
    dtype's (FSDP2 computes them in param_dtype)."""
    moved = dict.fromkeys((Place.BEFORE_FWD, Place.BEFORE_BWD, Place.AFTER_WG), 0)
    for place, comms in u.x.comms.items():
        for c in comms:
            if c.comm is CommType.ALLGATHER and place in (Place.BEFORE_FWD, Place.BEFORE_BWD):
                moved[place] += COPY_OUT * c.bytes
            elif c.comm is CommType.REDUCESCATTER and place is Place.AFTER_WG:
                moved[place] += c.bytes + _gradients(u, c.bytes)
    return moved[Place.BEFORE_FWD], moved[Place.BEFORE_BWD], moved[Place.AFTER_WG]


def _gradients(u: Unit, reduced: int) -> int:
    """The bf16 gradients a reduce-scatter of `reduced` bytes reads: the unit's own (its parameters'
    bytes), or the root's group on its first unit (rooted), the reduction's elements at the
    parameters' width (the unit's parameter bytes over its reduced gradient bytes)."""
    own, params = u.grad_bytes(), u.param_bytes()
    if not own or reduced in (own, params):
        return params
    return reduced * params // own


def copies(cost: CostModel) -> Callable[[Costed, Unit], Costed]:
    """A unit's run with FSDP2's copies at the device's streaming rate (cost models with a memory
    path: the gpu model's memory_seconds; the others leave the run as it is): the copy-out before
    its forward in the forward, the reduce-scatter's copy-in with its weight gradient. The
    backward's copy-out is regathered's, once the recomputation is known."""

    def copied(run: Costed, u: Unit) -> Costed:
        forward, _, reduced = copy_bytes(u)
        out, back = memory_ticks(cost, forward), memory_ticks(cost, reduced)
        if not (out or back):
            return run
        t = run.times
        return replace(run, times=replace(t, forward=t.forward + out, weight_grad=t.weight_grad + back))

    return copied


def regathered(chunks: Sequence[Sequence[Costed]], rerun: Rerun, cost: CostModel) -> list[list[Costed]]:
    """The chunks' runs with the copy-out of each gather before a backward (--zero 3), charged with
    the unit's weight gradient (a unit's first backward phase may be skipped: the first layer's
    input gradient), but for the units full recomputation forwards again: the backward's gather
    precedes the recomputation, whose forward, the copy-out in it (copies), stands for it."""
    again = {i for indices in rerun.forwards.values() for i in indices}

    def copied(run: Costed) -> Costed:
        if run.index in again:
            return run
        ticks = backward_copy_out(run.comms, cost)
        if not ticks:
            return run
        return replace(run, times=replace(run.times, weight_grad=run.times.weight_grad + ticks))

    return [[copied(run) for run in chunk] for chunk in chunks]


def backward_copy_out(comms: Mapping[Place, Sequence[Comm]], cost: CostModel) -> int:
    """Ticks of the copy-out after a unit's gathers before its backward (regathered charges them
    with its weight gradient; the fast tier takes them off again where full recomputation's
    forward stands for them: estimate/units.py)."""
    gathered = sum(c.bytes for c in comms.get(Place.BEFORE_BWD, ()) if c.comm is CommType.ALLGATHER)
    return memory_ticks(cost, COPY_OUT * gathered)
