"""Each training phase of a layer as GEMMs, with the permutation ASTRA-sim's generator used.

A layer's forward GEMM is out[M x N] = A[M x K] . W[K x N] (conv via im2col: M = batch*Hout*Wout,
K = (Cin/groups)*kh*kw, N = Cout/groups, repeated `groups` times). The generator
(astra-sim ASTRA-sim-1.0 branch, scripts/workload_generator) mapped the phases as:

    forward          (M, K, N)    Y  = X . W
    input gradient   (M, N, K)    dX = dY . W^T
    weight gradient  (K, M, N)    dW = X^T . dY

A product of two activations (attention scores and context) has no weight: its backward pass is
two GEMMs, one per operand (dA = dC . B^T as (M, N, K), dB = A^T . dC as (K, M, N)), both counted
as input gradient. Layers without a GEMM (normalisation, elementwise, pooling, softmax, data
movement) have none: the cost models charge them their memory traffic instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from modtrans.ir.document import Kind, Layer


@dataclass(frozen=True, slots=True)
class Shape:
    """`count` independent GEMMs of M x K by K x N."""

    m: int
    k: int
    n: int
    count: int = 1


@dataclass(frozen=True, slots=True)
class PhaseGemms:
    forward: tuple[Shape, ...] = ()
    input_grad: tuple[Shape, ...] = ()
    weight_grad: tuple[Shape, ...] = ()


_WEIGHTED = frozenset({Kind.CONV, Kind.CONV_TRANSPOSE, Kind.LINEAR, Kind.RNN})


def phase_gemms(layer: Layer) -> PhaseGemms | None:
    """The GEMMs of each phase, or None for a layer without a GEMM (costed by traffic)."""
    g = layer.gemm
    if g is None or min(g.m, g.k, g.n) == 0:
        return None
    if layer.kind is Kind.MATMUL:
        both = (Shape(g.m, g.n, g.k, g.groups), Shape(g.k, g.m, g.n, g.groups))
        return PhaseGemms(forward=(Shape(g.m, g.k, g.n, g.groups),), input_grad=both)
    if layer.kind in _WEIGHTED:
        return PhaseGemms(
            forward=(Shape(g.m, g.k, g.n, g.groups),),
            input_grad=(Shape(g.m, g.n, g.k, g.groups),),
            weight_grad=(Shape(g.k, g.m, g.n, g.groups),),
        )
    return None


def traffic(layer: Layer) -> tuple[int, int, int]:
    """Bytes each phase moves through memory (forward, input-grad, weight-grad).

    forward      read inputs and parameters, write outputs (an embedding reads only the rows it looks up)
    input-grad   read the output gradient and parameters, write the input gradient
    weight-grad  read the output gradient and inputs, write the parameter gradient (0 without parameters)

    A layer inside a loop moves that for every run (`repeats`: its activations are one run's).
    """
    inputs = sum(a.bytes or 0 for a in layer.inputs)
    outputs = sum(a.bytes or 0 for a in layer.outputs)
    params = sum(p.bytes for p in layer.params)
    trained = sum(p.bytes for p in layer.params if p.trainable)
    if layer.kind is Kind.EMBEDDING:
        params = outputs
    runs = layer.repeats
    return (
        runs * (inputs + params + outputs),
        runs * (outputs + params + inputs),
        runs * (outputs + inputs + trained) if trained else 0,
    )


FP32 = 4
ADAM_PASSES = 7  # reads parameter, gradient, both moments; writes parameter, both moments
NORM_PASSES = 1  # the gradient norm reads every gradient once
ZERO_PASSES = 1  # the gradient buffer zeroed for the next iteration
MASTER_PASSES = 2  # an fp16 model: the gradients unscaled in place (a read, a write)
LOSS_SCALED = frozenset({"float16"})  # the parameter dtypes trained under a loss scale (update_bytes)


# torch.optim.AdamW(foreach=True) over fp32 parameters, as torchtitan steps (torchtitan/optimizer.py at
# 9dec370, build_optimizers: `"fused": fused, "foreach": not fused`, --optimizer.fused off by
# default; torch/optim/adamw.py, _multi_tensor_adamw, torch 1963fc8): bytes an element each kernel
# reads and writes, fp32 throughout (FSDP2's sharded parameters, their gradients and both moments)
FOREACH_ADAMW = (
    2 * FP32  # _foreach_mul_(params, 1 - lr * weight_decay): read, write
    + 3 * FP32  # _foreach_lerp_(exp_avgs, grads, 1 - beta1): two read, one written
    + 2 * FP32  # _foreach_mul_(exp_avg_sqs, beta2)
    + 4 * FP32  # _foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2): three read, one written
    + 2 * FP32  # exp_avg_sq_sqrt = _foreach_sqrt(exp_avg_sqs)
    + 2 * FP32  # _foreach_div_(exp_avg_sq_sqrt, bias_correction2_sqrt)
    + 2 * FP32  # _foreach_add_(exp_avg_sq_sqrt, eps)
    + 4 * FP32  # _foreach_addcdiv_(params, exp_avgs, exp_avg_sq_sqrt, step_size)
)  # 84 B
# torchtitan's clip_grad_norm_(..., foreach=True) (torchtitan/utils.py at 9dec370): torch's
# get_total_norm (_foreach_norm reads each gradient) and clip_grads_with_norm_, which scales every
# gradient by the clamped coefficient whether the norm is over the limit or not (_foreach_mul_:
# read, write); the norms' stack and all-reduce are one number. zero_grad sets the gradients to None.
FOREACH_CLIP = FP32 + 2 * FP32  # 12 B


def foreach_update_bytes(layer: Layer) -> int:
    """The optimizer step's memory traffic for the layer's trainable parameters as torchtitan runs
    it over FSDP2's fp32 sharded parameters, whatever dtype they are gathered in: AdamW's foreach
    kernels and the gradient norm's clipping, 84 + 12 = 96 B an element (FOREACH_ADAMW,
    FOREACH_CLIP; tests/test_fsdp2_kernels_hf.py counts what torch's own AdamW and
    clip_grad_norm_ dispatch). Megatron's step, update_bytes, is 36 B over fp32 parameters."""
    elements = sum(p.elements for p in layer.params if p.trainable and p.counted)
    return elements * (FOREACH_ADAMW + FOREACH_CLIP)


