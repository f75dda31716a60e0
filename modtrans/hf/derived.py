"""The tensor-parallel plan Megatron-LM would apply to a model whose configuration publishes none
(BLOOM, OPT, MPT, GPT-Neo: transformers 5.x names no base_model_tp_plan for them, though BLOOM
176B trained at TP 4 and OPT-175B at TP 8; Falcon, GPT-NeoX, GPT-2 and BERT are llm/'s own
families, split by the same rule), derived from the recorded forward, not from a table of
families. A published plan that names no layer of the blocks (transformers 5.25's HunYuan dense
and GPT-OSS: embed_tokens alone, which transformers' apply_tensor_parallelism applies to that
module alone, every block whole on each rank) is completed by this one on the blocks (blockless).

Megatron-Core's rule (megatron/core/transformer/attention.py: linear_qkv a ColumnParallelLinear,
linear_proj a RowParallelLinear; mlp.py: linear_fc1 column, linear_fc2 row): the linear layers of
a block that read its (normed) input are column-parallel, the one whose output returns to the
residual stream is row-parallel. strategy/llm/tensor.roles_of reads that from the data flow (a
linear layer fed, through layers without parameters, by a column-parallel one is row-parallel),
the one definition of the rule; this module keeps the blocks' linear layers it names, as plan keys
with `*` for the block index (`transformer.h.*.self_attention.query_key_value: colwise`), and
refuses a block it does not understand:
    - a convolution or a recurrence with parameters (Mamba's and RecurrentGemma's mixers);
    - a column-parallel layer whose split output reaches another linear layer that is not
      row-parallel (a low-rank projection's down and up pair, MLA's q_a_proj / q_b_proj): Megatron
      keeps such a layer whole or gathers it, which the rule cannot tell;
    - a row-parallel layer fed by a linear layer the rule did not split (its input would be half
      split);
    - a key whose blocks disagree (heterogeneous blocks under one name), or no row-parallel layer.
A norm on a split output is treated as transformers' own plans treat it (_normed): one over each
head (Qwen3's q_norm) replicated with its gradient all-reduced, one over the whole projection
(OLMo 2's q_norm) gathered around (colwise_gather_output, rowwise_split_input).
A parallel-residual block (GPT-J, GPT-NeoX, Falcon: attention and MLP side by side on one normed
input) has two row-parallel outputs, as Megatron's parallel-attention variants do. The heads must
divide T (strategy/llm/tensor.check_heads, Megatron-Core's divide), a fused QKV's and a GQA
model's key/value heads too. tests/test_hf_derived_plans.py holds the derivation to every family
transformers does publish a plan for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from modtrans.hf import plans
from modtrans.ir.document import Kind, Layer, ModelIR, consumers
from modtrans.strategy.llm.options import LayoutError
from modtrans.strategy.llm.tensor import check_heads, roles_of
from modtrans.strategy.roles import LayerRole
from modtrans.strategy.share import SHARDABLE

STYLE = {LayerRole.COLUMN: "colwise", LayerRole.ROW: "rowwise"}
"""Megatron's two linear layers as transformers' styles (hf/plans.py): ColumnParallelLinear and
RowParallelLinear."""


def derive(ir: ModelIR) -> tuple[dict[str, str], str | None]:
    """The plan of the blocks' linear layers (key -> style) and None, or {} and the reason the
    blocks are not ones the rule understands."""
    linears = [x for x in ir.layers if _linear(x) and _in_block(x)]
    if not linears:
        return {}, "its blocks ran no linear layer"
    other = next((x for x in ir.layers if _in_block(x) and x.params and not _block_kind(x)), None)
    if other is not None:  # a convolution, a recurrence's own weights: channels the rule does not split
        kind = other.kind.value
        return {}, f"its blocks hold a {kind} layer with parameters ({other.name}): no transformer block's"
    roles = roles_of(ir, linears)
    flow = _Flow(ir)
    reason = _unpaired(linears, roles, flow)
    if reason is not None:
        return {}, reason
    styles = {x.name: STYLE[r] for x in linears if (r := roles.get(x.name, LayerRole.REPLICATED)) in STYLE}
    if len(styles) < len(linears):
        unsplit = next(x.name for x in linears if x.name not in styles)
        return {}, f"{unsplit} is neither column- nor row-parallel"
    _normed(linears, styles, flow)
    return _keyed(styles, flow)


def _unpaired(linears: Sequence[Layer], roles: Mapping[str, LayerRole], flow: _Flow) -> str | None:
    """Why a column-parallel layer's split output reaches no row-parallel layer, or a row-parallel
    layer reads a linear layer that is not column-parallel (None: every split is paired)."""
    for x in linears:
        role = roles.get(x.name)
        if role is LayerRole.COLUMN:
            after = flow.linears(x.name, flow.consumers)
            wrong = sorted(n for n in after if roles.get(n) is not LayerRole.ROW)
            if wrong or not after:
                reached = wrong[0] if wrong else "the residual stream"
                return f"{x.name}'s split output reaches {reached}, which is not row-parallel"
        elif role is LayerRole.ROW:
            before = flow.linears(x.name, flow.producers)
            wrong = sorted(n for n in before if roles.get(n) is not LayerRole.COLUMN)
            if wrong:
                return f"{x.name} reads {wrong[0]}, which is not column-parallel"
    return None


class _Flow:
    """The IR's data flow: each layer by name, its producers and its consumers."""

    def __init__(self, ir: ModelIR) -> None:
        self.by_name = {x.name: x for x in ir.layers}
        self.producers = {x.name: x.producers for x in ir.layers}
        self.consumers = consumers(ir.layers)

    def linears(
        self, name: str, edges: Mapping[str, Sequence[str]], norms: list[str] | None = None
    ) -> set[str]:
        """The nearest linear layers along `edges` from `name` (consumers: downstream; producers:
        upstream), through every other layer (norms included: Qwen3's per-head q_norm sits
        between q_proj and the attention; each passed appended to `norms`), a mixture's experts
        and router counted as linear layers, an embedding a source (T5's position bias)."""
        found: set[str] = set()
        stack = list(edges.get(name, ()))
        seen: set[str] = set()
        while stack:
            other = stack.pop()
            if other in seen or other not in self.by_name:
                continue
            seen.add(other)
            layer = self.by_name[other]
            if layer.kind is Kind.EMBEDDING:
                continue
            if layer.kind in SHARDABLE and layer.params:
                found.add(other)
                continue
            if norms is not None and layer.kind is Kind.NORM and layer.params:
                norms.append(other)
            stack += edges.get(other, ())
        return found


