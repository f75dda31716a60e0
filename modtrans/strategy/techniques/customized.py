"""HYBRID_CUSTOMIZED: each layer takes DATA, MODEL, HYBRID_DATA_MODEL or HYBRID_MODEL_DATA (its
13th field), from a user file (pattern -> keyword) or the automatic rule: per NPU, a ring
all-reduce moves 2(N-1)/N of its payload and an all-gather (N-1)/N, so DATA costs 2P and MODEL
A_out + 2 A_in (times (N-1)/N): the cheaper one is chosen.

The mesh is HYBRID_DATA_MODEL's: G NPUs of dimension 0 (the tensor axis), N/G across (the data
axis); a HYBRID_MODEL_DATA layer splits over the data axis and reduces over the tensor one.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping

from modtrans.comm import Policy
from modtrans.plan.model import Axis, Mesh, Purpose
from modtrans.strategy.draft import Draft, LayerDraft
from modtrans.strategy.techniques.data import reduce_gradients
from modtrans.strategy.techniques.hybrid import DATA, TENSOR, model_then_data
from modtrans.strategy.techniques.model import split_layer
from modtrans.strategy.techniques.registry import technique


@technique(Policy.HYBRID_CUSTOMIZED)
def customized(draft: Draft) -> None:
    g, n = draft.group_size, draft.npus
    draft.mesh = Mesh((Axis(Purpose.TENSOR, g), Axis(Purpose.DATA, n // g)))
    every = draft.every()
    for x in draft.layers:
        x.policy = choose(draft, x, draft.parallelism.per_layer)
        if x.policy is Policy.DATA:
            reduce_gradients(x, every)
        elif x.policy is Policy.MODEL:
            split_layer(draft, x, n, every)
        elif x.policy is Policy.HYBRID_DATA_MODEL:
            model_then_data(draft, x, g, TENSOR, DATA)
        else:
            model_then_data(draft, x, n // g, DATA, TENSOR)


def choose(draft: Draft, x: LayerDraft, rules: Mapping[str, Policy] | None) -> Policy:
    name = x.owner.name
    if rules is not None:
        return next((p for pattern, p in rules.items() if fnmatch.fnmatchcase(name, pattern)), Policy.DATA)
    model_cost = draft.a_out(x.owner) + 2 * draft.a_in(x.owner)
    return Policy.MODEL if x.shardable and model_cost < 2 * x.group.comm_bytes else Policy.DATA
