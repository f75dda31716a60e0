"""What part of a layer each rank holds: a layer's role, which the techniques set and
share.rank_share reads to size one rank's compute.

COLUMN      Megatron's column-parallel linear: output features split (Shoeybi et al. 2019, section 3;
            megatron/core/tensor_parallel/layers.py, ColumnParallelLinear)
ROW         Megatron's row-parallel linear: the reduction split (layers.py, RowParallelLinear)
EMBEDDING   Megatron's vocabulary-parallel word embedding (layers.py, VocabParallelEmbedding)
SPLIT       ASTRA-sim 1.0's layer-wise MODEL split, by output features (techniques/model.py)
ROUTER      an MoE router: replicated, sees every token (llm/expert.py)
EXPERT      an MoE expert's layer (llm/expert.py)
REPLICATED  every rank holds the whole layer (norms, position embeddings)
"""

from __future__ import annotations

import enum

__all__ = ["LayerRole", "Split"]


class LayerRole(enum.StrEnum):
    COLUMN = "column"
    ROW = "row"
    EMBEDDING = "embedding"
    SPLIT = "split"
    ROUTER = "router"
    EXPERT = "expert"
    REPLICATED = "replicated"


class Split(enum.StrEnum):
    """Which GEMM dimension a sharded layer divides (share.shard)."""

    N = "n"  # output features: column-parallel, MODEL's split, the vocabulary
    K = "k"  # the reduction: row-parallel
