"""The parallelism techniques, one module each, registered by keyword.

A technique edits a Draft (strategy/draft.py): it sets the mesh of ranks, and per
layer the shard each rank computes and the collectives each step issues. The classic keywords
are compositions of a few techniques:

    data.py        DATA: replicas, gradients all-reduced
    model.py       MODEL: every GEMM layer split over all NPUs
    hybrid.py      HYBRID_DATA_MODEL, HYBRID_MODEL_DATA: model inside one mesh axis, data across
    customized.py  HYBRID_CUSTOMIZED: each layer its own choice of the four above
    megatron.py    HYBRID_TRANSFORMER(_FWD_IN_BCKWD): Megatron tensor parallelism, data across

A new technique is a new module here with `@technique(...)` on its function.
"""

from __future__ import annotations

from collections.abc import Callable

from modtrans.strategy.draft import Draft
from modtrans.workload.model import Policy

Technique = Callable[[Draft], None]
TECHNIQUES: dict[Policy, Technique] = {}


def technique(*policies: Policy) -> Callable[[Technique], Technique]:
    def register(apply: Technique) -> Technique:
        for policy in policies:
            TECHNIQUES[policy] = apply
        return apply

    return register


def load() -> dict[Policy, Technique]:
    """Every registered technique (importing the modules registers them)."""
    from modtrans.strategy.techniques import customized, data, hybrid, megatron, model  # noqa: F401

    return TECHNIQUES
