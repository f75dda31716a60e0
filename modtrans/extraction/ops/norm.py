"""Normalisations and embeddings.

norm        forward 5·E (statistics 2E, normalise and affine 3E); input-grad 8·E; weight-grad 2·E
LRN         forward and input-grad (2·size + 3)·E over its channel window (flops.lrn); no parameters
embedding   forward 0 (a copy); input-grad 0 (ids have none); weight-grad E (scatter-add);
            EmbedLayerNormalization (com.microsoft) adds its norm: 5·E and 3·E
"""

from __future__ import annotations

from modtrans.extraction.ops.registry import (
    DEFAULT,
    MICROSOFT,
    Facts,
    NodeView,
    handles,
    param_roles,
    unknown,
)
from modtrans.ir import flops
from modtrans.ir.document import Flops, Kind, Role


@handles(
    "BatchNormalization",
    "InstanceNormalization",
    "LayerNormalization",
    "GroupNormalization",
    "RMSNormalization",
    "LpNormalization",
)
@handles(
    "SkipLayerNormalization",
    "SimplifiedLayerNormalization",
    "SkipSimplifiedLayerNormalization",
    domains=(DEFAULT, MICROSOFT),
)
def norm(node: NodeView) -> Facts:
    if node.op_type == "BatchNormalization":
        roles = [(1, Role.SCALE), (2, Role.SHIFT), (3, Role.STATISTIC), (4, Role.STATISTIC)]
    elif node.op_type.startswith("Skip"):
        roles = [(2, Role.SCALE), (3, Role.SHIFT), (4, Role.BIAS)]
    else:
        roles = [(1, Role.SCALE), (2, Role.SHIFT)]
    e = node.out_elements
    if e is None:
        return unknown(Kind.NORM, param_roles(node, roles))
    return Facts(Kind.NORM, param_roles(node, roles), flops.norm(e))


@handles("LRN")
def lrn(node: NodeView) -> Facts:
    size = node.attrs.get("size")  # required by the operator's definition
    e = node.out_elements
    if e is None or not isinstance(size, int) or size < 1:
        return unknown(Kind.NORM, {})
    return Facts(Kind.NORM, {}, flops.lrn(e, size))


@handles("Gather", "GatherElements", "GatherND")
@handles("EmbedLayerNormalization", domains=(DEFAULT, MICROSOFT))
def gather(node: NodeView) -> Facts:
    if node.op_type == "EmbedLayerNormalization":
        roles = param_roles(
            node, [(2, Role.WEIGHT), (3, Role.WEIGHT), (4, Role.WEIGHT), (5, Role.SCALE), (6, Role.SHIFT)]
        )
        e = node.out_elements
        if e is None:
            return unknown(Kind.EMBEDDING, roles)
        return Facts(Kind.EMBEDDING, roles, Flops(5 * e, 0, 3 * e))
    if node.param(0):
        if node.out_elements is None:
            return unknown(Kind.EMBEDDING, {0: Role.WEIGHT})
        return Facts(Kind.EMBEDDING, {0: Role.WEIGHT}, flops.embedding(node.out_elements))
    return Facts(Kind.DATA)