def _normed(linears: Sequence[Layer], styles: dict[str, str], flow: _Flow) -> None:
    """The norms on a split output, as transformers' plans treat them: one over each head (Qwen3's
    q_norm: a weight narrower than the projection) stays replicated with its gradient all-reduced
    over the tensor ranks (replicated_with_grad_allreduce); one over the whole projection (OLMo
    2's q_norm) needs it whole: every projection feeding that attention gathers its output
    (colwise_gather_output) and the output projection splits its whole input (rowwise_split_input),
    as OLMo 2's plan does (Megatron-Core has no such norm)."""
    whole: set[str] = set()
    for x in linears:
        if styles[x.name] != "colwise":
            continue
        norms: list[str] = []
        rows = flow.linears(x.name, flow.consumers, norms)
        width = x.outputs[0].shape[-1] if x.outputs and x.outputs[0].shape else None
        for n in norms:
            if max(p.elements for p in flow.by_name[n].params) == width:  # its scale (and bias)
                whole |= rows
            else:
                styles[n] = "replicated_with_grad_allreduce"
    for row in whole:
        styles[row] = "rowwise_split_input"
        for column in flow.linears(row, flow.producers):
            styles[column] = "colwise_gather_output"


def _keyed(styles: Mapping[str, str], flow: _Flow) -> tuple[dict[str, str], str | None]:
    """Each layer's key (its block index as `*`) -> its style; a key whose blocks disagree
    refused."""
    plan: dict[str, str] = {}
    for name, style in styles.items():
        key = key_of(flow.by_name[name])
        if plan.setdefault(key, style) != style:
            return {}, f"{key} is split one way in one block and another way in another"
    if not any(plans.role(s) is LayerRole.ROW for s in plan.values()):
        return {}, "no linear layer of its blocks reads another's output (no row-parallel layer)"
    return plan, None


