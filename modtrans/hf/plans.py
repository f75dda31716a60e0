"""A model's own tensor-parallel plan (transformers' `config.base_model_tp_plan`): each layer it
names carries its style in the IR (Layer.tp_style), and strategy/llm/tensor.py splits the layer
and sends the collectives of the Megatron-LM layer of that style. What each style does at run
time is transformers/distributed/tensor_parallel.py (transformers 5.x, ALL_PARALLEL_STYLES);
its Megatron equivalent is megatron/core/tensor_parallel/layers.py and mappings.py:

    colwise, unit_colwise, packed_colwise   ColwiseParallel / PackedColwiseParallel: the weight's
        output rows split, the input replicated, its gradient partial and all-reduced
        (transform_inputs_pre_forward: DTensor.from_local(Replicate), grad Partial); Megatron's
        ColumnParallelLinear (copy_to_tensor_model_parallel_region: backward all-reduce)
    colwise_gather_output, colwise_rep      ColwiseParallel(output_layouts=Replicate()): the same,
        and the output all-gathered after the forward (transform_output_post_forward: Shard(-1)
        -> Replicate redistribute), its gradient split back with no collective; Megatron's
        ColumnParallelLinear(gather_output=True) (_GatherFromModelParallelRegion)
    rowwise, unit_rowwise, packed_rowwise   RowwiseParallel: the input split, the partial output
        all-reduced after the forward (Partial -> Replicate); RowParallelLinear
    rowwise_split_input, rowwise_rep        RowwiseParallel(input_layouts=Replicate()): the same on
        a whole input split first (Replicate -> Shard(-1): no collective forward), its gradient
        all-gathered in the backward (Shard(-1) -> Replicate); RowParallelLinear(
        input_is_parallel=False) (_ScatterToModelParallelRegion.backward: _gather_along_last_dim)
    embedding_rowwise                       EmbeddingParallel(shard_dim=0): vocabulary rows split,
        the partial lookups all-reduced; VocabParallelEmbedding
    embedding_colwise                       EmbeddingParallel(shard_dim=1): the hidden width split,
        the slices all-gathered after the forward (not a Megatron layer)
    replicated_with_grad_allreduce          ReplicatedWithGradAllReduce: replicated, its gradient
        all-reduced over the tensor ranks once per iteration (a post-accumulate-grad hook: a norm
        on this rank's heads, Qwen3's q_norm / k_norm)
    all_reduce                              AllReduceParallel: the partial output all-reduced
    moe_tp_experts                          MoeExpertsParallel: left to expert parallelism
                                            (tensor.py does not split experts over T)
    sequence_parallel, replicate, local_params, mla_kv_a_proj
                                            replicated, no collective modelled (mla_kv_a_proj's
                                            backward all-reduce of the rope slice is not)

A plan's keys name modules from the base model on, with `*` for a block's index
(`layers.*.self_attn.q_proj`); the IR names them from the model class on (`model.layers.3...`).
Each key is first anchored where the model's own tp_plan puts it (library.anchored: a multimodal
model's text model, `model.language_model.`), so a tower's modules of the same names stay whole.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from modtrans.ir.document import Layer, ModelIR
from modtrans.strategy.roles import LayerRole


@dataclass(frozen=True, slots=True)
class Style:
    """What a style does beyond its role's collectives (tensor.py sends those)."""

    role: LayerRole
    gather_output: bool = False  # all-gather the output after the forward
    split_input: bool = False  # a whole input split: its gradient all-gathered after the backward
    reduce_output: bool = False  # a replicated module's partial output all-reduced
    reduce_grads: bool = False  # a replicated module's gradient all-reduced once per iteration


COLUMN, ROW, REPLICATED = Style(LayerRole.COLUMN), Style(LayerRole.ROW), Style(LayerRole.REPLICATED)
GATHERED = Style(LayerRole.COLUMN, gather_output=True)
SPLIT = Style(LayerRole.ROW, split_input=True)

