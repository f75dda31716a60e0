"""RMSNorm as PyTorch runs it op by op, without a fused kernel or torch.compile: torchtitan's
(torchtitan/models/norms.py at 9dec370, RMSNorm: `_norm(x.float()).type_as(x) * self.weight`,
`x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)`) and transformers' LlamaRMSNorm, the
same seven kernels: the cast up, the square, the mean, the reciprocal root, the multiply, the cast
down, the scale. Each reads and writes the whole tensor (the fp32 ones twice a bf16's bytes), and
autograd's backward runs as many again: about 36 bytes an element forward and 70 backward by
count, where one fused kernel moves 4 (read x, write y).

Measured (linkedin/Liger-Kernel, benchmark/benchmark_rms_norm.py, its LlamaRMSNorm on bf16
x of 2048 rows, triton.testing.do_bench's median; benchmark/data/{h100,a100}_all_benchmark_data.csv
rows `rms_norm,huggingface,{forward,backward}`), on an H100 NVL (3.9 TB/s) and an A100 80GB PCIe
(1.94 TB/s), turned into bytes an element at each part's streaming rate (its peak x the SXM
part's measured BabelStream efficiency, devices.json): the device profile's `eager_rmsnorm`. The
kernels move more than the count says (small kernels, and the benchmark's fp32 weight makes the
output fp32); the bytes are what was measured.
"""

from __future__ import annotations

from collections.abc import Mapping

from modtrans.cost.base import result_elements
from modtrans.ir.document import Kind, Layer

RMS = frozenset({"RMSNormalization", "SimplifiedLayerNormalization"})


def eager_rmsnorm_bytes(layer: Layer, per_element: Mapping[str, float]) -> tuple[int, int] | None:
    """The forward's and the backward's (input and weight gradients) bytes of an RMSNorm layer
    run op by op, at `per_element` bytes an element of its output; None: not an RMSNorm."""
    if layer.kind is not Kind.NORM or layer.op_type not in RMS or not layer.outputs:
        return None
    elements = result_elements(layer)
    return round(elements * per_element["forward"]), round(elements * per_element["backward"])
