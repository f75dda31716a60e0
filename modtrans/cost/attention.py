"""A device's measured fused attention kernel (devices.json `attention`, `attention_flash2`):
TFLOP/s curves over the sequence by direction, mask and head dimension, read as gpu.py charges
them (FLOPs counted as FlashAttention's benchmark counts them: flash-attention
benchmarks/benchmark_flash_attention.py, flops).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from modtrans.ir.document import Heads

BACKWARD_FLOPS = 2.5  # FlashAttention's backward does 2.5x its forward's FLOPs (benchmark_flash_attention.py)
Curve = tuple[tuple[float, float], ...]
"""(sequence, TFLOP/s) points, by sequence."""


@dataclass(frozen=True)
class Attention:
    """Measured FlashAttention throughput: per direction ("fwd", "bwd", or "fwd_bwd" when only the
    two together were published, split by `bwd_over_fwd`), mask ("causal", "noncausal") and head
    dimension, a curve over the sequence length."""

    curves: Mapping[str, Mapping[str, Mapping[int, Curve]]]
    bwd_over_fwd: float = 1.0  # the backward's rate over the forward's, to split a fwd_bwd curve
    scale: float = 1.0  # another device's measurements carried over (by matmul throughput)
    padded: tuple[int, ...] = ()  # the head dimensions the kernel is compiled for, if only some

    def rates(self, head_dim: int, sequence: int, causal: bool) -> tuple[float, float]:
        """FLOP/s of the forward and of the backward. A kernel compiled for some head dimensions
        only (`padded`: FlashAttention-1's 32, 64 and 128) runs another in the next one's time: its
        rate at that dimension, times the FLOPs' share of it."""
        mask = "causal" if causal else "noncausal"
        runs = min((d for d in self.padded if d >= head_dim), default=head_dim)
        scale = self.scale * head_dim / runs
        if "fwd_bwd" in self.curves:
            both = _at(self.curves["fwd_bwd"][mask], runs, sequence)
            # t = f / r_f + 2.5 f / (rho r_f) = 3.5 f / both  =>  r_f = both (1 + 2.5 / rho) / 3.5
            forward = both * (1 + BACKWARD_FLOPS / self.bwd_over_fwd) / (1 + BACKWARD_FLOPS)
            return forward * scale, forward * self.bwd_over_fwd * scale
        fwd = _at(self.curves["fwd"][mask], runs, sequence)
        bwd = _at(self.curves["bwd"][mask], runs, sequence)
        return fwd * scale, bwd * scale


def _at(by_dim: Mapping[int, Curve], head_dim: int, sequence: int) -> float:
    """FLOP/s at the nearest measured head dimension (in log2), interpolated in log2 of the
    sequence between the measured ones, flat beyond them."""
    dim = min(by_dim, key=lambda d: (abs(math.log2(d) - math.log2(max(head_dim, 1))), d))
    curve = by_dim[dim]
    xs = [math.log2(s) for s, _ in curve]
    x = math.log2(max(sequence, 1))
    i = bisect.bisect_left(xs, x)
    if i == 0:
        return curve[0][1] * 1e12
    if i == len(xs):
        return curve[-1][1] * 1e12
    (x0, (_, y0)), (x1, (_, y1)) = (xs[i - 1], curve[i - 1]), (xs[i], curve[i])
    return (y0 + (y1 - y0) * (x - x0) / (x1 - x0)) * 1e12


def attention_of(a: Mapping[str, Any] | None) -> Attention | None:
    """A profile's attention section as curves (None: the device has no measurement)."""
    if a is None:
        return None
    curves = {
        direction: {
            mask: {int(d): tuple((float(s), float(r)) for s, r in points) for d, points in dims.items()}
            for mask, dims in masks.items()
        }
        for direction, masks in a["curves"].items()
    }
    padded = tuple(int(d) for d in a.get("padded", ()))
    return Attention(curves, float(a.get("bwd_over_fwd", 1.0)), float(a.get("scale", 1.0)), padded)


def masked(heads: Heads) -> bool:
    """Whether transformers hands PyTorch's SDPA this attention with an attn_mask, which SDPA's
    FlashAttention backend refuses (pytorch/pytorch aten/src/ATen/native/transformers/cuda/
    sdp_utils.cpp, use_flash_attention's constraints: check_for_attn_mask), so its memory-efficient
    kernel runs it: a sliding window (masking_utils.sdpa_mask builds a [b, 1, q, k] bool mask) or a
    per-head bias (T5's position_bias, [1, heads, q, k] float). A plain causal decoder without
    padding gets is_causal and no mask (masking_utils._ignore_causal_mask_sdpa). Recorded on CPU
    with transformers 5.25: tests/test_sdpa_masks.py."""
    return heads.window is not None or heads.bias


def mask_bytes(heads: Heads, scores: int, width: int) -> tuple[int, int]:
    """The bytes the memory-efficient kernel reads of an attention's mask or bias in the forward
    (and again in the backward, which recomputes the probabilities), and writes of the bias's
    gradient in the backward, for `scores` = batch x heads x q x k elements of `width` bytes:
    SDPA hands the kernel a float bias in the query's dtype (a bool mask converted:
    aten/src/ATen/native/transformers/attention.cpp, convert_boolean_attn_mask), broadcast over
    batch and heads, and the kernel loads its tile for every (batch, head); it writes grad_bias
    [b, heads, q, k] where the bias is trained (T5's, from a parameter: Heads.bias), as
    _efficient_attention_backward's grad_bias. A window's mask is not trained; T5's cross-attention's
    zeros (ir/core.py) are counted as its self-attention's bias, a gradient written that autograd
    would not ask for: a small overcount, hidden under the kernel's compute wherever it is bound
    by it."""
    read = scores * width
    return read, read if heads.bias else 0
