"""HYBRID_TRANSFORMER and HYBRID_TRANSFORMER_FWD_IN_BCKWD: Megatron tensor parallelism over the
G NPUs of the tensor axis (G = --model-parallel-group), data parallelism across the N/G groups.

The tensor-parallel part is the layout's, with no sequence parallelism: strategy/llm/tensor.py
sets each layer's role, shard and collectives (column- and row-parallel linears, the
vocabulary-parallel embedding and loss) and refuses what Megatron-Core refuses, as for --tp G.
The keyword's own choice is the data part: each layer's weight gradients all-reduced over the
data axis as soon as its backward is done (ASTRA-sim's text, one collective per layer), the
rank's shard of them (ceil(P/G) for a split layer, P for a replicated one), where the layout
reduces Megatron-LM's gradient buffer once (strategy/llm/buckets.py).
FWD_IN_BCKWD adds the recomputed segments (strategy/recompute.py).
"""

from __future__ import annotations

from modtrans.comm import Policy
from modtrans.plan.model import Axis, Mesh, Purpose
from modtrans.strategy.draft import Draft, StrategyError
from modtrans.strategy.llm import tensor
from modtrans.strategy.llm.options import LayoutError
from modtrans.strategy.llm.stages import block_of
from modtrans.strategy.llm.unit import Unit
from modtrans.strategy.recompute import checkpoint
from modtrans.strategy.techniques.data import reduce_gradients
from modtrans.strategy.techniques.hybrid import DATA
from modtrans.strategy.techniques.registry import technique


@technique(Policy.HYBRID_TRANSFORMER, Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD)
def megatron(draft: Draft) -> None:
    g = draft.group_size
    draft.mesh = Mesh((Axis(Purpose.TENSOR, g), Axis(Purpose.DATA, draft.npus // g)))
    units = [Unit(x, block_of(x.owner)) for x in draft.layers]
    try:
        tensor.apply(units, draft.ir, g, sp=False, option="--model-parallel-group")
    except LayoutError as error:
        raise StrategyError(str(error)) from None
    for u in units:
        reduce_gradients(u.x, DATA, u.grad_bytes())
    if draft.parallelism.policy is Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD:
        checkpoint(draft)
