"""RMSNorm as PyTorch runs it op by op, without a fused kernel or torch.compile, and as
torch.compile's Inductor runs it.

Op by op: torchtitan's (torchtitan/models/norms.py at 9dec370, RMSNorm: `_norm(x.float()).type_as(x)
* self.weight`, `x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)`) and transformers'
LlamaRMSNorm, the same seven kernels: the cast up, the square, the mean, the reciprocal root, the
multiply, the cast down, the scale. Each reads and writes the whole tensor (the fp32 ones twice a
bf16's bytes), and autograd's backward runs as many again: about 36 bytes an element forward and 70
backward by count, where one fused kernel moves 4 (read x, write y).

Compiled (--compile: torchtitan's apply_compile, torch.compile of each block): Inductor fuses the
seven ops, forward and backward, into a few generated Triton kernels (a reduction over each row;
the weight gradient's over the rows), timed as measured below.

Measured (linkedin/Liger-Kernel, benchmark/scripts/benchmark_rms_norm.py, its LlamaRMSNorm and the
same module under @torch.compile, on bf16 x of 2,048 rows and hidden 1,024 to 32,768,
triton.testing.do_bench's median; benchmark/data/h100_all_benchmark_data.csv at 3534d44 and
a100_all_benchmark_data.csv at bdbfead, rows `rms_norm,{huggingface,torchcompile},{forward,backward}`:
fixtures/liger/rms_norm.csv), on an H100 NVL (3.9 TB/s) and an A100 80GB PCIe (1.94 TB/s). Each
phase's time is a fixed part a call plus a part proportional to the elements: op by op on the H100
NVL 0.1795 ms forward at hidden 4,096 but 1.219 ms at 32,768 (8 times the elements, 6.8 times the
time). The device profile's `eager_rmsnorm` and `compiled_rmsnorm` hold both parts, fitted by least
squares of the relative error over the six sizes: the fixed seconds a call, and the bytes an
element at the part's streaming rate (its peak x the SXM part's measured BabelStream efficiency,
devices.json). The two largest points alone would give the compiled kernel a negative fixed time.
The kernels move more than the count says (small kernels, and the benchmark's fp32 weight makes
the output fp32); the bytes are what was measured. The compiled backward's weight-gradient
reduction does not scale linearly with the elements (its fit misses single points by up to 23 %).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from modtrans.cost.base import result_elements
from modtrans.ir.document import Kind, Layer

RMS = frozenset({"RMSNormalization", "SimplifiedLayerNormalization"})


@dataclass(frozen=True)
class NormCost:
    """An RMSNorm's measured cost (devices.json `eager_rmsnorm`, `compiled_rmsnorm`): bytes an
    element at the streaming rate and seconds a call beside them, forward and backward."""

    forward: float
    backward: float
    forward_fixed_s: float = 0.0
    backward_fixed_s: float = 0.0


def norm_cost(data: Mapping[str, Any] | None) -> NormCost | None:
    """The profile's entry (already checked by its schema); None where the profile has none."""
    if data is None:
        return None
    return NormCost(
        float(data["forward"]),
        float(data["backward"]),
        float(data.get("forward_fixed_s", 0.0)),
        float(data.get("backward_fixed_s", 0.0)),
    )


def rmsnorm_bytes(layer: Layer, cost: NormCost) -> tuple[int, int] | None:
    """The forward's and the backward's (input and weight gradients) bytes of an RMSNorm layer at
    `cost`'s bytes an element of its output; None: not an RMSNorm."""
    if layer.kind is not Kind.NORM or layer.op_type not in RMS or not layer.outputs:
        return None
    elements = result_elements(layer)
    return round(elements * cost.forward), round(elements * cost.backward)


def rmsnorm_seconds(layer: Layer, cost: NormCost, bandwidth: float) -> tuple[float, float] | None:
    """The forward's and the backward's seconds of an RMSNorm layer: each phase's fixed seconds
    plus its bytes at `bandwidth` (bytes/s); None: not an RMSNorm."""
    moved = rmsnorm_bytes(layer, cost)
    if moved is None:
        return None
    return cost.forward_fixed_s + moved[0] / bandwidth, cost.backward_fixed_s + moved[1] / bandwidth
