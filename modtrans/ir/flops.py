"""The FLOP formulas every IR builder uses (ONNX extraction and transformer configurations alike),
per training phase: forward, input gradient, weight gradient. A multiply-add is 2 FLOPs.

    linear / conv   macs = M·K·N:  2 macs (+ bias) | 2 macs | 2 macs (+ bias)
    activation matmul (scores, context): 2 macs | 4 macs (both operands' gradients) | 0
    normalisation   e output elements: 5e | 8e | 2e
    local response  e output elements, a window of n channels: (2n + 3)e | (2n + 3)e | 0
    softmax         5e | 3e | 0
    elementwise     e | e | e when it has parameters, else 0
    pooling         e window reads (output elements x window): e | e | 0
    embedding       0 | 0 | e (the gradient scattered into the table)
"""

from __future__ import annotations

from modtrans.ir.document import Flops


def gemm(macs: int, extra_fwd: int = 0, extra_wg: int = 0) -> Flops:
    return Flops(2 * macs + extra_fwd, 2 * macs, 2 * macs + extra_wg)


def matmul(macs: int) -> Flops:
    return Flops(2 * macs, 4 * macs, 0)


def norm(e: int, *, affine: bool = True) -> Flops:
    """A LayerNorm or RMSNorm over `e` elements; its weight gradient only where it has a scale
    (`affine`): OLMo 1's OlmoLayerNorm, F.layer_norm(x, shape, None, None), has no parameter to
    take a gradient (transformers' models/olmo/modeling_olmo.py)."""
    return Flops(5 * e, 8 * e, 2 * e if affine else 0)


def lrn(e: int, size: int) -> Flops:
    """LRN (ONNX's definition: Y = X / (bias + alpha / size * square_sum) ^ beta, square_sum over a
    window of `size` channels): per output element `size` squares and `size - 1` adds for the
    window, then the scale, the bias, the power and the division, 2·size + 3. Its gradient is
    taken as the same: one window sum of dY·Y / scale and a few element-wise products per element,
    as Caffe's LRNLayer::CrossChannelBackward_cpu computes it (no parameters, no weight gradient)."""
    per = 2 * size + 3
    return Flops(per * e, per * e, 0)


def softmax(e: int) -> Flops:
    return Flops(5 * e, 3 * e, 0)


def elementwise(e: int, *, with_params: bool = False) -> Flops:
    return Flops(e, e, e if with_params else 0)


def pool(e: int) -> Flops:
    return Flops(e, e, 0)


def embedding(e: int) -> Flops:
    return Flops(0, 0, e)
