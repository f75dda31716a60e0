"""The attention core: the layers between an attention's score product (q k^T) and its context
product (the probabilities times v), what FlashAttention computes inside one kernel (Dao et al.
2022, arXiv 2205.14135, Algorithm 1: the scale, the mask, the softmax's running max and sum, the
dropout, all on tiles in SRAM) and an eager implementation runs kernel by kernel over the s x s
scores: Hugging Face's eager_attention_forward (transformers/models/llama/modeling_llama.py:
matmul, `* scaling`, `+ causal_mask`, softmax in fp32, `.to(query.dtype)`, dropout, matmul),
gpt-oss's sinks (modeling_gpt_oss.py: cat of the sink logits, max, subtraction, softmax, the
sink column dropped), an ONNX export's Div, Where and Add between its two MatMuls.

`mark` finds them by the graph, not by name: from each score product (an attention's MATMUL of
two activations), forward through its consumers in the same block's attention, not past another
product, a projection or a norm, the layers from which a product (the context) is reached.
The cost model charges them nothing under a fused kernel (cost/gpu.py, attention_seconds).

A core that adds a per-head term to the scores (an Add whose other operand is [.., heads, q, k]
with more than one head: T5's relative position bias, T5Attention.compute_bias) marks its block's
attention Heads.bias: transformers hands such a bias to PyTorch's SDPA as a float attn_mask, which
its FlashAttention backend refuses (cost/gpu.py, masked). A causal or padding mask is [b, 1, q, k]:
one for every head, not a bias.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from modtrans.ir.document import Kind, Layer, Part, consumers

STOP = frozenset({Kind.LINEAR, Kind.CONV, Kind.NORM})
"""What ends a core: a projection or a norm (the sinks' logits are a parameter inside it: gpt-oss)."""


def mark(layers: Sequence[Layer]) -> list[Layer]:
    """`layers` with each attention core's layers (neither product) marked Block.core."""
    by_name = {x.name: x for x in layers}
    after = consumers(layers)
    core: set[str] = set()
    for x in layers:
        if _product(x):
            core |= _between(x, by_name, after)
    if not core:
        return list(layers)
    biased = {x.block.index for x in layers if x.name in core and x.block is not None and _per_head(x)}
    return [_marked(x, x.name in core, x.block is not None and x.block.index in biased) for x in layers]


def _per_head(x: Layer) -> bool:
    """A core Add of the scores and a per-head term: both operands [.., heads, q, k], heads > 1
    (T5's bias; a causal or padding mask's second axis is 1)."""
    if x.op_type != "Add" or x.block is None or x.block.heads is None or x.block.heads.query < 2:
        return False
    heads = x.block.heads.query
    return sum(a.shape is not None and len(a.shape) == 4 and a.shape[1] == heads for a in x.inputs) >= 2


def _product(x: Layer) -> bool:
    """An attention's product of two activations: the score or the context matmul."""
    return x.kind is Kind.MATMUL and not x.params and x.block is not None and x.block.part is Part.ATTENTION


def _between(score: Layer, by_name: dict[str, Layer], consumers: dict[str, list[str]]) -> set[str]:
    """The layers after `score`, in its block's attention, that a product after them reads."""
    block = score.block.index if score.block is not None else None
    reached: dict[str, bool] = {}  # a layer after the score: whether a product follows it
    stack = list(consumers.get(score.name, ()))
    order: list[str] = []
    while stack:
        name = stack.pop()
        x = by_name.get(name)
        if name in reached or x is None or x.block is None or x.block.index != block:
            continue
        if x.block.part is not Part.ATTENTION or x.kind in STOP:
            continue
        reached[name] = _product(x)
        if not reached[name]:
            order.append(name)
            stack.extend(consumers.get(name, ()))
    leads: set[str] = set()
    changed = True
    while changed:  # a layer leads to a product when one of its consumers is one, or leads to one
        changed = False
        for name in order:
            if name not in leads and any(reached.get(c) or c in leads for c in consumers.get(name, ())):
                leads.add(name)
                changed = True
    return leads


def _marked(x: Layer, core: bool, biased: bool) -> Layer:
    """`x` marked Block.core where it is in a core; in a block whose core adds a per-head bias,
    its attention's heads marked Heads.bias."""
    if x.block is None or not (core or biased):
        return x
    block = dataclasses.replace(x.block, core=x.block.core or core)
    heads = block.heads
    if biased and heads is not None and block.part is Part.ATTENTION:
        block = dataclasses.replace(block, heads=dataclasses.replace(heads, bias=True))
    return dataclasses.replace(x, block=block)
