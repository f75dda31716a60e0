"""The training loss on a model's output logits: a memory-bound kernel sequence of its own, after
the head's GEMM in the forward and before its input gradient in the backward.

Frameworks take the loss in fp32 over the whole vocabulary: torchtitan's cross_entropy_loss
(`pred.flatten(0, 1).float()`, torchtitan/components/loss.py), transformers' ForCausalLMLoss
(`logits.float()`, loss/loss_utils.py), Megatron-LM's vocabulary-parallel loss on fp32 logits
(megatron/core/tensor_parallel/cross_entropy.py). PyTorch's cross_entropy is log_softmax then
nll_loss; for a vocabulary too wide for shared memory the softmax kernel reads its row three times
(max, sum of exponentials, the output) and writes it once (aten/src/ATen/native/cuda/SoftMax.cu),
and the backward's gradient fill, scatter and softmax backward make more passes again.

Measured (linkedin/Liger-Kernel 6159461, benchmark/benchmark_cross_entropy.py: torch.nn.
CrossEntropyLoss on fp32 logits of 16,384 tokens x V, triton.testing.do_bench's median;
benchmark/cross_entropy_speed/nvidia_h100_80gb_hbm3/*.csv, "Hugging Face" column), at V = 131,072
(8.59 GB of logits) on an H100 80GB HBM3: forward 11.587 ms, forward + backward 33.941 ms. At the
H100's measured streaming rate (2.97 TB/s, devices.json) those are 4.0 and 7.7 passes of 4 bytes
per logit: FORWARD_PASSES and BACKWARD_PASSES. Held against the A100's forward in the same
benchmark (nvidia_a100-sxm4-80gb: 20.8 ms at 1.70 TB/s) in tests/test_loss.py.

Logits in a narrower dtype (bf16) are cast up before the loss (read 2, write 4 bytes) and the
gradient cast back after it (read 4, write 2).

PyTorch's cross-entropy on the logits as they come (`native`: fms-fsdp's training loop,
fms_fsdp/utils/train_utils.py at foundation-model-stack/fms-fsdp HEAD, train:
`ce_loss(output.view(-1, output.size(-1)), label.view(-1).long())` on the bf16 output of its FSDP
model under bfSixteen) runs the same kernels on 16-bit rows: log_softmax reads and writes them in
their own dtype, accumulating in fp32 in registers (aten/src/ATen/native/cuda/SoftMax.cu,
accscalar_t), so the same passes at the logits' width, with no cast either way (a derivation: the
passes measured on fp32 logits, each of w bytes).

A fused softmax cross-entropy (`fused`: apex's xentropy, which flash-attention's training scripts
run: csrc/xentropy/xentropy_kernel.cu at Dao-AILab/flash-attention 4a6eaa9f, adapted from
apex/contrib/csrc/xentropy) reads the logits in their own dtype and computes in fp32 in registers:
its forward (cunn_SoftMaxXEntropyForward) reads a row twice, for its maximum and then for the sum
of exponentials (two ilpReduce loops), and writes one loss and log-sum-exp a row; its backward
(cunn_SoftMaxXEntropyBackward) reads the row once more and writes the gradient, over the logits
under inplace_backward: 2 w forward and 2 w backward a logit by count (w the logits' width). No
measurement of that kernel was found; a fused cross-entropy kernel of the same kind was measured,
Liger-Kernel's (6159461, liger_kernel/ops/cross_entropy.py: an online max and sum over the row,
then a second read writing the gradient over it, 3 passes by count; its backward skipped at a
gradient of 1.0), the "Liger" column of the same benchmark: 14.297 ms at V = 131,072 on the H100,
4.94 passes at the streaming rate where it counts 3. Each counted pass of the fused kernel is
charged at that measured cost (FUSED_PASS: 1.648 passes).
"""

from __future__ import annotations

from modtrans import dtypes
from modtrans.ir.document import Layer, Part

FP32 = 4
FORWARD_PASSES = 4.0  # 11.587 ms x 2.97 TB/s / 8.59 GB (the H100's forward, above)
BACKWARD_PASSES = 7.7  # (33.941 - 11.587) ms x 2.97 TB/s / 8.59 GB
FUSED_FORWARD = 2  # the fused kernel's passes over the logits in their own dtype: two reads
FUSED_BACKWARD = 2  # one read, one write (the docstring's xentropy kernels)
LIGER_COUNTED = 3  # Liger-Kernel's fused cross-entropy: two reads and a write of the fp32 logits
LIGER_MEASURED = 14.296783e-3 * 2.97e12 / (16384 * 131072 * FP32)  # 4.94 passes, as measured
FUSED_PASS = LIGER_MEASURED / LIGER_COUNTED  # a counted pass of a fused loss kernel, in passes


def is_loss_head(layer: Layer) -> bool:
    """The layer whose output the loss reads: a GEMM outside the blocks, in the model's head
    (the LM head's vocabulary logits, a classifier's class logits)."""
    b = layer.block
    return b is not None and b.index is None and b.part is Part.HEAD and layer.gemm is not None


LOSSES = ("torch", "native", "fused")
"""The losses a framework takes (frameworks.Framework.loss): PyTorch's on fp32 logits, PyTorch's on
the logits' own dtype, one fused softmax cross-entropy kernel (the docstring above)."""


def loss_bytes(layer: Layer, kind: str = "torch") -> tuple[int, int]:
    """Bytes the loss of `kind` (LOSSES) moves over `layer`'s logits, forward and backward (0, 0:
    not a head)."""
    if not is_loss_head(layer) or not layer.outputs or layer.gemm is None:
        return 0, 0
    g = layer.gemm  # the logits are its output: a rank's share of the tokens and the vocabulary
    width = max(1, dtypes.width(layer.outputs[0].dtype))
    elements = g.m * g.n * g.groups
    if kind == "fused":
        per_pass = elements * width * FUSED_PASS
        return round(FUSED_FORWARD * per_pass), round(FUSED_BACKWARD * per_pass)
    if kind == "native":
        return round(elements * FORWARD_PASSES * width), round(elements * BACKWARD_PASSES * width)
    cast = (width + FP32) if width < FP32 else 0  # to fp32 before the loss, and its gradient back
    forward = elements * (FORWARD_PASSES * FP32 + cast)
    backward = elements * (BACKWARD_PASSES * FP32 + cast)
    return round(forward), round(backward)