STYLES: dict[str, Style] = {
    "colwise": COLUMN,
    "unit_colwise": COLUMN,
    "packed_colwise": COLUMN,
    "colwise_gather_output": GATHERED,
    "colwise_rep": GATHERED,
    "rowwise": ROW,
    "unit_rowwise": ROW,
    "packed_rowwise": ROW,
    "rowwise_split_input": SPLIT,
    "rowwise_rep": SPLIT,
    "embedding_rowwise": Style(LayerRole.EMBEDDING),
    "embedding_colwise": GATHERED,
    "moe_tp_experts": Style(LayerRole.EXPERT),
    "replicated_with_grad_allreduce": Style(LayerRole.REPLICATED, reduce_grads=True),
    "all_reduce": Style(LayerRole.REPLICATED, reduce_output=True),
    "sequence_parallel": REPLICATED,
    "replicate": REPLICATED,
    "local_params": REPLICATED,
    "mla_kv_a_proj": REPLICATED,
}
"""transformers' style -> what tensor.py does with the layer (local_<style>: the same)."""


def style(name: str) -> Style | None:
    """A plan's style (None: one transformers added after this table)."""
    return STYLES.get(name) or STYLES.get(name.removeprefix("local_"))


def role(name: str) -> LayerRole | None:
    """The role of a plan's style (None: a style transformers added after this table)."""
    found = style(name)
    return None if found is None else found.role


def planned(plan: Mapping[str, str], layers: Sequence[str]) -> dict[str, str]:
    """Each IR layer a plan names -> its style: a key matches the end of the layer's module path,
    `*` standing for one path segment (a block's index)."""
    patterns = [
        (re.compile(r"(^|\.)" + re.escape(key).replace(r"\*", r"[^.]+") + "$"), name)
        for key, name in plan.items()
        if style(name) is not None
    ]
    found: dict[str, str] = {}
    for layer in layers:
        for pattern, name in patterns:
            if pattern.search(layer):
                found[layer] = name
                break
    return found


def annotate(ir: ModelIR, plan: Mapping[str, str]) -> ModelIR:
    """The IR with each layer the plan names carrying its style (Layer.tp_style)."""
    named = planned(plan, [x.name for x in ir.layers if x.params])
    if not named:
        return ir
    layers = tuple(
        dataclasses.replace(x, tp_style=named[x.name]) if x.name in named else x for x in ir.layers
    )
    return dataclasses.replace(ir, layers=layers)


def styled(ir: ModelIR) -> bool:
    """Whether the IR carries a plan's styles (the plan, not Megatron's rules, splits it)."""
    return any(x.tp_style is not None for x in ir.layers)


def of(layer: Layer) -> Style | None:
    """The style a layer's plan gives it (None: the plan does not name it, or there is none)."""
    return None if layer.tp_style is None else style(layer.tp_style)


def refusal(
    model_type: str,
    plan: Mapping[str, str] | None,
    tp: int,
    ir: ModelIR | None = None,
    reason: str | None = None,
) -> str | None:
    """The one line refusing `tp` > 1 tensor ranks for a model whose configuration names no split
    and whose blocks Megatron's rule could not split either (`reason`: derived.py's), or whose
    plan names none of the modules the forward ran."""
    if tp <= 1:
        return None
    if not plan:
        why = f"; nor could Megatron-LM's split be derived from its forward: {reason}" if reason else ""
        return (
            f"--tp {tp}: {model_type}'s configuration has no base_model_tp_plan (transformers names no "
            f"tensor-parallel split for it){why}; data parallelism, ZeRO and FSDP need none"
        )
    if ir is not None and not styled(ir):
        keys = ", ".join(sorted(plan)[:3])
        return (
            f"--tp {tp}: {model_type}'s base_model_tp_plan ({keys}) names none of the modules its "
            "forward ran; data parallelism, ZeRO and FSDP need none"
        )
    return None
