"""The tensor-parallel plan Megatron-LM would apply to a model whose configuration publishes none
(BLOOM, OPT, GPT-J, MPT, Falcon, GPT-NeoX: transformers names no base_model_tp_plan for them,
though BLOOM 176B trained at TP 4 and OPT-175B at TP 8), derived from the recorded forward, not
from a table of families.

Megatron-Core's rule (megatron/core/transformer/attention.py: linear_qkv a ColumnParallelLinear,
linear_proj a RowParallelLinear; mlp.py: linear_fc1 column, linear_fc2 row): the linear layers of
a block that read its (normed) input are column-parallel, the one whose output returns to the
residual stream is row-parallel. strategy/llm/tensor.roles_of reads that from the data flow (a
linear layer fed, through layers without parameters, by a column-parallel one is row-parallel),
the one definition of the rule; this module keeps the blocks' linear layers it names, as plan keys
with `*` for the block index (`transformer.h.*.self_attention.query_key_value: colwise`), and
refuses a block it does not understand:
    - a column-parallel layer whose split output reaches another linear layer that is not
      row-parallel (a low-rank projection's down and up pair, MLA's q_a_proj / q_b_proj): Megatron
      keeps such a layer whole or gathers it, which the rule cannot tell;
    - a row-parallel layer fed by a linear layer the rule did not split (its input would be half
      split);
    - a key whose blocks disagree (heterogeneous blocks under one name), or no row-parallel layer.
A parallel-residual block (GPT-J, GPT-NeoX, Falcon: attention and MLP side by side on one normed
input) has two row-parallel outputs, as Megatron's parallel-attention variants do. The heads must
divide T (strategy/llm/tensor.check_heads, Megatron-Core's divide), a fused QKV's and a GQA
model's key/value heads too. tests/test_hf_derived_plans.py holds the derivation to every family
transformers does publish a plan for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from modtrans.ir.document import Kind, Layer, ModelIR
from modtrans.strategy.llm.tensor import roles_of
from modtrans.strategy.roles import LayerRole
from modtrans.strategy.share import SHARDABLE

STYLE = {LayerRole.COLUMN: "colwise", LayerRole.ROW: "rowwise"}
"""Megatron's two linear layers as transformers' styles (hf/plans.py): ColumnParallelLinear and
RowParallelLinear."""


def derive(ir: ModelIR) -> tuple[dict[str, str], str | None]:
    """The plan of the blocks' linear layers (key -> colwise / rowwise) and None, or {} and the
    reason the blocks are not ones the rule understands."""
    linears = [x for x in ir.layers if _linear(x) and _in_block(x)]
    if not linears:
        return {}, "its blocks ran no linear layer"
    roles = roles_of(ir, linears)
    by_name = {x.name: x for x in ir.layers}
    consumers = _consumers(ir.layers)
    for x in linears:
        role = roles.get(x.name)
        if role is LayerRole.COLUMN:
            after = _linears_beside(x.name, consumers, by_name)
            wrong = sorted(n for n in after if roles.get(n) is not LayerRole.ROW)
            if wrong or not after:
                reached = wrong[0] if wrong else "the residual stream"
                return {}, f"{x.name}'s split output reaches {reached}, which is not row-parallel"
        elif role is LayerRole.ROW:
            before = _linears_beside(x.name, {k.name: k.producers for k in ir.layers}, by_name)
            wrong = sorted(n for n in before if roles.get(n) is not LayerRole.COLUMN)
            if wrong:
                return {}, f"{x.name} reads {wrong[0]}, which is not column-parallel"
    return _keyed(linears, roles)


def _keyed(linears: Sequence[Layer], roles: Mapping[str, LayerRole]) -> tuple[dict[str, str], str | None]:
    """Each block linear's key (its block index as `*`) -> its style; a key whose blocks disagree
    refused."""
    plan: dict[str, str] = {}
    for x in linears:
        style = STYLE.get(roles.get(x.name, LayerRole.REPLICATED))
        if style is None:
            return {}, f"{x.name} is neither column- nor row-parallel"
        key = key_of(x)
        if plan.setdefault(key, style) != style:
            return {}, f"{key} is column-parallel in one block and row-parallel in another"
    if "rowwise" not in plan.values():
        return {}, "no linear layer of its blocks reads another's output (no row-parallel layer)"
    return plan, None


def key_of(layer: Layer) -> str:
    """A block layer's plan key: its name with the block's index as `*` (the first path segment
    that is the index: `transformer.h.3.mlp.fc_in` -> `transformer.h.*.mlp.fc_in`)."""
    index = layer.block.index if layer.block is not None else None
    return re.sub(rf"(^|\.){index}(\.|$)", r"\1*\2", layer.name, count=1)


def _linear(layer: Layer) -> bool:
    """A dense linear layer with parameters (a mixture's experts and router are expert
    parallelism's: tensor.py does not split them over T)."""
    return layer.kind in SHARDABLE and bool(layer.params) and layer.moe is None


def _in_block(layer: Layer) -> bool:
    return layer.block is not None and layer.block.index is not None


def _consumers(layers: Sequence[Layer]) -> dict[str, list[str]]:
    """Each layer -> the layers that read its output."""
    found: dict[str, list[str]] = {}
    for x in layers:
        for p in x.producers:
            found.setdefault(p, []).append(x.name)
    return found


def _linears_beside(name: str, edges: Mapping[str, Sequence[str]], by_name: Mapping[str, Layer]) -> set[str]:
    """The nearest linear layers along `edges` from `name` (consumers: downstream; producers:
    upstream), through every other layer (norms included: Qwen3's per-head q_norm sits between
    q_proj and the attention), a mixture's experts and router counted as linear layers."""
    found: set[str] = set()
    stack = list(edges.get(name, ()))
    seen: set[str] = set()
    while stack:
        other = stack.pop()
        if other in seen or other not in by_name:
            continue
        seen.add(other)
        layer = by_name[other]
        if layer.kind is Kind.EMBEDDING:  # a source (T5's relative position bias), not a split
            continue
        if layer.kind in SHARDABLE and layer.params:
            found.add(other)
        else:
            stack += edges.get(other, ())
    return found


def said(family: str, tp: int, plan: Mapping[str, str]) -> str:
    """M806's line: the plan is derived, and which layers it splits how."""
    column = [k for k, v in plan.items() if v == "colwise"]
    row = [k for k, v in plan.items() if v == "rowwise"]
    return (
        f"--tp {tp}: {family}'s configuration has no base_model_tp_plan; split as Megatron-LM splits a "
        f"transformer block, derived from its forward: column-parallel {', '.join(column)}; "
        f"row-parallel {', '.join(row)}"
    )
