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
with more than one head: T5's relative position bias, T5Attention.compute_bias) marks that
attention's layers (its products and its core) Heads.bias, and every attention of its numbered
block: transformers hands such a bias to PyTorch's SDPA as a float attn_mask, which its
FlashAttention backend refuses (cost/attention.py, masked), and T5's stack hands each block's
cross-attention one too, zeros with the encoder's mask (T5Attention.forward: position_bias =
torch.zeros(1, n_heads, q, k) where it has no relative bias; recorded: tests/test_sdpa_masks.py).
A causal or padding mask is [b, 1, q, k]: one for every head, not a bias.
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
    biased: set[str] = set()  # the layers of an attention whose core adds a per-head bias
    for x in layers:
        if _product(x):
            between = _between(x, by_name, after)
            core |= between
            if any(_per_head(by_name[name]) for name in between):
                products = {c for name in between for c in after.get(name, ()) if _product(by_name[c])}
                biased |= {x.name, *between, *products}
    if not core:
        return list(layers)
    blocks = {x.block.index for x in layers if x.name in biased and x.block is not None} - {None}
    return [_marked(x, x.name in core, x.name in biased or _in(x, blocks)) for x in layers]


def _in(x: Layer, blocks: set[int | None]) -> bool:
    """Whether `x` is in one of the numbered `blocks` (a tower's layers, index None, are not)."""
    return x.block is not None and x.block.index is not None and x.block.index in blocks


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
    """`x` marked Block.core where it is in a core, and its heads Heads.bias where it is a layer
    of an attention whose core adds a per-head bias."""
    if x.block is None or not (core or biased):
        return x
    block = dataclasses.replace(x.block, core=x.block.core or core)
    heads = block.heads
    if biased and heads is not None and block.part is Part.ATTENTION:
        block = dataclasses.replace(block, heads=dataclasses.replace(heads, bias=True))
    return dataclasses.replace(x, block=block)
