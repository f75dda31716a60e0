"""Expert parallelism (GShard, Lepikhin et al. 2020; Megatron-Core's MoE): the E experts of a
mixture-of-experts block spread over the E_p ranks of the expert axis, carved from the data ranks.

Per MoE block and micro-batch, with tokens·top-k·hidden·bytes dispatched (÷ T with SP):
    router: fwd ALLTOALL dispatch after it; bwd ALLTOALL of the dispatched tokens' gradients
        before its backward
    the block's last local expert: fwd ALLTOALL combine after it; bwd ALLTOALL of the combined
        output's gradient before its backward (the first thing the block's backward does)
Each rank computes E / E_p experts on the tokens all E_p ranks route to them: under balanced
routing E_p times an expert's share of the local tokens, so an expert unit's compute is scaled by
E_p (E_p / T with sequence parallelism, which MoE with T > 1 needs, as in Megatron-Core: each
tensor-parallel rank routes its own 1/T of the sequence) and only E / E_p of them are kept (the
program names experts 0 .. E/E_p - 1; rank r of the expert group holds experts r·E/E_p ..., at
the same cost). Expert gradients are reduced over the
D / E_p ranks holding the same experts; router and dense gradients over all D.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

from modtrans.plan.model import Place
from modtrans.strategy.draft import Comm
from modtrans.strategy.llm.options import LayoutError
from modtrans.strategy.llm.unit import EXPERT, EXPERT_DATA, Unit
from modtrans.workload.model import CommType


def apply(units: list[Unit], ep: int, tp: int, sp: bool) -> list[Unit]:
    """The units this rank runs (local experts only), with the all-to-alls attached."""
    if ep > 1 and not any(u.x.owner.moe is not None for u in units):
        raise LayoutError(
            f"--ep {ep}: the model has no mixture of experts to place (Megatron-LM's "
            "--expert-model-parallel-size needs --num-experts)"
        )
    kept: list[Unit] = []
    last_expert: dict[int | None, Unit] = {}
    routers: dict[int | None, Unit] = {}
    for u in units:
        moe = u.x.owner.moe
        if moe is None:
            kept.append(u)
            continue
        if moe.experts % ep:
            raise LayoutError(f"--ep {ep} must divide the {moe.experts} experts of {u.name}")
        if tp > 1 and not sp:
            raise LayoutError(
                "a mixture of experts with --tp > 1 needs --sp (Megatron-Core's rule: each tensor-parallel "
                "rank routes its own sequence shard)"
            )
        if moe.expert is None:
            u.scale = Fraction(1, tp)  # the router sees this rank's sequence shard
            routers[u.block] = u
            kept.append(u)
            continue
        if moe.expert >= moe.experts // ep:
            _hand_over(u, kept)  # another rank's expert; what follows it in the block stays here
            continue
        u.scale, u.grads_over = Fraction(ep, tp), EXPERT_DATA
        last_expert[u.block] = u
        kept.append(u)
    for block, router in routers.items():
        moe = router.x.owner.moe
        assert moe is not None
        tokens = math.prod(int(d) for d in (router.x.owner.inputs[0].shape or ())[:-1])
        hidden = int((router.x.owner.inputs[0].shape or (0,))[-1])
        width = (router.x.owner.inputs[0].bytes or 0) // max(tokens * hidden, 1)
        size = tokens * moe.top_k * hidden * width // (tp if sp else 1)
        if ep == 1:
            continue
        router.attach(Place.AFTER_FWD, Comm(CommType.ALLTOALL, size, EXPERT))
        router.attach(Place.BEFORE_BWD, Comm(CommType.ALLTOALL, size, EXPERT))
        last = last_expert.get(block)
        if last is not None:
            last.attach(Place.AFTER_FWD, Comm(CommType.ALLTOALL, size, EXPERT))
            last.attach(Place.BEFORE_BWD, Comm(CommType.ALLTOALL, size, EXPERT))
    return kept


def _hand_over(dropped: Unit, kept: list[Unit]) -> None:
    """The layers folded into a dropped expert that are not its own (the combine, the residual
    add after the last expert) move to the last kept unit."""
    extra = tuple(m for m in dropped.x.group.folded if m.moe is None)
    if not extra or not kept:
        return
    last = kept[-1]
    g = last.x.group
    last.x.group = dataclasses.replace(g, folded=(*g.folded, *extra))
