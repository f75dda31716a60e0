"""The parallelism techniques, one module each, registered by keyword.

A technique edits a Draft (strategy/draft.py): it sets the mesh of ranks, and per
layer the shard each rank computes and the collectives each step issues. The classic keywords
are compositions of a few techniques:

    data.py        DATA: replicas, gradients all-reduced
    model.py       MODEL: every GEMM layer split over all NPUs
    hybrid.py      HYBRID_DATA_MODEL, HYBRID_MODEL_DATA: model inside one mesh axis, data across
    customized.py  HYBRID_CUSTOMIZED: each layer its own choice of the four above
    megatron.py    HYBRID_TRANSFORMER(_FWD_IN_BCKWD): Megatron tensor parallelism, data across

A new technique is a new module here with `@technique(...)` (registry.py) on its function.
"""

from __future__ import annotations

from modtrans.comm import Policy
from modtrans.strategy.techniques.registry import TECHNIQUES, Technique, technique

__all__ = ["TECHNIQUES", "Technique", "load", "technique"]


def load() -> dict[Policy, Technique]:
    """Every registered technique (importing the modules registers them)."""
    from modtrans.strategy.techniques import customized, data, hybrid, megatron, model  # noqa: F401

    return TECHNIQUES
