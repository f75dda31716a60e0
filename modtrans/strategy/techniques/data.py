"""Data parallelism: every rank holds the whole model; the weight gradients are all-reduced.

per layer: fwd NONE; ig NONE; wg ALLREDUCE P (its parameter bytes, the --params convention)
"""

from __future__ import annotations

from modtrans.comm import CommType, Policy
from modtrans.plan.model import Axis, Mesh, Purpose, Step
from modtrans.strategy.draft import Draft, LayerDraft
from modtrans.strategy.techniques.registry import technique


def reduce_gradients(x: LayerDraft, over: frozenset[Purpose], size: int | None = None) -> None:
    """The weight-gradient all-reduce of a layer's replicas (its whole parameter bytes by default)."""
    x.add(Step.WEIGHT_GRAD, CommType.ALLREDUCE, x.group.comm_bytes if size is None else size, over)


@technique(Policy.DATA)
def data(draft: Draft) -> None:
    draft.mesh = Mesh((Axis(Purpose.DATA, draft.npus),))
    for x in draft.layers:
        reduce_gradients(x, draft.every())
