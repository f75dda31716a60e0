"""Model parallelism, ASTRA-sim 1.0's layer-wise kind: each GEMM layer (conv, linear, embedding,
recurrent) split over the ranks by output features; the generator's rule for what it sends:

    sharded layer: fwd ALLGATHER A_out (its output activation); ig ALLREDUCE A_in (its
                   floating-point input, when back-propagation needs it); wg NONE
    other layers (normalisation): replicated, nothing sent
The all-gather's A_out is the gathered output; ASTRA-sim's text and traces get A_out / N, one
rank's part, as ASTRA-sim reads an all-gather's size (plan/sizes.py).
"""

from __future__ import annotations

from modtrans.comm import CommType, Policy
from modtrans.plan.model import Axis, Mesh, Purpose, Step
from modtrans.strategy.draft import Draft, LayerDraft
from modtrans.strategy.roles import LayerRole
from modtrans.strategy.techniques.registry import technique


def split_layer(draft: Draft, x: LayerDraft, ways: int, over: frozenset[Purpose]) -> None:
    """Shard a GEMM layer `ways` ways; gather its output, all-reduce its input gradient."""
    if not x.shardable or ways == 1:
        return
    x.ways, x.role = ways, LayerRole.SPLIT
    x.add(Step.FWD, CommType.ALLGATHER, draft.a_out(x.owner), over)
    x.add(Step.INPUT_GRAD, CommType.ALLREDUCE, draft.a_in(x.owner), over)


@technique(Policy.MODEL)
def model(draft: Draft) -> None:
    draft.mesh = Mesh((Axis(Purpose.TENSOR, draft.npus),))
    for x in draft.layers:
        split_layer(draft, x, draft.npus, draft.every())