def key_of(layer: Layer) -> str:
    """A block layer's plan key: its name with the block's index, the first path segment that is a
    number, as `*` (`transformer.h.3.mlp.fc_in` -> `transformer.h.*.mlp.fc_in`; a decoder's block 1
    is `model.decoder.layers.1`, whatever its index among all the blocks)."""
    return re.sub(r"(^|\.)\d+(\.|$)", r"\1*\2", layer.name, count=1)


def _block_kind(layer: Layer) -> bool:
    """Not a convolution or a recurrence: transformers' Conv1D (GPT-2's c_attn: "works like a
    linear layer but the weights are transposed", transformers/pytorch_utils.py) is a linear
    layer, its weight 2-D where a convolution's is 3-D or more; an elementwise layer with
    parameters (attention sinks, a router's bias) is a transformer block's."""
    if layer.kind is Kind.CONV:
        return all(len(p.shape) <= 2 for p in layer.params)
    return layer.kind not in (Kind.CONV_TRANSPOSE, Kind.RNN)


def _linear(layer: Layer) -> bool:
    """A dense linear layer with parameters (a mixture's experts and router are expert
    parallelism's: tensor.py does not split them over T; an embedding in a block, T5's relative
    position bias, stays whole, as Megatron's T5 relative position embedding is a torch Embedding)."""
    return (
        layer.kind in SHARDABLE
        and layer.kind is not Kind.EMBEDDING
        and bool(layer.params)
        and layer.moe is None
    )


def _in_block(layer: Layer) -> bool:
    """In a block, and run by the forward (layers.py names a module it did not run MODULE.unused)."""
    return layer.block is not None and layer.block.index is not None and not layer.name.endswith(".unused")


def said(family: str, tp: int, plan: Mapping[str, str], published: Mapping[str, str] | None = None) -> str:
    """M806's line: the plan is derived, and which layers it splits how; `published`: the
    configuration's own plan, which names no layer of the blocks (blockless) and is kept beside."""
    column = [k for k, v in plan.items() if plans.role(v) is LayerRole.COLUMN]
    row = [k for k, v in plan.items() if plans.role(v) is LayerRole.ROW]
    why = (
        f"{_alone(family, published)}; its blocks split"
        if published
        else (f"{family}'s configuration has no base_model_tp_plan; split")
    )
    return (
        f"--tp {tp}: {why} as Megatron-LM splits a transformer block, derived from its forward: "
        f"column-parallel {', '.join(column)}; row-parallel {', '.join(row)}"
    )


def whole(family: str, tp: int, published: Mapping[str, str], reason: str) -> str:
    """M806's line where the configuration's plan names no layer of the blocks and Megatron-LM's
    split cannot be derived (`reason`): the plan followed, the blocks whole on every rank."""
    return (
        f"--tp {tp}: {_alone(family, published)}, nor could Megatron-LM's split be derived from its "
        f"forward: {reason}; its blocks stay whole on every tensor rank"
    )


def _alone(family: str, published: Mapping[str, str]) -> str:
    """What a plan naming no layer of the blocks is: transformers' apply_tensor_parallelism
    (transformers/distributed/tensor_parallel.py) installs a style on the modules the plan names
    alone, so tp_plan="auto" runs every block whole on each rank."""
    keys = ", ".join(sorted(published))
    return (
        f"{family}'s base_model_tp_plan names {keys} alone, no layer of its blocks "
        '(transformers\' tp_plan="auto" runs them whole on each rank)'
    )


def blockless(ir: ModelIR, plan: Mapping[str, str]) -> bool:
    """Whether a published plan names no layer with parameters inside the blocks (HunYuan dense's
    and GPT-OSS's in transformers 5.25: embed_tokens alone), so that it splits nothing Megatron-LM
    splits in a transformer block: such a plan is completed by the derived one (hf/__init__)."""
    return not plans.planned(plan, [x.name for x in ir.layers if x.params and _in_block(x)])


def divides(ir: ModelIR, tp: int) -> bool:
    """Whether the heads divide over `tp` ranks (tensor.check_heads, Megatron-Core's divide): where
    they do not, the layout's refusal is the one line said, no M806 beside it."""
    try:
        check_heads(ir, tp)
    except LayoutError:
        return False
    return True