def update_bytes(layer: Layer, *, clipping: bool = True) -> int:
    """The optimizer step's memory traffic for the layer's trainable parameters: Megatron-LM's
    Adam on fp32 main parameters and gradients (megatron/core/optimizer/optimizer.py,
    MixedPrecisionOptimizer.step: _unscale_main_grads_and_check_for_nan, clip_grad_norm_fp32's
    multi_tensor_l2norm, the optimizer's step, _copy_main_params_to_model_params; apex's
    multi_tensor_adam reads p, g, m, v and writes p, m, v; megatron/core/distributed's
    zero_grad_buffer zeroes the fp32 gradients each iteration). Per element, in fp32:

        Adam 7 passes, gradient norm 1, zeroing 1                   36 B
        16-bit parameters: the copy back 4 + width                   +4 + width (bf16: 42 B)
        fp16 parameters: the unscaling 2 besides                     +8 (fp16: 50 B)

    Only fp16 runs under a loss scale: without --loss-scale Megatron builds a grad scaler for fp16
    alone ("otherwise we are running in bf16 with no loss-scale so leave it as None": megatron/
    core/optimizer/__init__.py at core_r0.8.0, _get_megatron_optimizer_based_on_param_groups;
    megatron/optimizer/__init__.py at fc7f4f0, get_megatron_optimizer, the same), and
    MixedPrecisionOptimizer.prepare_grads unscales and checks for inf only `if self.grad_scaler`.
    The clipping's scale (multi_tensor_scale) runs only when the norm is over the limit, and is
    not charged (strategy/llm/clipping.py says why); nor is loss-scale bookkeeping.

    `clipping` False: the step without the unscaling and the norm (clip_bytes), which Megatron's
    frameworks charge as kernels of their own before it, each followed by its all-reduce of one
    number (strategy/llm/clipping.py); the other frameworks' steps keep them in."""
    total = 0
    for p in layer.params:
        if not (p.trainable and p.counted) or not p.elements:
            continue
        width = p.bytes / p.elements
        unscale_bytes, norm_bytes = clip_bytes(p.dtype)
        passes = ADAM_PASSES + ZERO_PASSES
        unscale = unscale_bytes if clipping else 0
        passes_bytes = passes * FP32 + (norm_bytes if clipping else 0)
        extra = unscale + FP32 + width if width < FP32 else 0
        total += round(p.elements * (passes_bytes + extra))
    return total


def clip_bytes(dtype: str) -> tuple[int, int]:
    """Bytes an fp32 main-gradient element of a `dtype` parameter moves before Megatron's Adam
    step: (the unscaling and inf check, the gradient norm). fp16 alone is loss-scaled (update_bytes):
    torch._amp_foreach_non_finite_check_and_unscale_ reads and writes every main gradient
    (MixedPrecisionOptimizer._unscale_main_grads_and_check_for_nan, megatron/core/optimizer/
    optimizer.py at core_r0.8.0; megatron/optimizer/optimizer.py at fc7f4f0), 8 B; then
    multi_tensor_l2norm reads them once (clip_grads.py, get_grad_norm_fp32 at core_r0.8.0,
    clip_grad_norm_fp32 at fc7f4f0), 4 B."""
    return (MASTER_PASSES * FP32 if dtype in LOSS_SCALED else 0), NORM_PASSES * FP32


def zeroing_bytes(layer: Layer) -> int:
    """The part of update_bytes that zeroes the layer's fp32 gradients for the next iteration
    (ZERO_PASSES): Megatron's zero_grad_buffer, which the distributed optimizer runs over the whole
    buffer on every rank (strategy/llm/build.py, sharded_update)."""
    counted = (p for p in layer.params if p.trainable and p.counted)
    return sum(ZERO_PASSES * FP32 * p.elements for p in counted)
