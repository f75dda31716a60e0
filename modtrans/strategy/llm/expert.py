"""Expert parallelism (GShard, Lepikhin et al. 2020; Megatron-Core's MoE): the E experts of a
mixture-of-experts block spread over the E_p ranks of the expert axis, carved from the data ranks.

Per MoE block and micro-batch, tokens x top-k x hidden x bytes (/ T with SP) go in four
all-to-alls: the dispatch after the router's forward, the combine after the last local expert's,
and their gradients before those units' backwards.

Each rank computes E / E_p experts (named 0 .. E/E_p - 1; the others cost the same) on the tokens
all E_p ranks route to them: under balanced routing an expert unit's compute is scaled by E_p, or
by E_p / T with sequence parallelism, which MoE with T > 1 needs (each tensor rank routes its own
1/T of the sequence, as in Megatron-Core).

Expert tensor parallelism (--etp, Megatron-Core's --expert-tensor-parallel-size):
    ETP = T (the default, as Megatron-Core's): each expert's GEMMs split over the tensor ranks like
        a dense MLP; the tensor ranks all-gather their tokens after the dispatch and reduce-scatter
        the experts' output before the combine, the conjugates in the backward (token_dispatcher.py,
        MoEAlltoAllTokenDispatcher)
    ETP = 1: whole experts on every tensor rank, each on its own sequence shard's tokens
Expert gradients are reduced over the ranks holding the same expert shards, T x D / (ETP x E_p)
of them (megatron/core/parallel_state.py, initialize_model_parallel: the expert mesh [ETP, EP,
EDP, PP]); router and dense gradients over all D. At ETP = 1 the groups have Megatron's sizes, but
this mesh keeps the tensor axis fastest: for rank 0 at T 2, E 2, D 4 the expert group is {0, 2}
and the expert-data group {0, 1, 4, 5}, where Megatron's are {0, 1} and {0, 2, 4, 6}.

A capacity factor F (--moe-expert-capacity-factor; moe_utils.py, get_capacity, called by
topk_softmax_with_capacity with num_tokens x topk) lets each expert take at most ceil(t k / E x F)
of the t tokens a rank routes: under balanced routing none is dropped for F >= 1, and E x capacity
of the t k are kept for F < 1. --moe-pad-expert-input-to-capacity pads every expert's tokens to
its capacity (MoEAlltoAllTokenDispatcher, drop_and_pad: num_out_tokens = capacity x E). The
experts' compute and the dispatch's collectives scale with the tokens kept.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

from modtrans.comm import CommType
from modtrans.ir.document import ModelIR
from modtrans.plan.model import Place, Purpose
from modtrans.strategy.draft import Comm
from modtrans.strategy.llm.degrees import Degree, divisors, register
from modtrans.strategy.llm.options import Layout, LayoutError
from modtrans.strategy.llm.tensor import roles_of
from modtrans.strategy.llm.unit import EXPERT, EXPERT_DATA, TENSOR, TENSOR_EXPERT_DATA, Unit
from modtrans.strategy.roles import LayerRole, Split

# the expert-parallel degree E: carved from the D data ranks, which hold the same dense weights
# a sweep tries the divisors of the routed experts (a dense model: E = 1)
register(
    Degree(
        "ep",
        Purpose.EXPERT,
        listed=3,
        replica=True,
        carved=True,
        shards=True,
        tried=lambda left, model: divisors(model.experts) if model.experts else (1,),
    )
)


def apply(units: list[Unit], ir: ModelIR, layout: Layout) -> list[Unit]:
    """The units this rank runs (local experts only), with the all-to-alls attached."""
    ep, tp, sp = layout.ep, layout.tp, layout.sp
    if ep > 1 and not any(u.x.owner.moe is not None for u in units):
        raise LayoutError(
            f"--ep {ep}: the model has no mixture of experts to place (Megatron-LM's "
            "--expert-model-parallel-size needs --num-experts)"
        )
    whole, etp = _expert_tp(layout)
    shard = tp if sp else 1
    roles = roles_of(
        ir, [u.x.owner for u in units if u.x.owner.moe is not None and u.x.owner.moe.expert is not None]
    )
    kept: list[Unit] = []
    last_expert: dict[int | None, Unit] = {}
    routers: dict[int | None, Unit] = {}  # each block's last router layer: the scores
    reads: dict[int | None, Unit] = {}  # its first: the one reading the tokens routed (_dispatch)
    shares: dict[int | None, Fraction] = {}  # per block, the routed tokens kept (_capacity)
    for u in units:
        moe = u.x.owner.moe
        if moe is None:
            kept.append(u)
            continue
        if moe.experts % ep:
            raise LayoutError(f"--ep {ep} must divide the {moe.experts} experts of {u.name}")
        if moe.expert is None:
            u.scale = Fraction(1, shard)  # the router sees this rank's sequence shard
            routers[u.block] = u
            reads.setdefault(u.block, u)
            shares[u.block] = _capacity(u, layout, shard)
            kept.append(u)
            continue
        if not moe.grouped and moe.expert >= moe.experts // ep:
            _hand_over(u, kept)  # another rank's expert; what follows it in the block stays here
            continue
        # a grouped layer is every expert on the micro-batch's tokens: this rank's E / E_p of them,
        # each on the tokens all E_p ranks route to it, are its whole compute again (E_p x its
        # share), and 1 / E_p of its weights
        gather = 1 if moe.grouped else ep
        u.holds = ep if moe.grouped else 1
        if etp > 1:  # the tensor ranks' tokens gathered, each expert's GEMMs split over them
            u.x.ways, u.x.split = etp, Split.K if roles.get(u.name) == LayerRole.ROW else Split.N
            u.scale, u.grads_over = Fraction(gather), EXPERT_DATA
        elif whole:  # whole experts on each tensor rank, all on the same tokens
            u.scale, u.grads_over = Fraction(gather), EXPERT_DATA
        else:  # whole experts on each tensor rank, each on its own tokens
            u.scale, u.grads_over = Fraction(gather, tp), EXPERT_DATA if tp == 1 else TENSOR_EXPERT_DATA
        u.scale *= shares.get(u.block, Fraction(1))  # a router precedes its experts (IR order)
        last_expert[u.block] = u
        kept.append(u)
    for block, router in routers.items():
        _dispatch(router, last_expert.get(block), ep, etp, shard, shares[block], reads[block])
    if layout.capacity_factor is not None and not routers:
        raise LayoutError("--moe-expert-capacity-factor: the model has no mixture of experts to route")
    return kept


def _expert_tp(layout: Layout) -> tuple[bool, int]:
    """Whether every tensor rank keeps whole experts on the same tokens, and the expert tensor
    parallelism. A tensor group without SP (a model's own plan: tensor.py) runs the whole sequence
    on every tensor rank, routes every token there and keeps whole experts (transformers splits
    none its plan leaves out), which compute the same tokens and gradients on each tensor rank."""
    whole = layout.tp > 1 and not layout.sp
    if whole and layout.etp is not None and layout.etp > 1:
        raise LayoutError(
            f"--etp {layout.etp}: without --sp every tensor rank keeps whole experts on the whole "
            "sequence (the model's own plan splits no expert it leaves out)"
        )
    return whole, 1 if whole else layout.expert_tp


def _routed(router: Unit, shard: int) -> tuple[int, int, int]:
    """(tokens this rank routes, hidden, bytes per element) at a block's router."""
    source = router.x.owner.inputs[0]
    tokens = math.prod(int(d) for d in (source.shape or ())[:-1])
    hidden = int((source.shape or (0,))[-1])
    width = (source.bytes or 0) // max(tokens * hidden, 1)
    return tokens // shard, hidden, width


def _capacity(router: Unit, layout: Layout, shard: int) -> Fraction:
    """The share of the t x top-k routed tokens the experts compute and the dispatch moves: 1
    without a capacity factor (module docstring)."""
    moe = router.x.owner.moe
    assert moe is not None
    factor = layout.capacity_factor
    if factor is None:
        return Fraction(1)
    routed = _routed(router, shard)[0] * moe.top_k
    capacity = math.ceil(routed / moe.experts * factor)
    kept = moe.experts * capacity if layout.pad_to_capacity else min(routed, moe.experts * capacity)
    return Fraction(kept, max(routed, 1))


def _dispatch(
    router: Unit, last: Unit | None, ep: int, etp: int, shard: int, share: Fraction, reads: Unit
) -> None:
    """The block's token traffic: the all-to-alls over the expert group and, with the experts split
    over the tensor ranks, the gather of the dispatched tokens over them and the scatter back
    (Megatron-Core token_dispatcher.py, MoEAlltoAllTokenDispatcher: all-to-all, then
    gather_from_sequence_parallel_region over the tensor group; its unpermutation the reverse),
    with the conjugates in the backward; after the router's scores, the tokens its first layer
    reads (`reads`: a router with an MLP of its own, Zaya's, scores from a narrower state)."""
    moe = router.x.owner.moe
    assert moe is not None
    tokens, hidden, width = _routed(reads, shard)
    size = int(tokens * moe.top_k * share) * hidden * width  # this rank's dispatched tokens
    a2a = Comm(CommType.ALLTOALL, size, EXPERT) if ep > 1 else None
    gather = Comm(CommType.ALLGATHER, size * etp, TENSOR) if etp > 1 else None
    scatter = Comm(CommType.REDUCESCATTER, size * etp, TENSOR) if etp > 1 else None
    # forward: dispatch all-to-all, gather | experts | scatter, combine all-to-all
    # backward (reverse): all-to-all, gather | experts | scatter, all-to-all
    for place, comms in (
        (Place.AFTER_FWD, (a2a, gather)),
        (Place.BEFORE_BWD, (scatter, a2a)),
    ):
        for c in comms:
            if c is not None:
                router.attach(place, c)
    if last is None:
        return
    for place, comms in ((Place.AFTER_FWD, (scatter, a2a)), (Place.BEFORE_BWD, (a2a, gather))):
        for c in comms:
            if c is not None:
                last.attach(place, c)


def _hand_over(dropped: Unit, kept: list[Unit]) -> None:
    """The layers folded into a dropped expert that are not its own (the combine, the residual
    add after the last expert) move to the last kept unit."""
    extra = tuple(m for m in dropped.x.group.folded if m.moe is None)
    if not extra or not kept:
        return
    last = kept[-1]
    g = last.x.group
    last.x.group = dataclasses.replace(g, folded=(*g.folded, *extra))
