"""A mixture of experts read through transformers: which layers are a router's and which an
expert's (document.Moe), from the configuration's counts (blocks.Shape: E, top-k, zero experts)
and the module path, parameters and output of each layer; a router's own MLP the router's.
tools/hf_moe_marks.py holds every MoE family transformers defines to these rules. An experts
module that runs every expert on every token is read as the routed run (routed).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction

from modtrans.hf.blocks import Shape
from modtrans.ir.document import Activation, Block, Flops, Gemm, Kind, Layer, Moe, Part


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


def routed(found: Sequence[Layer]) -> list[Layer]:
    """`found` with each grouped expert layer that ran every expert on every token the block's
    router scored (its output [E, tokens, n]) as the run a training framework makes: each expert
    on the tokens routed to it, tokens x top-k / E on average (balanced, no capacity dropping).
    Llama4TextExperts (modeling_llama4.py) runs bmm over [E, tokens, h] after Llama4TextMoe's
    hidden.repeat(E, 1), the routing weights zeroing the unrouted: E / k times the FLOPs and
    bytes of Megatron-Core's GroupedMLP and TEGroupedMLP (megatron/core/transformer/moe/
    experts.py: grouped_gemm over tokens_per_expert of the permuted tokens) or torchtitan's MoE
    (torchtitan/models/moe: GroupedExperts, torch._grouped_mm over num_tokens_per_expert). Its
    FLOPs are scaled by k / E, its GEMM's rows are an expert's share and its [E, tokens, ...]
    tensors the routed [tokens x k, ...] of the permuted tokens; its parameters are unchanged.
    The MoE module's other layers over E copies of the tokens (Llama4TextMoe's repeat and
    weighting before the experts, its sum after) are the dispatch's permutation and the combine's
    unpermutation of the tokens x k routed (Megatron-Core's moe_utils.permute and unpermute)."""
    tokens: dict[int | None, tuple[int, str]] = {}  # block: the router's tokens, its MoE's path
    for x in found:
        if x.moe is not None and x.moe.expert is None and x.block is not None and x.gemm is not None:
            # the router's first layer scores them all; the module above the router's is the MoE's
            tokens.setdefault(x.block.index, (x.gemm.m, x.node.rpartition(".")[0]))
    dense: dict[int | None, tuple[int, int, int]] = {}  # block: tokens, E, k
    for x in found:
        t = tokens.get(x.block.index, (0, ""))[0] if x.block is not None else 0
        if t and x.block is not None and x.moe is not None and x.moe.grouped and _every_token(x, t):
            dense[x.block.index] = (t, x.moe.experts, x.moe.top_k)
    out = []
    for x in found:
        index = x.block.index if x.block is not None else None
        path = tokens[index][1] if index in dense else None
        inside = path is not None and (x.node == path or x.node.startswith(f"{path}."))
        if inside and (x.moe is None or x.moe.expert is not None):  # not the router
            x = _on_routed(x, *dense[index])
        out.append(x)
    return out


def _every_token(x: Layer, tokens: int) -> bool:
    """Whether a grouped expert layer's output is [E, tokens, n]: each expert on all the tokens
    (a routed batched_mm's is [rows, n, 1], a grouped_mm's [rows, n], rows = tokens x k)."""
    shape = x.outputs[0].shape if x.outputs else None
    assert x.moe is not None
    return shape is not None and len(shape) == 3 and shape[:2] == (x.moe.experts, tokens) and shape[2] != 1


def _on_routed(x: Layer, tokens: int, e: int, k: int) -> Layer:
    """Layer `x` of a block whose experts ran on every one of `tokens`: its tensors of E copies of
    the tokens (E x tokens rows) as the tokens x k routed and its FLOPs k / E of the dense run's,
    an expert's GEMM on its share; a layer with no such tensor as it is."""
    share = Fraction(k, e)

    def copies(a: Activation) -> bool:
        dims = a.shape or ()
        known = len(dims) >= 2 and all(isinstance(d, int) for d in dims)
        return known and math.prod(int(d) for d in dims[:-1]) == e * tokens

    def rows(a: Activation) -> Activation:
        if not copies(a):
            return a
        size = None if a.bytes is None else round(a.bytes * share)
        return replace(a, shape=(tokens * k, (a.shape or (0,))[-1]), bytes=size)

    if not any(copies(a) for a in (*x.inputs, *x.outputs)):
        return x
    fl = Flops(*(round(v * share) for v in (x.flops.forward, x.flops.input_grad, x.flops.weight_grad)))
    gemm = x.gemm and Gemm(-(-tokens * k // e), x.gemm.k, x.gemm.n, x.gemm.groups)
    return replace(
        x, flops=fl, gemm=gemm, inputs=tuple(map(rows, x.inputs)), outputs=tuple(map(rows, x.outputs))
    )
