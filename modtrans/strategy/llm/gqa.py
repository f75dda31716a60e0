"""Grouped-query attention's keys and values copied to every query head before the attention
kernel, as torchtitan's Llama does it (torchtitan/models/llama/model.py at 9dec370, repeat_kv:
`torch.unsqueeze(x, dim=3).expand(bs, slen, n_kv_heads, n_rep, head_dim).reshape(bs, slen,
n_kv_heads * n_rep, head_dim)`, for xk and xv before F.scaled_dot_product_attention): a reshape of
an expanded tensor is a copy, reading the key/value heads once and writing n_rep times as many
(aten.clone); its backward sums the n_rep copies' gradients back (expand's backward, aten.sum):
reading n_rep times the heads, writing them once. Each way (1 + n_rep) x the projection's output
bytes, for k and for v (tests/test_fsdp2_kernels_hf.py counts them as torch runs them).

Charged to the k and v projections' units: the copy in the forward, the sum in the input gradient.
torchtitan's 'op' selective recomputation saves neither the copy nor what reads it bar SDPA's
outputs (its _save_list: mm, SDPA), so the backward reruns the copy for SDPA's backward to read
its inputs: the copy joins the unit's rerun (Costed.core); full recomputation reruns the forward
whole. Not under --compile, where the copy is one of the compiled block's pointwise kernels
(Inductor may fuse it with the rotary's cast before it). Megatron-Core's attention kernels take
the groups as they are (TE and flash-attn's GQA), as do the other frameworks here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from modtrans.cost import CostModel
from modtrans.cost.base import memory_ticks
from modtrans.ir.document import Kind, Part
from modtrans.ir.document import Layer as IRLayer
from modtrans.strategy.llm.unit import Unit
from modtrans.strategy.program import Costed


def repeats(layer: IRLayer) -> int:
    """n_rep where the layer is an attention's key or value projection under grouped-query
    attention (its output the key/value heads' width, fewer heads than the queries'); else 0."""
    b = layer.block
    if layer.kind is not Kind.LINEAR or b is None or b.part is not Part.ATTENTION or b.heads is None:
        return 0
    h = b.heads
    if h.key_value >= h.query or h.query % h.key_value or layer.gemm is None:
        return 0
    queries = layer.gemm.k  # the input's width: the hidden size, the query heads' width (Llama's)
    return h.query // h.key_value if layer.gemm.n * h.query == queries * h.key_value else 0


def copying(
    cost: CostModel, share_of: Callable[[Unit], IRLayer], rerun: bool
) -> Callable[[Costed, Unit], Costed]:
    """A unit's run with repeat_kv's copy in its forward and its sum in its input gradient, at the
    device's streaming rate (cost models with a memory path: the gpu model's memory_seconds; the
    others leave the run as it is); `rerun`: the copy rerun with the unit's selective
    recomputation (torchtitan's 'op' policy); `share_of`: the layer the rank computes of a unit."""

    def copied(run: Costed, u: Unit) -> Costed:
        n = repeats(u.x.owner)
        layer = share_of(u)
        if not n or not layer.outputs:
            return run
        ticks = memory_ticks(cost, (1 + n) * (layer.outputs[0].bytes or 0))
        if not ticks:
            return run
        t = run.times
        times = replace(t, forward=t.forward + ticks, input_grad=t.input_grad + ticks)
        core = (run.core[0] + ticks, run.core[1]) if rerun else run.core
        return replace(run, times=times, core=core)

    return copied
