"""The parallelism keywords and the collective types: what a plan, a strategy and every output
format share, so none of them imports another format's model for them.

Their values are the text format's tokens (grammar/workload.lark), which the Chakra and SimAI
writers map to their own (chakra/write.py, plan/simai.py).
"""

from __future__ import annotations

import enum

__all__ = ["TRANSLATED", "CommType", "Policy"]


class Policy(enum.StrEnum):
    """Parallelism keyword (header token 0, and the 13th field under HYBRID_CUSTOMIZED)."""

    DATA = "DATA"
    MODEL = "MODEL"
    HYBRID_DATA_MODEL = "HYBRID_DATA_MODEL"
    HYBRID_MODEL_DATA = "HYBRID_MODEL_DATA"
    HYBRID_CUSTOMIZED = "HYBRID_CUSTOMIZED"
    HYBRID_TRANSFORMER = "HYBRID_TRANSFORMER"
    HYBRID_TRANSFORMER_FWD_IN_BCKWD = "HYBRID_TRANSFORMER_FWD_IN_BCKWD"
    HYBRID_DLRM = "HYBRID_DLRM"
    HYBRID_DLRM_ENHANCED = "HYBRID_DLRM_ENHANCED"
    MICRO = "MICRO"
    DISTRIBUTED_INFERENCE = "DISTRIBUTED_INFERENCE"

    @property
    def is_transformer(self) -> bool:
        return self in (Policy.HYBRID_TRANSFORMER, Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD)

    @property
    def is_dlrm(self) -> bool:
        return self in (Policy.HYBRID_DLRM, Policy.HYBRID_DLRM_ENHANCED)


TRANSLATED = (
    Policy.DATA,
    Policy.MODEL,
    Policy.HYBRID_DATA_MODEL,
    Policy.HYBRID_MODEL_DATA,
    Policy.HYBRID_CUSTOMIZED,
    Policy.HYBRID_TRANSFORMER,
    Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD,
)
"""The keywords `translate` writes (a module each in strategy/techniques/, whose registry a test
holds equal to these): --parallel's choices (table.py) and strategy.SUPPORTED."""


class CommType(enum.StrEnum):
    """A phase's collective, spelled as in the file. Every spelling found in real files."""

    NONE = "NONE"
    ALLREDUCE = "ALLREDUCE"
    ALLGATHER = "ALLGATHER"
    REDUCESCATTER = "REDUCESCATTER"
    ALLTOALL = "ALLTOALL"
    ALLREDUCEALLTOALL = "ALLREDUCEALLTOALL"  # ASTRA-sim 1.0 parses it, then panics when issuing it
    ALLREDUCE_EP = "ALLREDUCE_EP"  # SimAI: expert-parallel group
    ALLGATHER_EP = "ALLGATHER_EP"
    REDUCESCATTER_EP = "REDUCESCATTER_EP"
    ALLTOALL_EP = "ALLTOALL_EP"
    ALLREDUCE_DP_EP = "ALLREDUCE_DP_EP"  # SimAI: data-parallel x expert-parallel group
    ALLGATHER_DP_EP = "ALLGATHER_DP_EP"
    REDUCESCATTER_DP_EP = "REDUCESCATTER_DP_EP"
    ALLTOALL_DP_EP = "ALLTOALL_DP_EP"
    BROADCAST = "BROADCAST"  # AICB writes it for norm layers; every consumer reads "no collective"

    @property
    def is_portable(self) -> bool:
        """Understood identically by ASTRA-sim 1.0, SimAI and Chakra."""
        return self in _PORTABLE

    @property
    def is_simai_only(self) -> bool:
        return self in _SIMAI_ONLY

    @property
    def moves_data(self) -> bool:
        """Whether the type names a collective (NONE and BROADCAST do not, for every consumer)."""
        return self not in (CommType.NONE, CommType.BROADCAST)


_SIMAI_ONLY = frozenset(c for c in CommType if c.value.endswith("_EP") or c is CommType.BROADCAST)
_PORTABLE = frozenset(
    {CommType.NONE, CommType.ALLREDUCE, CommType.ALLGATHER, CommType.REDUCESCATTER, CommType.ALLTOALL}
)
