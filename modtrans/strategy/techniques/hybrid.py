"""ASTRA-sim 1.0's two hybrids of model and data parallelism (G = --model-parallel-group, the
NPUs of network dimension 0; N = --npus):

    HYBRID_DATA_MODEL  model parallel inside the G NPUs of dimension 0, data parallel across:
                       fwd ALLGATHER A_out; ig ALLREDUCE A_in; wg ALLREDUCE ceil(P / G)   ways G
    HYBRID_MODEL_DATA  data parallel inside dimension 0, model parallel across the N/G groups:
                       fwd ALLGATHER A_out; ig ALLREDUCE A_in; wg ALLREDUCE ceil(P/(N/G)) ways N/G

A replicated layer (normalisation) sends only its whole gradient, over the data axis.
"""

from __future__ import annotations

import math

from modtrans.comm import Policy
from modtrans.plan.model import Axis, Mesh, Purpose
from modtrans.strategy.draft import Draft, LayerDraft
from modtrans.strategy.techniques.data import reduce_gradients
from modtrans.strategy.techniques.model import split_layer
from modtrans.strategy.techniques.registry import technique

TENSOR, DATA = frozenset({Purpose.TENSOR}), frozenset({Purpose.DATA})


def model_then_data(
    draft: Draft, x: LayerDraft, ways: int, model: frozenset[Purpose], data: frozenset[Purpose]
) -> None:
    split_layer(draft, x, ways, model)
    p = x.group.comm_bytes
    reduce_gradients(x, data, math.ceil(p / ways) if x.shardable else p)


@technique(Policy.HYBRID_DATA_MODEL)
def data_model(draft: Draft) -> None:
    g = draft.group_size
    draft.mesh = Mesh((Axis(Purpose.TENSOR, g), Axis(Purpose.DATA, draft.npus // g)))
    for x in draft.layers:
        model_then_data(draft, x, g, TENSOR, DATA)


@technique(Policy.HYBRID_MODEL_DATA)
def model_data(draft: Draft) -> None:
    g = draft.group_size
    draft.mesh = Mesh((Axis(Purpose.DATA, g), Axis(Purpose.TENSOR, draft.npus // g)))
    for x in draft.layers:
        model_then_data(draft, x, draft.npus // g, TENSOR, DATA)
