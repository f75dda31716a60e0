"""FP8 training as Transformer Engine (TE) runs it under Megatron-Core (--precision fp8): which
layers' GEMMs run in FP8, and the bytes of the cast kernels TE adds around each.

Megatron-Core's --fp8-format hybrid (NeMo's fp8 'hybrid') wraps the transformer blocks, and only
them, in TE's fp8_autocast with a DelayedScaling recipe of Format.HYBRID (NVIDIA/Megatron-LM
core_r0.8.0, megatron/core/transformer/transformer_block.py, TransformerBlock.forward: E4M3 tensors
in the forward, E5M2 gradients in the backward). In the TE layer spec a block's four linears are TE
modules (megatron/core/models/gpt/gpt_layer_specs.py, get_gpt_layer_with_transformer_engine_spec:
linear_qkv and linear_fc1 TELayerNormColumnParallelLinear, linear_proj and linear_fc2
TERowParallelLinear), whose three GEMMs each (fprop, dgrad, wgrad) run in FP8; the attention core,
the norms, the activation function, the embedding, the output layer and the loss are outside
them and stay in the activations' dtype (bf16), as do a MoE's router and, here, its experts.

What TE adds around an FP8 linear (NVIDIA/TransformerEngine v1.8, 3ec998e, 2024-07-24, the release
of NeMo 24.07's month; which TE that container holds was not checked; transformer_engine/pytorch/
module/linear.py _Linear, layernorm_linear.py _LayerNormLinear,
base.py TransformerEngineBaseModule.grad_output_preprocess), each a memory-bound kernel:

    every FP8 linear, backward   the output gradient cast to E5M2 and transposed for the wgrad
                                 GEMM in one kernel (fp8_cast_transpose_fused, or _bgrad_fused
                                 with the bias gradient): reads 2 B an element, writes 1 + 1
    a Linear (proj, fc2)         its input cast to E4M3 and transposed in one kernel
                                 (fp8_cast_transpose_fused), 2 B read and 1 + 1 written an
                                 element, in the forward; under sequence parallelism it casts
                                 without the transpose (cast_to_fp8) and transposes in the
                                 backward (tex.fp8_transpose), 3 B + 2 B an element
    a LayerNormLinear (qkv, fc1) its norm writes the FP8 output itself (_apply_normalization with
                                 fp8 out: nothing added forward); the backward transposes it
                                 for the wgrad GEMM (tex.fp8_transpose of ln_out_total), 1 B read
                                 and 1 written an element of the norm's output, once per module
                                 (Megatron's fused QKV, its fused gate and up projection)

The gradient's cast is the same for any linear (its output's elements), so the cost model charges
it with the GEMMs (gpu.py); the input's side depends on which kind of module a linear is, which
only the strategy's roles say (column-parallel: a LayerNormLinear; row-parallel: a Linear), so
strategy/llm/fp8.py charges it, and the weights' cast and transpose, once an iteration
(linear.py, Linear.forward: get_fp8_workspace(update_workspace=is_first_microbatch,
with_transpose=True), base.py: Float8Tensor.cast_transpose_ of the bf16 weight; Megatron-Core
passes is_first_microbatch: megatron/core/transformer/custom_layers/transformer_engine.py at
core_r0.8.0), 4 B a weight element: with the optimizer step, the iteration's once-only work
(9 ms of Llama 3 8B's 10.9 s iteration on an H100). Not charged: the amax and scale update (one
fused kernel per fp8_autocast and direction over every module's amax history:
FP8GlobalStateManager.reduce_and_update_fp8_tensors), a few microseconds a micro-batch.
"""

from __future__ import annotations

from modtrans.ir.document import Kind, Layer, Part, Role

FORWARD = "float8e4m3fn"  # E4M3: fprop's input and weight (Format.HYBRID)
BACKWARD = "float8e5m2"  # E5M2: the gradients dgrad and wgrad read (Format.HYBRID)
WIDTH = 1  # bytes an FP8 element

GRAD_CAST = 4  # the output gradient read in bf16 (2), written cast (1) and transposed (1)
INPUT_CAST = 4  # a Linear's input, the same in the forward (fp8_cast_transpose_fused)
INPUT_CAST_SP = 3  # under sequence parallelism cast alone in the forward (cast_to_fp8) ...
INPUT_TRANSPOSE = 2  # ... and transposed in the backward (tex.fp8_transpose), 1 B read, 1 written
WEIGHT_CAST = 4  # a weight element read in bf16 (2), written cast (1) and transposed (1), an iteration


def te_linear(layer: Layer) -> bool:
    """Whether `layer` is one of Megatron-Core's TE linears: a dense linear of a transformer
    block (not a MoE's router or experts, nor anything outside the blocks)."""
    b = layer.block
    return (
        layer.kind is Kind.LINEAR
        and layer.gemm is not None
        and layer.moe is None
        and b is not None
        and b.index is not None
        and b.part is not Part.ROUTER
    )


def grad_cast_bytes(layer: Layer) -> int:
    """Bytes the output gradient's cast and transpose moves in a TE linear's backward (each run)."""
    g = layer.gemm
    return 0 if g is None else GRAD_CAST * g.m * g.n * g.groups * layer.repeats


def input_cast_bytes(layer: Layer, row: bool, sp: bool, share: float = 1.0) -> tuple[float, float]:
    """Bytes the input's FP8 casts move, forward and backward, in a TE linear: a row-parallel
    Linear's cast and transpose of its input; a column-parallel LayerNormLinear's transpose of the
    norm's FP8 output, `share` of it (the module's output columns this layer holds: q, k and v, or
    gate and up, are one module in Megatron-Core)."""
    g = layer.gemm
    if g is None:
        return 0.0, 0.0
    elements = g.m * g.k * g.groups * layer.repeats
    if not row:
        return 0.0, INPUT_TRANSPOSE * elements * share
    if sp:
        return float(INPUT_CAST_SP * elements), float(INPUT_TRANSPOSE * elements)
    return float(INPUT_CAST * elements), 0.0


def weight_cast_bytes(layer: Layer) -> int:
    """Bytes the weight's cast and transpose moves once an iteration in a TE linear (`layer`'s
    weights, as the rank holds them)."""
    return WEIGHT_CAST * sum(p.elements for p in layer.params if p.role is Role.WEIGHT)
