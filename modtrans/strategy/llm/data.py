"""Data parallelism and ZeRO (Rajbhandari et al. 2020) over the data ranks as Megatron-LM runs them
(`--framework megatron`, the default; DeepSpeed's: deepspeed.py): D for dense gradients, the
expert-data-parallel ranks for experts' (expert.py).

    ZeRO 0    ALLREDUCE of the gradients once per iteration, by buffer and bucket (buckets.py)
    ZeRO 1, 2 the distributed optimizer: REDUCESCATTER of the gradients, then ALLGATHER of the
              updated parameters, once per iteration by buffer and bucket (buckets.py). Stage 2
              partitions the gradients as well, which saves memory, not communication.
    ZeRO 3    parameters partitioned too: per micro-batch ALLGATHER of the unit's parameters
              before its forward and again before its backward, REDUCESCATTER of its gradient
              after its weight gradient (fully sharded: Megatron-Core's FSDP, PyTorch FSDP's
              FULL_SHARD; DeepSpeed's stage 3, with its persistence and reuse rules, is deepspeed.py)
Sizes are this rank's tensor-parallel shard of the unit: gradients in the framework's reduction
dtype (fp32 for bf16 parameters, strategy/frameworks.py), parameters in their own dtype.
"""

from __future__ import annotations

from modtrans.comm import CommType
from modtrans.plan.model import Place, Purpose
from modtrans.strategy.draft import Comm
from modtrans.strategy.llm.degrees import Degree, register
from modtrans.strategy.llm.unit import Unit
from modtrans.strategy.roles import LayerRole

# the data-parallel degree D; its mesh axis holds the D / E expert-data ranks (options.py), under
# HSDP a shard group's D / R (hsdp.py: the replicas on an axis of their own)
register(
    Degree(
        "dp",
        Purpose.DATA,
        listed=2,
        replica=True,
        data=True,
        size=lambda layout: layout.expert_data_ranks // layout.dp_replicate,
    )
)


def apply(units: list[Unit], zero: int, data_ranks: int, expert_data_ranks: int) -> None:
    """ZeRO-3's per-unit collectives; the others wait for the pipeline's chunks (buckets.py)."""
    if zero != 3:
        return
    for u in units:
        grads, params = u.grad_bytes(), u.param_bytes()
        ranks = expert_data_ranks if u.role is LayerRole.EXPERT else data_ranks
        if grads == 0 or ranks == 1:
            continue
        over = u.grads_over
        u.attach(Place.BEFORE_FWD, Comm(CommType.ALLGATHER, params, over))
        u.attach(Place.BEFORE_BWD, Comm(CommType.ALLGATHER, params, over))
        u.attach(Place.AFTER_WG, Comm(CommType.REDUCESCATTER, grads, over))
