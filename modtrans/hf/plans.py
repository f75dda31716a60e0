"""A model's own tensor-parallel plan (transformers' `config.base_model_tp_plan`) read as the
Megatron-LM roles strategy/llm/tensor.py gives: each style transformers registers
(transformers/distributed/tensor_parallel.py, ALL_PARALLEL_STYLES) mapped to the Megatron layer
whose collectives it sends.

    colwise, unit_colwise, packed_colwise   ColumnParallelLinear: the output split by columns, the
                                            input's gradient all-reduced (gate and up packed as one)
    colwise_gather_output, colwise_rep      ColumnParallelLinear(gather_output=True): the same, its
                                            output gathered after the forward
    rowwise, unit_rowwise, packed_rowwise   RowParallelLinear: the input split, the output all-reduced
    rowwise_split_input, rowwise_rep        RowParallelLinear(input_is_parallel=False): the same, its
                                            whole input split first (no collective)
    embedding_rowwise                       VocabParallelEmbedding: rows split, the output all-reduced
    embedding_colwise                       the hidden width split: an all-gather (not Megatron's)
    moe_tp_experts                          every expert's weights split: an all-reduce of the partial
                                            outputs (tensor.py leaves experts to expert parallelism)
    sequence_parallel, replicate,           replicated: every rank holds the whole parameter
    replicated_with_grad_allreduce,
    local_params, all_reduce, mla_kv_a_proj

A plan's keys name modules from the base model on, with `*` for a block's index
(`layers.*.self_attn.q_proj`); the IR names them from the model class on (`model.layers.3...`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from modtrans.strategy.roles import LayerRole

STYLES: dict[str, LayerRole] = {
    "colwise": LayerRole.COLUMN,
    "unit_colwise": LayerRole.COLUMN,
    "packed_colwise": LayerRole.COLUMN,
    "colwise_gather_output": LayerRole.COLUMN,
    "colwise_rep": LayerRole.COLUMN,
    "rowwise": LayerRole.ROW,
    "unit_rowwise": LayerRole.ROW,
    "packed_rowwise": LayerRole.ROW,
    "rowwise_split_input": LayerRole.ROW,
    "rowwise_rep": LayerRole.ROW,
    "embedding_rowwise": LayerRole.EMBEDDING,
    "moe_tp_experts": LayerRole.EXPERT,
    "sequence_parallel": LayerRole.REPLICATED,
    "replicate": LayerRole.REPLICATED,
    "replicated_with_grad_allreduce": LayerRole.REPLICATED,
    "local_params": LayerRole.REPLICATED,
    "all_reduce": LayerRole.REPLICATED,
    "mla_kv_a_proj": LayerRole.REPLICATED,
}
"""transformers' style -> the role tensor.py gives the layer (local_<style>: the same role)."""


def role(style: str) -> LayerRole | None:
    """The role of a plan's style (None: a style transformers added after this table)."""
    return STYLES.get(style.removeprefix("local_"))


def planned(plan: Mapping[str, str], layers: list[str]) -> dict[str, LayerRole]:
    """Each IR layer a plan names -> its role: a key matches the end of the layer's module path,
    `*` standing for one path segment (a block's index)."""
    patterns = [
        (re.compile(r"(^|\.)" + re.escape(key).replace(r"\*", r"[^.]+") + "$"), style)
        for key, style in plan.items()
    ]
    found: dict[str, LayerRole] = {}
    for name in layers:
        for pattern, style in patterns:
            r = role(style)
            if r is not None and pattern.search(name):
                found[name] = r
                break
    return found


def refusal(model_type: str, plan: Mapping[str, str] | None, tp: int) -> str | None:
    """The one line refusing `tp` > 1 tensor ranks for a model whose configuration names no split."""
    if tp <= 1 or plan:
        return None
    return (
        f"--tp {tp}: {model_type}'s configuration has no base_model_tp_plan (transformers names no "
        "tensor-parallel split for it); data parallelism, ZeRO and FSDP need none"
    )
