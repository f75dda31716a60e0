"""A mixture of experts read through transformers: which layers are a router's and which an
expert's (document.Moe), from the configuration's counts (blocks.Shape: E, top-k, zero experts)
and the module path, parameters and output of each layer; a router's own MLP the router's.
tools/hf_moe_marks.py holds every MoE family transformers defines to these rules.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from modtrans.hf.blocks import Shape
from modtrans.ir.document import Block, Kind, Layer, Moe, Part


def moe(
    module: str,
    kind: Kind,
    params: Sequence[tuple[int, ...]],
    out: tuple[int, ...] | None,
    shape: Shape,
    run: int = 0,
) -> Moe | None:
    """A routed expert's layer, or the router's. Experts: the fused [E, ...] parameters of
    transformers 5's experts modules (one grouped layer of every expert); experts.<e>. or
    experts.expert_<e>. modules (expert e); a linear under `experts` of [tokens, f] output (an
    expert's run of weights read an expert at a time: DBRX's). The router: a linear whose weight
    is [E, hidden] (or whose output is E wide; E and zero experts: scores) in a module named gate
    or router; its module may run the top-k after it, so its output is [tokens, k]
    (MixtralTopKRouter, NemotronHTopkRouter). `params`: the layer's parameters' shapes; `out`: its
    output's; `run`: the same projection's runs before it in the module (an expert loop runs expert
    `run`: balanced routing, hf/values.py, hits every expert, in order). An attention's experts
    are its attention's (layers.py: blocks.in_attention)."""
    e, k = shape.experts, shape.top_k
    if not e or not k:
        return None
    each = re.search(r"\.experts\.(?:[a-z]+_)?(\d+)(\.|$)", module)  # experts.3, experts.expert_3
    if each:
        return Moe(e, k, int(each.group(1)))
    # a matrix product's [E, ...] weights (not a convolution's [C_out, C_in / groups, k]: a
    # depthwise convolution of E channels is no expert)
    fused = kind is Kind.LINEAR and any(len(s) == 3 and s[0] == e for s in params)
    inside = re.search(r"\.experts(\.|$)", module) is not None
    looped = kind is Kind.LINEAR and out is not None and len(out) == 2
    if inside and not fused and looped:
        # a projection of [E x f, h] weights run an expert at a time (DbrxExpertGLU: a layer
        # per expert run, its GEMM its own tokens' [tokens, f]), not batched_mm's [rows, n, 1]
        return Moe(e, k, run % e)
    if fused or (inside and not params):
        return Moe(e, k, 0, e)
    # the router's weight is a linear's [E, hidden] (its module may run the softmax and top-k
    # after it: transformers 5's MixtralTopKRouter, whose output is then [tokens, k])
    rows = any(len(s) == 2 and scores(s[0], shape) for s in params)
    routes = kind is Kind.LINEAR and (rows or (out is not None and bool(out) and scores(out[-1], shape)))
    return Moe(e, k) if routes and ROUTER_MODULE.search(module) else None


ROUTER_MODULE = re.compile(r"^(.*(?:gate|router))(?:\.|$)")
"""A router's module path: the last component named gate or router (and what is under it)."""


def scores(width: int, shape: Shape) -> bool:
    """Whether a router's output of `width` scores the E experts: E, or E and the experts that
    compute nothing beside them (LongCat-Flash's zero_expert_num, LongcatFlashTopkRouter's
    n_routed_experts + zero_expert_num; Zaya's one skip expert, ZayaRouter's num_experts + 1)."""
    e = shape.experts or 0
    return e > 0 and e <= width <= e + shape.zero_experts


def router_modules(found: Sequence[Layer]) -> list[Layer]:
    """`found` with every linear of a router's module marked the router's: a router may run an MLP
    of its own before its scores (ZayaRouter: a down projection and ZayaRouterMLP's fc1, fc2 and
    out_proj, modeling_zaya.py), replicated and seeing every token as the scores' linear does."""
    routers = {
        (x.block.index, m.group(1))
        for x in found
        if x.moe is not None and x.moe.expert is None and x.block is not None
        if (m := ROUTER_MODULE.search(x.node))
    }
    marks = {x.block.index: x.moe for x in found if x.moe is not None and x.moe.expert is None and x.block}
    out = []
    for x in found:
        index = x.block.index if x.block is not None else None
        under = any(i == index and x.node.startswith(f"{path}.") for i, path in routers)
        if under and x.moe is None and x.kind is Kind.LINEAR:
            x = replace(x, moe=marks[index], block=Block(index, Part.ROUTER))
        out.append(x)
    return out
