"""Each layer's block (index and part) from the module path in its name, where the path says so.

Exporters keep the module path in node names (`/model/layers.3/self_attn/q_proj/MatMul`), which
graph.readable turns into layer names (`model.layers.3.self_attn.q_proj`). The block index is the
number after `layers`, `h`, `layer` or `blocks` (the module lists of transformers, timm and
modtrans/llm); the part comes from the MoE marks (router, expert), the layer kind (norm,
embedding) and the module names around it (`attn`, `attention` -> attention; `mlp`,
`feed_forward`, `intermediate`, `output`, `block_sparse_moe` -> MLP; `lm_head`, `head`,
`classifier` outside the blocks -> head). A layer whose name says neither gets no block.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from modtrans.ir.document import Block, Kind, Layer, Part

_BLOCK = re.compile(r"\.(?:layers|h|layer|blocks)\.(\d+)\.")
_UNIQUE = re.compile(r"_\d+$")  # the suffix graph.Walker makes names unique with
_ATTENTION = frozenset({"attn", "self_attn", "attention", "self_attention", "cross_attn", "mixer"})
_MLP = frozenset({"mlp", "feed_forward", "ffn", "intermediate", "output", "block_sparse_moe", "moe"})
_HEAD = frozenset({"lm_head", "head", "classifier", "score"})


def index_of(name: str) -> int | None:
    """The transformer block a layer name's module path puts it in."""
    found = _BLOCK.search(f".{name}")
    return int(found.group(1)) if found else None


def part_of(layer: Layer, index: int | None) -> Part | None:
    if layer.moe is not None:
        return Part.ROUTER if layer.moe.expert is None else Part.EXPERT
    if layer.kind is Kind.NORM:
        return Part.NORM
    if layer.kind is Kind.EMBEDDING:
        return Part.EMBEDDING
    scopes = [_UNIQUE.sub("", s) for s in layer.name.split(".")]  # attn_4 -> attn
    if index is not None:
        if any(s in _ATTENTION for s in scopes):
            return Part.ATTENTION
        if any(s in _MLP for s in scopes):
            return Part.MLP
        return None
    if scopes[0] in _HEAD:
        return Part.HEAD
    return None


def mark(layers: Sequence[Layer]) -> list[Layer]:
    """The layers, each with the block its name says (unchanged where it says nothing)."""
    out = []
    for x in layers:
        index = index_of(x.name)
        part = part_of(x, index)
        if index is None and part is None:
            out.append(x)
        else:
            out.append(dataclasses.replace(x, block=Block(index, part)))
    return out
