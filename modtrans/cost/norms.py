"""RMSNorm as PyTorch runs it op by op, without a fused kernel or torch.compile, and as
torch.compile's Inductor runs it.

Op by op: torchtitan's (torchtitan/models/norms.py at 9dec370, RMSNorm: `_norm(x.float()).type_as(x)
* self.weight`, `x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)`) and transformers'
LlamaRMSNorm, the same seven kernels: the cast up, the square, the mean, the reciprocal root, the
multiply, the cast down, the scale. Each reads and writes the whole tensor (the fp32 ones twice a
bf16's bytes), and autograd's backward about twice as many. Counted as torch runs them (every aten
kernel's operands and results under a TorchDispatchMode, tests/test_norms_hf.py), the module Liger
measured (bf16 x, its weight fp32, so its output and incoming gradient fp32) moves 38 bytes an
element forward and 108 backward (torchtitan's, whose weight FSDP2 casts to bf16: 36 and 92), where
one fused kernel moves 4 (read x, write y).

Compiled (--compile: torchtitan's apply_compile, torch.compile of each block): Inductor fuses the
seven ops, forward and backward, into a few generated Triton kernels (a reduction over each row;
the weight gradient's over the rows), timed as measured below.

Measured (linkedin/Liger-Kernel, benchmark/scripts/benchmark_rms_norm.py, its LlamaRMSNorm and the
same module under @torch.compile, on bf16 x of 2,048 rows and hidden 1,024 to 32,768,
triton.testing.do_bench's median; benchmark/data/h100_all_benchmark_data.csv at 3534d44 and
a100_all_benchmark_data.csv at bdbfead, rows `rms_norm,{huggingface,torchcompile},{forward,backward}`:
fixtures/liger/rms_norm.csv), on an H100 NVL (3.9 TB/s) and an A100 80GB PCIe (1.94 TB/s). Each
phase's time is a fixed part a call plus a part proportional to the elements, fitted by least
squares of the relative error over the six sizes (the two largest points alone would give the
compiled kernel a negative fixed time).

What bounds the part an element differs between the two. Inductor's kernels stream: between hidden
16,384 and 32,768 the A100 takes 2.0 times the NVL's time an element, forward and backward, as their
bandwidths (2.0 apart), so the profile's `compiled_rmsnorm` holds bytes an element at the part's
streaming rate (its peak x the SXM part's measured BabelStream efficiency, devices.json). The
op-by-op kernels do not: there the A100 takes 1.54 times the NVL's time an element forward, as its
SMs x boost clock (108 x 1,410 MHz against 132 x 1,785: 1.55), not as its bandwidth (backward 1.72,
nearer the SMs' ratio than the bandwidths'); they reach 62 % of the NVL's streaming rate by count
and 80 % of the A100's, in 4.2 and 4.5 SM cycles an element. So `eager_rmsnorm` holds SM cycles an
element (forward_cycles, backward_cycles: the fit's time an element x the measured part's SMs x
boost clock) beside the bytes the count says must stream (forward, backward), and an element costs
the larger of the two: the cycles at the device's own SMs and boost clock (`sm_clock_hz`), the bytes
at its streaming rate. Moved from the NVL by bandwidth, as before, the 2.4 TB/s HBM2e H100
torchtitan measured on was charged 1.62 times what the cycles and the count give an element forward,
1.45 backward; the A100 SXM4, moved from the PCIe part, 5 % less (its own rows, below, come within 6
% by the SMs, 10 % by the bandwidth: the two A100s do not tell the rules apart; the NVL and the
A100s do). Checked on a third part, Liger's A100-SXM4-80GB rows of the same module
(fixtures/liger/rms_norm_a100_sxm4.csv): the NVL's cycles predict each within 14 %, where the NVL's
bytes at the streaming rate were 11-28 % over (tests/test_norms.py).
The compiled backward's weight-gradient reduction does not scale linearly with the elements (its
fit misses single points by up to 23 %). Both measurements are of the module with an fp32 weight;
torchtitan's bf16 one moves less (36 and 92 bytes by count, 4 and about 6 fused), not charged:
how the kernels' cycles follow their bytes is not measured.
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
    element at the streaming rate, SM cycles an element (0: the bytes bound it alone) and seconds a
    call beside them, forward and backward."""

    forward: float
    backward: float
    forward_fixed_s: float = 0.0
    backward_fixed_s: float = 0.0
    forward_cycles: float = 0.0
    backward_cycles: float = 0.0


def norm_cost(data: Mapping[str, Any] | None) -> NormCost | None:
    """The profile's entry (already checked by its schema); None where the profile has none."""
    if data is None:
        return None
    return NormCost(
        float(data["forward"]),
        float(data["backward"]),
        float(data.get("forward_fixed_s", 0.0)),
        float(data.get("backward_fixed_s", 0.0)),
        float(data.get("forward_cycles", 0.0)),
        float(data.get("backward_cycles", 0.0)),
    )


def rmsnorm_bytes(layer: Layer, cost: NormCost) -> tuple[int, int] | None:
    """The forward's and the backward's (input and weight gradients) bytes of an RMSNorm layer at
    `cost`'s bytes an element of its output; None: not an RMSNorm."""
    if layer.kind is not Kind.NORM or layer.op_type not in RMS or not layer.outputs:
        return None
    elements = result_elements(layer)
    return round(elements * cost.forward), round(elements * cost.backward)


def rmsnorm_seconds(
    layer: Layer, cost: NormCost, bandwidth: float, sm_cycles: float = 0.0
) -> tuple[float, float] | None:
    """The forward's and the backward's seconds of an RMSNorm layer: each phase's fixed seconds
    plus the longer of its bytes at `bandwidth` (bytes/s) and its SM cycles at `sm_cycles` (the
    device's SMs x boost clock, cycles/s); None: not an RMSNorm."""
    moved = rmsnorm_bytes(layer, cost)
    if moved is None:
        return None
    elements = result_elements(layer)

    def issued(cycles: float) -> float:
        return elements * cycles / sm_cycles if cycles and sm_cycles else 0.0

    return (
        cost.forward_fixed_s + max(moved[0] / bandwidth, issued(cost.forward_cycles)),
        cost.backward_fixed_s + max(moved[1] / bandwidth, issued(cost.backward_cycles)),
    )
