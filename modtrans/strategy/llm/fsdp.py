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
training script opts into; it is not modelled. Also left out: the root module's parameters, which
FSDP does not reshard after the forward (gathered once, not twice), the padding of each flat
parameter to a multiple of D (of D / R under HSDP). ZeRO-1 has no FSDP counterpart: Layout.check refuses it.
"""

from __future__ import annotations

from collections.abc import Sequence

from modtrans.comm import CommType
from modtrans.plan.model import Place
from modtrans.strategy.draft import Comm
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm.hsdp import REPLICATE
from modtrans.strategy.llm.unit import Unit
from modtrans.strategy.roles import LayerRole


def apply(
    units: Sequence[Unit],
    zero: int,
    data_ranks: int,
    expert_data_ranks: int,
    framework: Framework = Framework.FSDP,
    replicas: int = 1,
) -> None:
    """Each unit's collectives; `replicas`: HSDP's R (1: every data rank one shard group)."""
    assert zero != 1, "Layout.check refuses it"
    for u in units:
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
        u.attach(Place.BEFORE_FWD, Comm(CommType.ALLGATHER, size, shard))
        if zero == 3:
            u.attach(Place.BEFORE_BWD, Comm(CommType.ALLGATHER, size, shard))
        u.attach(Place.AFTER_WG, Comm(CommType.REDUCESCATTER, grads, shard))
        if replicas > 1:  # the reduce-scattered shard, all-reduced over the replicas
            u.attach(Place.AFTER_WG, Comm(CommType.ALLREDUCE, -(-grads // (ranks // replicas)), REPLICATE))
