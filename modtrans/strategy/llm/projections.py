"""Separate projections of one input: autograd sums their input gradients, one kernel each.

A model that computes q, k and v (or an MLP's gate and up) with separate linears on the same
input, as torchtitan's Llama does (torchtitan/models/llama/model.py at 9dec370, Attention.forward:
`xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)`; FeedForward.forward: `self.w2(F.silu(
self.w1(x)) * self.w3(x))`), hands autograd k gradients of that input; it adds each after the
first into the one it holds (torch/csrc/autograd/input_buffer.cpp, InputBuffer::add and
accumulate: `variable.add_(new)` in place where it may steal the buffer, else `variable + new`): an
elementwise kernel reading two gradients and writing one, 3 x the input's bytes, k - 1 times
(tests/test_fsdp2_kernels_hf.py counts the adds torch dispatches). Megatron-Core fuses them
(linear_qkv, linear_fc1: one GEMM, one gradient), so it is a framework's convention
(Framework.separate_projections): torchtitan's, and transformers' modules where --framework fsdp
or deepspeed train them (LlamaAttention's q_proj, k_proj, v_proj; LlamaMLP's gate_proj, up_proj).
Each linear whose input an earlier linear of the rank's units reads pays one add with its input
gradient. A residual's two uses are charged as its Add layer's backward (cost/gemm.py, traffic),
not here. Under --compile the sum is a pointwise op of the
block's compiled backward graph, which Inductor fuses into the kernel that reads it (the norm's
backward): not charged there (its two extra reads neither).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from modtrans.cost import CostModel
from modtrans.cost.base import memory_ticks
from modtrans.ir.document import Kind
from modtrans.ir.document import Layer as IRLayer
from modtrans.strategy.llm.unit import Unit
from modtrans.strategy.program import Costed

ADD = 3  # InputBuffer's add: two gradients read, one written, each the input's bytes


def repeated(units: Sequence[Unit]) -> frozenset[int]:
    """The indices of the linear units whose input an earlier linear unit reads."""
    seen: set[str] = set()
    out = set()
    for u in units:
        x = u.x.owner
        if x.kind is not Kind.LINEAR or not x.inputs:
            continue
        name = x.inputs[0].name
        if name in seen:
            out.add(u.index)
        seen.add(name)
    return frozenset(out)


def summing(
    units: Sequence[Unit], cost: CostModel, share_of: Callable[[Unit], IRLayer]
) -> Callable[[Costed, Unit], Costed]:
    """A unit's run with autograd's add of its input's gradient in its input gradient, where
    `repeated` holds it, at the device's streaming rate (cost models with a memory path: the gpu
    model's memory_seconds; the others leave the run as it is); `share_of`: the layer the rank
    computes of a unit, as it was costed."""
    adds = repeated(units)

    def summed(run: Costed, u: Unit) -> Costed:
        layer = share_of(u)
        if u.index not in adds or not layer.inputs:
            return run
        ticks = memory_ticks(cost, ADD * (layer.inputs[0].bytes or 0))
        if not ticks:
            return run
        return replace(run, times=replace(run.times, input_grad=run.times.input_grad + ticks))

    return summed
