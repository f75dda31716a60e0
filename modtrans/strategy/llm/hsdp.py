"""Hybrid-sharded data parallelism (HSDP): the D data ranks as R replicas of a shard group of D / R
ranks (`--dp-replicate R`), as PyTorch FSDP runs it (`--framework fsdp`, `torchtitan`,
`llm-foundry`).

    names      torchtitan's data_parallel_replicate_degree (its shard degree the rest, D / R:
               torchtitan/distributed/parallel_dims.py, ParallelDims; its mesh ["dp_replicate",
               "dp_shard", ...], the replicate dimension the slower); FSDP1's
               ShardingStrategy.HYBRID_SHARD (--zero 3) and _HYBRID_SHARD_ZERO2 (--zero 2), whose
               default shard group is one node (torch/distributed/fsdp/_init_utils.py,
               _init_intra_and_inter_node_groups: the intra-node group the node's consecutive
               ranks, the inter-node group the ranks of one local rank across the nodes)
    axis       the mesh's "dp" axis holds the D / R ranks of a shard group (consecutive, after the
               tensor ranks: a node's where T x D / R is 8) and this degree's "replicate" axis, the
               next slower, its R replicas; both hold the same dense weights (a replica degree:
               the dense gradients' group spans them both, D ranks)
    collectives  all-gathers of parameters and reduce-scatters of gradients over the shard group
               only, then an ALLREDUCE of each rank's reduce-scattered shard (1 / (D / R) of the
               gradient) over the replicate group: FSDP1 torch/distributed/fsdp/_runtime_utils.py,
               _reduce_grad ("if uses_hybrid_sharded_strategy: ... dist.all_reduce(new_sharded_grad,
               group=state._inter_node_pg)" after reduce_scatter_tensor over state.process_group);
               FSDP2 torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py, foreach_reduce
               (`if all_reduce_group is not None:  # HSDP`, dist.all_reduce(reduce_output, ...)
               after reduce_scatter_tensor over reduce_scatter_group); fsdp.py attaches them
    memory     parameters, gradients and optimizer state sharded over D / R ranks, not D
               (Layout.shard_ranks; memory.py)
Refused (rules, one line each): R not dividing D, R > 1 outside the FSDP family or without
sharding (--zero 2 or 3), a shard group of one rank (R = D: DDP, --zero 0), experts (E > 1: the
expert-data ranks are not split here) and context parallelism (Megatron-LM's alone anyway).
"""

from __future__ import annotations

from modtrans.plan.model import Purpose
from modtrans.strategy.frameworks import Framework, named
from modtrans.strategy.llm.degrees import Degree, register
from modtrans.strategy.llm.options import Layout, LayoutError

AXIS = Purpose("replicate")
REPLICATE = frozenset({AXIS})


def rules(layout: Layout) -> None:
    """Where HSDP is modelled (the module's docstring)."""
    r, d = layout.dp_replicate, layout.data_ranks
    if r == 1:
        return
    if layout.framework.family is not Framework.FSDP:
        raise LayoutError(
            f"--dp-replicate {r}: hybrid sharding is PyTorch FSDP's "
            f"(--framework {named(lambda f: f.family is Framework.FSDP)}), not {layout.framework}'s"
        )
    if d % r:
        raise LayoutError(
            f"--dp-replicate {r} must divide --dp {d} (each replica a shard group of D / R ranks)"
        )
    if layout.zero not in (2, 3):
        raise LayoutError(
            f"--dp-replicate {r} shards within each replica: it needs --zero 3 (HYBRID_SHARD) or 2 "
            f"(_HYBRID_SHARD_ZERO2), not --zero {layout.zero}"
        )
    if d == r:
        raise LayoutError(
            f"--dp-replicate {r} = --dp {d} leaves shard groups of one rank: that is DDP (--zero 0)"
        )
    if layout.ep > 1 or layout.cp > 1:
        raise LayoutError(f"--dp-replicate {r} with --ep or --cp above 1 is not modelled")


# the replicate degree R: carved from the D data ranks (the "dp" axis keeps a shard group's D / R),
# its axis only where R > 1 (meshes and group ids as before it otherwise); a sweep tries 1 unless told
register(
    Degree(
        "dp_replicate",
        AXIS,
        listed=5,
        optional=True,
        replica=True,
        carved=True,
        tried=lambda left, model: (1,),
        rules=rules,
        label="HSDP",  # HSDP2: two replicas (the token in capitals would read DP_REPLICATE2)
    )
)
