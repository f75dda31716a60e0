"""Megatron's add of a parameter's own gradient into its main_grad, every micro-batch.

Megatron-LM's data-parallel wrapper gives each parameter a `main_grad`, its view of the gradient
buffer (fp32 for bf16 parameters: frameworks.py), and hooks its gradient accumulator: once autograd
has written a parameter's `.grad`, `param.main_grad.add_(param.grad.data)` and `param.grad = None`
(megatron/core/distributed/distributed_data_parallel.py at core_r0.8.0, _make_param_hook: unless
`param.grad_added_to_main_grad`, which only a linear's fused weight-gradient GEMM sets, the
gradient-accumulation fusion, and zero_grad_buffer clears each iteration; NVIDIA/Megatron-LM
fc7f4f0 (2022), megatron/model/distributed.py, DistributedDataParallel._make_param_hook:
`if param.grad is not None: param.main_grad.add_(param.grad.data)`). The hook runs on every
micro-batch's backward, so a parameter outside the fused linears pays, each micro-batch, an
elementwise kernel reading the main gradient and the gradient and writing the main gradient:

    bytes = 2 x main_grad + grad        bf16 parameters, fp32 main_grad: 10 B an element

The embeddings are the ones that matter: VocabParallelEmbedding's weight (megatron/core/
tensor_parallel/layers.py at core_r0.8.0: F.embedding(masked_input, self.weight), or
self.weight[masked_input] in deterministic mode) gets a dense gradient from torch's
embedding_dense_backward (aten/src/ATen/native/cuda/EmbeddingBackwardKernel.cu, pytorch 01b9dc5,
embedding_backward_cuda_kernel: `at::zeros({num_weights, grad.size(-1)}, grad.options())`, then
the looked-up rows' sums scattered into it), V / T x h in the parameter's dtype, already charged
as the layer's weight-gradient write (cost/gemm.py, traffic); the hook's add is this module's.
For Megatron-Core's 1.7B row (V 131,072, h 2,048, bf16) 2.7 GB a micro-batch over the 0.54 GB
zero-fill. The norms' weights and the biases outside the fused GEMMs pay the same a
micro-batch, h elements each: not charged (0.2 MB a block at h 2,048). Not charged either: the
per-token fp32 partial sums embedding_backward_cuda_kernel writes and reads before its scatter
(tokens x h x 8 B, 2.5 % of the add at the 1.7B's 4,096 tokens).

The kernel's time is the cost model's memory_ticks (cost/base.py), added to the embedding's
weight-gradient step, so both tiers take it (the fast tier reads the step's time off the plan:
estimate/units.py). Only the Megatron frameworks run the hook (Framework.main_grad_hook).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from modtrans.cost import CostModel
from modtrans.cost.base import memory_ticks
from modtrans.ir.document import Kind
from modtrans.ir.document import Layer as IRLayer
from modtrans.strategy.llm.unit import Unit
from modtrans.strategy.program import Costed


def add_bytes(layer: IRLayer, main_grad: int) -> int:
    """The hook's bytes for a rank's share `layer` of an embedding whose main gradients take
    `main_grad` bytes (the unit's grad_bytes: the buffer's dtype); 0 for any other layer."""
    if layer.kind is not Kind.EMBEDDING:
        return 0
    grad = sum(p.bytes for p in layer.params if p.trainable) * layer.repeats
    return 2 * main_grad + grad if grad else 0


def adding(cost: CostModel, share_of: Callable[[Unit], IRLayer]) -> Callable[[Costed, Unit], Costed]:
    """A unit's run with the hook's add in its weight-gradient step, where the unit is an
    embedding, at the device's streaming rate (cost models with a memory path; the others leave
    the run as it is); `share_of`: the layer the rank computes of a unit, as it was costed."""

    def added(run: Costed, u: Unit) -> Costed:
        ticks = memory_ticks(cost, add_bytes(share_of(u), u.grad_bytes()))
        if not ticks:
            return run
        return replace(run, times=replace(run.times, weight_grad=run.times.weight_grad + ticks))

    return added
